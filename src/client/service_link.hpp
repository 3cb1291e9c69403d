// A connection to the node's service that comes back. When the service goes away (killed, or
// restarted by systemd or a package upgrade), the link dials the same endpoint again with a
// bounded back-off until a service answers with the same devices, then hands the new connection
// to whoever listens. Meanwhile current() is the connection that ended, so a call on it fails at
// once with an error naming the endpoint, and outage() says since when and how the last try went.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.hpp"

namespace gf::client {

// What a connection is dialled with (client/connection.hpp says what each means).
struct Dial {
  std::string endpoint;
  std::string name;
  double weight = 1;
  std::string token_file;
};

class ServiceLink {
 public:
  // The back-off between tries: the first soon after the service went, doubling up to the cap.
  static constexpr double kFirstRetry_s = 0.05;
  static constexpr double kMaxRetry_s = 1.0;
  // How long one try waits for the Welcome: a socket-activated service may still be starting.
  static constexpr int kHandshakeMs = 2000;

  // Connects within `timeout_ms` (throws as Connection::open does) and reconnects from then on.
  static std::shared_ptr<ServiceLink> open(Dial dial, int timeout_ms);
  // A link that never dials again: a connection whose service is this process (the service's
  // own pools).
  static std::shared_ptr<ServiceLink> fixed(std::shared_ptr<Connection> connection);
  ~ServiceLink();  // stop()
  ServiceLink(const ServiceLink &) = delete;
  ServiceLink &operator=(const ServiceLink &) = delete;

  // Dials no more; waits for a try under way (at most kHandshakeMs). Idempotent.
  void stop();

  // The connection now: the live one, or during an outage the one that ended.
  std::shared_ptr<Connection> current() const;
  // 0 for the first connection; one more for each that replaced it.
  uint64_t generation() const;
  // Called on the link's thread once each new connection is current. Must be quick.
  void on_reconnect(std::function<void()> listener);
  // A lease of this process released while the service was away: once a service answers again,
  // it is taken back (the restarted service kept it for this process) and released there.
  void release_when_back(uint64_t lease_id);
  // Whether the link will dial again when its connection ends (not fixed, not stopped).
  bool redials() const;
  // "" while connected; otherwise what went and how the last try went, in words.
  std::string outage() const;

 private:
  // What a connection's end wakes: shared with the connections' close listeners, which may run
  // after the link is gone (a run still holds its connection).
  struct Signal {
    std::mutex mu;
    std::condition_variable wake;
  };
  ServiceLink(Dial dial, std::shared_ptr<Connection> first, std::shared_ptr<Signal> signal,
              bool redial);
  static std::shared_ptr<Connection> connect(const Dial &dial, int timeout_ms,
                                             const std::shared_ptr<Signal> &signal);
  void loop();
  // Why `next` cannot stand in for the first connection ("": it can).
  std::string differs(const Connection &next) const;

  const Dial dial_;
  const Welcome first_welcome_;
  const std::shared_ptr<Signal> signal_;
  // Under signal_->mu:
  std::shared_ptr<Connection> current_;
  uint64_t generation_ = 0;
  std::string last_try_;  // how the last failed try went
  bool stopping_ = false;
  std::vector<std::function<void()>> listeners_;
  std::vector<uint64_t> to_release_;
  std::thread thread_;
};

}  // namespace gf::client
