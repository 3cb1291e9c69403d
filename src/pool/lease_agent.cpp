#include "pool/lease_agent.hpp"

#include <chrono>
#include <utility>

#include "core/error.hpp"

namespace gf {

namespace {

// How often held devices are looked at (linger, revocation, running tasks drained).
constexpr auto kTick = std::chrono::milliseconds(5);

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void LeaseAgent::Mailbox::poke() {
  {
    std::lock_guard lock(mu);
    poked = true;
  }
  wake.notify_one();
}

LeaseAgent::LeaseAgent(Scheduler &scheduler, std::shared_ptr<client::ServiceLink> link,
                       std::vector<Device> devices, std::string name, double linger_s)
    : scheduler_(scheduler),
      link_(std::move(link)),
      connection_(link_->current()),
      generation_(link_->generation()),
      name_(std::move(name)),
      linger_s_(linger_s) {
  for (const Device &d : devices) {
    Slot slot;
    slot.device = d;
    slots_.push_back(slot);
    scheduler_.ungrant(d.worker);
  }
  connection_->leases().on_revoke([mailbox = mailbox_](uint64_t) { mailbox->poke(); });
  link_->on_reconnect([mailbox = mailbox_] { mailbox->poke(); });
  scheduler_.set_demand_listener([mailbox = mailbox_] { mailbox->poke(); });
  thread_ = std::thread([this] { loop(); });
}

LeaseAgent::~LeaseAgent() {
  stop();
}

void LeaseAgent::stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard lock(mailbox_->mu);
    mailbox_->stopping = true;
  }
  mailbox_->wake.notify_one();
  if (thread_.joinable()) thread_.join();
  std::vector<Answer> late;
  {
    std::lock_guard lock(mailbox_->mu);
    late.swap(mailbox_->answers);
  }
  for (const Answer &a : late) {
    if (a.granted && a.generation == generation_) {
      slots_[a.slot].state = State::kHeld;
      slots_[a.slot].lease = a.lease;
    }
  }
  for (Slot &slot : slots_) {
    scheduler_.ungrant(slot.device.worker);
    if (slot.state == State::kHeld && connection_->alive()) {
      try {
        connection_->leases().release(slot.lease);
      } catch (const Error &) {
        // The service is gone: the lease ended with the connection.
      }
    }
  }
}

void LeaseAgent::loop() {
  std::vector<Answer> answers;
  for (;;) {
    // With no lease held or asked for, nothing changes until a task is placed on a device or
    // the connection closes, and both poke: an idle pool does not wake at all.
    // (A poke that lands between this look and the wait is kept in `poked`.)
    bool all_idle = true;
    for (const Slot &slot : slots_) {
      all_idle = all_idle && slot.state == State::kIdle && !scheduler_.has_work(slot.device.worker);
    }
    {
      std::unique_lock lock(mailbox_->mu);
      auto woken = [this] { return mailbox_->poked || mailbox_->stopping; };
      if (all_idle) {
        mailbox_->wake.wait(lock, woken);
      } else {
        mailbox_->wake.wait_for(lock, kTick, woken);
      }
      if (mailbox_->stopping) return;
      mailbox_->poked = false;
      answers.swap(mailbox_->answers);
    }
    for (const Answer &a : answers) apply(a);
    answers.clear();
    if (link_->generation() != generation_) adopt_connection();
    const double t = now_s();
    for (Slot &slot : slots_) step(slot, t);
  }
}

void LeaseAgent::step(Slot &slot, double t) {
  const uint32_t w = slot.device.worker;
  if (!connection_->alive()) {
    if (slot.state == State::kAsking) return;  // its answer comes with the connection's end
    if (slot.granted) scheduler_.ungrant(w);
    // A restarted service keeps it for this process while it runs: taken back on reconnecting.
    if (slot.state == State::kHeld) slot.lost = slot.lease;
    slot.state = State::kIdle;
    slot.granted = false;
    slot.lease = 0;
    if (scheduler_.has_work(w)) {
      scheduler_.fail_placed(w, "this process holds no device or CPU: " + link_->outage());
    }
    return;
  }
  switch (slot.state) {
    case State::kAsking:
      return;  // apply() moves it on
    case State::kIdle: {
      if (!scheduler_.has_work(w)) return;
      slot.state = State::kAsking;
      client::LeaseAsk ask;
      if (slot.device.ordinal < 0) {
        ask.cpus = 1;
      } else {
        ask.gpus = 1;
        ask.devices = {slot.device.ordinal};
      }
      ask.name = name_;
      slot.asked_on = generation_;
      const size_t index = static_cast<size_t>(&slot - slots_.data());
      connection_->leases().acquire_async(ask, answer_to(index, false));
      return;
    }
    case State::kHeld: {
      const bool revoked = connection_->leases().revoked(slot.lease);
      const bool busy = scheduler_.has_work(w);
      if (busy) slot.last_busy = t;
      if (!revoked && (busy || t - slot.last_busy < linger_s_)) {
        if (busy && !slot.granted) {  // work came back while the running tasks drained
          scheduler_.grant(w);
          slot.granted = true;
        }
        return;
      }
      // Hand it back: no new tasks here; once the running ones have ended, release it.
      slot.granted = false;
      if (scheduler_.ungrant(w) > 0) return;
      try {
        connection_->leases().release(slot.lease);
      } catch (const Error &) {
        // Gone: the lease ended with the connection; the next step fails what waits.
      }
      slot.state = State::kIdle;
      slot.lease = 0;
      return;
    }
  }
}

client::LeaseClient::GrantDone LeaseAgent::answer_to(size_t slot, bool reclaim) {
  return [mailbox = mailbox_, slot, reclaim, generation = generation_](
             const client::Grant *grant, gf_status status, const std::string &why) {
    {
      std::lock_guard lock(mailbox->mu);
      mailbox->answers.push_back(Answer{slot, generation, reclaim, grant != nullptr,
                                        grant ? grant->lease_id : 0, status, why});
    }
    mailbox->poke();
  };
}

void LeaseAgent::adopt_connection() {
  connection_ = link_->current();
  generation_ = link_->generation();
  connection_->leases().on_revoke([mailbox = mailbox_](uint64_t) { mailbox->poke(); });
  for (Slot &slot : slots_) {
    // A question asked on the connection that ended has its answer there, never here.
    if (slot.state == State::kAsking && slot.asked_on != generation_) slot.state = State::kIdle;
    if (slot.state != State::kIdle || slot.lost == 0) continue;
    slot.state = State::kAsking;
    slot.asked_on = generation_;
    const uint64_t lease = std::exchange(slot.lost, 0);
    const size_t index = static_cast<size_t>(&slot - slots_.data());
    connection_->leases().reclaim_async(lease, answer_to(index, true));
  }
}

void LeaseAgent::apply(const Answer &a) {
  Slot &slot = slots_[a.slot];
  // From a connection that ended since: adopt_connection() already moved the slot on.
  if (a.generation != generation_ || a.generation != slot.asked_on) return;
  if (a.granted) {
    slot.state = State::kHeld;
    slot.lease = a.lease;
    slot.last_busy = now_s();
    slot.granted = true;
    scheduler_.grant(slot.device.worker);
    return;
  }
  slot.state = State::kIdle;
  // A lease the restarted service did not keep (its devices are asked for anew), or a gone
  // service, which step() handles.
  if (!a.reclaim && a.status != GF_ERR_SYSTEM) {
    scheduler_.fail_placed(slot.device.worker,
                           "the gpuflow service refused this worker's lease: " + a.why);
  }
}

}  // namespace gf
