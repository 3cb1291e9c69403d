#include "pool/pool_core.hpp"

#include <unistd.h>
#include <algorithm>
#include <atomic>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "client/process_name.hpp"
#include "commands/command_bodies.hpp"
#include "core/error.hpp"
#include "core/resource_names.hpp"
#include "devices/host/host_backend.hpp"
#include "devices/visible_devices.hpp"
#include "pool/backend_choice.hpp"
#include "pool/service_run.hpp"
#include "pool/split_run.hpp"
#include "pool/where.hpp"

namespace gf {
namespace {

std::atomic<uint64_t> next_pool_serial{1};

// How long a connected pool keeps a device it has no work for: long enough that a stream of
// small graphs keeps its lease, short enough that an idle process soon gives the device back.
constexpr double kLeaseLinger_s = 0.1;

FixedPoint amount(double value) {
  return FixedPoint::from_double(value);
}

}  // namespace

namespace {

// A connected pool mirrors the service's devices: the same backend, the same devices.
PoolOptions connected_options(PoolOptions options, const client::Welcome &welcome, bool remote) {
  if (remote) {
    // The service's devices are on its host: this process has none of them. Its CPU workers
    // are this host's own; work that needs a device runs in the service (pool/where.cpp).
    options.backend = GF_BACKEND_HOST;
    options.host.devices = 0;
    options.host.handed_down = named_devices("none here: the service's are on its host", {});
    return options;
  }
  // The service's devices by UUID, whatever this process was handed: they are what it leases.
  std::vector<std::string> uuids;
  for (const client::DeviceSlot &d : welcome.devices) uuids.push_back(d.uuid);
  int emulated_node = emulated_node_size(uuids);
  options.host.handed_down = options.cuda.handed_down = named_devices("the service's", uuids);
  if (welcome.backend != "cuda" && emulated_node < 0) {
    // Emulated devices named otherwise than this library names them (a service of another
    // version, a stand-in): mirrored one for one, in the service's order.
    emulated_node = static_cast<int>(welcome.devices.size());
    options.host.handed_down.all = true;
    options.host.handed_down.entries.clear();
  }
  if (welcome.backend == "cuda") {
    options.backend = GF_BACKEND_CUDA;
    options.cuda.devices.clear();
  } else {
    options.backend = GF_BACKEND_HOST;
    options.host.devices = emulated_node;
    options.host.device_memory = welcome.devices.empty() ? 0 : welcome.devices[0].memory;
    options.host.memory_limit = 0;
    options.host.bandwidth = welcome.emulated_bandwidth;
  }
  return options;
}

// This client's weight among its user's clients: GPUFLOW_CLIENT_WEIGHT, else 1.
double client_weight() {
  const char *text = std::getenv("GPUFLOW_CLIENT_WEIGHT");
  if (!text || !*text) return 1.0;
  char *end = nullptr;
  errno = 0;
  const double weight = std::strtod(text, &end);
  if (*end != '\0' || errno != 0 || !(weight > 0 && weight <= 1e6)) {
    fail(GF_ERR_INVALID_ARGUMENT,
         std::string("GPUFLOW_CLIENT_WEIGHT='") + text + "' is not a weight in (0, 1e6]");
  }
  return weight;
}

}  // namespace

namespace {

// A pool is never deleted on one of its own worker threads (a thread cannot join itself).
std::shared_ptr<PoolCore> owned(PoolCore *pool) {
  return std::shared_ptr<PoolCore>(pool, [](PoolCore *p) {
    if (Worker::on_thread_of(p->scheduler())) {
      std::thread([p] { delete p; }).detach();
    } else {
      delete p;
    }
  });
}

}  // namespace

std::shared_ptr<PoolCore> PoolCore::create(const gf_pool_config &config) {
  PoolOptions options = resolve_pool_options(config);
  const std::string endpoint = client::resolve_endpoint(config.endpoint);
  if (!endpoint.empty()) {
    client::Dial dial{endpoint, client::process_name(), client_weight(),
                      config.token_file ? config.token_file : ""};
    return create_connected(std::move(options), client::ServiceLink::open(std::move(dial), 5000));
  }
  return owned(new PoolCore(options, nullptr));
}

std::shared_ptr<PoolCore> PoolCore::create_connected(PoolOptions options,
                                                     std::shared_ptr<client::ServiceLink> link) {
  const std::shared_ptr<client::Connection> first = link->current();
  options = connected_options(std::move(options), first->welcome(), first->remote());
  return owned(new PoolCore(options, std::move(link)));
}

std::shared_ptr<PoolCore> PoolCore::create_connected(
    PoolOptions options, std::shared_ptr<client::Connection> connection) {
  return create_connected(std::move(options), client::ServiceLink::fixed(std::move(connection)));
}

PoolCore::PoolCore(const PoolOptions &options, std::shared_ptr<client::ServiceLink> link)
    : link_(std::move(link)),
      backend_(make_backend(options)),
      devices_source_(options.host.handed_down.source),
      serial_(next_pool_serial.fetch_add(1)) {
  ResourceRegistry registry;
  ResourceId cpu = registry.intern(resource_names::kCpu);
  ResourceId gpu = registry.intern(resource_names::kGpu);
  ResourceId gpu_memory = registry.intern(resource_names::kGpuMemory);
  std::vector<std::unique_ptr<WorkerState>> states;
  for (int i = 0; i < options.cpu_workers; ++i) {
    auto w = std::make_unique<WorkerState>();
    w->index = static_cast<uint32_t>(states.size());
    w->kind = GF_WORKER_CPU;
    w->name = "cpu:" + std::to_string(i);
    w->ledger.advertise(cpu, amount(1));
    for (const auto &[name, value] : options.cpu_labels)
      w->ledger.advertise(registry.intern(name), amount(value));
    states.push_back(std::move(w));
  }
  for (int d = 0; d < backend_->device_count(); ++d) {
    DeviceDescription device = backend_->describe(d);
    devices_.push_back(device);
    // A command on an emulated device is shown its ordinal: no CUDA program could use the UUID.
    device_uuids_.push_back(device.emulated ? std::string() : device.uuid);
    auto w = std::make_unique<WorkerState>();
    w->index = static_cast<uint32_t>(states.size());
    w->kind = GF_WORKER_GPU;
    w->device = d;
    w->space = device_space(d);
    w->threads = options.gpu_worker_threads;
    w->emulated = device.emulated;
    w->name = "gpu:" + std::to_string(d);
    w->ledger.advertise(gpu, amount(1));
    // Options keep configured sizes within kMaxBytes; a real device is far below it.
    w->ledger.advertise(
        gpu_memory, FixedPoint::from_bytes(std::min(device.memory_bytes, FixedPoint::kMaxBytes)));
    for (const auto &[name, value] : options.gpu_labels)
      w->ledger.advertise(registry.intern(name), amount(value));
    states.push_back(std::move(w));
  }
  for (auto &w : states) worker_states_.push_back(w.get());
  scheduler_ = std::make_unique<Scheduler>(*backend_, std::move(registry), std::move(states),
                                           gpu_memory, options.spill_threshold);
  scheduler_->set_events(&events_);
  const std::shared_ptr<client::Connection> connection = this->connection();
  if (connection && !connection->remote()) {
    // Every worker runs tasks only on what the service grants: a device each, and one CPU
    // for each CPU worker. (A remote service's CPUs and devices are not this host's: nothing
    // here is leased from it.)
    std::vector<LeaseAgent::Device> leased;
    for (const WorkerState *w : worker_states_) {
      const bool device = w->kind == GF_WORKER_GPU;
      leased.push_back(
          {w->index, device ? connection->welcome().devices.at(w->device).ordinal : -1});
    }
    lease_agent_ = std::make_unique<LeaseAgent>(*scheduler_, link_, std::move(leased),
                                                client::process_name(), kLeaseLinger_s);
  }
  try {
    for (WorkerState *w : worker_states_) {
      workers_.push_back(std::make_unique<Worker>(*scheduler_, *w, events_));
      workers_.back()->start();
    }
  } catch (...) {
    shutdown();
    throw;
  }
}

PoolCore::~PoolCore() {
  shutdown();
}

std::shared_ptr<LocalRun> PoolCore::prepare(std::shared_ptr<Graph> graph) {
  BodyResolvers bodies;
  bodies.kernels = &kernels_;
  std::shared_ptr<CommandBodies> commands;
  if (graph->has_commands()) {
    commands = std::make_shared<CommandBodies>(device_uuids_);
    bodies.commands = commands;
  }
  std::shared_ptr<RunState> state = scheduler_->prepare(std::move(graph), bodies);
  state->name =
      command_log_subdir(wall_time(state->submitted_at), serial_, runs_prepared_.fetch_add(1) + 1);
  if (commands) commands->set_log_subdir([name = state->name] { return name; });
  return std::make_shared<LocalRun>(shared_from_this(), *scheduler_, std::move(state));
}

std::shared_ptr<Run> PoolCore::make_run(std::shared_ptr<Graph> graph, gf_run_where asked) {
  const gf_run_where where = choose_where(*this, *graph, asked);
  if (where == GF_RUN_IN_SERVICE) return std::make_shared<ServiceRun>(shared_from_this(), graph);
  if (where == GF_RUN_SPLIT) return std::make_shared<SplitRun>(shared_from_this(), graph);
  return prepare(std::move(graph));
}

void PoolCore::start(const std::shared_ptr<Run> &run) {
  run->start();
  if (run->where() != GF_RUN_IN_PROCESS) track(run);
}

namespace {

// What a public subscriber's observer needs set up: nothing; it reads the event stream.
class SubscriberObserver final : public SchedulerObserver {
 public:
  void set_up(size_t) override {}
};

}  // namespace

void PoolCore::subscribe_events(gf_event_fn fn, void *user_data) {
  std::lock_guard lock(subscriber_mu_);
  if (fn && !subscriber_observer_) {
    subscriber_observer_ = scheduler_->add_observer(std::make_shared<SubscriberObserver>());
  }
  events_.subscribe(fn, user_data);
  if (!fn) subscriber_observer_.reset();
}

void PoolCore::track(std::weak_ptr<Run> run) {
  std::lock_guard lock(tracked_mu_);
  std::erase_if(tracked_, [](const std::weak_ptr<Run> &r) { return r.expired(); });
  tracked_.push_back(std::move(run));
}

void PoolCore::shutdown() {
  if (shut_down_.exchange(true)) return;
  std::vector<std::weak_ptr<Run>> tracked;
  {
    std::lock_guard lock(tracked_mu_);
    tracked.swap(tracked_);
  }
  for (const std::weak_ptr<Run> &r : tracked) {
    if (std::shared_ptr<Run> run = r.lock()) run->cancel();
  }
  scheduler_->shutdown();
  if (Worker::on_thread_of(*scheduler_)) {
    // A task body destroys its own pool: its thread finishes the body and exits, and a thread
    // that keeps the pool alive joins them all.
    std::thread([self = shared_from_this()] { self->join_threads(); }).detach();
    return;
  }
  join_threads();
}

void PoolCore::join_threads() {
  if (lease_agent_) lease_agent_->stop();
  if (link_) link_->stop();  // no reconnecting for a pool that has stopped
  for (auto &w : workers_) w->join();
  backend_->shutdown();
}

}  // namespace gf
