// Transfers and spills in the pool's event stream, for traces and the dashboard. Nothing is read
// or built unless someone listens; the event itself is delivered after the scheduler's mutex is
// released, as task events are, so a listener never runs under it.
#include "scheduler/memory.hpp"

namespace gf {

Clock::time_point Memory::movement_began() const {
  return events_ && events_->active() ? Clock::now() : Clock::time_point{};
}

void Memory::report_movement(gf_event_kind kind, const RunState &run, DataIndex d, SpaceId from,
                             SpaceId to, bool ok, Clock::time_point began, Deferred &deferred) {
  if (!events_ || !events_->active()) return;
  const auto worker_of = [this](SpaceId space) {
    const WorkerState *owner = owner_of(space);
    return owner ? owner->index : uint32_t{GF_NO_WORKER};
  };
  gf_event event{};
  event.kind = kind;
  event.run = run.handle;
  event.ok = ok ? 1 : 0;
  event.task_name = "";
  event.data = run.graph().data_ref(d);
  event.bytes = run.data[d].size;
  // A spill is reported on the device it leaves; a transfer on the space it arrives in.
  event.worker = worker_of(kind == GF_EVENT_SPILL_FINISHED ? from : to);
  event.source_worker = worker_of(from);
  const auto end = Clock::now();
  event.time_s = events_->time_s(end);
  event.duration_s = began == Clock::time_point{} ? 0.0 : seconds_between(began, end);
  deferred.calls.emplace_back([hub = events_, event]() mutable { hub->emit(event); });
}

}  // namespace gf
