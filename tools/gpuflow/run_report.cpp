#include "run_report.hpp"

#include <cinttypes>
#include <cstdio>

#include "core/bytes_text.hpp"

namespace gpuflow_cli {

void print_summary(const gf_run_stats &stats, const TaskTrace &trace, gf_pool *pool) {
  std::printf("\n%" PRIu64 " tasks: %" PRIu64 " succeeded, %" PRIu64 " failed, %" PRIu64
              " cancelled (%" PRIu64 " attempts) in %.3f s\n",
              stats.tasks, stats.succeeded, stats.failed, stats.cancelled, stats.attempts,
              stats.elapsed_s);
  trace.print_summary(pool, stats.elapsed_s);
  std::printf("moved %s in %" PRIu64 " transfers\n",
              gf::bytes_text(static_cast<double>(stats.bytes_transferred)).c_str(),
              stats.transfers);
}

void print_failure(gf_status status, const std::string &why, gf_run *run, gf_graph *graph,
                   const GraphNames &names) {
  std::fprintf(stderr, "gpuflow: run %s: %s\n", status == GF_ERR_CANCELLED ? "cancelled" : "failed",
               why.c_str());
  constexpr int kShown = 10;
  int shown = 0;
  for (uint64_t i = 0; i < names.tasks.size() && shown < kShown; ++i) {
    gf_task t;
    gf_task_state state;
    const char *error = "";
    if (gf_graph_task_at(&t, graph, i) != GF_OK) continue;
    if (gf_run_task_state(&state, run, t) != GF_OK || state != GF_TASK_FAILED ||
        gf_run_task_error(&error, run, t) != GF_OK) {
      continue;
    }
    // A command task's error names the task already; any other task's is the words alone.
    const GraphNames::Task &task = names.tasks[i];
    if (task.command) {
      std::fprintf(stderr, "  %s\n", error);
    } else {
      std::fprintf(stderr, "  %s: %s\n", task.label.c_str(), error);
    }
    ++shown;
  }
}

}  // namespace gpuflow_cli
