// gpuflow — run, check and inspect graph documents from the shell. Uses only the public C ABI.
//
//   gpuflow info     [pool options] [--plugin LIB]...
//   gpuflow validate GRAPH [--plugin LIB]... [pool options]
//   gpuflow run      GRAPH [--plugin LIB]... [pool options] [--trace OUT.json] [--log-dir DIR]
//                    [--no-progress] [--progress-interval S] [--show-outputs] [--quiet]
//   gpuflow convert  GRAPH OUT (--json | --binary)
//
// Exit codes: 0 success; 1 the run failed (a task failed) or was cancelled; 2 usage, graph,
// plugin or pool errors (nothing ran).
#include <gpuflow.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
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

#include "dask_command.hpp"
#include "service_commands.hpp"
#include "trace.hpp"

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitError = 2;

const char *kUsage = R"(usage:
  gpuflow info     [pool options] [--plugin LIB]...
  gpuflow validate GRAPH [--plugin LIB]... [pool options]
  gpuflow run      GRAPH [--plugin LIB]... [pool options] [--trace OUT.json] [--log-dir DIR]
                   [--no-progress] [--progress-interval SECONDS] [--show-outputs] [--quiet]
                   [--in-service | --in-process]
  gpuflow run      GRAPH --dask SCHEDULER_ADDRESS [--plugin LIB]...
  gpuflow convert  GRAPH OUT (--json | --binary)
  gpuflow serve | lease | status | trace | doctor   the node's shared pool (gpuflow serve --help)

GRAPH is a graph document, JSON or binary (detected); '-' reads standard input.
pool options:
  --devices LIST         device ordinals to use, e.g. 0,1 (CUDA backend); on the host backend,
                         emulates that many devices
  --emulated-devices N   emulated devices on the host backend (-1: none)
  --cpu-workers N        CPU workers (default: one per core)
  --backend auto|host|cuda
  --pool ENDPOINT        run on the node's shared pool (default: GPUFLOW_POOL, else a private
                         pool); 'embedded' forces a private one
  --token-file F         the token of a tcp://HOST:PORT pool (default: GPUFLOW_TOKEN_FILE)
validate checks the document and, against the pool the options describe, that every request is
feasible; a graph naming kernels is checked against a pool only when --plugin provides them.
run shows a progress bar on a terminal; otherwise a progress line every --progress-interval
seconds (default 10) and at the end. --show-outputs prints the value of every kept output.
--trace writes a Chrome/Perfetto trace: tasks, copies and spills on each worker's track and, on
the node's shared pool, every lease held on the same devices meanwhile (other processes' jobs).
On the shared pool (--pool), a graph whose kernels the service loaded (gpuflow serve --plugin)
runs inside the service: its document goes there over the data plane, and so do the outputs
back. --in-service insists on that (and says why it cannot), --in-process keeps it here.
run --dask runs the graph on a Dask cluster's workers, each through its own gpuflow pool with
the plugins loaded (paths valid on every node), and prints its outputs; it needs a Python with
the gpuflow package and distributed ($GPUFLOW_PYTHON, else python3).
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
  std::string trace, log_dir, endpoint, dask, token_file;
  bool progress = true, quiet = false, show_outputs = false;
  double progress_interval = 10.0;
  gf_run_where where = GF_RUN_ANYWHERE;
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
    } else if (a == "--pool") {
      o.endpoint = value();
    } else if (a == "--token-file") {
      o.token_file = value();
    } else if (a == "--dask") {
      o.dask = value();
    } else if (a == "--in-service") {
      o.where = GF_RUN_IN_SERVICE;
    } else if (a == "--in-process") {
      o.where = GF_RUN_IN_PROCESS;
    } else if (a == "--trace") {
      o.trace = value();
    } else if (a == "--log-dir") {
      o.log_dir = value();
    } else if (a == "--progress-interval") {
      std::string v = value();
      char *end = nullptr;
      o.progress_interval = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.progress_interval > 0) || o.progress_interval > 1e6) {
        usage_error("--progress-interval wants a number of seconds above 0, not '" + v + "'");
      }
    } else if (a == "--show-outputs") {
      o.show_outputs = true;
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

// Catches what the library would call "shorter than a FlatBuffers header": an empty file, or text
// (JSON) whose top level is not an object. A binary document holds NUL bytes; text does not.
std::string not_a_document(const std::string &bytes) {
  size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return bytes.empty() ? "the file is empty" : "it holds only blanks";
  if (bytes.find('\0') != std::string::npos || bytes[first] == '{') return "";
  char c = bytes[first];
  const char *what = c == '['                             ? "an array"
                     : c == '"'                           ? "a string"
                     : c == '-' || (c >= '0' && c <= '9') ? "a number"
                     : c == 't' || c == 'f'               ? "a boolean"
                     : c == 'n'                           ? "null"
                                                          : nullptr;
  if (!what) return "it is text, but not JSON";
  return std::string("its JSON top level is ") + what + ", not an object";
}

gf_graph *load_graph(const Options &o, int &rc) {
  std::string bytes;
  if (!read_file(o.graph, bytes)) {
    std::cerr << "gpuflow: cannot read " << o.graph << ": " << std::strerror(errno) << "\n";
    rc = kExitError;
    return nullptr;
  }
  if (std::string why = not_a_document(bytes); !why.empty()) {
    std::cerr << "gpuflow: " << o.graph << " is not a gpuflow graph document: " << why << "\n";
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
  config.endpoint = o.endpoint.empty() ? nullptr : o.endpoint.c_str();
  config.token_file = o.token_file.empty() ? nullptr : o.token_file.c_str();
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

// Why a pool with the default backend came out emulated, in words; "" when it has real GPUs or
// the backend was chosen explicitly. The library tells the reason only when the CUDA backend is
// forced, so this asks a throwaway pool for it. *no_cuda_build is set when the build lacks CUDA.
std::string emulation_reason(const Options &o, gf_pool *pool, bool *no_cuda_build) {
  *no_cuda_build = false;
  if (o.backend != GF_BACKEND_AUTO) return "";
  uint32_t devices = 0;
  gf_pool_device_count(&devices, pool);
  for (uint32_t d = 0; d < devices; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    if (gf_pool_device_info(&info, pool, d) == GF_OK && !info.emulated) return "";
  }
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.backend = GF_BACKEND_CUDA;
  config.cpu_workers = 1;
  gf_pool *probe = nullptr;
  if (gf_pool_create(&probe, &config) == GF_OK) {
    gf_pool_destroy(probe);
    return "";
  }
  std::string detail = gf_last_error();
  const std::string lead = "GF_BACKEND_CUDA, but ";
  if (size_t at = detail.find(lead); at != std::string::npos) detail.erase(0, at + lead.size());
  const std::string wrapper = "no CUDA device is usable (";
  if (detail.rfind(wrapper, 0) == 0 && detail.back() == ')') {
    detail = detail.substr(wrapper.size(), detail.size() - wrapper.size() - 1);
  }
  if (detail.find("no CUDA backend") != std::string::npos) {
    *no_cuda_build = true;
    return "this build of gpuflow has no CUDA backend";
  }
  const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string words;
  if (visible && (*visible == '\0' || std::string(visible) == "-1")) {
    words = std::string("CUDA_VISIBLE_DEVICES is ") + (*visible ? "-1" : "set but empty");
  } else if (detail.find("NoDevice") != std::string::npos ||
             detail.find("no CUDA-capable device") != std::string::npos ||
             detail.find("is visible") != std::string::npos) {
    words = "no GPU found";
  } else if (detail.find("Driver") != std::string::npos ||
             detail.find("driver") != std::string::npos) {
    words = "the NVIDIA driver is missing or too old";
  } else {
    words = "the CUDA backend could not start";
  }
  return "no usable GPU: " + words + " (" + detail + ")";
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
  bool no_cuda_build = false;
  if (std::string why = emulation_reason(o, pool, &no_cuda_build); !why.empty()) {
    std::printf("  emulated by the host backend: %s\n", why.c_str());
  }
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
  // Always checked against the pool the options describe: requests must be feasible there. A
  // graph naming kernels cannot be resolved without the plugins that provide them.
  gf_pool *pool = make_pool(o, rc);
  if (!pool) {
    gf_graph_destroy(graph);
    return rc;
  }
  std::string verdict = "; feasible on this pool";
  gf_status s = gf_graph_check(graph, pool);
  if (s == GF_ERR_NOT_FOUND && o.plugins.empty()) {
    verdict = "; NOT checked against a pool: it names kernels, give --plugin LIB to check it";
  } else if (s != GF_OK) {
    rc = error(o.graph);
  }
  gf_pool_destroy(pool);
  if (rc == 0) {
    std::printf("%s: valid (%" PRIu64 " tasks, %" PRIu64 " data objects)%s\n", o.graph.c_str(),
                tasks, data, verdict.c_str());
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

std::string duration_text(double seconds) {
  char buf[32];
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds / 60),
                  static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds / 3600),
                  static_cast<int>(seconds / 60) % 60);
  }
  return buf;
}

// A bar redrawn in place on a terminal; elsewhere (batch logs) one line every `interval` seconds
// and one at the end.
class Progress {
 public:
  Progress(bool terminal, double interval) : terminal_(terminal), interval_(interval) {}

  void show(const gf_run_stats &s, bool final) {
    uint64_t done = std::min(s.succeeded + s.failed + s.cancelled, s.tasks);
    double rate = s.elapsed_s > 0 ? static_cast<double>(done) / s.elapsed_s : 0;
    std::string eta = done == s.tasks ? duration_text(0)
                      : rate > 0      ? duration_text(static_cast<double>(s.tasks - done) / rate)
                                      : "?";
    int percent = s.tasks ? static_cast<int>(100 * done / s.tasks) : 100;
    if (terminal_) {
      constexpr int kWidth = 30;
      int filled = s.tasks ? static_cast<int>(kWidth * done / s.tasks) : kWidth;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, '.');
      std::printf("\r[%s] %3d%% %" PRIu64 "/%" PRIu64 " tasks", bar.c_str(), percent, done,
                  s.tasks);
      if (s.failed) std::printf(", %" PRIu64 " failed", s.failed);
      std::printf("  %.1f tasks/s  ETA %s  elapsed %s\x1b[K%s", rate, eta.c_str(),
                  duration_text(s.elapsed_s).c_str(), final ? "\n" : "");
    } else {
      if (!final && s.elapsed_s < next_s_) return;
      while (next_s_ <= s.elapsed_s) next_s_ += interval_;
      std::printf("progress: %" PRIu64 "/%" PRIu64 " tasks (%d%%), %" PRIu64
                  " failed, %.1f tasks/s, ETA %s, elapsed %s\n",
                  done, s.tasks, percent, s.failed, rate, eta.c_str(),
                  duration_text(s.elapsed_s).c_str());
    }
    std::fflush(stdout);
  }

 private:
  bool terminal_;
  double interval_;
  double next_s_ = interval_;
};

// "task 'x' failed: task 'x': command ..." -> "task 'x' failed: command ...": the library's
// summary names the task, and so does the error text of a command task.
std::string drop_repeated_label(std::string message) {
  const std::string sep = " failed: ";
  size_t at = message.find(sep);
  if (at == std::string::npos || at == 0) return message;
  std::string repeated = message.substr(0, at) + ": ";
  if (message.compare(at + sep.size(), repeated.size(), repeated) == 0) {
    message.erase(at + sep.size(), repeated.size());
  }
  return message;
}

// The name of every data object of the graph, and whether it is a literal input, read from its
// JSON form (the ABI has no accessor for names).
struct DataEntry {
  std::string name;
  bool literal = false;
};

class JsonScan {
 public:
  explicit JsonScan(const std::string &text) : t_(text) {}

  std::vector<DataEntry> data_entries() {
    std::vector<DataEntry> out;
    ws();
    if (!eat('{')) return out;
    while (ws(), i_ < t_.size() && t_[i_] != '}') {
      std::string key = string();
      ws();
      eat(':');
      ws();
      if (key == "data" && eat('[')) {
        while (ws(), i_ < t_.size() && t_[i_] != ']') {
          DataEntry entry;
          if (eat('{')) {
            while (ws(), i_ < t_.size() && t_[i_] != '}') {
              std::string field = string();
              ws();
              eat(':');
              ws();
              if (field == "name" && i_ < t_.size() && t_[i_] == '"') {
                entry.name = string();
              } else {
                if (field == "text" || field == "bytes" || field == "base64") entry.literal = true;
                skip();
              }
              ws();
              eat(',');
            }
            eat('}');
          } else {
            skip();
          }
          out.push_back(entry);
          ws();
          eat(',');
        }
        eat(']');
      } else {
        skip();
      }
      ws();
      eat(',');
    }
    return out;
  }

 private:
  void ws() {
    while (i_ < t_.size() && std::strchr(" \t\r\n", t_[i_])) ++i_;
  }
  bool eat(char c) {
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string string() {
    std::string out;
    if (!eat('"')) {
      ++i_;  // not a string: step on, so the scan always ends
      return out;
    }
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\' && i_ + 1 < t_.size()) ++i_;
      out += t_[i_++];
    }
    ++i_;
    return out;
  }
  void skip() {
    if (i_ >= t_.size()) return;
    char c = t_[i_];
    if (c == '"') {
      string();
    } else if (c == '{' || c == '[') {
      int depth = 0;
      while (i_ < t_.size()) {
        char d = t_[i_];
        if (d == '"') {
          string();
          continue;
        }
        ++i_;
        if (d == '{' || d == '[') ++depth;
        if ((d == '}' || d == ']') && --depth == 0) return;
      }
    } else {
      while (i_ < t_.size() && !std::strchr(",]}", t_[i_])) ++i_;
    }
  }

  const std::string &t_;
  size_t i_ = 0;
};

bool printable_utf8(const std::vector<unsigned char> &b) {
  for (size_t i = 0; i < b.size();) {
    unsigned char c = b[i];
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 9;
    if (n == 9 || c < 0xC2 || c > 0xF4 || i + n >= b.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

// --show-outputs: the value of every output the run kept (literal inputs left out).
void show_outputs(gf_run *run, gf_graph *graph) {
  std::vector<DataEntry> entries;
  gf_bytes json{nullptr, 0};
  if (gf_graph_serialize(&json, graph, GF_GRAPH_FORMAT_JSON) == GF_OK) {
    std::string text(static_cast<const char *>(json.data), json.size);
    entries = JsonScan(text).data_entries();
  }
  gf_bytes_free(&json);
  uint64_t count = 0;
  gf_graph_data_count(&count, graph);
  std::printf("outputs:\n");
  int shown = 0;
  for (uint64_t i = 0; i < count; ++i) {
    gf_data d;
    if (gf_graph_data_at(&d, graph, i) != GF_OK) continue;
    std::string name = i < entries.size() && !entries[i].name.empty()
                           ? entries[i].name
                           : "data #" + std::to_string(i);
    if (i < entries.size() && entries[i].literal) continue;
    uint64_t size = 0;
    gf_status s = gf_run_fetch(&size, run, d, nullptr, 0);
    if (s != GF_OK) {
      void *value = nullptr;
      if (s == GF_ERR_INVALID_ARGUMENT && gf_run_value(&value, run, d) == GF_OK) {
        std::printf("  %s: an opaque value\n", name.c_str());
        ++shown;
      }
      continue;  // not kept, or not produced
    }
    ++shown;
    std::printf("  %s: %" PRIu64 " byte%s", name.c_str(), size, size == 1 ? "" : "s");
    constexpr uint64_t kSmall = 256;
    if (size == 0 || size > kSmall) {
      if (size > kSmall) std::printf(" (%s)", human_bytes(static_cast<double>(size)).c_str());
      std::printf("\n");
      continue;
    }
    std::vector<unsigned char> bytes(size);
    if (gf_run_fetch(&size, run, d, bytes.data(), bytes.size()) != GF_OK) {
      std::printf(" (cannot fetch: %s)\n", gf_last_error());
      continue;
    }
    if (size == 8) {
      int64_t as_int;
      double as_double;
      std::memcpy(&as_int, bytes.data(), 8);
      std::memcpy(&as_double, bytes.data(), 8);
      std::printf(", int64 %" PRId64 ", double %.17g", as_int, as_double);
    }
    if (printable_utf8(bytes)) {
      std::string text;
      for (unsigned char c : bytes) {
        text += c == '\n'   ? std::string("\\n")
                : c == '\t' ? std::string("\\t")
                : c == '\r' ? std::string("\\r")
                : c == '"'  ? std::string("\\\"")
                : c == '\\' ? std::string("\\\\")
                            : std::string(1, static_cast<char>(c));
      }
      std::printf(", text \"%s\"\n", text.c_str());
    } else {
      std::printf(", hex ");
      for (unsigned char c : bytes) std::printf("%02x", c);
      std::printf("\n");
    }
  }
  if (shown == 0) std::printf("  (none kept)\n");
}

int cmd_run(const Options &o) {
  if (!o.dask.empty()) {
    if (!o.endpoint.empty() || !o.trace.empty() || !o.devices.empty() || o.emulated) {
      usage_error(
          "--dask runs on the cluster's workers: --pool, --trace, --devices and "
          "--emulated-devices do not apply");
    }
    return gpuflow_cli::run_on_dask(o.dask, o.graph, o.plugins);
  }
  int rc = 0;
  if (!o.log_dir.empty()) setenv("GPUFLOW_LOG_DIR", o.log_dir.c_str(), 1);
  gf_graph *graph = load_graph(o, rc);
  if (!graph) return rc;
  gf_pool *pool = make_pool(o, rc);
  if (!pool) {
    gf_graph_destroy(graph);
    return rc;
  }
  bool no_cuda_build = false;
  if (std::string why = emulation_reason(o, pool, &no_cuda_build); !why.empty() && !no_cuda_build) {
    uint32_t devices = 0;
    gf_pool_device_count(&devices, pool);
    std::fprintf(stderr, "gpuflow: running on %u emulated device(s) (host backend): %s\n", devices,
                 why.c_str());
  }
  TaskTrace trace;
  gf_pool_set_event_callback(pool, TaskTrace::on_event, &trace);
  if (!o.trace.empty()) trace.follow_leases(pool);  // a connected pool: the node's leases too
  gf_run *run = nullptr;
  gf_submit_options submit = GF_SUBMIT_OPTIONS_INIT;
  submit.where = o.where;
  if (gf_graph_submit(&run, pool, graph, &submit) != GF_OK) {
    rc = error(o.graph);
    gf_pool_destroy(pool);
    gf_graph_destroy(graph);
    return rc;
  }
  gf_run_where where = GF_RUN_IN_PROCESS;
  gf_run_where_get(&where, run);
  if (where == GF_RUN_IN_SERVICE && !o.quiet) {
    std::fprintf(stderr, "gpuflow: running in the service at %s\n",
                 o.endpoint.empty() ? "GPUFLOW_POOL" : o.endpoint.c_str());
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool progress = o.progress && !o.quiet;
  Progress bar(isatty(STDOUT_FILENO) != 0, o.progress_interval);
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
      if (gf_run_stats_get(&s, run) == GF_OK) bar.show(s, false);
    }
  }
  std::string message = status == GF_OK ? "" : gf_last_error();
  gf_pool_set_event_callback(pool, nullptr, nullptr);
  gf_run_stats stats = GF_RUN_STATS_INIT;
  gf_run_stats_get(&stats, run);
  if (progress) bar.show(stats, true);

  // Counted from task states, so a task stopped by a cancel is counted once (the run's
  // counters may hold it as both failed and cancelled).
  uint64_t task_count = 0, succeeded = 0, failed = 0, cancelled_tasks = 0;
  gf_graph_task_count(&task_count, graph);
  for (uint64_t i = 0; i < task_count; ++i) {
    gf_task t;
    gf_task_state state;
    if (gf_graph_task_at(&t, graph, i) != GF_OK || gf_run_task_state(&state, run, t) != GF_OK) {
      continue;
    }
    // A body that failed because the cancel killed it (a command) counts as cancelled.
    const char *why = "";
    if (state == GF_TASK_FAILED && status == GF_ERR_CANCELLED &&
        gf_run_task_error(&why, run, t) == GF_OK && std::strstr(why, ": cancelled") != nullptr) {
      state = GF_TASK_CANCELLED;
    }
    succeeded += state == GF_TASK_SUCCEEDED;
    failed += state == GF_TASK_FAILED;
    cancelled_tasks += state == GF_TASK_CANCELLED;
  }

  if (!o.quiet) {
    std::printf("\n%" PRIu64 " tasks: %" PRIu64 " succeeded, %" PRIu64 " failed, %" PRIu64
                " cancelled (%" PRIu64 " attempts) in %.3f s\n",
                task_count, succeeded, failed, cancelled_tasks, stats.attempts, stats.elapsed_s);
    trace.print_summary(pool, stats.elapsed_s);
    std::printf("moved %s in %" PRIu64 " transfers\n",
                human_bytes(static_cast<double>(stats.bytes_transferred)).c_str(), stats.transfers);
  }
  if (status != GF_OK) {
    std::fprintf(stderr, "gpuflow: run %s: %s\n",
                 status == GF_ERR_CANCELLED ? "cancelled" : "failed",
                 drop_repeated_label(message).c_str());
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
      if (std::strncmp(text, "task '", 6) == 0 || std::strncmp(text, "task #", 6) == 0) {
        std::fprintf(stderr, "  %s\n", text);  // it names the task already
      } else {
        std::fprintf(stderr, "  task #%" PRIu64 ": %s\n", i, text);
      }
      ++shown;
    }
    rc = kExitFailed;
  }
  if (o.show_outputs) show_outputs(run, graph);
  if (!o.trace.empty()) {
    std::string error_text;
    trace.stop_leases();
    trace.read_leases(pool, error_text);  // the leases as they stand at the end (if connected)
    error_text.clear();
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
  if (argc > 1 && gpuflow_cli::is_service_command(argv[1])) {
    return gpuflow_cli::service_main(argc, argv);
  }
  Options o = parse(argc, argv);
  if (o.command == "info") return cmd_info(o);
  if (o.command == "validate") return cmd_validate(o);
  if (o.command == "convert") return cmd_convert(o);
  return cmd_run(o);
}
