// The handle tables for gf_pool, gf_graph, gf_run, gf_lease and gf_service, and the lookups the
// shims use.
#pragma once

#include <mutex>
#include <string>

#include "capi/handles.hpp"
#include "client/connection.hpp"
#include "graph/graph.hpp"
#include "pool/pool_core.hpp"
#include "runtime/run.hpp"
#include "service/server.hpp"

namespace gf::capi {

using PoolTable = HandleTable<PoolCore, 1>;
using GraphTable = HandleTable<Graph, 2>;
using RunTable = HandleTable<Run, 3>;

// A lease as its holder sees it: the grant, and the connection it is held on (which must
// outlive it: closing the connection is what releases a lease whose holder died). After a
// restart of the service, the lease moves to the pool's new connection (lease_c.cpp).
struct LeaseObject {
  std::shared_ptr<client::ServiceLink> link;  // its pool's: the lease follows it after a restart
  client::Grant grant;
  std::string environment;  // gf_lease_environment's lines, made once at acquire
  std::mutex mu;
  std::shared_ptr<client::Connection> connection;  // under mu: the one the lease is held on
  std::string lost;  // under mu: why the restarted service did not give it back ("": it did)
};
using LeaseTable = HandleTable<LeaseObject, 4>;
using ServiceTable = HandleTable<service::Server, 5>;

// Process-wide and deliberately never destroyed: a handle the caller leaks must not be torn
// down by static destructors at exit, while other threads may still run.
PoolTable &pools();
GraphTable &graphs();
RunTable &runs();
LeaseTable &leases();
ServiceTable &services();

[[noreturn]] inline void not_live(const char *what) {
  fail(GF_ERR_INVALID_HANDLE,
       std::string(what) + " is not a live handle (NULL, destroyed, or not a " + what + ")");
}

template <class Table, class Handle>
auto &lookup(Table &table, const Handle *handle, const char *what) {
  auto *object = table.find(handle_bits(handle));
  if (!object) not_live(what);
  return *object;
}

// For a call that may run while another thread destroys the handle: the object stays alive
// until the caller lets go of it.
template <class Table, class Handle>
auto lookup_shared(Table &table, const Handle *handle, const char *what) {
  auto object = table.find_shared(handle_bits(handle));
  if (!object) not_live(what);
  return object;
}

inline PoolCore &pool_of(const gf_pool *pool) {
  return lookup(pools(), pool, "gf_pool");
}
inline Graph &graph_of(const gf_graph *graph) {
  return lookup(graphs(), graph, "gf_graph");
}
inline Run &run_of(const gf_run *run) {
  return lookup(runs(), run, "gf_run");
}
inline LeaseObject &lease_of(const gf_lease *lease) {
  return lookup(leases(), lease, "gf_lease");
}
inline service::Server &service_of(const gf_service *service) {
  return lookup(services(), service, "gf_service");
}

// The connection of a pool connected to the node's service; an embedded pool is refused, naming
// how to connect one (leases, the service's status and the data-plane check need a service).
std::shared_ptr<client::Connection> connection_of(gf_pool *pool);

}  // namespace gf::capi
