// How much a worker thread takes per taking of the scheduler's mutex (picking.cpp, stealing.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "graph/graph.hpp"

namespace gf {

// Tasks without resources or device outputs are handed out up to kMaxBatch at a time, so the
// mutex is taken once per batch rather than once per task; up to kLongBatch while the batch's
// learnt durations add up to less than the scheduler's batch budget (batch_budget_for), so that
// tasks known to be tiny take it far less often (tasks not yet learnt count kUnknownDuration:
// they stay in batches of kMaxBatch).
inline constexpr size_t kMaxBatch = 8;
inline constexpr size_t kLongBatch = 64;
// How far down its queue a worker looks for a task that fits while the first ones do not.
inline constexpr int kScanDepth = 8;

// Bytes of the buffers a task declares it will produce (charged on a device before it starts).
inline uint64_t declared_output_bytes(const Graph &graph, const TaskDesc &task) {
  uint64_t bytes = 0;
  const DataIndex *out = graph.outputs(task);
  for (uint32_t i = 0; i < task.output_count; ++i) {
    const DataDesc &d = graph.data(out[i]);
    if (d.kind == DataKind::kBuffer) bytes += d.size;
  }
  return bytes;
}

}  // namespace gf
