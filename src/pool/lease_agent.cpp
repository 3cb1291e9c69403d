#include "pool/lease_agent.hpp"

#include <chrono>

#include "core/error.hpp"

namespace gf {

namespace {

constexpr auto kTick = std::chrono::milliseconds(5);  // how often idle devices are looked at

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LeaseAgent::LeaseAgent(Scheduler &scheduler, std::shared_ptr<client::Connection> connection,
                       std::vector<Device> devices, std::string name, double linger_s)
    : scheduler_(scheduler),
      connection_(std::move(connection)),
      name_(std::move(name)),
      linger_s_(linger_s) {
  guard_->agent = this;
  for (const Device &d : devices) {
    Slot slot;
    slot.device = d;
    slots_.push_back(slot);
    scheduler_.ungrant(d.worker);
  }
  auto poke_through = [guard = guard_] {
    std::lock_guard lock(guard->mu);
    if (guard->agent) guard->agent->poke();
  };
  connection_->on_revoke([poke_through](uint64_t) { poke_through(); });
  scheduler_.set_demand_listener(poke_through);
  thread_ = std::thread([this] { loop(); });
}

LeaseAgent::~LeaseAgent() {
  stop();
}

void LeaseAgent::poke() {
  {
    std::lock_guard lock(mu_);
    poked_ = true;
  }
  wake_.notify_one();
}

void LeaseAgent::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(guard_->mu);  // waits for a callback under way
    guard_->agent = nullptr;
  }
  for (Slot &slot : slots_) {
    scheduler_.ungrant(slot.device.worker);
    if (slot.state == State::kHeld && connection_->alive()) {
      try {
        connection_->release(slot.lease);
      } catch (const Error &) {
        // The service is gone: the lease ended with the connection.
      }
    }
  }
}

void LeaseAgent::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, kTick, [this] { return poked_ || stopping_; });
      if (stopping_) return;
      poked_ = false;
    }
    const double t = now_s();
    for (size_t i = 0; i < slots_.size(); ++i) step(i, t);
  }
}

void LeaseAgent::step(size_t i, double t) {
  Slot s;
  {
    std::lock_guard lock(mu_);
    s = slots_[i];
  }
  const uint32_t w = s.device.worker;
  if (!connection_->alive()) {
    if (s.state == State::kAsking) return;  // its callback runs with the connection's end
    scheduler_.ungrant(w);
    if (scheduler_.has_work(w)) {
      scheduler_.fail_placed(w, "the gpuflow service at " + connection_->endpoint() +
                                    " is gone, so this process holds no device");
    }
    std::lock_guard lock(mu_);
    slots_[i].state = State::kIdle;
    slots_[i].granted = false;
    return;
  }
  switch (s.state) {
    case State::kAsking:
      return;  // granted() moves it on
    case State::kIdle: {
      if (!s.refused.empty()) {
        scheduler_.fail_placed(w, "the gpuflow service refused this device: " + s.refused);
        std::lock_guard lock(mu_);
        slots_[i].refused.clear();
        return;
      }
      if (!scheduler_.has_work(w)) return;
      {
        std::lock_guard lock(mu_);
        slots_[i].state = State::kAsking;
      }
      client::LeaseAsk ask;
      ask.gpus = 1;
      ask.devices = {s.device.ordinal};
      ask.name = name_;
      connection_->acquire_async(ask,
                                 [guard = guard_, i](const client::Grant *grant, gf_status status,
                                                     const std::string &why) {
                                   std::lock_guard lock(guard->mu);
                                   if (guard->agent) guard->agent->granted(i, grant, status, why);
                                   // A grant after stop() needs no handing back: the pool's
                                   // connection closes with it.
                                 });
      return;
    }
    case State::kHeld: {
      const bool revoked = connection_->revoked(s.lease);
      const bool busy = scheduler_.has_work(w);
      if (busy) s.last_busy = t;
      if (!revoked && (busy || t - s.last_busy < linger_s_)) {
        if (busy && !s.granted) {  // work came back while the running tasks drained
          scheduler_.grant(w);
          s.granted = true;
        }
      } else {
        // Hand it back: no new tasks here; once the running ones have ended, release it.
        s.granted = false;
        if (scheduler_.ungrant(w) == 0) {
          try {
            connection_->release(s.lease);
          } catch (const Error &) {
            // Gone: the lease ended with the connection; the next step fails what waits.
          }
          s.state = State::kIdle;
          s.lease = 0;
        }
      }
      std::lock_guard lock(mu_);
      slots_[i] = s;
      return;
    }
  }
}

// Runs under the guard's lock (on the reader thread, or on whichever thread found the connection
// gone): it must not call the scheduler, whose lock is taken before the guard's when the
// scheduler pokes the agent. loop() grants the worker (a held slot with work and no grant) or
// fails what waits there (a refusal) on its next step, which this poke brings at once.
void LeaseAgent::granted(size_t i, const client::Grant *grant, gf_status status,
                         const std::string &why) {
  {
    std::lock_guard lock(mu_);
    Slot &slot = slots_[i];
    slot.state = grant ? State::kHeld : State::kIdle;
    slot.lease = grant ? grant->lease_id : 0;
    slot.last_busy = now_s();
    slot.granted = false;
    if (!grant && status != GF_ERR_SYSTEM) slot.refused = why.empty() ? "no reason given" : why;
  }
  poke();
}

}  // namespace gf
