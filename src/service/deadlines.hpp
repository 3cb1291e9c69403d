// Every deadline the service keeps for its clients, in one place: how long a connection may go
// without its Hello, how long a remote client's relay may take to start, and when each lease
// request with a timeout gives up. Whoever sets deadlines of a kind says once what ends when one
// passes (on_due), and clears one when what it waited for came first; the loop's tick runs
// expire().
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "service/lease_book.hpp"

namespace gf::service {

// How often the loop looks at deadlines: they end at most this late.
constexpr uint64_t kTickMs = 20;
// How long a connection may stay without its Hello (a remote one: with the right token).
constexpr double kHelloTimeout_s = 10.0;
// How long a relay may take to start and give its addresses.
constexpr double kRelayStartTimeout_s = 10.0;
// How long a request waits while others hold more than their fair share before the service
// asks them for leases back.
constexpr double kRevokePatience_s = 1.0;
// How often leases kept for their jobs (job_keeper.hpp) look at their processes.
constexpr uint64_t kJobWatchMs = 250;

// What a deadline ends; expire() acts on them in this order.
enum class Deadline { kHello, kRelayStart, kLeaseRequest };
constexpr Deadline kDeadlineKinds[] = {Deadline::kHello, Deadline::kRelayStart,
                                       Deadline::kLeaseRequest};

class Deadlines {
 public:
  using Action = std::function<void(ClientId client, uint64_t request)>;
  // What ends when a deadline of `kind` passes: its owner says so once.
  void on_due(Deadline kind, Action action) {
    actions_.at(static_cast<size_t>(kind)) = std::move(action);
  }
  // Acts on every deadline that passed by `now`: kind by kind in the order of Deadline, then by
  // client and request. Those of a kind are cleared before the first of them is acted on (an
  // action may drop a client: the next finds it gone).
  void expire(double now);

  // `request`: the lease request's id (kLeaseRequest), else 0. Setting one again moves it.
  void set(Deadline kind, ClientId client, uint64_t request, double when);
  void clear(Deadline kind, ClientId client, uint64_t request = 0);
  // The client left: none of its deadlines fire.
  void forget(ClientId client);

 private:
  struct Due {
    ClientId client = 0;
    uint64_t request = 0;
  };
  // The deadlines of `kind` that passed by `now`, by client, then request; they are cleared.
  std::vector<Due> take_due(Deadline kind, double now);

  std::map<std::tuple<Deadline, ClientId, uint64_t>, double> at_;
  std::array<Action, std::size(kDeadlineKinds)> actions_;
};

}  // namespace gf::service
