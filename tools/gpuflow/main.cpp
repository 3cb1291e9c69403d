// gpuflow — run, check and inspect graph documents from the shell. Uses only the public C ABI.
//
//   gpuflow info     [pool options] [--plugin LIB]...
//   gpuflow validate GRAPH [--plugin LIB]... [pool options]
//   gpuflow run      GRAPH [--plugin LIB]... [pool options] [--trace OUT.json] [--log-dir DIR]
//                    [--no-progress] [--quiet]
//   gpuflow convert  GRAPH OUT (--json | --binary)
//
// Exit codes: 0 success; 1 the run failed (a task failed) or was cancelled; 2 usage, graph,
// plugin or pool errors (nothing ran).
#include <gpuflow.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "trace.hpp"

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitError = 2;

const char *kUsage = R"(usage:
  gpuflow info     [pool options] [--plugin LIB]...
  gpuflow validate GRAPH [--plugin LIB]... [pool options]
  gpuflow run      GRAPH [--plugin LIB]... [pool options] [--trace OUT.json] [--log-dir DIR]
                   [--no-progress] [--quiet]
  gpuflow convert  GRAPH OUT (--json | --binary)

GRAPH is a graph document, JSON or binary (detected); '-' reads standard input.
pool options:
  --devices LIST         device ordinals to use, e.g. 0,1 (CUDA backend); on the host backend,
                         emulates that many devices
  --emulated-devices N   emulated devices on the host backend (-1: none)
  --cpu-workers N        CPU workers (default: one per core)
  --backend auto|host|cuda
validate without --plugin checks the document; with plugins it also checks the graph against a
pool (kernels known, requests feasible).
exit codes: 0 success, 1 the run failed or was cancelled, 2 nothing ran (usage, graph, plugin or
pool error).
)";

struct Options {
  std::string command, graph, output;
  std::vector<std::string> plugins;
  std::vector<int32_t> devices;
  int emulated = 0;
  int cpu_workers = 0;
  gf_backend backend = GF_BACKEND_AUTO;
  std::string trace, log_dir;
  bool progress = true, quiet = false;
  gf_graph_format convert_to = GF_GRAPH_FORMAT_AUTO;
};

[[noreturn]] void usage_error(const std::string &message) {
  std::cerr << "gpuflow: " << message << "\n\n" << kUsage;
  std::exit(kExitError);
}

int to_int(const std::string &text, const char *what) {
  char *end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < -1000000 || v > 1000000) {
    usage_error(std::string(what) + " wants an integer, not '" + text + "'");
  }
  return static_cast<int>(v);
}

Options parse(int argc, char **argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--version") {
      std::cout << "gpuflow " << gf_version_string() << "\n";
      std::exit(0);
    } else if (a == "--plugin") {
      o.plugins.push_back(value());
    } else if (a == "--devices") {
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) {
        o.devices.push_back(to_int(item, "--devices"));
      }
    } else if (a == "--emulated-devices") {
      o.emulated = to_int(value(), a.c_str());
    } else if (a == "--cpu-workers") {
      o.cpu_workers = to_int(value(), a.c_str());
    } else if (a == "--backend") {
      std::string b = value();
      o.backend = b == "host" ? GF_BACKEND_HOST : b == "cuda" ? GF_BACKEND_CUDA : GF_BACKEND_AUTO;
      if (b != "host" && b != "cuda" && b != "auto") usage_error("unknown backend '" + b + "'");
    } else if (a == "--trace") {
      o.trace = value();
    } else if (a == "--log-dir") {
      o.log_dir = value();
    } else if (a == "--no-progress") {
      o.progress = false;
    } else if (a == "--quiet" || a == "-q") {
      o.quiet = true;
    } else if (a == "--json") {
      o.convert_to = GF_GRAPH_FORMAT_JSON;
    } else if (a == "--binary") {
      o.convert_to = GF_GRAPH_FORMAT_BINARY;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      usage_error("unknown option " + a);
    } else {
      positional.push_back(a);
    }
  }
  if (positional.empty()) usage_error("no command given");
  o.command = positional[0];
  size_t wanted = o.command == "info" ? 1 : o.command == "convert" ? 3 : 2;
  if (o.command != "info" && o.command != "validate" && o.command != "run" &&
      o.command != "convert") {
    usage_error("unknown command '" + o.command + "'");
  }
  if (positional.size() != wanted) usage_error("wrong number of arguments for " + o.command);
  if (wanted >= 2) o.graph = positional[1];
  if (wanted == 3) o.output = positional[2];
  if (o.command == "convert" && o.convert_to == GF_GRAPH_FORMAT_AUTO) {
    usage_error("convert needs --json or --binary");
  }
  return o;
}

bool read_file(const std::string &path, std::string &out) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    out = ss.str();
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int error(const std::string &what) {
  std::cerr << "gpuflow: " << what << ": " << gf_last_error() << "\n";
  return kExitError;
}

gf_graph *load_graph(const Options &o, int &rc) {
  std::string bytes;
  if (!read_file(o.graph, bytes)) {
    std::cerr << "gpuflow: cannot read " << o.graph << ": " << std::strerror(errno) << "\n";
    rc = kExitError;
    return nullptr;
  }
  gf_graph *graph = nullptr;
  if (gf_graph_deserialize(&graph, bytes.data(), bytes.size(), GF_GRAPH_FORMAT_AUTO, 0) != GF_OK) {
    rc = error(o.graph);
    return nullptr;
  }
  return graph;
}

gf_pool *make_pool(const Options &o, int &rc) {
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = o.backend;
  config.cpu_workers = o.cpu_workers;
  config.emulated_devices = o.emulated;
  if (!o.devices.empty()) {
    if (o.backend == GF_BACKEND_HOST) {
      config.emulated_devices = static_cast<int32_t>(o.devices.size());
    } else {
      config.devices = o.devices.data();
      config.device_count = static_cast<uint32_t>(o.devices.size());
      if (config.emulated_devices == 0) {
        config.emulated_devices = static_cast<int32_t>(o.devices.size());
      }
    }
  }
  gf_pool *pool = nullptr;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    rc = error("cannot create the pool");
    return nullptr;
  }
  for (const auto &plugin : o.plugins) {
    if (gf_pool_load_plugin(pool, plugin.c_str()) != GF_OK) {
      rc = error("cannot load plugin");
      gf_pool_destroy(pool);
      return nullptr;
    }
  }
  return pool;
}

std::string human_bytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

int cmd_info(const Options &o) {
  int rc = 0;
  gf_pool *pool = make_pool(o, rc);
  if (!pool) return rc;
  std::printf("gpuflow %s (library), built with header %d.%d.%d\n", gf_version_string(),
              GF_VERSION_MAJOR, GF_VERSION_MINOR, GF_VERSION_PATCH);
  uint32_t devices = 0, workers = 0, kernels = 0;
  gf_pool_device_count(&devices, pool);
  std::printf("\ndevices: %u\n", devices);
  for (uint32_t d = 0; d < devices; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    if (gf_pool_device_info(&info, pool, d) != GF_OK) continue;
    std::printf("  %d  %-24s %s  memory %s (pool %s)%s%s\n", info.ordinal,
                info.name ? info.name : "?", info.emulated ? "emulated" : "cuda",
                human_bytes(static_cast<double>(info.total_memory)).c_str(),
                human_bytes(static_cast<double>(info.pool_memory)).c_str(),
                info.uuid && *info.uuid ? "  " : "", info.uuid ? info.uuid : "");
  }
  gf_pool_worker_count(&workers, pool);
  std::printf("\nworkers: %u\n", workers);
  for (uint32_t w = 0; w < workers; ++w) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    if (gf_pool_worker_info(&info, pool, w) != GF_OK) continue;
    std::printf("  %-8s threads %u  resources:", info.name, info.threads);
    uint32_t lines = 0;
    gf_pool_ledger_size(&lines, pool, w);
    for (uint32_t i = 0; i < lines; ++i) {
      gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
      if (gf_pool_ledger_entry(&e, pool, w, i) != GF_OK) continue;
      if (std::strcmp(e.resource, "gpu_memory") == 0) {
        std::printf(" %s=%s", e.resource, human_bytes(e.capacity).c_str());
      } else {
        std::printf(" %s=%g", e.resource, e.capacity);
      }
    }
    std::printf("\n");
  }
  gf_pool_kernel_count(&kernels, pool);
  std::printf("\nkernels: %u\n", kernels);
  for (uint32_t k = 0; k < kernels; ++k) {
    const char *name = nullptr;
    if (gf_pool_kernel_name(&name, pool, k) == GF_OK) std::printf("  %s\n", name);
  }
  gf_pool_destroy(pool);
  return 0;
}

int cmd_validate(const Options &o) {
  int rc = 0;
  gf_graph *graph = load_graph(o, rc);
  if (!graph) return rc;
  uint64_t tasks = 0, data = 0;
  gf_graph_task_count(&tasks, graph);
  gf_graph_data_count(&data, graph);
  if (!o.plugins.empty()) {
    gf_pool *pool = make_pool(o, rc);
    if (!pool) {
      gf_graph_destroy(graph);
      return rc;
    }
    gf_status s = gf_graph_check(graph, pool);
    if (s != GF_OK) rc = error(o.graph);
    gf_pool_destroy(pool);
  }
  if (rc == 0) {
    std::printf("%s: valid (%" PRIu64 " tasks, %" PRIu64 " data objects)%s\n", o.graph.c_str(),
                tasks, data, o.plugins.empty() ? "" : "; runs on this pool");
  }
  gf_graph_destroy(graph);
  return rc;
}

int cmd_convert(const Options &o) {
  int rc = 0;
  gf_graph *graph = load_graph(o, rc);
  if (!graph) return rc;
  gf_bytes bytes{nullptr, 0};
  if (gf_graph_serialize(&bytes, graph, o.convert_to) != GF_OK) {
    rc = error(o.graph);
  } else {
    std::ofstream out(o.output, std::ios::binary);
    out.write(static_cast<const char *>(bytes.data), static_cast<std::streamsize>(bytes.size));
    if (o.convert_to == GF_GRAPH_FORMAT_JSON) out << "\n";
    if (!out) {
      std::cerr << "gpuflow: cannot write " << o.output << "\n";
      rc = kExitError;
    }
  }
  gf_bytes_free(&bytes);
  gf_graph_destroy(graph);
  return rc;
}

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
}

void draw_progress(const gf_run_stats &s, bool final) {
  constexpr int kWidth = 30;
  uint64_t done = s.succeeded + s.failed + s.cancelled;
  int filled = s.tasks ? static_cast<int>(kWidth * done / s.tasks) : kWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::printf("\r[%s] %" PRIu64 "/%" PRIu64 " tasks", bar.c_str(), done, s.tasks);
  if (s.failed) std::printf(", %" PRIu64 " failed", s.failed);
  std::printf("  %.1f s\x1b[K%s", s.elapsed_s, final ? "\n" : "");
  std::fflush(stdout);
}

int cmd_run(const Options &o) {
  int rc = 0;
  if (!o.log_dir.empty()) setenv("GPUFLOW_LOG_DIR", o.log_dir.c_str(), 1);
  gf_graph *graph = load_graph(o, rc);
  if (!graph) return rc;
  gf_pool *pool = make_pool(o, rc);
  if (!pool) {
    gf_graph_destroy(graph);
    return rc;
  }
  TaskTrace trace;
  gf_pool_set_event_callback(pool, TaskTrace::on_event, &trace);
  gf_run *run = nullptr;
  if (gf_graph_submit(&run, pool, graph, nullptr) != GF_OK) {
    rc = error(o.graph);
    gf_pool_destroy(pool);
    gf_graph_destroy(graph);
    return rc;
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool progress = o.progress && !o.quiet && isatty(STDOUT_FILENO);
  bool cancelled = false;
  gf_status status;
  while ((status = gf_run_wait(run, 100)) == GF_TIMEOUT) {
    if (g_interrupted.load() && !cancelled) {
      cancelled = true;
      std::fprintf(stderr, "\ngpuflow: interrupted; cancelling the run\n");
      gf_run_cancel(run);
    }
    if (progress) {
      gf_run_stats s = GF_RUN_STATS_INIT;
      if (gf_run_stats_get(&s, run) == GF_OK) draw_progress(s, false);
    }
  }
  std::string message = status == GF_OK ? "" : gf_last_error();
  gf_pool_set_event_callback(pool, nullptr, nullptr);
  gf_run_stats stats = GF_RUN_STATS_INIT;
  gf_run_stats_get(&stats, run);
  if (progress) draw_progress(stats, true);

  if (!o.quiet) {
    std::printf("\n%" PRIu64 " tasks: %" PRIu64 " succeeded, %" PRIu64 " failed, %" PRIu64
                " cancelled (%" PRIu64 " attempts) in %.3f s\n",
                stats.tasks, stats.succeeded, stats.failed, stats.cancelled, stats.attempts,
                stats.elapsed_s);
    trace.print_summary(pool, stats.elapsed_s);
    std::printf("moved %s in %" PRIu64 " transfers\n",
                human_bytes(static_cast<double>(stats.bytes_transferred)).c_str(), stats.transfers);
  }
  if (status != GF_OK) {
    std::fprintf(stderr, "gpuflow: run %s: %s\n",
                 status == GF_ERR_CANCELLED ? "cancelled" : "failed", message.c_str());
    uint64_t tasks = 0;
    gf_graph_task_count(&tasks, graph);
    int shown = 0;
    for (uint64_t i = 0; i < tasks && shown < 10; ++i) {
      gf_task t;
      gf_task_state state;
      const char *text = "";
      if (gf_graph_task_at(&t, graph, i) != GF_OK || gf_run_task_state(&state, run, t) != GF_OK ||
          state != GF_TASK_FAILED || gf_run_task_error(&text, run, t) != GF_OK) {
        continue;
      }
      std::fprintf(stderr, "  task #%" PRIu64 ": %s\n", i, text);
      ++shown;
    }
    rc = kExitFailed;
  }
  if (!o.trace.empty()) {
    std::string error_text;
    if (!trace.write_chrome_trace(o.trace, pool, error_text)) {
      std::fprintf(stderr, "gpuflow: cannot write the trace: %s\n", error_text.c_str());
      if (rc == 0) rc = kExitError;
    } else if (!o.quiet) {
      std::printf("trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                  o.trace.c_str());
    }
  }
  gf_run_destroy(run);
  gf_pool_destroy(pool);
  gf_graph_destroy(graph);
  return rc;
}

}  // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  if (o.command == "info") return cmd_info(o);
  if (o.command == "validate") return cmd_validate(o);
  if (o.command == "convert") return cmd_convert(o);
  return cmd_run(o);
}
