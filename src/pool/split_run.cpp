#include "pool/split_run.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "graph/task_error.hpp"
#include "pool/pool_core.hpp"
#include "pool/service_run.hpp"
#include "pool/settled_run.hpp"
#include "pool/where.hpp"

namespace gf {

SplitRun::SplitRun(std::shared_ptr<PoolCore> pool, std::shared_ptr<Graph> graph)
    : PublishedRun(pool->scheduler()), pool_(std::move(pool)), graph_(std::move(graph)) {}

SplitRun::~SplitRun() {
  for (PartRun &p : parts_) {
    if (p.run) p.run->release([] {});
  }
}

void SplitRun::start() {
  const GraphAnalysis &a = graph_->freeze();
  const Graph &g = *graph_;
  const size_t n = g.task_count();
  in_service_ = service_tasks(*pool_, g);
  // Steps in topological order (Kahn): a task's step is its predecessors' highest, plus one
  // where a predecessor runs on the other side.
  step_.assign(n, 0);
  std::vector<uint32_t> pending = a.predecessor_count;
  std::vector<TaskIndex> ready, order;
  order.reserve(n);
  for (TaskIndex t = 0; t < n; ++t) {
    if (pending[t] == 0) ready.push_back(t);
  }
  while (!ready.empty()) {
    const TaskIndex t = ready.back();
    ready.pop_back();
    order.push_back(t);
    for (uint32_t e = a.successor_begin[t]; e < a.successor_begin[t + 1]; ++e) {
      const TaskIndex s = a.successors[e];
      step_[s] = std::max(step_[s], step_[t] + (in_service_[t] != in_service_[s] ? 1u : 0u));
      if (--pending[s] == 0) ready.push_back(s);
    }
  }
  for (TaskIndex t = 0; t < n; ++t) steps_ = std::max(steps_, step_[t] + 1);
  // Which data a task of another part reads (read back when its step ends). An opaque value
  // cannot move between parts: refuse before anything runs.
  crosses_.assign(g.data_count(), false);
  for (TaskIndex t = 0; t < n; ++t) {
    const TaskDesc &task = g.task(t);
    for (uint32_t i = 0; i < task.input_count; ++i) {
      const DataIndex d = g.inputs(task)[i];
      const TaskIndex p = g.data(d).producer;
      if (p != kNoIndex && (step_[p] != step_[t] || in_service_[p] != in_service_[t])) {
        crosses_[d] = true;
      }
      if (g.data(d).kind == DataKind::kValue && p != kNoIndex &&
          (step_[p] != step_[t] || in_service_[p] != in_service_[t])) {
        fail(GF_ERR_INFEASIBLE, g.data_label(d) + " is an opaque value that " + g.task_label(t) +
                                    " would read on the other side of this process and the "
                                    "service (only buffers move between them)");
      }
      if (g.data(d).kind == DataKind::kValue && p == kNoIndex && in_service_[t]) {
        fail(GF_ERR_INFEASIBLE, g.data_label(d) + " is an opaque host value, which " +
                                    g.task_label(t) + " cannot read in the service");
      }
    }
  }
  part_of_.assign(n, UINT32_MAX);
  index_in_part_.assign(n, 0);
  doomed_by_.assign(n, kNoIndex);
  order_ = std::move(order);
  started_ = std::chrono::steady_clock::now();
  finish_on_thread(shared_from_this(), [](SplitRun &run) { run.drive(); });
}

void SplitRun::doom_successors(TaskIndex t, TaskIndex cause) {
  const GraphAnalysis &a = graph_->analysis();
  for (uint32_t e = a.successor_begin[t]; e < a.successor_begin[t + 1]; ++e) {
    const TaskIndex s = a.successors[e];
    if (part_of_[s] == UINT32_MAX && doomed_by_[s] == kNoIndex) doomed_by_[s] = cause;
  }
}

void SplitRun::drive() {
  const Graph &g = *graph_;
  std::vector<std::vector<TaskIndex>> by_step(steps_);
  for (TaskIndex t : order_) by_step[step_[t]].push_back(t);  // topological within a step
  for (uint32_t s = 0; s < steps_; ++s) {
    std::vector<TaskIndex> here, there;
    {
      std::lock_guard lock(mu_);
      if (pool_->is_shut_down()) cancelled_ = true;  // gf_pool_destroy: nothing more starts
      for (TaskIndex t : by_step[s]) {
        if (cancelled_) {
          skipped_[t] = {GF_TASK_CANCELLED, task_error_text(g, t, "the run was cancelled")};
        } else if (doomed_by_[t] != kNoIndex) {
          const TaskIndex cause = doomed_by_[t];
          skipped_[t] = {GF_TASK_FAILED, task_error_text(g, t,
                                                         "did not run: its dependency " +
                                                             g.task_label(cause) + " failed")};
          doom_successors(t, cause);
        } else {
          (in_service_[t] ? there : here).push_back(t);
        }
      }
    }
    try {
      run_step(here, there);
    } catch (const std::exception &e) {  // out of memory: the rest cannot run
      std::vector<std::shared_ptr<Run>> started;
      {
        std::lock_guard lock(mu_);
        for (const PartRun &p : parts_) started.push_back(p.run);
      }
      for (auto &run : started) {  // nothing may still read the bytes this run holds
        run->cancel();
        run->wait(-1);
      }
      std::lock_guard lock(mu_);
      if (summary_.empty()) summary_ = std::string("the split run stopped: ") + e.what();
      for (TaskIndex t : here) {
        if (part_of_[t] == UINT32_MAX)
          skipped_[t] = {GF_TASK_FAILED, task_error_text(g, t, summary_)};
      }
      for (TaskIndex t : there) {
        if (part_of_[t] == UINT32_MAX)
          skipped_[t] = {GF_TASK_FAILED, task_error_text(g, t, summary_)};
      }
      for (uint32_t later = s + 1; later < steps_; ++later) {
        for (TaskIndex t : by_step[later]) {
          skipped_[t] = {GF_TASK_FAILED, task_error_text(g, t, summary_)};
        }
      }
      break;
    }
  }
  {
    std::lock_guard lock(mu_);
    finish();
  }
  completion_.publish();  // unlocked: its callback may ask the run anything
}

void SplitRun::finish() {
  // As one run would end: cancelled when anything was cancelled, else failed when anything
  // failed (a cancel that came after the last part ended changes nothing).
  bool failed = false, cancelled = false;
  for (const PartRun &p : parts_) {
    const gf_run_state s = p.run->state();
    if (s == GF_RUN_FAILED && summary_.empty()) summary_ = p.run->failure_summary();
    failed = failed || s == GF_RUN_FAILED;
    cancelled = cancelled || s == GF_RUN_CANCELLED;
  }
  for (const auto &[t, skipped] : skipped_) {
    if (skipped.state == GF_TASK_FAILED) {
      failed = true;
      if (summary_.empty()) summary_ = skipped.error;
    }
    cancelled = cancelled || skipped.state == GF_TASK_CANCELLED;
  }
  state_ = cancelled ? GF_RUN_CANCELLED : failed ? GF_RUN_FAILED : GF_RUN_SUCCEEDED;
  elapsed_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void SplitRun::run_step(const std::vector<TaskIndex> &here, const std::vector<TaskIndex> &there) {
  const Graph &g = *graph_;
  auto moved = [this](DataIndex d) -> std::pair<const void *, uint64_t> {
    const std::vector<uint8_t> &bytes = moved_.at(d);  // read when its step ended
    return {bytes.data(), bytes.size()};
  };
  auto keep = [this, &g](DataIndex d) {
    return (g.data(d).flags & GF_DATA_KEEP) || g.data(d).consumer_slots == 0 || crosses_[d];
  };
  std::vector<size_t> started;
  for (int side = 0; side < 2; ++side) {
    const std::vector<TaskIndex> &tasks = side == 0 ? here : there;
    if (tasks.empty()) continue;
    PartRun part;
    try {
      part.part = g.part(tasks, moved, keep);
      if (side == 0) {
        std::shared_ptr<LocalRun> run = pool_->prepare(part.part.graph);
        run->start();
        part.run = run;
      } else {
        auto run = std::make_shared<ServiceRun>(pool_, part.part.graph);
        run->start();
        part.run = run;
      }
    } catch (const std::exception &e) {
      std::lock_guard lock(mu_);
      for (TaskIndex t : tasks) {
        skipped_[t] = {GF_TASK_FAILED,
                       task_error_text(g, t, std::string("did not run: ") + e.what())};
        doom_successors(t, t);
      }
      continue;
    }
    std::lock_guard lock(mu_);
    const auto index = static_cast<uint32_t>(parts_.size());
    for (size_t i = 0; i < part.part.tasks.size(); ++i) {
      part_of_[part.part.tasks[i]] = index;
      index_in_part_[part.part.tasks[i]] = static_cast<uint32_t>(i);
    }
    for (size_t j = 0; j < part.part.data.size(); ++j) {
      const DataIndex d = part.part.data[j];
      const TaskIndex p = g.data(d).producer;
      if (p != kNoIndex && part_of_[p] == index)
        produced_in_[d] = {index, static_cast<DataIndex>(j)};
    }
    if (cancelled_) part.run->cancel();
    parts_.push_back(std::move(part));
    started.push_back(index);
  }
  for (size_t index : started) parts_[index].run->wait(-1);  // parts_ grows on this thread only
  for (size_t index : started) settle(index);
}

void SplitRun::settle(size_t index) {
  const Graph &g = *graph_;
  std::shared_ptr<Run> run = parts_[index].run;
  const Graph::Part &part = parts_[index].part;
  const bool all_succeeded = run->state() == GF_RUN_SUCCEEDED;
  std::vector<bool> succeeded(part.tasks.size(), true);
  if (!all_succeeded) {
    for (size_t i = 0; i < part.tasks.size(); ++i) {
      try {
        succeeded[i] = run->task(static_cast<TaskIndex>(i)).state == GF_TASK_SUCCEEDED;
      } catch (const Error &) {
        succeeded[i] = false;  // no report: nothing downstream may trust this part
      }
    }
  }
  std::map<DataIndex, std::vector<uint8_t>> read;
  std::string read_error;
  for (size_t j = 0; j < part.data.size(); ++j) {
    const DataIndex d = part.data[j];
    const TaskIndex p = g.data(d).producer;
    if (p == kNoIndex || part_of_[p] != index || !succeeded[index_in_part_[p]] || !crosses_[d]) {
      continue;
    }
    try {
      const uint64_t size = run->read_buffer(static_cast<DataIndex>(j), nullptr, 0);
      std::vector<uint8_t> bytes(size);
      run->read_buffer(static_cast<DataIndex>(j), bytes.data(), size);
      read[d] = std::move(bytes);
    } catch (const Error &e) {
      succeeded[index_in_part_[p]] = false;  // its consumers cannot run
      if (read_error.empty()) read_error = e.what();
    }
  }
  // A part holding nothing the caller may read (every buffer it made was consumed, and those a
  // later part needs were read back above) is let go now: its buffers (blobs on the service for
  // a service part) do not pile up along a long chain of steps. What its tasks did is kept.
  bool visible = false;
  for (size_t j = 0; j < part.data.size() && !visible; ++j) {
    const DataIndex d = part.data[j];
    const TaskIndex p = g.data(d).producer;
    visible = p != kNoIndex && part_of_[p] == index &&
              ((g.data(d).flags & GF_DATA_KEEP) || g.data(d).consumer_slots == 0);
  }
  std::shared_ptr<Run> settled;
  if (!visible) {
    try {
      settled = std::make_shared<SettledRun>(*run, part.graph);
    } catch (const Error &) {
      // No report to keep (a service part whose report could not be had): keep the part.
    }
  }
  {
    std::lock_guard lock(mu_);
    for (auto &[d, bytes] : read) moved_[d] = std::move(bytes);
    for (size_t i = 0; i < part.tasks.size(); ++i) {
      if (!succeeded[i]) doom_successors(part.tasks[i], part.tasks[i]);
    }
    if (!read_error.empty() && summary_.empty()) {
      summary_ = "a result could not be moved to the other side: " + read_error;
    }
    if (settled) parts_[index].run = settled;
  }
  if (settled) run->release([] {});
}

gf_run_state SplitRun::state() {
  std::lock_guard lock(mu_);
  return state_;
}

void SplitRun::cancel() {
  std::vector<std::shared_ptr<Run>> running;
  {
    std::lock_guard lock(mu_);
    if (state_ != GF_RUN_RUNNING) return;
    cancelled_ = true;
    for (const PartRun &p : parts_) running.push_back(p.run);
  }
  for (auto &run : running) run->cancel();
}

void SplitRun::release(std::function<void()> forget) {
  cancel();
  forget_after_callback(std::move(forget), state() != GF_RUN_RUNNING);
}

TaskRecord SplitRun::task(TaskIndex t) {
  std::shared_ptr<Run> run;
  TaskIndex i = 0;
  {
    std::lock_guard lock(mu_);
    if (part_of_[t] == UINT32_MAX) {
      auto it = skipped_.find(t);
      if (it == skipped_.end()) return {GF_TASK_WAITING, 0, UINT32_MAX, ""};
      return {it->second.state, 0, UINT32_MAX, it->second.error.c_str()};
    }
    run = parts_[part_of_[t]].run;
    i = index_in_part_[t];
  }
  return run->task(i);
}

RunStats SplitRun::snapshot() {
  std::vector<std::shared_ptr<Run>> runs;
  RunStats total{};
  {
    std::lock_guard lock(mu_);
    for (const PartRun &p : parts_) runs.push_back(p.run);
    for (const auto &[t, skipped] : skipped_) {
      total.failed += skipped.state == GF_TASK_FAILED;
      total.cancelled += skipped.state == GF_TASK_CANCELLED;
    }
    total.elapsed_s =
        state_ != GF_RUN_RUNNING
            ? elapsed_s_
            : std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  total.tasks = graph_->task_count();
  for (auto &run : runs) {
    const RunStats s = run->snapshot();
    total.succeeded += s.succeeded;
    total.failed += s.failed;
    total.cancelled += s.cancelled;
    total.attempts += s.attempts;
    total.transfers += s.transfers;
    total.bytes_transferred += s.bytes_transferred;
  }
  return total;
}

std::string SplitRun::failure_summary() {
  std::lock_guard lock(mu_);
  return summary_.empty() ? "no task failed" : summary_;
}

uint64_t SplitRun::read_buffer(DataIndex d, void *dst, uint64_t capacity) {
  const Graph &g = *graph_;
  const DataDesc &data = g.data(d);
  std::shared_ptr<Run> run;
  DataIndex j = 0;
  {
    std::lock_guard lock(mu_);
    const void *bytes = nullptr;
    uint64_t size = 0;
    bool local = false;
    if (data.origin == DataOrigin::kHostBuffer) {
      bytes = data.host_bytes;
      size = data.size;
      local = true;
    } else if (auto m = moved_.find(d); m != moved_.end()) {
      bytes = m->second.data();
      size = m->second.size();
      local = true;
    } else if (auto p = produced_in_.find(d); p != produced_in_.end()) {
      run = parts_[p->second.first].run;
      j = p->second.second;
    } else if (state_ == GF_RUN_RUNNING) {
      fail(GF_ERR_STATE, g.data_label(d) + " is not produced yet");
    } else {
      fail(GF_ERR_STATE, g.data_label(d) + " was never produced: its producer " +
                             g.task_label(data.producer) + " did not run");
    }
    if (local) {
      if (!dst) return size;
      if (capacity < size) {
        fail(GF_ERR_INVALID_ARGUMENT, g.data_label(d) + " has " + std::to_string(size) +
                                          " bytes; dst_capacity is " + std::to_string(capacity));
      }
      if (size) std::memcpy(dst, bytes, size);
      return size;
    }
  }
  return run->read_buffer(j, dst, capacity);
}

void *SplitRun::read_value(DataIndex d) {
  std::shared_ptr<Run> run;
  DataIndex j = 0;
  {
    std::lock_guard lock(mu_);
    auto p = produced_in_.find(d);
    if (p == produced_in_.end()) {
      fail(GF_ERR_STATE, graph_->data_label(d) + " was not produced by a part of this run");
    }
    run = parts_[p->second.first].run;
    j = p->second.second;
  }
  return run->read_value(j);
}

}  // namespace gf
