// The handshake: a connection's Hello is checked (protocol, weight), its peer settled by the
// connection's kind (connection.hpp), the client added to the book, and Welcome tells it what
// the service has.
#pragma once

#include <string>
#include <vector>

#include "core/refusal.hpp"
#include "service/connection.hpp"
#include "service/lease_book.hpp"
#include "service/plane_handler.hpp"

namespace gf::service {

class Greeter {
 public:
  struct Collaborators {
    LeaseBook &book;
    const ClientTable &clients;
    const PlaneHandler &plane;
    const std::vector<std::string> &kernels;  // of the graphs it may run
    std::string backend;
    double emulated_bandwidth = 0;
    Deadlines &deadlines;
    Log log;
    Clock now;
  };
  explicit Greeter(Collaborators with) : w_(std::move(with)) {}

  // A refusal is a Hello the connection must be closed for (after the Error it was sent).
  Refusal on_hello(Connection &c, const wire::Hello &m);

 private:
  Collaborators w_;
};

}  // namespace gf::service
