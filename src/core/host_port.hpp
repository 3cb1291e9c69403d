// "HOST:PORT" addresses, as the dashboard and the service's TCP listener take them.
#pragma once

#include <cstdint>
#include <string>

namespace gf::core {

// "HOST:PORT" with HOST an IPv4 address (or "localhost") and PORT 0-65535; throws gf::Error
// (GF_ERR_INVALID_ARGUMENT) naming `what` otherwise.
struct Address {
  std::string host;
  uint16_t port = 0;
};
Address parse_address(const std::string &text, const std::string &what);

}  // namespace gf::core
