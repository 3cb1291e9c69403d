#include "trace.hpp"

#include "core/bytes_text.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string worker_name(gf_pool *pool, uint32_t worker) {
  gf_worker_info info = GF_WORKER_INFO_INIT;
  if (gf_pool_worker_info(&info, pool, worker) != GF_OK) return "worker " + std::to_string(worker);
  return info.name;
}

std::string quoted(const std::string &text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// Spans drawn in one lane must nest; overlapping ones (a worker running several tasks at once,
// concurrent copies, shared devices) go to further lanes: the first lane free at their start.
template <typename Span>
std::vector<size_t> pack_lanes(const std::vector<const Span *> &spans) {
  std::vector<double> lane_end;
  std::vector<size_t> lane(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    size_t l = 0;
    while (l < lane_end.size() && lane_end[l] > spans[i]->start_s + 1e-9) ++l;
    if (l == lane_end.size()) lane_end.push_back(0);
    lane_end[l] = spans[i]->end_s;
    lane[i] = l;
  }
  return lane;
}

}  // namespace

TaskTrace::TaskTrace() : unix_start_s_(unix_now_s()) {}

TaskTrace::~TaskTrace() {
  stop_leases();
}

double TaskTrace::now_s() const {
  return unix_now_s() - unix_start_s_;
}

void TaskTrace::on_event(const gf_event *event, void *self) {
  auto &t = *static_cast<TaskTrace *>(self);
  std::lock_guard lock(t.mu_);
  if (!t.have_offset_) {  // events carry pool time: place it on the trace's clock once
    t.pool_offset_s_ = t.now_s() - event->time_s;
    t.have_offset_ = true;
  }
  const double at = event->time_s + t.pool_offset_s_;
  auto key = std::make_pair(event->task.id, event->attempt);
  switch (event->kind) {
    case GF_EVENT_TASK_STARTED:
      t.started_[key] = at;
      break;
    case GF_EVENT_TASK_FINISHED: {
      auto it = t.started_.find(key);
      double start = it == t.started_.end() ? at - event->duration_s : it->second;
      if (it != t.started_.end()) t.started_.erase(it);
      std::string name = event->task_name && *event->task_name
                             ? event->task_name
                             : "task " + std::to_string(event->task.id & 0xffffffffu);
      t.spans_.push_back(Span{Kind::kTask, event->worker, start, at, event->ok != 0,
                              std::move(name), "\"attempt\":" + std::to_string(event->attempt)});
      break;
    }
    case GF_EVENT_TRANSFER_FINISHED:
    case GF_EVENT_SPILL_FINISHED: {
      const bool spill = event->kind == GF_EVENT_SPILL_FINISHED;
      // A copy to host memory is drawn on the device it leaves.
      uint32_t worker = event->worker != GF_NO_WORKER ? event->worker : event->source_worker;
      if (worker == GF_NO_WORKER) break;
      const std::string size = gf::bytes_text(static_cast<double>(event->bytes));
      std::string name = spill                                  ? "spill " + size
                         : event->source_worker == GF_NO_WORKER ? "copy in " + size
                                                                : "copy " + size;
      std::string args = "\"bytes\":" + std::to_string(event->bytes) +
                         ",\"data\":" + std::to_string(event->data.id & 0xffffffffu);
      if (!spill) {
        args += ",\"from\":" + (event->source_worker == GF_NO_WORKER
                                    ? std::string("\"host\"")
                                    : std::to_string(event->source_worker));
      }
      t.spans_.push_back(Span{spill ? Kind::kSpill : Kind::kTransfer, worker,
                              at - event->duration_s, at, event->ok != 0, std::move(name),
                              std::move(args)});
      break;
    }
    default:  // kinds from a newer library
      break;
  }
}

void TaskTrace::add_lease(uint64_t id, const std::string &holder, const std::string &name,
                          double since_s, double until_s, bool ended,
                          const std::vector<std::pair<int32_t, double>> &on) {
  if (until_s < 0) return;  // over before the trace began
  std::vector<Span> spans;
  for (const auto &[ordinal, share] : on) {
    auto w = worker_of_ordinal_.find(ordinal);
    if (w == worker_of_ordinal_.end()) continue;
    char share_text[32];
    std::snprintf(share_text, sizeof share_text, "%g", share);
    spans.push_back(
        Span{Kind::kLease, w->second, std::max(since_s, 0.0), until_s, true,
             (name.empty() ? "lease " + std::to_string(id) : name) + " [" + holder + "]",
             "\"lease\":" + std::to_string(id) + ",\"holder\":" + quoted(holder) +
                 ",\"share\":" + share_text + (ended ? "" : ",\"held_at_end\":true")});
  }
  leases_[id] = std::move(spans);
}

bool TaskTrace::read_leases(gf_pool *pool, std::string &error) {
  gf_bytes status{};
  if (gf_pool_service_status(&status, pool, GF_STATUS_JSON) != GF_OK) {
    error = gf_last_error();
    return false;
  }
  json doc = json::parse(static_cast<const char *>(status.data),
                         static_cast<const char *>(status.data) + status.size, nullptr, false);
  gf_bytes_free(&status);
  if (doc.is_discarded() || !doc.is_object()) {
    error = "the service's status is not JSON";
    return false;
  }
  std::lock_guard lock(mu_);
  if (worker_of_ordinal_.empty()) {
    uint32_t workers = 0;
    gf_pool_worker_count(&workers, pool);
    for (uint32_t w = 0; w < workers; ++w) {
      gf_worker_info info = GF_WORKER_INFO_INIT;
      if (gf_pool_worker_info(&info, pool, w) == GF_OK && info.kind == GF_WORKER_GPU)
        worker_of_ordinal_[info.device] = w;
    }
  }
  const double now = now_s();
  for (const char *list : {"ended", "leases"}) {
    const bool ended = std::string(list) == "ended";
    for (const json &l : doc.value(list, json::array())) {
      if (!l.is_object()) continue;
      std::vector<std::pair<int32_t, double>> on;
      for (const json &d : l.value("devices", json::array()))
        on.emplace_back(d.value("ordinal", -1), d.value("share", 0.0));
      const std::string holder =
          l.value("user", std::string("?")) + " pid " + std::to_string(l.value("pid", 0));
      const double since = l.value("since_ms", 0.0) / 1000.0 - unix_start_s_;
      const double until = ended ? l.value("until_ms", 0.0) / 1000.0 - unix_start_s_ : now;
      add_lease(l.value("lease_id", uint64_t{0}), holder, l.value("name", std::string()), since,
                until, ended, on);
    }
  }
  return true;
}

void TaskTrace::follow_leases(gf_pool *pool) {
  std::string error;
  if (!read_leases(pool, error)) return;  // an embedded pool: no service, no leases
  poller_ = std::thread([this, pool] {
    std::unique_lock lock(poll_mu_);
    while (!poll_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return poll_stop_; })) {
      std::string ignored;
      read_leases(pool, ignored);
    }
  });
}

void TaskTrace::stop_leases() {
  {
    std::lock_guard lock(poll_mu_);
    poll_stop_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

void TaskTrace::print_summary(gf_pool *pool, double elapsed_s) const {
  std::lock_guard lock(mu_);
  std::map<uint32_t, std::pair<uint64_t, double>> per_worker;  // tasks, busy seconds
  uint64_t failed_attempts = 0;
  for (const Span &s : spans_) {
    if (s.kind != Kind::kTask) continue;
    auto &w = per_worker[s.worker];
    w.first++;
    w.second += s.end_s - s.start_s;
    failed_attempts += s.ok ? 0 : 1;
  }
  if (per_worker.empty()) return;  // nothing ran here (a graph run in the service)
  std::printf("%-10s %8s %10s %6s\n", "worker", "attempts", "busy (s)", "busy");
  for (const auto &[worker, w] : per_worker) {
    double share = elapsed_s > 0 ? 100.0 * w.second / elapsed_s : 0;
    std::printf("%-10s %8" PRIu64 " %10.3f %5.0f%%\n", worker_name(pool, worker).c_str(), w.first,
                w.second, share);
  }
  if (failed_attempts) std::printf("failed attempts: %" PRIu64 "\n", failed_attempts);
}

bool TaskTrace::write_chrome_trace(const std::string &path, gf_pool *pool,
                                   std::string &error) const {
  std::lock_guard lock(mu_);
  std::ofstream out(path);
  if (!out) {
    error = "cannot open " + path;
    return false;
  }
  uint32_t workers = 0;
  gf_pool_worker_count(&workers, pool);
  // Devices are processes (pid 10 + worker) with lanes for tasks, copies and leases; the CPU
  // workers share pid 1, a lane group each.
  std::vector<bool> is_gpu(workers);
  std::vector<std::string> names(workers);
  for (uint32_t w = 0; w < workers; ++w) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    is_gpu[w] = gf_pool_worker_info(&info, pool, w) == GF_OK && info.kind == GF_WORKER_GPU;
    names[w] = quoted(worker_name(pool, w));
  }
  auto pid_of = [&](uint32_t w) { return is_gpu[w] ? 10 + w : 1u; };
  auto group_of = [](Kind k) {
    return k == Kind::kTask ? 0 : k == Kind::kLease ? 2 : 1;  // tasks, copies, leases
  };
  auto tid_of = [&](uint32_t w, int group, size_t lane) {
    return is_gpu[w] ? 1 + group * 100 + lane : 1 + w * 100 + lane;
  };
  std::map<std::pair<uint32_t, int>, std::vector<const Span *>> lanes;  // (worker, group)
  for (const Span &s : spans_) {
    if (s.worker < workers) lanes[{s.worker, group_of(s.kind)}].push_back(&s);
  }
  for (const auto &[id, spans] : leases_) {
    for (const Span &s : spans) {
      if (s.worker < workers) lanes[{s.worker, 2}].push_back(&s);
    }
  }

  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"CPU workers\"}}";
  for (uint32_t w = 0; w < workers; ++w) {
    if (!is_gpu[w]) continue;
    out << ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid_of(w)
        << ",\"args\":{\"name\":" << quoted("device " + worker_name(pool, w)) << "}}";
    out << ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << pid_of(w)
        << ",\"args\":{\"sort_index\":" << pid_of(w) << "}}";
  }
  const char *group_names[] = {"tasks", "copies and spills", "leases"};
  const char *categories[] = {"task", "transfer", "spill", "lease"};
  char buf[96];
  for (auto &[key, spans] : lanes) {
    auto [w, group] = key;
    std::sort(spans.begin(), spans.end(),
              [](const Span *a, const Span *b) { return a->start_s < b->start_s; });
    std::vector<size_t> lane = pack_lanes(spans);
    size_t lane_count = spans.empty() ? 0 : *std::max_element(lane.begin(), lane.end()) + 1;
    for (size_t l = 0; l < lane_count; ++l) {
      std::string name = is_gpu[w] ? group_names[group] : worker_name(pool, w);
      if (l > 0) name += " (" + std::to_string(l + 1) + ")";
      out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid_of(w)
          << ",\"tid\":" << tid_of(w, group, l) << ",\"args\":{\"name\":" << quoted(name) << "}}";
      out << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << pid_of(w)
          << ",\"tid\":" << tid_of(w, group, l)
          << ",\"args\":{\"sort_index\":" << tid_of(w, group, l) << "}}";
    }
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span &s = *spans[i];
      out << ",\n{\"name\":" << quoted(s.name) << ",\"cat\":\""
          << categories[static_cast<int>(s.kind)] << "\",\"ph\":\"X\",\"pid\":" << pid_of(w)
          << ",\"tid\":" << tid_of(w, group, lane[i]);
      std::snprintf(buf, sizeof buf, ",\"ts\":%.3f,\"dur\":%.3f", s.start_s * 1e6,
                    std::max(0.0, s.end_s - s.start_s) * 1e6);
      out << buf << ",\"args\":{\"worker\":" << names[w] << ",\"ok\":" << (s.ok ? "true" : "false")
          << (s.args.empty() ? "" : ",") << s.args << "}}";
    }
  }
  out << "\n]}\n";
  out.close();
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}
