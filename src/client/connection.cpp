#include "client/connection.hpp"

namespace gf::client {

Connection::Connection(std::unique_ptr<Session> session)
    : session_(std::move(session)),
      blobs_(*session_),
      runs_(*session_, blobs_),
      leases_(*session_) {
  session_->start();  // everyone on top has registered
}

std::shared_ptr<Connection> Connection::open(const std::string &endpoint, const std::string &name,
                                             double weight, int timeout_ms, uint64_t on_behalf_of,
                                             const std::string &token_file) {
  return std::shared_ptr<Connection>(
      new Connection(Session::open(endpoint, name, weight, timeout_ms, on_behalf_of, token_file)));
}

Connection::~Connection() {
  session_->stop();  // the reader calls into the clients: it ends before they do
}

}  // namespace gf::client
