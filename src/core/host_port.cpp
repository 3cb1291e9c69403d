#include "core/host_port.hpp"

#include <arpa/inet.h>

#include "core/error.hpp"

namespace gf::core {

Address parse_address(const std::string &text, const std::string &what) {
  auto bad = [&](const std::string &why) -> Address {
    fail(GF_ERR_INVALID_ARGUMENT,
         what + " '" + text + "' " + why + " (expected HOST:PORT, e.g. 127.0.0.1:8787)");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("has no port");
  Address a;
  a.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (a.host == "localhost") a.host = "127.0.0.1";
  in_addr ip{};
  if (a.host.empty() || inet_pton(AF_INET, a.host.c_str(), &ip) != 1)
    return bad("does not start with an IPv4 address");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return bad("has no port number");
  const unsigned long value = std::stoul(port);
  if (value > 65535) return bad("has a port above 65535");
  a.port = static_cast<uint16_t>(value);
  return a;
}

}  // namespace gf::core
