// gpuflow status | trace | doctor: the node's shared pool from the shell (serve is
// serve_command.cpp, lease lease_command.cpp). Public C ABI only.
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

#include <nlohmann/json.hpp>

#include "doctor_transport.hpp"
#include "exit_codes.hpp"
#include "options.hpp"
#include "service_client.hpp"
#include "stop_signals.hpp"
#include "trace.hpp"

namespace gpuflow_cli {

namespace {

// What the client commands (status, trace, doctor) are given.
struct ClientOptions {
  std::string endpoint, token_file;
  bool json = false;
  double seconds = 10;
  std::string output = "gpuflow-trace.json";
};

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

// How the service follows its leases' jobs (docs/service.md, "A lease owns its job"): its own
// cgroup each where it was delegated a subtree, else their process groups.
void print_job_tracking(gf_pool *pool) {
  gf_bytes text{};
  if (gf_pool_service_status(&text, pool, GF_STATUS_JSON) != GF_OK) return;
  const nlohmann::json status =
      nlohmann::json::parse(std::string(static_cast<const char *>(text.data), text.size), nullptr,
                            /*allow_exceptions=*/false);
  gf_bytes_free(&text);
  const auto tracking = status.is_object() ? status.find("job_tracking") : status.end();
  if (!status.is_object() || tracking == status.end() || !tracking->is_string() ||
      tracking->get<std::string>().empty()) {
    std::printf(
        "note the service does not say how it follows jobs (an older one: process groups)\n");
    return;
  }
  std::printf("note jobs of leases are followed as %s\n", tracking->get<std::string>().c_str());
}

int check_node(const ClientOptions &a) {
  int problems = 0;
  auto line = [&](bool ok, const std::string &what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    problems += ok ? 0 : 1;
  };
  std::printf("gpuflow %s\n", gf_version_string());
  const std::string endpoint = service_endpoint(a.endpoint);
  const bool remote = endpoint.rfind("tcp://", 0) == 0 || endpoint.rfind("tcp+insecure://", 0) == 0;
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
        print_job_tracking(pool);
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
