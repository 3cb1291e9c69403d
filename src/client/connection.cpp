#include "client/connection.hpp"

namespace gf::client {

Connection::Connection(std::unique_ptr<Session> session, std::function<void()> closed)
    : session_(std::move(session)),
      blobs_(*session_),
      runs_(*session_, blobs_),
      leases_(*session_) {
  // After the protocols' own listeners, so they have seen the end when the link hears of it.
  if (closed) session_->on_close([closed = std::move(closed)](const std::string &) { closed(); });
  session_->start();  // everyone on top has registered
}

std::shared_ptr<Connection> Connection::open(const std::string &endpoint, const std::string &name,
                                             double weight, int timeout_ms, uint64_t on_behalf_of,
                                             const std::string &token_file,
                                             std::function<void()> closed) {
  return std::shared_ptr<Connection>(
      new Connection(Session::open(endpoint, name, weight, timeout_ms, on_behalf_of, token_file),
                     std::move(closed)));
}

Connection::~Connection() {
  session_->stop();  // the reader calls into the clients: it ends before they do
}

}  // namespace gf::client
