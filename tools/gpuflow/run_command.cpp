#include "run_command.hpp"

#include <gpuflow.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "dask_command.hpp"
#include "exit_codes.hpp"
#include "graph_document.hpp"
#include "local_pool.hpp"
#include "options.hpp"
#include "run_outputs.hpp"
#include "run_progress.hpp"
#include "run_report.hpp"
#include "stop_signals.hpp"
#include "trace.hpp"

namespace gpuflow_cli {

namespace {

struct RunOptions {
  std::string graph;
  PoolOptions pool;
  std::string trace, log_dir, dask;
  bool no_progress = false, quiet = false, show_outputs = false;
  double progress_interval = 10.0;
  bool in_service = false, in_process = false;
};

using GraphHandle = std::unique_ptr<gf_graph, void (*)(gf_graph *)>;
using PoolHandle = std::unique_ptr<gf_pool, void (*)(gf_pool *)>;
using RunHandle = std::unique_ptr<gf_run, void (*)(gf_run *)>;

// The default backend fell back to emulated devices on a build that has CUDA: said on stderr.
void warn_if_emulated(const RunOptions &o, gf_pool *pool) {
  if (!kCudaBuild) return;
  const std::string why = emulation_reason(o.pool, pool);
  if (why.empty()) return;
  uint32_t devices = 0;
  gf_pool_device_count(&devices, pool);
  std::fprintf(stderr, "gpuflow: running on %u emulated device(s) (host backend): %s\n", devices,
               why.c_str());
}

gf_run *submit(const RunOptions &o, gf_pool *pool, gf_graph *graph) {
  gf_submit_options submit = GF_SUBMIT_OPTIONS_INIT;
  submit.where = o.in_service   ? GF_RUN_IN_SERVICE
                 : o.in_process ? GF_RUN_IN_PROCESS
                                : GF_RUN_ANYWHERE;
  gf_run *run = nullptr;
  if (gf_graph_submit(&run, pool, graph, &submit) != GF_OK) return nullptr;
  gf_run_where where = GF_RUN_IN_PROCESS;
  gf_run_where_get(&where, run);
  if (where == GF_RUN_IN_SERVICE && !o.quiet) {
    std::fprintf(stderr, "gpuflow: running in the service at %s\n",
                 o.pool.endpoint.empty() ? "GPUFLOW_POOL" : o.pool.endpoint.c_str());
  }
  return run;
}

struct Outcome {
  gf_status status = GF_OK;
  std::string why;  // the library's message when the run did not succeed
  gf_run_stats stats = GF_RUN_STATS_INIT;
};

// Waits for the run to finish, showing progress and cancelling it at the first stop signal.
Outcome wait_for(gf_run *run, const RunOptions &o) {
  const bool progress = !o.no_progress && !o.quiet;
  Progress bar(isatty(STDOUT_FILENO) != 0, o.progress_interval);
  bool cancelled = false;
  gf_status status;
  while ((status = gf_run_wait(run, 100)) == GF_TIMEOUT) {
    if (!cancelled && stop_signal_received()) {
      cancelled = true;
      std::fprintf(stderr, "\ngpuflow: interrupted; cancelling the run\n");
      gf_run_cancel(run);
    }
    if (progress) {
      gf_run_stats s = GF_RUN_STATS_INIT;
      if (gf_run_stats_get(&s, run) == GF_OK) bar.show(s, false);
    }
  }
  Outcome out;
  out.status = status;
  out.why = status == GF_OK ? "" : gf_last_error();
  gf_run_stats_get(&out.stats, run);
  if (progress) bar.show(out.stats, true);
  return out;
}

bool write_trace(const RunOptions &o, TaskTrace &trace, gf_pool *pool) {
  std::string error;
  trace.stop_leases();
  trace.read_leases(pool, error);  // the leases as they stand at the end (if connected)
  error.clear();
  if (!trace.write_chrome_trace(o.trace, pool, error)) {
    std::fprintf(stderr, "gpuflow: cannot write the trace: %s\n", error.c_str());
    return false;
  }
  if (!o.quiet) {
    std::printf("trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                o.trace.c_str());
  }
  return true;
}

int run_graph(const RunOptions &o) {
  if (!o.dask.empty()) return run_on_dask(o.dask, o.graph, o.pool.plugins);
  if (!o.log_dir.empty()) setenv("GPUFLOW_LOG_DIR", o.log_dir.c_str(), 1);
  GraphHandle graph(load_graph(o.graph), gf_graph_destroy);
  if (!graph) return kExitError;
  // Before the pool's threads exist (after reading the graph, which may wait on standard input
  // for a Ctrl-C to end it): a stop signal from here on cancels the run, once it runs.
  handle_stop_signals(StopPolicy{});
  TaskTrace trace;  // outlives the pool that reports to it
  PoolHandle pool(make_pool(o.pool), gf_pool_destroy);
  if (!pool) return kExitError;
  warn_if_emulated(o, pool.get());
  gf_pool_set_event_callback(pool.get(), TaskTrace::on_event, &trace);
  if (!o.trace.empty()) trace.follow_leases(pool.get());  // a connected pool: the node's leases
  RunHandle run(submit(o, pool.get(), graph.get()), gf_run_destroy);
  if (!run) return library_error(o.graph);

  const Outcome outcome = wait_for(run.get(), o);
  gf_pool_set_event_callback(pool.get(), nullptr, nullptr);
  if (!o.quiet) print_summary(outcome.stats, trace, pool.get());
  int rc = kExitOk;
  // From the graph's JSON form, costly for a large graph: read only when something is named.
  const GraphNames names =
      outcome.status != GF_OK || o.show_outputs ? names_of(graph.get()) : GraphNames{};
  if (outcome.status != GF_OK) {
    print_failure(outcome.status, outcome.why, run.get(), graph.get(), names);
    rc = kExitFailed;
  }
  if (o.show_outputs) show_outputs(run.get(), graph.get(), names);
  if (!o.trace.empty() && !write_trace(o, trace, pool.get()) && rc == kExitOk) rc = kExitError;
  return rc;
}

}  // namespace

void add_run_command(CLI::App &app, int &exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App *run = app.add_subcommand("run");
  run->add_option("GRAPH", o->graph)->required();
  add_plugin_option(*run, o->pool.plugins);
  add_device_options(*run, o->pool, /*device_memory=*/false);
  add_service_options(*run, o->pool.endpoint, o->pool.token_file);
  CLI::Option *trace = run->add_option("--trace", o->trace);
  run->add_option("--log-dir", o->log_dir);
  run->add_flag("--no-progress", o->no_progress);
  run->add_option("--progress-interval", o->progress_interval)->check(kPositiveSeconds);
  run->add_flag("--show-outputs", o->show_outputs);
  run->add_flag("-q,--quiet", o->quiet);
  run->add_flag("--in-service", o->in_service)
      ->excludes(run->add_flag("--in-process", o->in_process));
  // The cluster's workers build their own pools: these describe nothing there.
  run->add_option("--dask", o->dask)
      ->excludes(run->get_option("--pool"))
      ->excludes(trace)
      ->excludes(run->get_option("--devices"))
      ->excludes(run->get_option("--emulated-devices"));
  run->callback([o, &exit_code] { exit_code = run_graph(*o); });
}

}  // namespace gpuflow_cli
