// What a dashboard shows, from one source: a pool in this process (pool_source.hpp) or the
// node's service (service_source.hpp). The dashboard (dashboard.hpp) serves whichever it is
// given the same way: the page, its snapshot as JSON and as server-sent events, and /metrics.
#pragma once

#include <string>

namespace gf::dashboard {

class Source {
 public:
  virtual ~Source() = default;

  // The source's Prometheus metrics (the dashboard appends its own). Any thread.
  virtual std::string metrics() const = 0;
  // One snapshot as a JSON object, "kind" first ("pool" or "service"): task-stream bars that
  // ended after `since` (the source's clock, now_s()) for a live view's next update, or all of
  // them (since 0) for /snapshot.json. Any thread.
  virtual std::string snapshot_json(double since) const = 0;
  // The source's clock, for the next update's `since` (0 where snapshots have no bars).
  virtual double now_s() const = 0;
  // Stops watching (the pool's event stream), before the dashboard stops serving. Idempotent.
  virtual void stop() {}
};

}  // namespace gf::dashboard
