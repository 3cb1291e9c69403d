#include "service/status_handler.hpp"

#include <unistd.h>

namespace gf::service {

void StatusHandler::on_status_request(Client &c, const wire::StatusRequest &m) {
  c.send(status_reply_frame(w_.book, context(&c), m.request_id(), peers()));
}

StatusContext StatusHandler::context(const Client *asker) const {
  StatusContext context;
  context.endpoint = w_.endpoint;
  context.service_pid = static_cast<uint32_t>(::getpid());
  context.started_ms = w_.started_ms;
  context.now = w_.now();
  context.asker_uid = asker ? asker->peer.uid : 0;
  context.asker_privileged = asker ? asker->peer.privileged : true;
  context.blob_bytes = w_.plane.blob_bytes();
  context.devices_source = w_.devices_source;
  context.job_tracking = w_.jobs.tracking();
  for (const auto &[id, k] : w_.clients.all()) {
    if (k->plane.blobs) {
      context.data_planes[id] = {k->plane.blobs->transports(), k->plane.blobs->bytes()};
    }
  }
  return context;
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
  const std::vector<uint8_t> frame = status_reply_frame(w_.book, context(nullptr), 0, peers());
  next->status.assign(frame.begin() + 4, frame.end());  // the payload, past the length
  std::lock_guard lock(snapshot_mu_);
  snapshot_ = std::move(next);
}

std::shared_ptr<const BookSnapshot> StatusHandler::snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

}  // namespace gf::service
