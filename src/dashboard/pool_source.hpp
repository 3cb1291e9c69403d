// A pool's dashboard source: what its event stream says (a Collector tapped into it and
// registered as the scheduler's observer, so finishes carry queue waits), and the scheduler's
// snapshot queries (pool_snapshot, ledger_lines, device_memory).
#pragma once

#include <memory>
#include <string>

#include "dashboard/collector.hpp"
#include "dashboard/source.hpp"
#include "scheduler/observer.hpp"

namespace gf {
class PoolCore;
}

namespace gf::dashboard {

class PoolSource final : public Source {
 public:
  explicit PoolSource(std::shared_ptr<PoolCore> pool);
  ~PoolSource() override;  // stop()

  std::string metrics() const override;
  std::string snapshot_json(double since) const override;
  double now_s() const override;
  void stop() override;

 private:
  std::shared_ptr<PoolCore> pool_;  // first: the observer's handle goes before the scheduler
  std::shared_ptr<Collector> collector_;
  ObserverHandle observing_;
};

}  // namespace gf::dashboard
