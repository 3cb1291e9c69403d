// gpuflow serve | lease | status | trace | doctor — the node's shared pool from the shell.
// Public C ABI only.
#include "service_commands.hpp"

#include "doctor_transport.hpp"
#include "job_tree.hpp"
#include "stop_signals.hpp"
#include "trace.hpp"

#include <gpuflow.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

extern char **environ;

namespace {

constexpr int kExitError = 2;

const char *kServiceUsage = R"(usage:
  gpuflow serve  [pool options] [--socket PATH] [--group NAME] [--client-gpu-cap N]
                 [--user-gpu-cap N] [--user-weights USER=W,...] [--usage-half-life SECONDS]
                 [--dashboard HOST:PORT] [--plugin LIB]... [--listen HOST:PORT --token-file F]
                 [--job-kill-grace SECONDS]
  gpuflow lease  [--pool ENDPOINT] [--gpus N] [--gpu-memory SIZE] [--cpus N] [--device ORDINAL]...
                 [--timeout SECONDS] [--name TEXT] [--grace SECONDS] -- COMMAND [ARGS...]
  gpuflow status [--pool ENDPOINT] [--json]
  (client commands take --token-file F for a tcp:// ENDPOINT)
  gpuflow trace  [--pool ENDPOINT] [--seconds N] [--output FILE]
  gpuflow doctor [--pool ENDPOINT] [--seconds N]

serve runs the node's shared pool until SIGTERM or Ctrl-C: it owns the devices and one ledger,
and listens on a unix socket ($XDG_RUNTIME_DIR/gpuflow.sock, else /tmp/gpuflow-$UID/gpuflow.sock;
mode 0600, or 0660 for --group). Clients find it through --pool or GPUFLOW_POOL. --dashboard
serves a live page and Prometheus metrics (/metrics) over HTTP there (e.g. 127.0.0.1:8787).
--plugin loads a kernel library: graphs naming its kernels run inside the service, for clients of
the service's own user (gpuflow run --pool ENDPOINT GRAPH). --listen also accepts clients of other
hosts over TCP (--pool tcp://HOST:PORT); they must show the token in F (created, mode 0600, when
missing; clients name their copy with --token-file or GPUFLOW_TOKEN_FILE). Leases whose jobs still
run when their holder is killed (or the service restarts) stay held until the jobs are gone;
such a job gets SIGTERM, and SIGKILL --job-kill-grace seconds later (default 10).
lease waits its turn for the devices asked for, runs COMMAND with CUDA_VISIBLE_DEVICES and
NVIDIA_VISIBLE_DEVICES (device UUIDs) and GPUFLOW_DEVICES (ordinals) set, and releases them once
no process COMMAND started is left; it exits with COMMAND's status. The lease owns the job:
COMMAND runs in a process group of its own (with the terminal's foreground), signals to lease
reach all of it, and what COMMAND leaves running when it exits gets SIGTERM, then SIGKILL after
--grace seconds (default 10; also after SIGTERM or SIGHUP to lease). If lease itself is killed,
the service keeps the devices until the job's processes are gone and ends them the same way.
--gpus takes a whole number of devices or a fraction of one (0.5); SIZE takes K, M, G, T suffixes
(powers of 1024).
status shows devices, leases and their holders, the queue and per-client usage.
trace records the leases on each device for N seconds (default 10; Ctrl-C ends it early) and
writes a Chrome/Perfetto trace (default gpuflow-trace.json): one track per device, each leased
job a slice named after the lease and its holder. `gpuflow run --trace` on the shared pool puts
its own tasks on the same device tracks.
doctor checks the service, CUDA, MPS and UCX: the transports UCX offers here, the ones the
connection to the service took, and N seconds (default 2) of put/get self-test over them.
pool options (serve): --backend auto|host|cuda, --devices LIST, --emulated-devices N,
  --emulated-device-memory SIZE, --cpu-workers N (the CPUs it leases)
exit codes: lease: COMMAND's, or 2 when no lease was granted; others: 0 ok, 2 error.
)";

struct Args {
  std::string command;
  std::string endpoint, socket, group, name, user_weights, dashboard, listen, token_file;
  double gpus = -1, cpus = 0, timeout_s = -1, seconds = 10, grace_s = 10;
  std::string output = "gpuflow-trace.json";
  uint64_t gpu_memory = 0;
  std::vector<int32_t> lease_devices;
  bool json = false;
  gf_pool_config pool = GF_POOL_CONFIG_INIT;
  std::vector<int32_t> devices;
  double client_cap = 0, user_cap = 0, half_life = 0, job_kill_grace = 0;
  std::vector<std::string> child;
  std::vector<std::string> plugins;
};

[[noreturn]] void usage_error(const std::string &message) {
  std::cerr << "gpuflow: " << message << "\n\n" << kServiceUsage;
  std::exit(kExitError);
}

double to_number(const std::string &text, const std::string &what) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno || !std::isfinite(v) || v < 0) {
    usage_error(what + " wants a number >= 0, not '" + text + "'");
  }
  return v;
}

uint64_t to_size(const std::string &text, const std::string &what) {
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double scale = 1;
  if (unit == "K" || unit == "KiB" || unit == "k")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    usage_error(what + ": unknown size unit in '" + text + "'");
  if (text.empty() || end == text.c_str() || !(v >= 0) || v * scale > 1e14) {
    usage_error(what + " wants a size such as 512M or 10G, not '" + text + "'");
  }
  return static_cast<uint64_t>(v * scale);
}

Args parse(int argc, char **argv) {
  Args a;
  a.command = argv[1];
  bool seconds_given = false;
  for (int i = 2; i < argc; ++i) {
    std::string o = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(o + " needs a value");
      return argv[++i];
    };
    if (o == "--") {
      for (++i; i < argc; ++i) a.child.push_back(argv[i]);
    } else if (o == "-h" || o == "--help") {
      std::cout << kServiceUsage;
      std::exit(0);
    } else if (o == "--pool") {
      a.endpoint = value();
    } else if (o == "--socket") {
      a.socket = value();
    } else if (o == "--group") {
      a.group = value();
    } else if (o == "--plugin") {
      a.plugins.push_back(value());
    } else if (o == "--listen") {
      a.listen = value();
    } else if (o == "--token-file") {
      a.token_file = value();
    } else if (o == "--name") {
      a.name = value();
    } else if (o == "--gpus") {
      a.gpus = to_number(value(), o);
    } else if (o == "--gpu-memory") {
      a.gpu_memory = to_size(value(), o);
    } else if (o == "--cpus") {
      a.cpus = to_number(value(), o);
    } else if (o == "--device") {
      a.lease_devices.push_back(static_cast<int32_t>(to_number(value(), o)));
    } else if (o == "--grace" && a.command == "lease") {
      a.grace_s = to_number(value(), o);
    } else if (o == "--timeout") {
      a.timeout_s = to_number(value(), o);
    } else if (o == "--seconds" && (a.command == "trace" || a.command == "doctor")) {
      a.seconds = to_number(value(), o);
      seconds_given = true;
    } else if ((o == "--output" || o == "-o") && a.command == "trace") {
      a.output = value();
    } else if (o == "--json") {
      a.json = true;
    } else if (o == "--client-gpu-cap") {
      a.client_cap = to_number(value(), o);
    } else if (o == "--user-gpu-cap") {
      a.user_cap = to_number(value(), o);
    } else if (o == "--user-weights") {
      a.user_weights = value();
    } else if (o == "--dashboard") {
      a.dashboard = value();
    } else if (o == "--job-kill-grace" && a.command == "serve") {
      a.job_kill_grace = to_number(value(), o);
    } else if (o == "--usage-half-life") {
      a.half_life = to_number(value(), o);
    } else if (o == "--backend") {
      std::string b = value();
      if (b != "host" && b != "cuda" && b != "auto") usage_error("unknown backend '" + b + "'");
      a.pool.backend = b == "host"   ? GF_BACKEND_HOST
                       : b == "cuda" ? GF_BACKEND_CUDA
                                     : GF_BACKEND_AUTO;
    } else if (o == "--devices") {
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) {
        a.devices.push_back(static_cast<int32_t>(to_number(item, "--devices")));
      }
    } else if (o == "--emulated-devices") {
      std::string v = value();
      a.pool.emulated_devices = v == "-1" ? -1 : static_cast<int32_t>(to_number(v, o));
    } else if (o == "--emulated-device-memory") {
      a.pool.emulated_device_memory = to_size(value(), o);
    } else if (o == "--cpu-workers") {
      a.pool.cpu_workers = static_cast<int32_t>(to_number(value(), o));
    } else {
      usage_error("unknown option " + o + " for gpuflow " + a.command);
    }
  }
  if (!a.devices.empty()) {
    a.pool.devices = a.devices.data();
    a.pool.device_count = static_cast<uint32_t>(a.devices.size());
    if (a.pool.backend == GF_BACKEND_HOST || a.pool.emulated_devices == 0) {
      a.pool.emulated_devices = static_cast<int32_t>(a.devices.size());
    }
  }
  if (a.command == "lease" && a.child.empty()) usage_error("lease needs -- COMMAND [ARGS...]");
  if (a.command != "lease" && !a.child.empty()) usage_error(a.command + " takes no command");
  if (a.command == "doctor" && !seconds_given) a.seconds = 2;
  return a;
}

int library_error(const std::string &what) {
  std::cerr << "gpuflow: " << what << ": " << gf_last_error() << "\n";
  return kExitError;
}

// A pool connected to the service, for the client commands.
gf_pool *connect(const Args &a, int &rc) {
  std::string endpoint = a.endpoint;
  if (endpoint.empty()) {
    const char *env = std::getenv("GPUFLOW_POOL");
    endpoint = env && *env ? env : "";
  }
  if (endpoint.empty()) endpoint = gf_default_endpoint();
  gf_pool_config config = GF_POOL_CONFIG_INIT;
  config.endpoint = endpoint.c_str();
  config.cpu_workers = -1;  // this process runs no tasks: no CPU workers of its own
  config.token_file = a.token_file.empty() ? nullptr : a.token_file.c_str();
  gf_pool *pool = nullptr;
  if (gf_pool_create(&pool, &config) != GF_OK) {
    rc = library_error("cannot reach the gpuflow service");
    return nullptr;
  }
  return pool;
}

volatile sig_atomic_t stop_signal = 0;
extern "C" void note_signal(int sig) {
  stop_signal = sig;
}

int cmd_serve(const Args &a) {
  gf_service_config config = GF_SERVICE_CONFIG_INIT;
  config.pool = &a.pool;
  config.socket_path = a.socket.empty() ? nullptr : a.socket.c_str();
  config.group = a.group.empty() ? nullptr : a.group.c_str();
  config.client_gpu_cap = a.client_cap;
  config.user_gpu_cap = a.user_cap;
  config.usage_half_life_s = a.half_life;
  config.job_kill_grace_s = a.job_kill_grace;
  config.user_weights = a.user_weights.empty() ? nullptr : a.user_weights.c_str();
  config.dashboard = a.dashboard.empty() ? nullptr : a.dashboard.c_str();
  std::vector<const char *> plugins;
  for (const std::string &p : a.plugins) plugins.push_back(p.c_str());
  config.plugins = plugins.data();
  config.plugin_count = static_cast<uint32_t>(plugins.size());
  config.listen = a.listen.empty() ? nullptr : a.listen.c_str();
  config.token_file = a.token_file.empty() ? nullptr : a.token_file.c_str();
  if (!a.listen.empty() && a.token_file.empty()) usage_error("--listen needs --token-file F");
  // Before the service's threads exist, so that only the stop-signal thread takes them; and
  // before start, which may take long, so that a stop signal during it is not lost.
  gpuflow_cli::handle_stop_signals();
  gf_service *service = nullptr;
  if (gf_service_start(&service, &config) != GF_OK) return library_error("cannot start");
  if (gpuflow_cli::stop_signal_received()) {
    // It came during start: stopped before anyone is told the service listens.
    gf_service_stop(service);
    return 0;
  }
  std::printf("gpuflow serve: listening on %s (pid %d)\n", gf_service_endpoint(service),
              static_cast<int>(getpid()));
  if (const char *remote = gf_service_remote_endpoint(service))
    std::printf("gpuflow serve: remote clients connect to %s with the token in %s\n", remote,
                a.token_file.c_str());
  if (const char *url = gf_service_dashboard_url(service))
    std::printf("gpuflow serve: dashboard at %s (metrics: %smetrics)\n", url, url);
  std::fflush(stdout);
  gpuflow_cli::wait_for_stop_signal();
  gf_service_stop(service);
  return 0;
}

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (const auto &s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

int cmd_lease(const Args &a) {
  // Before any thread exists (the pool's start them): every thread inherits the blocked signals,
  // so they reach the job's wrapper only.
  gpuflow_cli::take_job_signals();
  int rc = 0;
  const char *pool_env = std::getenv("GPUFLOW_POOL");
  const std::string endpoint = !a.endpoint.empty() ? a.endpoint : pool_env ? pool_env : "";
  if (endpoint.rfind("tcp://", 0) == 0) {
    std::cerr << "gpuflow: lease runs COMMAND here, but " << endpoint
              << " is a service on another host, whose devices are not here: run a graph of "
                 "commands there instead (gpuflow run --pool "
              << endpoint << " GRAPH)\n";
    return kExitError;
  }
  gf_pool *pool = connect(a, rc);
  if (!pool) return rc;
  gf_lease_request request = GF_LEASE_REQUEST_INIT;
  request.gpus = a.gpus < 0 ? (a.cpus > 0 ? 0 : 1) : a.gpus;
  request.gpu_memory = a.gpu_memory;
  request.cpus = a.cpus;
  request.devices = a.lease_devices.empty() ? nullptr : a.lease_devices.data();
  request.device_count = static_cast<uint32_t>(a.lease_devices.size());
  std::string name = a.name.empty() ? a.child[0] : a.name;
  request.name = name.c_str();
  gf_lease *lease = nullptr;
  const int64_t timeout_ms = a.timeout_s < 0 ? -1 : static_cast<int64_t>(a.timeout_s * 1000);
  if (gf_lease_acquire(&lease, pool, &request, timeout_ms) != GF_OK) {
    rc = library_error("no lease");
    gf_pool_destroy(pool);
    return rc;
  }
  uint64_t id = 0;
  uint32_t count = 0;
  double cpus = 0;
  gf_lease_info(&id, &count, &cpus, lease);
  std::vector<std::string> uuids, ordinals, mps_memory;
  double share = 1;
  for (uint32_t i = 0; i < count; ++i) {
    gf_lease_device d = GF_LEASE_DEVICE_INIT;
    gf_lease_device_info(&d, lease, i);
    uuids.push_back(d.uuid);
    ordinals.push_back(std::to_string(d.ordinal));
    share = d.share;
    mps_memory.push_back(std::to_string(i) + "=" + std::to_string(d.memory >> 20) + "M");
  }
  // The child's environment: ours, plus what names its devices.
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e;
    for (const char *replaced :
         {"CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=", "GPUFLOW_DEVICES=",
          "GPUFLOW_LEASE_ID=", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=",
          "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="}) {
      if (entry.rfind(replaced, 0) == 0) entry.clear();
    }
    if (!entry.empty()) env.push_back(entry);
  }
  env.push_back("CUDA_VISIBLE_DEVICES=" + join(uuids));
  env.push_back("NVIDIA_VISIBLE_DEVICES=" + (uuids.empty() ? std::string("void") : join(uuids)));
  env.push_back("GPUFLOW_DEVICES=" + join(ordinals));
  env.push_back("GPUFLOW_LEASE_ID=" + std::to_string(id));
  if (count == 1 && share < 1) {
    // Enforced where NVIDIA MPS runs (its clients read these); elsewhere they are only counted.
    env.push_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" +
                  std::to_string(static_cast<int>(std::ceil(share * 100))));
    env.push_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + join(mps_memory));
  }
  gpuflow_cli::JobSpec job;
  job.argv = a.child;
  job.env = std::move(env);
  job.grace_s = a.grace_s;
  job.started = [&](pid_t process_group) {
    // From here the lease owns the job, even should this process be killed.
    if (gf_lease_bind_process_group(lease, process_group) != GF_OK) {
      std::cerr << "gpuflow: warning: the lease is not bound to the job (" << gf_last_error()
                << "): if this process is killed, the job runs on unleased\n";
    }
  };
  std::string error;
  int exit_code = gpuflow_cli::run_job(job, error);
  if (exit_code < 0) {
    std::cerr << "gpuflow: " << error << "\n";
    exit_code = kExitError;
  }
  if (gf_lease_release(lease) != GF_OK) {
    std::cerr << "gpuflow: releasing the lease: " << gf_last_error() << "\n";
  }
  gf_pool_destroy(pool);
  return exit_code;
}

int cmd_status(const Args &a) {
  int rc = 0;
  gf_pool *pool = connect(a, rc);
  if (!pool) return rc;
  gf_bytes text{};
  if (gf_pool_service_status(&text, pool, a.json ? GF_STATUS_JSON : GF_STATUS_TEXT) != GF_OK) {
    rc = library_error("cannot read the service's status");
  } else {
    std::fwrite(text.data, 1, text.size, stdout);
    std::printf("\n");
    gf_bytes_free(&text);
  }
  gf_pool_destroy(pool);
  return rc;
}

int cmd_trace(const Args &a) {
  int rc = 0;
  gf_pool *pool = connect(a, rc);
  if (!pool) return rc;
  TaskTrace trace;
  std::string error;
  if (!trace.read_leases(pool, error)) {
    std::cerr << "gpuflow: cannot read the service's leases: " << error << "\n";
    gf_pool_destroy(pool);
    return kExitError;
  }
  struct sigaction sa {};
  sa.sa_handler = note_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::cerr << "gpuflow: recording the service's leases for " << a.seconds
            << " s (Ctrl-C ends it early)\n";
  // The service keeps the last 1024 ended leases: reading every 250 ms misses none on any node
  // that ends fewer than 4096 leases a second.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.seconds);
  while (!stop_signal && std::chrono::steady_clock::now() < until) {
    usleep(250 * 1000);
    if (!trace.read_leases(pool, error)) {
      std::cerr << "gpuflow: the service stopped answering: " << error << "\n";
      break;
    }
  }
  if (!trace.write_chrome_trace(a.output, pool, error)) {
    std::cerr << "gpuflow: cannot write the trace: " << error << "\n";
    rc = kExitError;
  } else {
    std::cout << "trace: " << a.output
              << " (open in https://ui.perfetto.dev or chrome://tracing)\n";
  }
  gf_pool_destroy(pool);
  return rc;
}

int cmd_doctor(const Args &a) {
  int problems = 0;
  auto line = [&](bool ok, const std::string &what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    problems += ok ? 0 : 1;
  };
  std::printf("gpuflow %s\n", gf_version_string());
  const char *env = std::getenv("GPUFLOW_POOL");
  std::string endpoint = !a.endpoint.empty() ? a.endpoint
                         : env && *env       ? std::string(env)
                                             : std::string(gf_default_endpoint());
  const bool remote = endpoint.rfind("tcp://", 0) == 0;
  std::string path = endpoint.rfind("unix://", 0) == 0 ? endpoint.substr(7) : endpoint;
  struct stat st {};
  bool exists = remote || ::stat(path.c_str(), &st) == 0;
  if (remote) {
    std::printf("note service on another host: %s (its data plane is UCX's TCP, relayed there)\n",
                endpoint.c_str());
  } else {
    line(exists && S_ISSOCK(st.st_mode),
         "service socket " + path +
             (exists ? (S_ISSOCK(st.st_mode) ? "" : " is not a socket") : " does not exist"));
  }
  int rc = 0;
  bool service_answered = false;
  if (exists) {
    gf_pool *pool = connect(a, rc);
    service_answered = pool != nullptr;
    line(pool != nullptr, pool ? "the service answers"
                               : std::string("the service does not answer: ") + gf_last_error());
    if (pool) {
      uint32_t devices = 0;
      gf_pool_device_count(&devices, pool);
      if (remote) {
        std::printf(
            "note the service's devices are on its host: graphs that need them run "
            "there (gpuflow status --pool %s lists them)\n",
            endpoint.c_str());
      } else {
        line(devices > 0, "the service offers " + std::to_string(devices) + " device(s)");
      }
      gpuflow_cli::print_data_plane_check(pool, a.seconds, line);
      gf_pool_destroy(pool);
    }
  }
  if (!exists || !service_answered) gpuflow_cli::print_data_plane_check(nullptr, 0, line);
  gf_pool_config embedded = GF_POOL_CONFIG_INIT;
  embedded.backend = GF_BACKEND_CUDA;
  embedded.endpoint = "embedded";
  embedded.cpu_workers = -1;
  gf_pool *cuda = nullptr;
  if (gf_pool_create(&cuda, &embedded) == GF_OK) {
    uint32_t devices = 0;
    gf_pool_device_count(&devices, cuda);
    line(true, "CUDA: " + std::to_string(devices) + " GPU(s) visible to this process");
    gf_pool_destroy(cuda);
  } else {
    std::printf("note CUDA: %s (emulated devices are used instead)\n", gf_last_error());
  }
  const char *mps = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::string mps_dir = mps && *mps ? mps : "/tmp/nvidia-mps";
  bool mps_running = ::stat((mps_dir + "/control").c_str(), &st) == 0;
  std::printf("note NVIDIA MPS: %s\n",
              mps_running ? ("running (" + mps_dir + ")").c_str()
                          : "not running: fractional leases are counted, not enforced");
  return problems ? kExitError : 0;
}

}  // namespace

namespace gpuflow_cli {

bool is_service_command(const char *command) {
  std::string c = command ? command : "";
  return c == "serve" || c == "lease" || c == "status" || c == "trace" || c == "doctor";
}

int service_main(int argc, char **argv) {
  Args a = parse(argc, argv);
  if (a.command == "serve") return cmd_serve(a);
  if (a.command == "lease") return cmd_lease(a);
  if (a.command == "status") return cmd_status(a);
  if (a.command == "trace") return cmd_trace(a);
  return cmd_doctor(a);
}

}  // namespace gpuflow_cli
