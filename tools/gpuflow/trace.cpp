#include "trace.hpp"

#include <cinttypes>
#include <cstdio>
#include <fstream>

namespace {

std::string json_escape(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string worker_name(gf_pool *pool, uint32_t worker) {
  gf_worker_info info = GF_WORKER_INFO_INIT;
  if (gf_pool_worker_info(&info, pool, worker) != GF_OK) return "worker " + std::to_string(worker);
  return info.name;
}

}  // namespace

void TaskTrace::on_event(const gf_event *event, void *self) {
  auto &t = *static_cast<TaskTrace *>(self);
  std::lock_guard lock(t.mu_);
  auto key = std::make_pair(event->task.id, event->attempt);
  if (event->kind == GF_EVENT_TASK_STARTED) {
    t.started_[key] = event->time_s;
  } else if (event->kind == GF_EVENT_TASK_FINISHED) {
    auto it = t.started_.find(key);
    double start = it == t.started_.end() ? event->time_s : it->second;
    if (it != t.started_.end()) t.started_.erase(it);
    t.spans_.push_back(Span{event->task.id, event->worker, event->attempt, start, event->time_s,
                            event->ok != 0, event->task_name ? event->task_name : ""});
  }
}

void TaskTrace::print_summary(gf_pool *pool, double elapsed_s) const {
  std::lock_guard lock(mu_);
  std::map<uint32_t, std::pair<uint64_t, double>> per_worker;  // tasks, busy seconds
  uint64_t failed_attempts = 0;
  for (const Span &s : spans_) {
    auto &w = per_worker[s.worker];
    w.first++;
    w.second += s.end_s - s.start_s;
    failed_attempts += s.ok ? 0 : 1;
  }
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
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"gpuflow pool\"}}";
  uint32_t workers = 0;
  gf_pool_worker_count(&workers, pool);
  for (uint32_t w = 0; w < workers; ++w) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << w
        << ",\"args\":{\"name\":\"" << json_escape(worker_name(pool, w)) << "\"}}";
    out << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":" << w
        << ",\"args\":{\"sort_index\":" << w << "}}";
  }
  char buf[64];
  for (const Span &s : spans_) {
    std::string name = s.name.empty() ? "task " + std::to_string(s.task & 0xffffffffu) : s.name;
    out << ",\n{\"name\":\"" << json_escape(name) << "\",\"cat\":\"task\",\"ph\":\"X\",\"pid\":1"
        << ",\"tid\":" << s.worker;
    std::snprintf(buf, sizeof buf, ",\"ts\":%.3f,\"dur\":%.3f", s.start_s * 1e6,
                  (s.end_s - s.start_s) * 1e6);
    out << buf << ",\"args\":{\"attempt\":" << s.attempt << ",\"ok\":" << (s.ok ? "true" : "false")
        << "}}";
  }
  out << "\n]}\n";
  out.close();
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  return true;
}
