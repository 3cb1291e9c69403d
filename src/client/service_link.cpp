#include "client/service_link.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.hpp"

namespace gf::client {

std::shared_ptr<Connection> ServiceLink::connect(const Dial &dial, int timeout_ms,
                                                 const std::shared_ptr<Signal> &signal) {
  return Connection::open(dial.endpoint, dial.name, dial.weight, timeout_ms, 0, dial.token_file,
                          [signal] {
                            // Taken so that the wake cannot fall between the loop's look at
                            // alive() and its wait.
                            { std::lock_guard lock(signal->mu); }
                            signal->wake.notify_all();
                          });
}

std::shared_ptr<ServiceLink> ServiceLink::open(Dial dial, int timeout_ms) {
  auto signal = std::make_shared<Signal>();
  std::shared_ptr<Connection> first = connect(dial, timeout_ms, signal);
  return std::shared_ptr<ServiceLink>(
      new ServiceLink(std::move(dial), std::move(first), std::move(signal), true));
}

std::shared_ptr<ServiceLink> ServiceLink::fixed(std::shared_ptr<Connection> connection) {
  Dial dial;
  dial.endpoint = connection->endpoint();
  return std::shared_ptr<ServiceLink>(
      new ServiceLink(std::move(dial), std::move(connection), std::make_shared<Signal>(), false));
}

ServiceLink::ServiceLink(Dial dial, std::shared_ptr<Connection> first,
                         std::shared_ptr<Signal> signal, bool redial)
    : dial_(std::move(dial)),
      first_welcome_(first->welcome()),
      signal_(std::move(signal)),
      current_(std::move(first)) {
  if (redial) thread_ = std::thread([this] { loop(); });
}

ServiceLink::~ServiceLink() {
  stop();
}

void ServiceLink::stop() {
  {
    std::lock_guard lock(signal_->mu);
    stopping_ = true;
  }
  signal_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Connection> ServiceLink::current() const {
  std::lock_guard lock(signal_->mu);
  return current_;
}

uint64_t ServiceLink::generation() const {
  std::lock_guard lock(signal_->mu);
  return generation_;
}

void ServiceLink::release_when_back(uint64_t lease_id) {
  std::lock_guard lock(signal_->mu);
  to_release_.push_back(lease_id);
}

bool ServiceLink::redials() const {
  std::lock_guard lock(signal_->mu);
  return thread_.joinable() && !stopping_;
}

void ServiceLink::on_reconnect(std::function<void()> listener) {
  std::lock_guard lock(signal_->mu);
  listeners_.push_back(std::move(listener));
}

std::string ServiceLink::outage() const {
  std::lock_guard lock(signal_->mu);
  if (current_->alive()) return {};
  std::string words =
      "the gpuflow service at " + dial_.endpoint + " is gone: " + current_->closing().words();
  if (!thread_.joinable()) return words;
  words += "; reconnecting to " + dial_.endpoint;
  if (!last_try_.empty()) words += " (last try: " + last_try_ + ")";
  return words;
}

std::string ServiceLink::differs(const Connection &next) const {
  const Welcome &now = next.welcome();
  auto list = [](const Welcome &w) {
    std::string out;
    for (const DeviceSlot &d : w.devices)
      out += (out.empty() ? "" : ", ") + std::to_string(d.ordinal) + " " + d.uuid;
    return out.empty() ? std::string("none") : out;
  };
  bool same =
      now.backend == first_welcome_.backend && now.devices.size() == first_welcome_.devices.size();
  for (size_t i = 0; same && i < now.devices.size(); ++i) {
    same = now.devices[i].ordinal == first_welcome_.devices[i].ordinal &&
           now.devices[i].uuid == first_welcome_.devices[i].uuid;
  }
  if (same) return {};
  // This process's workers were made for the first service's devices.
  return "it came back with other devices (" + list(now) + "; this pool was made for " +
         list(first_welcome_) + ")";
}

void ServiceLink::loop() {
  std::unique_lock lock(signal_->mu);
  double retry_s = kFirstRetry_s;
  for (;;) {
    signal_->wake.wait(lock, [this] { return stopping_ || !current_->alive(); });
    if (stopping_) return;
    // An outage: try again and again, further apart, until a service answers or the link stops.
    signal_->wake.wait_for(lock, std::chrono::duration<double>(retry_s),
                           [this] { return stopping_; });
    if (stopping_) return;
    retry_s = std::min(retry_s * 2, kMaxRetry_s);
    lock.unlock();
    std::shared_ptr<Connection> next;
    std::string why;
    try {
      next = connect(dial_, kHandshakeMs, signal_);
      why = differs(*next);
      if (!why.empty()) next.reset();
    } catch (const Error &e) {
      why = e.what();
    }
    lock.lock();
    if (!next) {
      last_try_ = why;
      continue;
    }
    std::shared_ptr<Connection> ended = std::exchange(current_, std::move(next));
    ++generation_;
    last_try_.clear();
    retry_s = kFirstRetry_s;
    const std::vector<std::function<void()>> listeners = listeners_;
    const std::vector<uint64_t> to_release = std::exchange(to_release_, {});
    const std::shared_ptr<Connection> now = current_;
    lock.unlock();
    ended.reset();  // its reader may still be in its close listener, which takes the lock
    for (uint64_t lease : to_release) {
      now->leases().reclaim_async(lease, [weak = std::weak_ptr<Connection>(now), lease](
                                             const Grant *grant, gf_status, const std::string &) {
        std::shared_ptr<Connection> c = weak.lock();
        if (!grant || !c) return;  // not kept, or gone again: nothing is held
        try {
          c->leases().release(lease);
        } catch (const Error &) {
          // Gone again: a lease ends with its connection.
        }
      });
    }
    for (const auto &listener : listeners) listener();
    lock.lock();
  }
}

}  // namespace gf::client
