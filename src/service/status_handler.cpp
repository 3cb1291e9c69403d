#include "service/status_handler.hpp"

#include <unistd.h>

namespace gf::service {

void StatusHandler::on_status_request(Client &c, const wire::StatusRequest &m) {
  StatusContext context;
  context.endpoint = w_.endpoint;
  context.service_pid = static_cast<uint32_t>(::getpid());
  context.started_ms = w_.started_ms;
  context.now = w_.now();
  context.asker_uid = c.peer.uid;
  context.asker_privileged = c.peer.privileged;
  context.blob_bytes = w_.plane.blob_bytes();
  for (const auto &[id, k] : w_.clients.all()) {
    if (k->plane.blobs) {
      context.data_planes[id] = {k->plane.blobs->transports(), k->plane.blobs->bytes()};
    }
  }
  c.send(status_reply_frame(w_.book, context, m.request_id(), peers()));
}

ClientPeers StatusHandler::peers() const {
  ClientPeers out;
  for (const auto &[id, c] : w_.clients.all()) out[id] = {c->peer, c->name};
  for (const JobKeeper::KeptView &k : w_.jobs.kept()) {
    Peer holder;
    holder.uid = k.holder.uid;
    holder.pid = k.holder.pid;
    holder.user = k.holder.user;
    out[k.keeper] = {holder, "job of '" + k.holder.name + "'"};
  }
  return out;
}

void StatusHandler::publish() {
  auto next = std::make_shared<BookSnapshot>();
  next->now = w_.now();
  next->backend = w_.backend;
  next->devices = w_.book.devices();
  next->leases = w_.book.leases();
  next->queued = w_.book.queued(next->now);
  next->clients = w_.book.clients(next->now);
  next->cpus = w_.book.cpus();
  next->cpus_in_use = w_.book.cpus_in_use().to_double();
  next->blob_bytes = w_.plane.blob_bytes();
  std::lock_guard lock(snapshot_mu_);
  snapshot_ = std::move(next);
}

std::shared_ptr<const BookSnapshot> StatusHandler::snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

}  // namespace gf::service
