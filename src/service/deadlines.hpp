// Every deadline the service keeps for its clients, in one place: how long a connection may go
// without its Hello, how long a remote client's relay may take to start, and when each lease
// request with a timeout gives up. The loop's tick asks for those that are due; the handler that
// set a deadline acts on it (and clears it when what it waited for came first).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
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

// What a deadline ends; a tick hands them out in this order.
enum class Deadline { kHello, kRelayStart, kLeaseRequest };

class Deadlines {
 public:
  // `request`: the lease request's id (kLeaseRequest), else 0. Setting one again moves it.
  void set(Deadline kind, ClientId client, uint64_t request, double when);
  void clear(Deadline kind, ClientId client, uint64_t request = 0);
  // The client left: none of its deadlines fire.
  void forget(ClientId client);

  struct Due {
    ClientId client = 0;
    uint64_t request = 0;
  };
  // The deadlines of `kind` that passed by `now`, by client, then request; they are cleared.
  std::vector<Due> take_due(Deadline kind, double now);

 private:
  std::map<std::tuple<Deadline, ClientId, uint64_t>, double> at_;
};

}  // namespace gf::service
