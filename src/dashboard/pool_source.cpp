#include "dashboard/pool_source.hpp"

#include "core/json_text.hpp"
#include "dashboard/metrics_text.hpp"
#include "pool/pool_core.hpp"

namespace gf::dashboard {

PoolSource::PoolSource(std::shared_ptr<PoolCore> pool)
    : pool_(std::move(pool)),
      collector_(std::make_shared<Collector>(
          [core = pool_.get()](uint32_t id) { return core->scheduler().cost_key_name(id); })) {
  observing_ = pool_->scheduler().add_observer(collector_);  // sets up a shard per worker
  pool_->events().set_tap(collector_);
}

PoolSource::~PoolSource() {
  stop();
}

void PoolSource::stop() {
  pool_->events().set_tap(nullptr);
  observing_.reset();
}

double PoolSource::now_s() const {
  return pool_->events().now_s();
}

std::string PoolSource::metrics() const {
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
  out.family("gpuflow_worker_batches_total", "counter",
             "Batches each worker's threads took from its queue, each at one taking of the "
             "scheduler's lock (task attempts over batches: how many tasks share one).");
  for (size_t w = 0; w < snap.workers.size(); ++w) {
    out.sample("gpuflow_worker_batches_total", kv("worker", core.worker(w).name),
               num(snap.workers[w].batches));
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

std::string PoolSource::snapshot_json(double since) const {
  PoolCore &core = *pool_;
  Scheduler &sched = core.scheduler();
  const Scheduler::PoolSnapshot snap = sched.pool_snapshot();
  const Collector::Merged m = collector_->merged();
  std::string j = "{\"kind\":\"pool\",\"t\":" + jnum(core.events().now_s());
  // A comma before every item but the first (appended on its own: GCC 12 warns, wrongly, about
  // overlapping copies in `(first ? "" : ",") + std::string(...)`).
  auto comma_unless = [&j](bool first) {
    if (!first) j += ',';
  };
  j += ",\"connected\":" + std::string(core.connection() ? "true" : "false");
  j += ",\"names\":[";
  for (size_t i = 0; i < m.names.size(); ++i) {
    comma_unless(i == 0);
    j += json_quoted(m.names[i]);
  }
  j += "],\"per_name\":[";
  for (size_t i = 0; i < m.names.size(); ++i) {
    const NameStats &s = m.stats[i];
    const uint64_t n = s.duration.count();
    comma_unless(i == 0);
    j += std::string("{\"succeeded\":") + num(s.succeeded) + ",\"failed\":" + num(s.failed) +
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
    comma_unless(i == 0);
    j += std::string("{\"run\":") + num(r.sequence) + ",\"tasks\":" + num(r.tasks) +
         ",\"succeeded\":" + num(r.succeeded) + ",\"failed\":" + num(r.failed) +
         ",\"cancelled\":" + num(r.cancelled) + ",\"left\":" + num(r.left) +
         ",\"elapsed_s\":" + jnum(r.elapsed_s) +
         ",\"finished\":" + (r.finished ? "true" : "false") + "}";
  }
  j += "],\"workers\":[";
  for (size_t w = 0; w < core.worker_count(); ++w) {
    const WorkerState &ws = core.worker(w);
    const auto &load = snap.workers[w];
    comma_unless(w == 0);
    j += std::string("{\"name\":") + json_quoted(ws.name) +
         ",\"kind\":" + (ws.kind == GF_WORKER_GPU ? "\"gpu\"" : "\"cpu\"") +
         ",\"device\":" + std::to_string(ws.device) + ",\"threads\":" + num(uint64_t{ws.threads}) +
         ",\"ready\":" + num(load.ready) + ",\"fetching\":" + num(load.fetching) +
         ",\"running\":" + num(uint64_t{load.running}) +
         ",\"granted\":" + (load.granted ? "true" : "false") + ",\"ledger\":[";
    bool first = true;
    for (const Ledger::Line &line : sched.ledger_lines(static_cast<uint32_t>(w))) {
      comma_unless(first);
      j += std::string("{\"resource\":") + json_quoted(sched.registry().name(line.resource)) +
           ",\"capacity\":" + jnum(line.capacity.to_double()) +
           ",\"in_use\":" + jnum(line.in_use.to_double()) +
           ",\"peak\":" + jnum(line.peak.to_double()) + "}";
      first = false;
    }
    j += "],\"bars\":[";
    first = true;
    for (const Bar &b : collector_->bars(w, since, 200)) {
      comma_unless(first);
      j += std::string("[") + jnum(b.start) + "," + jnum(b.end) + "," + num(uint64_t{b.name}) +
           "," + (b.ok ? "1" : "0") + "]";
      first = false;
    }
    j += "]}";
  }
  j += "],\"devices\":[";
  for (size_t d = 0; d < core.devices().size(); ++d) {
    const gf_device_memory mem = sched.device_memory(static_cast<int>(d));
    comma_unless(d == 0);
    j += std::string("{\"device\":") + std::to_string(d) +
         ",\"name\":" + json_quoted(core.devices()[d].name) + ",\"capacity\":" + num(mem.capacity) +
         ",\"resident\":" + num(mem.resident) + ",\"reserved\":" + num(mem.reserved) +
         ",\"spilled\":" + num(mem.spilled) + ",\"spilled_total\":" + num(mem.spilled_total) +
         ",\"unspilled_total\":" + num(mem.unspilled_total) + "}";
  }
  return j + "]}";
}

}  // namespace gf::dashboard
