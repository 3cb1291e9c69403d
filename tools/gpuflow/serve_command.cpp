// gpuflow serve: runs the node's shared pool until a stop signal. Its settings come from the
// command line and, with --config, a TOML file (serve_config.cpp; the command line wins); under
// systemd it takes over the socket gpuflow.socket listens on, says when it is ready, and
// re-reads the file's [policy] on SIGHUP (systemd_socket.cpp). With --per-job it is one batch
// job's pool instead (per_job.cpp). Public C ABI only.
#include "serve_command.hpp"

#include <gpuflow.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "exit_codes.hpp"
#include "options.hpp"
#include "per_job.hpp"
#include "serve_config.hpp"
#include "stop_signals.hpp"
#include "systemd_socket.hpp"

namespace gpuflow_cli {

namespace {

struct ServeOptions {
  PoolOptions pool;
  std::string socket, group, user_weights, dashboard, listen, token_file, cgroup_root, config;
  std::string tls_cert, tls_key, tls_client_ca;
  std::vector<std::string> trusted_data_devices;
  bool insecure_listen = false;
  double client_cap = 0, user_cap = 0, half_life = 0, job_kill_grace = 0;
  bool per_job = false, daemon = false;  // command line only: not a node's setting
};

// Declares serve's flags on `command`, bound to `o`: for the command line, and again to check
// each setting of a configuration file by the same rules.
void add_serve_flags(CLI::App &command, ServeOptions &o) {
  add_device_options(command, o.pool, /*device_memory=*/true);
  add_plugin_option(command, o.pool.plugins);
  command.add_option("--socket", o.socket);
  command.add_option("--group", o.group);
  command.add_option("--client-gpu-cap", o.client_cap)->check(kNonNegative);
  command.add_option("--user-gpu-cap", o.user_cap)->check(kNonNegative);
  command.add_option("--user-weights", o.user_weights);
  command.add_option("--usage-half-life", o.half_life)->check(kNonNegative);
  command.add_option("--dashboard", o.dashboard);
  command.add_option("--token-file", o.token_file);
  command.add_option("--listen", o.listen);
  command.add_option("--tls-cert", o.tls_cert);
  command.add_option("--tls-key", o.tls_key);
  command.add_option("--tls-client-ca", o.tls_client_ca);
  command.add_flag("--insecure-listen", o.insecure_listen);
  command.add_option("--trusted-data-device", o.trusted_data_devices);
  command.add_option("--job-kill-grace", o.job_kill_grace)->check(kNonNegative);
  command.add_option("--cgroup-root", o.cgroup_root);
}

// Copies the value of one flag from `from` to `to`.
using Copy = std::function<void(ServeOptions &to, const ServeOptions &from)>;
const std::map<std::string, Copy> &copiers() {
  static const std::map<std::string, Copy> kCopy = {
      {"--backend", [](auto &t, const auto &f) { t.pool.backend = f.pool.backend; }},
      {"--devices", [](auto &t, const auto &f) { t.pool.devices = f.pool.devices; }},
      {"--cpu-workers", [](auto &t, const auto &f) { t.pool.cpu_workers = f.pool.cpu_workers; }},
      {"--emulated-devices",
       [](auto &t, const auto &f) { t.pool.emulated_devices = f.pool.emulated_devices; }},
      {"--emulated-device-memory",
       [](auto &t, const auto &f) {
         t.pool.emulated_device_memory = f.pool.emulated_device_memory;
       }},
      {"--plugin", [](auto &t, const auto &f) { t.pool.plugins = f.pool.plugins; }},
      {"--socket", [](auto &t, const auto &f) { t.socket = f.socket; }},
      {"--group", [](auto &t, const auto &f) { t.group = f.group; }},
      {"--dashboard", [](auto &t, const auto &f) { t.dashboard = f.dashboard; }},
      {"--listen", [](auto &t, const auto &f) { t.listen = f.listen; }},
      {"--token-file", [](auto &t, const auto &f) { t.token_file = f.token_file; }},
      {"--tls-cert", [](auto &t, const auto &f) { t.tls_cert = f.tls_cert; }},
      {"--tls-key", [](auto &t, const auto &f) { t.tls_key = f.tls_key; }},
      {"--tls-client-ca", [](auto &t, const auto &f) { t.tls_client_ca = f.tls_client_ca; }},
      {"--insecure-listen", [](auto &t, const auto &f) { t.insecure_listen = f.insecure_listen; }},
      {"--trusted-data-device",
       [](auto &t, const auto &f) { t.trusted_data_devices = f.trusted_data_devices; }},
      {"--job-kill-grace", [](auto &t, const auto &f) { t.job_kill_grace = f.job_kill_grace; }},
      {"--cgroup-root", [](auto &t, const auto &f) { t.cgroup_root = f.cgroup_root; }},
      {"--usage-half-life", [](auto &t, const auto &f) { t.half_life = f.half_life; }},
      {"--client-gpu-cap", [](auto &t, const auto &f) { t.client_cap = f.client_cap; }},
      {"--user-gpu-cap", [](auto &t, const auto &f) { t.user_cap = f.user_cap; }},
      {"--user-weights", [](auto &t, const auto &f) { t.user_weights = f.user_weights; }},
  };
  return kCopy;
}

// `given` (the command line) with the file's settings for every flag the command line did not
// give. Throws std::runtime_error naming the key when a value breaks its flag's rule.
ServeOptions with_file(const ServeOptions &given, const CLI::App &command_line,
                       const std::vector<ConfigSetting> &settings) {
  ServeOptions out = given;
  for (const ConfigSetting &s : settings) {
    if (command_line.get_option(s.flag)->count() > 0) continue;
    ServeOptions parsed;
    CLI::App one{"serve"};
    one.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    add_serve_flags(one, parsed);
    std::vector<std::string> args(s.args.rbegin(), s.args.rend());  // CLI11 takes them reversed
    try {
      one.parse(args);
    } catch (const CLI::ParseError &e) {
      throw std::runtime_error(s.where + ": " + e.what());
    }
    copiers().at(s.flag)(out, parsed);
  }
  return out;
}

// The listener's TLS goes to the library through its environment (gf_service_config has no
// fields for it): every variable set or cleared here, so none is inherited by accident.
void set_remote_security(const ServeOptions &o) {
  std::string devices;
  for (const std::string &d : o.trusted_data_devices) devices += (devices.empty() ? "" : ",") + d;
  for (const auto &[name, value] :
       {std::pair<const char *, std::string>{"GPUFLOW_SERVE_TLS_CERT", o.tls_cert},
        {"GPUFLOW_SERVE_TLS_KEY", o.tls_key},
        {"GPUFLOW_SERVE_TLS_CLIENT_CA", o.tls_client_ca},
        {"GPUFLOW_SERVE_INSECURE_LISTEN", o.insecure_listen ? "1" : ""},
        {"GPUFLOW_SERVE_TRUSTED_DEVICES", devices}}) {
    if (value.empty()) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value.c_str(), 1);
    }
  }
}

void set_policy(gf_service_config &config, const ServeOptions &o) {
  config.client_gpu_cap = o.client_cap;
  config.user_gpu_cap = o.user_cap;
  config.usage_half_life_s = o.half_life;
  config.user_weights = o.user_weights.empty() ? nullptr : o.user_weights.c_str();
}

// SIGHUP: the file's [policy] again, for the service to apply without dropping a lease. A file
// that has become unreadable or wrong changes nothing and says why; other keys that changed take
// effect at the next start, which is said too. The re-read never waits (read_serve_config: a
// FIFO or a device in the file's place is refused, not opened), so this loop goes on taking the
// next SIGHUP and the stop.
void reload(gf_service *service, const ServeOptions &given, const CLI::App &command_line,
            std::vector<ConfigSetting> &settings) {
  std::vector<ConfigSetting> now;
  ServeOptions options;
  try {
    now = read_serve_config(given.config);
    options = with_file(given, command_line, now);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "gpuflow serve: %s not re-read, the policy stays as it was: %s\n",
                 given.config.c_str(), e.what());
    return;
  }
  std::map<std::string, std::vector<std::string>> before, after;
  for (const ConfigSetting &s : settings) before[s.key] = s.args;
  for (const ConfigSetting &s : now) after[s.key] = s.args;
  for (const auto &[key, args] : after) {
    if (!is_policy_key(key) && before[key] != args)
      std::fprintf(stderr, "gpuflow serve: %s changed in %s: it takes effect at the next start\n",
                   key.c_str(), given.config.c_str());
  }
  for (const auto &[key, args] : before) {
    if (!is_policy_key(key) && !after.count(key))
      std::fprintf(stderr, "gpuflow serve: %s left %s: that takes effect at the next start\n",
                   key.c_str(), given.config.c_str());
  }
  gf_service_config config = GF_SERVICE_CONFIG_INIT;
  set_policy(config, options);
  if (gf_service_update_policy(service, &config) != GF_OK) {
    std::fprintf(stderr, "gpuflow serve: the policy of %s was refused, it stays as it was: %s\n",
                 given.config.c_str(), gf_last_error());
    return;
  }
  settings = std::move(now);
}

int serve(const ServeOptions &given, const CLI::App &command_line) {
  std::vector<ConfigSetting> settings;
  ServeOptions o = given;
  int handed_over = 0;
  std::string job_dir;  // --per-job: made here, removed at the end (if empty by then)
  pid_t job = 0;
  // `served`: this service listened there, and its stop is the job's end, so the grants it saved
  // beside the socket for a restart (SOCKET.leases.a, .b) are of no use to anyone. Otherwise they
  // may be another service's of the same job, which this one found listening.
  const auto remove_job_dir = [&job_dir, &o](bool served) {
    if (job_dir.empty()) return;
    if (served) {
      for (const char *slot : {".leases.a", ".leases.b"}) ::unlink((o.socket + slot).c_str());
    }
    ::rmdir(job_dir.c_str());
  };
  try {
    if (!given.config.empty()) {
      settings = read_serve_config(given.config);
      o = with_file(given, command_line, settings);
    }
    if (!o.listen.empty() && o.token_file.empty()) {
      throw std::runtime_error(
          "--listen requires --token-file (in a --config file: service.listen, "
          "service.token_file)");
    }
    if (o.per_job) {
      const JobPlace place = job_place();
      if (o.socket.empty()) {
        make_job_dir(place.dir);
        job_dir = place.dir;
        o.socket = place.socket;
      }
      job = job_process();  // before --daemon's fork, which makes a new parent
    }
    handed_over = socket_from_systemd();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "gpuflow serve: %s\n", e.what());
    remove_job_dir(false);
    return kExitError;
  }
  if (o.daemon) {
    const int parent_exit = daemonize();
    if (parent_exit >= 0) return parent_exit;
  }
  const gf_pool_config pool = o.pool.config();
  gf_service_config config = GF_SERVICE_CONFIG_INIT;
  config.pool = &pool;
  config.socket_path = o.socket.empty() ? nullptr : o.socket.c_str();
  config.listen_fd = handed_over;
  config.group = o.group.empty() ? nullptr : o.group.c_str();
  set_policy(config, o);
  config.job_kill_grace_s = o.job_kill_grace;
  // The library takes the jobs' cgroup subtree from its environment (a node's setting, not a
  // field of gf_service_config).
  if (!o.cgroup_root.empty()) ::setenv("GPUFLOW_CGROUP_ROOT", o.cgroup_root.c_str(), 1);
  config.dashboard = o.dashboard.empty() ? nullptr : o.dashboard.c_str();
  std::vector<const char *> plugins;
  for (const std::string &p : o.pool.plugins) plugins.push_back(p.c_str());
  config.plugins = plugins.data();
  config.plugin_count = static_cast<uint32_t>(plugins.size());
  config.listen = o.listen.empty() ? nullptr : o.listen.c_str();
  config.token_file = o.token_file.empty() ? nullptr : o.token_file.c_str();
  set_remote_security(o);
  // Before the service's threads exist, so that only the stop-signal thread takes them; and
  // before start, which may take long, so that a stop signal during it is not lost.
  handle_stop_signals(StopPolicy{"gpuflow serve", /*second_exits=*/true,
                                 /*hup_reloads=*/!given.config.empty()});
  try {
    if (job > 0) stop_when_gone(job, "the job's script");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "gpuflow serve: %s\n", e.what());
    remove_job_dir(false);
    return kExitError;
  }
  gf_service *service = nullptr;
  if (gf_service_start(&service, &config) != GF_OK) {
    remove_job_dir(false);
    return library_error("cannot start");
  }
  if (stop_signal_received()) {
    // It came during start: stopped before anyone is told the service listens.
    gf_service_stop(service);
    remove_job_dir(true);
    return 0;
  }
  const std::string endpoint = gf_service_endpoint(service);
  std::printf("gpuflow serve: listening on %s (pid %d)%s\n", endpoint.c_str(),
              static_cast<int>(getpid()), handed_over ? ", the socket systemd handed over" : "");
  if (handed_over && !o.socket.empty() && "unix://" + o.socket != endpoint)
    std::printf("gpuflow serve: --socket %s is not used: systemd handed over %s\n",
                o.socket.c_str(), endpoint.c_str());
  if (const char *remote = gf_service_remote_endpoint(service))
    std::printf("gpuflow serve: remote clients connect to %s with the token in %s\n", remote,
                o.token_file.c_str());
  if (const char *url = gf_service_dashboard_url(service))
    std::printf("gpuflow serve: dashboard at %s (metrics: %smetrics)\n", url, url);
  std::fflush(stdout);
  if (o.daemon) {
    daemon_ready(shell_export("GPUFLOW_POOL", endpoint) + "\n" +
                 shell_export("GPUFLOW_SERVE_PID", std::to_string(getpid())) + "\n");
  }
  tell_systemd("READY=1\nSTATUS=listening on " + endpoint);
  while (wait_for_reload_or_stop()) {
    tell_systemd("RELOADING=1");
    reload(service, given, command_line, settings);
    tell_systemd("READY=1\nSTATUS=listening on " + endpoint);
  }
  tell_systemd("STOPPING=1");
  gf_service_stop(service);
  remove_job_dir(true);
  return 0;
}

}  // namespace

void add_serve_command(CLI::App &app, int &exit_code) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App *command = app.add_subcommand("serve");
  add_serve_flags(*command, *o);
  command->add_option("--config", o->config);
  command->add_flag("--per-job", o->per_job);
  command->add_flag("--daemon", o->daemon)->needs("--per-job");
  command->callback([o, command, &exit_code] { exit_code = serve(*o, *command); });
}

}  // namespace gpuflow_cli
