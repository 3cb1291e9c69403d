// One device's memory as the scheduler accounts for it: the gpu_memory line of the device
// worker's ledger (what resident data, declared outputs and the gpu_memory requests of running
// tasks hold), the data resident there in spill order, and the spill counters. Every charge and
// release of device memory goes through here; bytes become the ledger's fixed point in one place
// (FixedPoint::from_bytes). Guarded by the scheduler mutex; inert on CPU workers.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "graph/graph.hpp"
#include "scheduler/ledger.hpp"
#include "scheduler/replica_set.hpp"

namespace gf {

class RunState;

// A gpu_memory amount in whole bytes (requests may hold fractions of a byte).
inline uint64_t whole_bytes(FixedPoint amount) {
  return amount.raw() <= 0 ? 0 : static_cast<uint64_t>(amount.raw() / FixedPoint::kScale);
}

class DeviceMemory {
 public:
  void bind(Ledger *ledger, ResourceId gpu_memory) {
    ledger_ = ledger;
    resource_ = gpu_memory;
  }
  bool on_device() const { return ledger_ != nullptr; }

  uint64_t capacity() const;
  uint64_t in_use() const;
  uint64_t free() const;
  // Whether `request` (which may hold gpu_memory) plus `bytes` of data fits now / ever.
  bool fits_now(const PoolRequest &request, uint64_t bytes) const {
    return ledger_->fits_now(request, FixedPoint::from_bytes(bytes), resource_);
  }
  bool could_fit(const PoolRequest &request, uint64_t bytes) const {
    return ledger_->could_fit(request, FixedPoint::from_bytes(bytes), resource_);
  }
  // Bytes by which `request_memory` plus `bytes` exceeds what is free now (0: it fits).
  uint64_t shortfall(FixedPoint request_memory, uint64_t bytes) const;

  // Charges bytes for data arriving or being produced; false (nothing charged) if they do not fit.
  bool reserve(uint64_t bytes) {
    return bytes == 0 || ledger_->try_charge(resource_, FixedPoint::from_bytes(bytes));
  }
  // Gives bytes back; tasks waiting for memory retry once the worker's loop takes the news.
  void release(uint64_t bytes) {
    if (bytes == 0) return;
    ledger_->discharge(resource_, FixedPoint::from_bytes(bytes));
    released_ = true;
  }
  // Takes back a reservation that was never used, without waking tasks that wait for memory.
  void unreserve(uint64_t bytes) {
    if (bytes) ledger_->discharge(resource_, FixedPoint::from_bytes(bytes));
  }
  bool take_released() { return std::exchange(released_, false); }

  // Resident data by last use, oldest first (what spills first).
  void touch(RunState &run, DataIndex d, Replica &replica, uint64_t tick) {
    if (replica.lru_tick) lru.erase(replica.lru_tick);
    replica.lru_tick = tick;
    lru.emplace(tick, std::pair{&run, d});
  }
  void forget(Replica &replica) {
    if (replica.lru_tick) lru.erase(replica.lru_tick);
    replica.lru_tick = 0;
  }
  std::map<uint64_t, std::pair<RunState *, DataIndex>> lru;
  uint64_t requested_bytes = 0;  // gpu_memory requests of the tasks running there
  uint64_t spilling_bytes = 0;   // copies to host under way
  uint64_t spilled_now = 0;      // bytes of its data that live only on host after a spill
  uint64_t spilled_total = 0;
  uint64_t unspilled_total = 0;

 private:
  const Ledger::Line &line() const;
  Ledger *ledger_ = nullptr;
  ResourceId resource_ = 0;
  bool released_ = false;
};

}  // namespace gf
