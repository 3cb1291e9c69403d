// gpuflow serve | status | trace | doctor: the node's shared pool from the shell (lease is
// lease_command.cpp). Public C ABI only.
#include "service_commands.hpp"

#include <gpuflow.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "doctor_transport.hpp"
#include "exit_codes.hpp"
#include "options.hpp"
#include "service_client.hpp"
#include "stop_signals.hpp"
#include "trace.hpp"

namespace gpuflow_cli {

namespace {

struct ServeOptions {
  PoolOptions pool;
  std::string socket, group, user_weights, dashboard, listen, token_file;
  double client_cap = 0, user_cap = 0, half_life = 0, job_kill_grace = 0;
};

// What the client commands (status, trace, doctor) are given.
struct ClientOptions {
  std::string endpoint, token_file;
  bool json = false;
  double seconds = 10;
  std::string output = "gpuflow-trace.json";
};

int serve(const ServeOptions &a) {
  const gf_pool_config pool = a.pool.config();
  gf_service_config config = GF_SERVICE_CONFIG_INIT;
  config.pool = &pool;
  config.socket_path = a.socket.empty() ? nullptr : a.socket.c_str();
  config.group = a.group.empty() ? nullptr : a.group.c_str();
  config.client_gpu_cap = a.client_cap;
  config.user_gpu_cap = a.user_cap;
  config.usage_half_life_s = a.half_life;
  config.job_kill_grace_s = a.job_kill_grace;
  config.user_weights = a.user_weights.empty() ? nullptr : a.user_weights.c_str();
  config.dashboard = a.dashboard.empty() ? nullptr : a.dashboard.c_str();
  std::vector<const char *> plugins;
  for (const std::string &p : a.pool.plugins) plugins.push_back(p.c_str());
  config.plugins = plugins.data();
  config.plugin_count = static_cast<uint32_t>(plugins.size());
  config.listen = a.listen.empty() ? nullptr : a.listen.c_str();
  config.token_file = a.token_file.empty() ? nullptr : a.token_file.c_str();
  // Before the service's threads exist, so that only the stop-signal thread takes them; and
  // before start, which may take long, so that a stop signal during it is not lost.
  handle_stop_signals(StopPolicy{"gpuflow serve", /*second_exits=*/true});
  gf_service *service = nullptr;
  if (gf_service_start(&service, &config) != GF_OK) return library_error("cannot start");
  if (stop_signal_received()) {
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
  wait_for_stop_signal();
  gf_service_stop(service);
  return 0;
}

int print_status(const ClientOptions &a) {
  gf_pool *pool = connect_to_service(a.endpoint, a.token_file);
  if (!pool) return kExitError;
  int rc = kExitOk;
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

int record_leases(const ClientOptions &a) {
  // Before the pool's threads exist: Ctrl-C ends the recording early, and the trace is written.
  handle_stop_signals(StopPolicy{});
  gf_pool *pool = connect_to_service(a.endpoint, a.token_file);
  if (!pool) return kExitError;
  int rc = kExitOk;
  TaskTrace trace;
  std::string error;
  if (!trace.read_leases(pool, error)) {
    std::cerr << "gpuflow: cannot read the service's leases: " << error << "\n";
    gf_pool_destroy(pool);
    return kExitError;
  }
  std::cerr << "gpuflow: recording the service's leases for " << a.seconds
            << " s (Ctrl-C ends it early)\n";
  // The service keeps the last 1024 ended leases: reading every 250 ms misses none on any node
  // that ends fewer than 4096 leases a second.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.seconds);
  while (!stop_signal_received() && std::chrono::steady_clock::now() < until) {
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

int check_node(const ClientOptions &a) {
  int problems = 0;
  auto line = [&](bool ok, const std::string &what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    problems += ok ? 0 : 1;
  };
  std::printf("gpuflow %s\n", gf_version_string());
  const std::string endpoint = service_endpoint(a.endpoint);
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
  bool service_answered = false;
  if (exists) {
    gf_pool *pool = connect_to_service(a.endpoint, a.token_file);
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
      print_data_plane_check(pool, a.seconds, line);
      gf_pool_destroy(pool);
    }
  }
  if (!exists || !service_answered) print_data_plane_check(nullptr, 0, line);
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
  return problems ? kExitError : kExitOk;
}

}  // namespace

void add_serve_command(CLI::App &app, int &exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App *command = app.add_subcommand("serve");
  add_device_options(*command, o->pool, /*device_memory=*/true);
  add_plugin_option(*command, o->pool.plugins);
  command->add_option("--socket", o->socket);
  command->add_option("--group", o->group);
  command->add_option("--client-gpu-cap", o->client_cap)->check(kNonNegative);
  command->add_option("--user-gpu-cap", o->user_cap)->check(kNonNegative);
  command->add_option("--user-weights", o->user_weights);
  command->add_option("--usage-half-life", o->half_life)->check(kNonNegative);
  command->add_option("--dashboard", o->dashboard);
  CLI::Option *token_file = command->add_option("--token-file", o->token_file);
  command->add_option("--listen", o->listen)->needs(token_file);
  command->add_option("--job-kill-grace", o->job_kill_grace)->check(kNonNegative);
  command->callback([o, &exit_code] { exit_code = serve(*o); });
}

void add_client_commands(CLI::App &app, int &exit_code) {
  // Each its own options: --seconds means 10 s of trace but 2 s of data-plane check.
  auto add = [&](const char *name, int (*run)(const ClientOptions &), double seconds) {
    auto o = std::make_shared<ClientOptions>();
    o->seconds = seconds;
    CLI::App *command = app.add_subcommand(name);
    add_service_options(*command, o->endpoint, o->token_file);
    command->callback([o, run, &exit_code] { exit_code = run(*o); });
    return std::make_pair(command, o);
  };
  auto [status_command, status_options] = add("status", print_status, 0);
  status_command->add_flag("--json", status_options->json);
  auto [trace_command, trace_options] = add("trace", record_leases, 10);
  trace_command->add_option("--seconds", trace_options->seconds)->check(kNonNegative);
  trace_command->add_option("-o,--output", trace_options->output);
  auto [doctor_command, doctor_options] = add("doctor", check_node, 2);
  doctor_command->add_option("--seconds", doctor_options->seconds)->check(kNonNegative);
}

}  // namespace gpuflow_cli
