#include "service/lease_handler.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/request_bounds.hpp"
#include "wire/records.hpp"

namespace gf::service {

namespace fb = flatbuffers;

// The bounds of gpuflow.h, as the C shims check them before sending (core/request_bounds).
Refusal LeaseHandler::invalid(const wire::LeaseRequest &m) const {
  std::string why;
  if (m.request_id() == 0) {
    why = "LeaseRequest.request_id is 0; a lease request needs an id of its own (1 or more)";
  } else if (m.devices()) {
    why = bounds::lease_devices_problem("LeaseRequest.devices", m.devices()->data(),
                                        m.devices()->size());
  }
  if (why.empty()) {
    why = bounds::lease_name_problem("LeaseRequest.name", m.name() ? m.name()->string_view() : "");
  }
  if (why.empty()) return {};
  return {GF_ERR_INVALID_ARGUMENT, std::move(why)};
}

// Bounded queues: a client that floods the service gets refusals, not a slower service.
Refusal LeaseHandler::beyond_bounds(const Client &c) const {
  if (w_.book.queued_count(c.id) >= kMaxQueuedPerClient) {
    return {GF_ERR_STATE,
            "client " + std::to_string(c.id) + " already has " +
                std::to_string(kMaxQueuedPerClient) +
                " lease requests waiting, the most one client may have; wait for or cancel some"};
  }
  if (w_.book.queued_count_of_user(c.peer.account()) >= kMaxQueuedPerUser) {
    return {GF_ERR_STATE, "user " + c.peer.user + " already has " +
                              std::to_string(kMaxQueuedPerUser) +
                              " lease requests waiting, the most one user's clients may have "
                              "together"};
  }
  return {};
}

void LeaseHandler::on_lease_request(Client &c, const wire::LeaseRequest &m) {
  const RequestId id = m.request_id();
  if (Refusal bad = invalid(m)) {
    w_.log(c.who() + ": lease request " + std::to_string(id) + " refused: " + bad.why);
    return refuse(c, id, bad);
  }
  // A request that fits in what is free now would not wait, so no bound keeps it out (checked
  // after submit).
  const Refusal full = beyond_bounds(c);
  if (Refusal refused = w_.book.submit(c.id, id, wire::decode(m), w_.now())) {
    w_.log(c.who() + ": lease request refused: " + refused.why);
    return refuse(c, id, refused);
  }
  if (full && !w_.book.fits_now(c.id, id)) {
    w_.book.cancel(c.id, id);
    if (!c.warned_full) w_.log(c.who() + ": lease requests refused: " + full.why);
    c.warned_full = true;  // once per client: a flood would fill the log
    return refuse(c, id, full);
  }
  if (m.timeout_ms() >= 0) {
    w_.deadlines.set(Deadline::kLeaseRequest, c.id, id,
                     w_.now() + static_cast<double>(m.timeout_ms()) / 1000.0);
  }
  if (m.timeout_ms() == 0) {  // now or never: decided before this request is answered
    schedule();
    w_.deadlines.expire(w_.now());
  } else {
    schedule_due_ = true;
  }
}

void LeaseHandler::refuse(Client &c, RequestId id, const Refusal &refused) {
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(
      b, wire::CreateLeaseRefused(b, id, refused.status, b.CreateString(refused.why))));
}

void LeaseHandler::on_lease_release(Client &c, const wire::LeaseRelease &m) {
  const Lease *lease = w_.book.lease(m.lease_id());
  const ClientId holder = lease ? lease->client : 0;
  if (!w_.book.release(c.id, m.lease_id(), c.peer.privileged, w_.now())) {
    const std::string why = lease ? "lease " + std::to_string(m.lease_id()) + " is not yours"
                                  : "no lease " + std::to_string(m.lease_id());
    // A quiet holder reads no answer: its refusal would only come back as the connection's
    // last word.
    if (m.quiet()) return w_.log(c.who() + ": quiet release refused: " + why);
    return c.send_error(m.request_id(), GF_ERR_NOT_FOUND, why);
  }
  w_.jobs.forget(m.lease_id());
  w_.saver.changed();
  w_.log(c.who() + " released lease " + std::to_string(m.lease_id()) +
         (holder != c.id ? " of client " + std::to_string(holder) : ""));
  if (!m.quiet()) {
    fb::FlatBufferBuilder b;
    c.send(wire::frame_of(b, wire::CreateReleased(b, m.request_id(), m.lease_id())));
  }
  schedule_due_ = true;
}

void LeaseHandler::on_lease_cancel(Client &c, const wire::LeaseCancel &m) {
  const RequestId target = m.target_request_id();
  if (!w_.book.cancel(c.id, target)) {
    return c.send_error(m.request_id(), GF_ERR_NOT_FOUND,
                        "no queued request " + std::to_string(target) + " of yours");
  }
  w_.deadlines.clear(Deadline::kLeaseRequest, c.id, target);
  refuse(c, target, {GF_ERR_CANCELLED, "cancelled by the client"});
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::CreateCancelled(b, m.request_id(), target)));
  schedule_due_ = true;
}

void LeaseHandler::on_lease_bind(Client &c, const wire::LeaseBind &m) {
  if (!c.peer.on_this_host()) {
    return c.send_error(m.request_id(), GF_ERR_STATE,
                        "a process group of another host cannot be bound to a lease of this "
                        "service");
  }
  if (Refusal r = w_.jobs.bind(c.id, c.peer.uid, m.lease_id(), m.process_group())) {
    return c.send_error(m.request_id(), r.status, "cannot bind: " + r.why);
  }
  w_.saver.save();  // before the holder hears of it: from now on the job outlives a restart
  w_.log(c.who() + " bound process group " + std::to_string(m.process_group()) + " to lease " +
         std::to_string(m.lease_id()));
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::CreateLeaseBound(b, m.request_id(), m.lease_id())));
}

void LeaseHandler::schedule() {
  schedule_due_ = false;
  std::vector<Lease> granted = w_.book.schedule(w_.now());
  // On disk before any holder hears of its grant: a service killed from here on restarts
  // knowing the lease.
  if (!granted.empty()) w_.saver.save();
  for (const Lease &lease : granted) {
    Client *c = w_.clients.find(lease.client);
    if (!c) continue;  // cannot happen: departed clients leave the book
    w_.deadlines.clear(Deadline::kLeaseRequest, c->id, lease.request);
    send_grant(*c, lease.request, lease, "granted to");
  }
}

void LeaseHandler::send_grant(Client &c, RequestId request, const Lease &lease, const char *how) {
  wire::Grant grant{lease.id, {}, lease.cpus.to_double()};
  std::string where;
  for (const DeviceShare &d : lease.devices) {
    const DeviceSlot &slot = slot_of(d.ordinal);
    grant.devices.push_back({d.ordinal, slot.uuid, slot.pci_bus_id, d.share.to_double(), d.memory});
    where += (where.empty() ? "" : ", ") + std::string("gpu:") + std::to_string(d.ordinal) +
             (d.share.to_double() < 1 ? " x" + amount_text(d.share.to_double()) : "");
  }
  if (lease.cpus.raw() > 0) {
    where += (where.empty() ? "" : ", ") + amount_text(lease.cpus.to_double()) + " cpu";
  }
  w_.log("lease " + std::to_string(lease.id) + " " + how + " " + c.who() + ": " + where);
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::encode(b, request, grant)));
}

void LeaseHandler::on_lease_reclaim(Client &c, const wire::LeaseReclaim &m) {
  if (!c.peer.on_this_host()) {
    return c.send_error(m.request_id(), GF_ERR_STATE,
                        "a client on another host holds no lease of this service to take back");
  }
  if (Refusal r = w_.jobs.hand_back(m.lease_id(), c.id, c.holder(), w_.now())) {
    return c.send_error(m.request_id(), r.status, "cannot take lease back: " + r.why);
  }
  const Lease *lease = w_.book.lease(m.lease_id());
  if (!lease) fail(GF_ERR_INTERNAL, "a lease handed back is not in the book");
  w_.saver.save();  // its holder is a live client again before it hears so
  send_grant(c, m.request_id(), *lease, "taken back by");
}

const DeviceSlot &LeaseHandler::slot_of(int32_t ordinal) const {
  for (const DeviceSlot &s : w_.book.slots())
    if (s.ordinal == ordinal) return s;
  fail(GF_ERR_INTERNAL, "a lease names device " + std::to_string(ordinal));
}

void LeaseHandler::revoke_for_waiting(double t) {
  // The pass below is the fair-share order; most ticks nobody has waited that long.
  bool patience_over = false;
  for (const auto &[client, since] : w_.book.waiting_since())
    patience_over |= t - since >= kRevokePatience_s;
  if (!patience_over) return;
  std::vector<std::pair<ClientId, double>> waiting;  // client, how long its oldest has waited
  for (const QueuedView &q : w_.book.queued(t)) {
    if (t - q.since < kRevokePatience_s) continue;
    auto it = std::find_if(waiting.begin(), waiting.end(),
                           [&](const auto &w) { return w.first == q.client; });
    if (it == waiting.end()) waiting.emplace_back(q.client, t - q.since);
  }
  for (const auto &[client, waited] : waiting) {
    for (LeaseId id : w_.book.revoke_for(client, t)) {
      const Lease *lease = w_.book.lease(id);
      Client *holder = lease ? w_.clients.find(lease->client) : nullptr;
      if (!holder) continue;
      const std::string reason = "fair share: client " + std::to_string(client) + " has waited " +
                                 amount_text(waited) + " s";
      w_.log("asking " + holder->who() + " to hand back lease " + std::to_string(id) + " (" +
             reason + ")");
      fb::FlatBufferBuilder b;
      holder->send(wire::frame_of(b, wire::CreateLeaseRevoke(b, id, b.CreateString(reason))));
    }
  }
}

void LeaseHandler::timed_out(ClientId client, RequestId id) {
  Client *c = w_.clients.find(client);
  if (!c || !w_.book.cancel(c->id, id)) return;
  refuse(*c, id, {GF_TIMEOUT, "no lease was free in time"});
}

void LeaseHandler::watch_jobs(double t) {
  if (w_.jobs.keeping() && w_.jobs.watch(t)) {
    w_.saver.changed();
    schedule();
  }
}

std::string LeaseHandler::client_gone(Client &c) {
  schedule_due_ = true;
  if (!c.greeted) return {};
  const size_t queued = w_.book.queued_count(c.id);
  // A remote client's process groups are another host's: none was bound, none is kept.
  const size_t kept = c.peer.on_this_host() ? w_.jobs.holder_gone(c.id, c.holder(), w_.now()) : 0;
  std::vector<LeaseId> released = w_.book.remove_client(c.id, w_.now());
  for (LeaseId id : released) w_.jobs.forget(id);
  if (!released.empty() || kept > 0) w_.saver.changed();
  return "; " + std::to_string(released.size()) + " lease(s) released, " +
         (kept ? std::to_string(kept) + " kept for their jobs, " : std::string()) +
         std::to_string(queued) + " request(s) dropped";
}

}  // namespace gf::service
