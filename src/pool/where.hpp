// Where a graph submitted to a pool runs (gf_run_where; docs/transport.md, "Graphs in the
// service"): in this process, in the node's service, or split between the two.
#pragma once

#include <vector>

#include "gpuflow.h"
#include "graph/graph.hpp"

namespace gf {

class PoolCore;

// Where `graph` runs on `pool` when the caller asked for `asked`: GF_RUN_IN_PROCESS,
// GF_RUN_IN_SERVICE or GF_RUN_SPLIT. Throws gf::Error (GF_ERR_INFEASIBLE) naming why when
// GF_RUN_IN_SERVICE cannot be honoured.
gf_run_where choose_where(PoolCore &pool, const Graph &graph, gf_run_where asked);

// For a split graph: which tasks run in the service (kernels only the service has).
std::vector<bool> service_tasks(PoolCore &pool, const Graph &graph);

}  // namespace gf
