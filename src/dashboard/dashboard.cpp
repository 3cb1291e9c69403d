#include "dashboard/dashboard.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "dashboard/assets.hpp"
#include "pool/pool_core.hpp"
#include "service/server.hpp"

namespace gf::dashboard {

namespace {

// ---- text helpers -------------------------------------------------------------------------

std::string num(double v) {
  if (!std::isfinite(v)) return v > 0 ? "+Inf" : (v < 0 ? "-Inf" : "NaN");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}
std::string num(uint64_t v) {
  return std::to_string(v);
}

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string jnum(double v) {
  return std::isfinite(v) ? num(v) : "null";
}

class Metrics {
 public:
  void family(const std::string &name, const char *type, const std::string &help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string &name, const std::string &labels, const std::string &value) {
    out_ += name;
    if (!labels.empty()) out_ += "{" + labels + "}";
    out_ += " " + value + "\n";
  }
  void histogram(const std::string &name, const std::string &labels, const Histogram &h) {
    uint64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : labels + ",";
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.counts[i];
      sample(name + "_bucket", sep + "le=\"" + num(kBuckets[i]) + "\"", num(cumulative));
    }
    cumulative += h.counts.back();
    sample(name + "_bucket", sep + "le=\"+Inf\"", num(cumulative));
    sample(name + "_sum", labels, num(h.sum));
    sample(name + "_count", labels, num(cumulative));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string kv(const char *key, const std::string &value) {
  return std::string(key) + "=\"" + label(value) + "\"";
}

}  // namespace

std::string requested_address(const char *field, const char *env_name, bool *from_env) {
  std::string text = field ? field : "";
  std::string what = "gf_pool_config.dashboard";
  if (from_env) *from_env = false;
  if (text.empty()) {
    const char *env = env_name ? std::getenv(env_name) : nullptr;
    if (env && *env) {
      text = env;
      what = env_name;
      if (from_env) *from_env = true;
    }
  }
  if (text.empty() || text == "off") return "";
  parse_address(text, what);  // refuses a malformed one now, naming where it came from
  return text;
}

std::unique_ptr<Dashboard> Dashboard::for_pool(std::shared_ptr<PoolCore> pool,
                                               const std::string &address) {
  std::unique_ptr<Dashboard> d(new Dashboard());
  d->pool_ = std::move(pool);
  d->collector_ = std::make_shared<Collector>(
      d->pool_->worker_count(),
      [core = d->pool_.get()](uint32_t id) { return core->scheduler().cost_key_name(id); });
  d->pool_->scheduler().observe_waits(true);
  d->pool_->events().set_tap(d->collector_);
  try {
    d->start(address);
  } catch (...) {
    d->pool_->events().set_tap(nullptr);
    throw;
  }
  return d;
}

std::unique_ptr<Dashboard> Dashboard::for_service(service::Server &server,
                                                  const std::string &address) {
  std::unique_ptr<Dashboard> d(new Dashboard());
  d->server_ = &server;
  d->start(address);
  return d;
}

void Dashboard::start(const std::string &address) {
  const Address a = parse_address(address, "the dashboard address");
  http_ = std::make_unique<HttpServer>(
      a,
      [this](const std::string &, const std::string &path) -> HttpResponse {
        if (path == "/" || path == "/index.html")
          return HttpResponse{200, "text/html; charset=utf-8", std::string(index_html())};
        if (path == "/metrics")
          return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", metrics()};
        if (path == "/snapshot.json")
          return HttpResponse{200, "application/json", snapshot_json(0)};
        return HttpResponse{404, "text/plain; charset=utf-8", "not found\n"};
      },
      "/events", events_);
  publisher_ = std::thread([this] { publisher(); });
}

Dashboard::~Dashboard() {
  stop();
}

void Dashboard::stop() {
  if (pool_ && collector_) pool_->events().set_tap(nullptr);
  {
    std::lock_guard lock(stop_mu_);
    if (stopping_.exchange(true)) return;
  }
  stop_cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
  if (http_) http_->stop();
}

void Dashboard::publisher() {
  double last = 0;
  std::unique_lock lock(stop_mu_);
  while (!stopping_.load()) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(kPublishMs));
    if (stopping_.load()) break;
    if (http_->live_streams() == 0) continue;  // nobody watches: nothing to build
    lock.unlock();
    double now = pool_ ? pool_->events().now_s() : 0;
    std::string message = snapshot_json(last);
    last = now;
    events_->publish(std::move(message));
    lock.lock();
  }
}

std::string Dashboard::metrics() const {
  Metrics self;
  self.family("gpuflow_dashboard_connections", "gauge",
              "HTTP connections this dashboard has open (live streams included).");
  self.sample("gpuflow_dashboard_connections", "", num(uint64_t{http_->connections()}));
  self.family("gpuflow_dashboard_streams", "gauge", "Live views (/events) open.");
  self.sample("gpuflow_dashboard_streams", "", num(uint64_t{http_->live_streams()}));
  return (pool_ ? pool_metrics() : service_metrics()) + self.take();
}

std::string Dashboard::snapshot_json(double bars_since) const {
  return pool_ ? pool_json(bars_since) : service_json();
}

// ---- an embedded (or connected) pool ---------------------------------------------------------

std::string Dashboard::pool_metrics() const {
  PoolCore &core = *pool_;
  Scheduler &sched = core.scheduler();
  const Scheduler::PoolSnapshot snap = sched.pool_snapshot();
  const Collector::Merged m = collector_->merged();
  Metrics out;

  out.family("gpuflow_tasks", "gauge", "Tasks of the pool's current runs, by state.");
  out.sample("gpuflow_tasks", kv("state", "waiting"), num(snap.waiting));
  out.sample("gpuflow_tasks", kv("state", "queued"), num(snap.queued));
  out.sample("gpuflow_tasks", kv("state", "running"), num(snap.running));
  out.family("gpuflow_tasks_settled_total", "counter",
             "Tasks settled since the pool started, by final state.");
  out.sample("gpuflow_tasks_settled_total", kv("state", "succeeded"), num(snap.succeeded_total));
  out.sample("gpuflow_tasks_settled_total", kv("state", "failed"), num(snap.failed_total));
  out.sample("gpuflow_tasks_settled_total", kv("state", "cancelled"), num(snap.cancelled_total));
  out.family("gpuflow_runs", "gauge", "Runs the pool keeps, by state.");
  uint64_t finished = 0;
  for (const auto &r : snap.runs) finished += r.finished;
  out.sample("gpuflow_runs", kv("state", "running"), num(snap.runs.size() - finished));
  out.sample("gpuflow_runs", kv("state", "finished"), num(finished));

  out.family("gpuflow_task_attempts_total", "counter",
             "Task attempts that ran, by task name prefix (at most 64, then 'other') and outcome.");
  for (size_t i = 0; i < m.names.size(); ++i) {
    const NameStats &s = m.stats[i];
    if (s.succeeded + s.failed == 0) continue;
    out.sample("gpuflow_task_attempts_total",
               kv("name", m.names[i]) + "," + kv("outcome", "succeeded"), num(s.succeeded));
    out.sample("gpuflow_task_attempts_total",
               kv("name", m.names[i]) + "," + kv("outcome", "failed"), num(s.failed));
  }
  out.family("gpuflow_task_duration_seconds", "histogram",
             "Run time of task attempts, by task name prefix.");
  for (size_t i = 0; i < m.names.size(); ++i) {
    if (m.stats[i].duration.count() == 0) continue;
    out.histogram("gpuflow_task_duration_seconds", kv("name", m.names[i]), m.stats[i].duration);
  }
  out.family("gpuflow_task_queue_wait_seconds", "histogram",
             "Time task attempts waited in their worker's ready queue, by task name prefix.");
  for (size_t i = 0; i < m.names.size(); ++i) {
    if (m.stats[i].wait.count() == 0) continue;
    out.histogram("gpuflow_task_queue_wait_seconds", kv("name", m.names[i]), m.stats[i].wait);
  }

  out.family("gpuflow_worker_tasks", "gauge",
             "Tasks on each worker: queued (ready or fetching inputs) and running.");
  for (size_t w = 0; w < snap.workers.size(); ++w) {
    const std::string wl = kv("worker", core.worker(w).name);
    out.sample("gpuflow_worker_tasks", wl + "," + kv("state", "ready"), num(snap.workers[w].ready));
    out.sample("gpuflow_worker_tasks", wl + "," + kv("state", "fetching"),
               num(snap.workers[w].fetching));
    out.sample("gpuflow_worker_tasks", wl + "," + kv("state", "running"),
               num(uint64_t{snap.workers[w].running}));
  }
  out.family("gpuflow_ledger_capacity", "gauge", "Resource capacity in each worker's ledger.");
  Metrics in_use, peak;
  for (size_t w = 0; w < core.worker_count(); ++w) {
    const std::string wl = kv("worker", core.worker(w).name);
    for (const Ledger::Line &line : sched.ledger_lines(static_cast<uint32_t>(w))) {
      const std::string l = wl + "," + kv("resource", sched.registry().name(line.resource));
      out.sample("gpuflow_ledger_capacity", l, num(line.capacity.to_double()));
      in_use.sample("gpuflow_ledger_in_use", l, num(line.in_use.to_double()));
      peak.sample("gpuflow_ledger_peak_in_use", l, num(line.peak.to_double()));
    }
  }
  out.family("gpuflow_ledger_in_use", "gauge", "Resources in use in each worker's ledger.");
  std::string text = out.take() + in_use.take();
  Metrics rest;
  rest.family("gpuflow_ledger_peak_in_use", "gauge",
              "The most of each resource in use at once since the pool started.");
  text += rest.take() + peak.take();

  Metrics dev;
  dev.family("gpuflow_device_memory_bytes", "gauge",
             "Device memory as the scheduler accounts it, by kind: capacity, resident data, "
             "reserved by running tasks, spilled to host.");
  Metrics spilled, unspilled;
  spilled.family("gpuflow_spilled_bytes_total", "counter",
                 "Bytes moved from a device to host memory.");
  unspilled.family("gpuflow_unspilled_bytes_total", "counter", "Bytes brought back to a device.");
  for (size_t d = 0; d < core.devices().size(); ++d) {
    const gf_device_memory mem = sched.device_memory(static_cast<int>(d));
    const std::string dl = kv("device", std::to_string(d));
    dev.sample("gpuflow_device_memory_bytes", dl + "," + kv("kind", "capacity"), num(mem.capacity));
    dev.sample("gpuflow_device_memory_bytes", dl + "," + kv("kind", "resident"), num(mem.resident));
    dev.sample("gpuflow_device_memory_bytes", dl + "," + kv("kind", "reserved"), num(mem.reserved));
    dev.sample("gpuflow_device_memory_bytes", dl + "," + kv("kind", "spilled"), num(mem.spilled));
    spilled.sample("gpuflow_spilled_bytes_total", dl, num(mem.spilled_total));
    unspilled.sample("gpuflow_unspilled_bytes_total", dl, num(mem.unspilled_total));
  }
  dev.family("gpuflow_transfers_total", "counter", "Copies between memory spaces.");
  dev.sample("gpuflow_transfers_total", "", num(snap.transfers_total));
  dev.family("gpuflow_transfer_bytes_total", "counter", "Bytes copied between memory spaces.");
  dev.sample("gpuflow_transfer_bytes_total", "", num(snap.bytes_transferred_total));
  return text + dev.take() + spilled.take() + unspilled.take();
}

std::string Dashboard::pool_json(double bars_since) const {
  PoolCore &core = *pool_;
  Scheduler &sched = core.scheduler();
  const Scheduler::PoolSnapshot snap = sched.pool_snapshot();
  const Collector::Merged m = collector_->merged();
  std::string j = "{\"kind\":\"pool\",\"t\":" + jnum(core.events().now_s());
  j += ",\"connected\":" + std::string(core.connection() ? "true" : "false");
  j += ",\"names\":[";
  for (size_t i = 0; i < m.names.size(); ++i) j += (i ? "," : "") + json_quoted(m.names[i]);
  j += "],\"per_name\":[";
  for (size_t i = 0; i < m.names.size(); ++i) {
    const NameStats &s = m.stats[i];
    const uint64_t n = s.duration.count();
    j += (i ? "," : "") + std::string("{\"succeeded\":") + num(s.succeeded) +
         ",\"failed\":" + num(s.failed) +
         ",\"mean_s\":" + jnum(n ? s.duration.sum / static_cast<double>(n) : 0) +
         ",\"mean_wait_s\":" + jnum(n ? s.wait.sum / static_cast<double>(n) : 0) + "}";
  }
  j += "],\"tasks\":{\"waiting\":" + num(snap.waiting) + ",\"queued\":" + num(snap.queued) +
       ",\"running\":" + num(snap.running) + ",\"succeeded\":" + num(snap.succeeded_total) +
       ",\"failed\":" + num(snap.failed_total) + ",\"cancelled\":" + num(snap.cancelled_total) +
       "}";
  j += ",\"transfers\":{\"count\":" + num(snap.transfers_total) +
       ",\"bytes\":" + num(snap.bytes_transferred_total) + "}";
  j += ",\"runs\":[";
  for (size_t i = 0; i < snap.runs.size(); ++i) {
    const auto &r = snap.runs[i];
    j += (i ? "," : "") + std::string("{\"run\":") + num(r.sequence) +
         ",\"tasks\":" + num(r.tasks) + ",\"succeeded\":" + num(r.succeeded) +
         ",\"failed\":" + num(r.failed) + ",\"cancelled\":" + num(r.cancelled) +
         ",\"left\":" + num(r.left) + ",\"elapsed_s\":" + jnum(r.elapsed_s) +
         ",\"finished\":" + (r.finished ? "true" : "false") + "}";
  }
  j += "],\"workers\":[";
  for (size_t w = 0; w < core.worker_count(); ++w) {
    const WorkerState &ws = core.worker(w);
    const auto &load = snap.workers[w];
    j += (w ? "," : "") + std::string("{\"name\":") + json_quoted(ws.name) +
         ",\"kind\":" + (ws.kind == GF_WORKER_GPU ? "\"gpu\"" : "\"cpu\"") +
         ",\"device\":" + std::to_string(ws.device) + ",\"threads\":" + num(uint64_t{ws.threads}) +
         ",\"ready\":" + num(load.ready) + ",\"fetching\":" + num(load.fetching) +
         ",\"running\":" + num(uint64_t{load.running}) +
         ",\"granted\":" + (load.granted ? "true" : "false") + ",\"ledger\":[";
    bool first = true;
    for (const Ledger::Line &line : sched.ledger_lines(static_cast<uint32_t>(w))) {
      j += (first ? "" : ",") + std::string("{\"resource\":") +
           json_quoted(sched.registry().name(line.resource)) +
           ",\"capacity\":" + jnum(line.capacity.to_double()) +
           ",\"in_use\":" + jnum(line.in_use.to_double()) +
           ",\"peak\":" + jnum(line.peak.to_double()) + "}";
      first = false;
    }
    j += "],\"bars\":[";
    first = true;
    for (const Bar &b : collector_->bars(w, bars_since, 200)) {
      j += (first ? "" : ",") + std::string("[") + jnum(b.start) + "," + jnum(b.end) + "," +
           num(uint64_t{b.name}) + "," + (b.ok ? "1" : "0") + "]";
      first = false;
    }
    j += "]}";
  }
  j += "],\"devices\":[";
  for (size_t d = 0; d < core.devices().size(); ++d) {
    const gf_device_memory mem = sched.device_memory(static_cast<int>(d));
    j += (d ? "," : "") + std::string("{\"device\":") + std::to_string(d) +
         ",\"name\":" + json_quoted(core.devices()[d].name) + ",\"capacity\":" + num(mem.capacity) +
         ",\"resident\":" + num(mem.resident) + ",\"reserved\":" + num(mem.reserved) +
         ",\"spilled\":" + num(mem.spilled) + ",\"spilled_total\":" + num(mem.spilled_total) +
         ",\"unspilled_total\":" + num(mem.unspilled_total) + "}";
  }
  return j + "]}";
}

// ---- the node's service ---------------------------------------------------------------------

std::string Dashboard::service_metrics() const {
  auto book = server_->book_snapshot();
  Metrics out;
  std::map<uint64_t, std::string> client_labels;
  for (const auto &c : book->clients) {
    client_labels[c.client] = kv("client", std::to_string(c.client)) + "," +
                              kv("user", c.info.user) + "," + kv("client_name", c.info.name);
  }
  out.family("gpuflow_service_clients", "gauge", "Processes connected to the service.");
  out.sample("gpuflow_service_clients", "", num(uint64_t{book->clients.size()}));
  out.family("gpuflow_service_leases", "gauge", "Leases held, per client.");
  for (const auto &c : book->clients)
    out.sample("gpuflow_service_leases", client_labels[c.client], num(uint64_t{c.leases}));
  out.family("gpuflow_service_queued_requests", "gauge", "Lease requests waiting, per client.");
  for (const auto &c : book->clients)
    out.sample("gpuflow_service_queued_requests", client_labels[c.client], num(uint64_t{c.queued}));
  out.family("gpuflow_service_client_gpus_in_use", "gauge",
             "GPUs (whole and shares) leased, per client.");
  for (const auto &c : book->clients)
    out.sample("gpuflow_service_client_gpus_in_use", client_labels[c.client], num(c.gpus_in_use));
  out.family("gpuflow_service_client_usage", "gauge",
             "Decayed past use that fair share ranks by, per client.");
  for (const auto &c : book->clients)
    out.sample("gpuflow_service_client_usage", client_labels[c.client], num(c.usage));
  out.family("gpuflow_service_device_share_in_use", "gauge",
             "Share of each device leased (0 to 1).");
  for (const auto &d : book->devices)
    out.sample("gpuflow_service_device_share_in_use", kv("device", std::to_string(d.slot.ordinal)),
               num(d.share_in_use.to_double()));
  out.family("gpuflow_service_device_memory_bytes", "gauge",
             "Device memory, by kind: capacity and leased.");
  for (const auto &d : book->devices) {
    const std::string dl = kv("device", std::to_string(d.slot.ordinal));
    out.sample("gpuflow_service_device_memory_bytes", dl + "," + kv("kind", "capacity"),
               num(d.slot.memory));
    out.sample("gpuflow_service_device_memory_bytes", dl + "," + kv("kind", "leased"),
               num(d.memory_in_use));
  }
  out.family("gpuflow_service_cpus", "gauge",
             "CPUs the service leases, by kind: capacity and leased.");
  out.sample("gpuflow_service_cpus", kv("kind", "capacity"), num(book->cpus));
  out.sample("gpuflow_service_cpus", kv("kind", "leased"), num(book->cpus_in_use));
  return out.take();
}

std::string Dashboard::service_json() const {
  auto book = server_->book_snapshot();
  std::map<uint64_t, const service::ClientView *> by_id;
  for (const auto &c : book->clients) by_id[c.client] = &c;
  std::string j = "{\"kind\":\"service\",\"t\":" + jnum(book->now) +
                  ",\"backend\":" + json_quoted(book->backend);
  j += ",\"cpus\":" + jnum(book->cpus) + ",\"cpus_in_use\":" + jnum(book->cpus_in_use);
  j += ",\"devices\":[";
  for (size_t i = 0; i < book->devices.size(); ++i) {
    const auto &d = book->devices[i];
    j += (i ? "," : "") + std::string("{\"device\":") + std::to_string(d.slot.ordinal) +
         ",\"name\":" + json_quoted(d.slot.name) + ",\"capacity\":" + num(d.slot.memory) +
         ",\"share_in_use\":" + jnum(d.share_in_use.to_double()) +
         ",\"memory_in_use\":" + num(d.memory_in_use) + "}";
  }
  j += "],\"leases\":[";
  for (size_t i = 0; i < book->leases.size(); ++i) {
    const auto &l = book->leases[i];
    auto it = by_id.find(l.client);
    const std::string holder =
        it == by_id.end()
            ? "?"
            : it->second->info.user + " pid " + std::to_string(it->second->info.pid) +
                  (it->second->info.name.empty() ? "" : " (" + it->second->info.name + ")");
    j += (i ? "," : "") + std::string("{\"id\":") + num(l.id) + ",\"client\":" + num(l.client) +
         ",\"holder\":" + json_quoted(holder) + ",\"name\":" + json_quoted(l.name) +
         ",\"cpus\":" + jnum(l.cpus.to_double()) + ",\"age_s\":" + jnum(book->now - l.since) +
         ",\"revoking\":" + (l.revoking ? "true" : "false") + ",\"devices\":[";
    for (size_t k = 0; k < l.devices.size(); ++k) {
      j += (k ? "," : "") + std::string("[") + std::to_string(l.devices[k].ordinal) + "," +
           jnum(l.devices[k].share.to_double()) + "," + num(l.devices[k].memory) + "]";
    }
    j += "]}";
  }
  j += "],\"queued\":[";
  for (size_t i = 0; i < book->queued.size(); ++i) {
    const auto &q = book->queued[i];
    j += (i ? "," : "") + std::string("{\"client\":") + num(q.client) +
         ",\"request\":" + num(q.request) + ",\"gpus\":" + jnum(q.ask.gpus) +
         ",\"cpus\":" + jnum(q.ask.cpus) + ",\"name\":" + json_quoted(q.ask.name) +
         ",\"wait_s\":" + jnum(book->now - q.since) +
         ",\"reserved\":" + (q.reserved ? "true" : "false") + "}";
  }
  j += "],\"clients\":[";
  for (size_t i = 0; i < book->clients.size(); ++i) {
    const auto &c = book->clients[i];
    j += (i ? "," : "") + std::string("{\"client\":") + num(c.client) +
         ",\"user\":" + json_quoted(c.info.user) + ",\"pid\":" + num(uint64_t{c.info.pid}) +
         ",\"name\":" + json_quoted(c.info.name) + ",\"leases\":" + num(uint64_t{c.leases}) +
         ",\"queued\":" + num(uint64_t{c.queued}) + ",\"gpus_in_use\":" + jnum(c.gpus_in_use) +
         ",\"usage\":" + jnum(c.usage) + ",\"dominant_share\":" + jnum(c.dominant_share) + "}";
  }
  return j + "]}";
}

}  // namespace gf::dashboard
