// What `gpuflow run` says once the run has finished: the summary (tasks by state from the run's
// counters, busy time per worker, bytes moved) and, when it did not succeed, why (the run's
// summary and the first failed tasks, each named once).
#pragma once

#include <gpuflow.h>

#include <string>

#include "graph_document.hpp"
#include "trace.hpp"

namespace gpuflow_cli {

void print_summary(const gf_run_stats &stats, const TaskTrace &trace, gf_pool *pool);

// `status`: what gf_run_wait returned; `why`: the library's message with it.
void print_failure(gf_status status, const std::string &why, gf_run *run, gf_graph *graph,
                   const GraphNames &names);

}  // namespace gpuflow_cli
