// What the service says about itself: StatusRequest answered from the live book (with what the
// asker may not see left out: status_reply.hpp), and the snapshot of the book it publishes for
// dashboards and metrics on other threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "service/book_snapshot.hpp"
#include "service/client.hpp"
#include "service/job_keeper.hpp"
#include "service/lease_book.hpp"
#include "service/plane_handler.hpp"
#include "service/status_reply.hpp"
#include "wire/framing.hpp"

namespace gf::service {

class StatusHandler {
 public:
  struct Collaborators {
    const LeaseBook &book;
    const JobKeeper &jobs;
    const PlaneHandler &plane;
    const ClientTable &clients;
    Clock now;
    std::string endpoint;  // "unix://PATH"
    int64_t started_ms = 0;
    std::string backend;
    std::string devices_source;  // where the list of devices came from, in words
  };
  explicit StatusHandler(Collaborators with) : w_(std::move(with)) {}

  void on_status_request(Client &c, const wire::StatusRequest &m);

  // Takes a new snapshot (on the loop); `snapshot` reads the last one from any thread.
  void publish();
  std::shared_ptr<const BookSnapshot> snapshot() const;

 private:
  // Who each client of the book is: connected ones, and the keepers of jobs whose holder went.
  ClientPeers peers() const;
  // What a status reply tells `asker` besides the book; null: the service itself (its dashboard),
  // which sees every name.
  StatusContext context(const Client *asker) const;

  Collaborators w_;
  mutable std::mutex snapshot_mu_;
  std::shared_ptr<const BookSnapshot> snapshot_;  // under snapshot_mu_
};

}  // namespace gf::service
