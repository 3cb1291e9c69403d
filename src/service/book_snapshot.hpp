// The lease book as the service last published it (status_handler.hpp), for dashboards and
// metrics on other threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gf::service {

struct BookSnapshot {
  double now = 0;  // the book's clock
  std::string backend;
  // The book as status shows it to the service itself (every name shown): a verified Message
  // holding the StatusReply (service/status_reply.hpp), or its Error should even the reply's
  // least not fit a frame. status/status_render.hpp renders it.
  std::vector<uint8_t> status;
};

}  // namespace gf::service
