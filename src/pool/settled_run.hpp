// What a finished part of a split run did, kept after the part itself was let go (pool/
// split_run.hpp): its state, counts, failure summary and every task's snapshot. Its buffers are
// gone (those a later part needed were read back first, and none was the caller's to read), so
// fetching one says it was freed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/run.hpp"

namespace gf {

class SettledRun final : public Run {
 public:
  // Reads everything from `run`, which must have finished.
  SettledRun(Run &run, std::shared_ptr<Graph> graph) : graph_(std::move(graph)) {
    where_ = run.where();
    state_ = run.state();
    snapshot_ = run.snapshot();
    summary_ = run.failure_summary();
    const size_t n = graph_->task_count();
    tasks_.reserve(n);
    errors_.reserve(n);
    for (TaskIndex t = 0; t < n; ++t) {
      TaskRecord s = run.task(t);
      errors_.emplace_back(s.error ? s.error : "");
      tasks_.push_back(s);
    }
    for (TaskIndex t = 0; t < n; ++t) tasks_[t].error = errors_[t].c_str();
  }

  const Graph &graph() const override { return *graph_; }
  gf_run_where where() const override { return where_; }
  void attach(gf_run *, const gf_submit_options &) override {}
  void start() override {}
  bool wait(int64_t) override { return true; }
  gf_run_state state() override { return state_; }
  int fd() override { return -1; }
  void cancel() override {}
  void release(std::function<void()> forget) override { forget(); }
  TaskRecord task(TaskIndex t) override { return tasks_.at(t); }
  RunStats snapshot() override { return snapshot_; }
  std::string failure_summary() override { return summary_; }
  uint64_t read_buffer(DataIndex d, void *, uint64_t) override {
    fail(GF_ERR_STATE, graph_->data_label(d) +
                           " was freed after its last consumer finished; mark it GF_DATA_KEEP to "
                           "read it after the run");
  }
  void *read_value(DataIndex d) override {
    fail(GF_ERR_STATE, graph_->data_label(d) + " was freed after its last consumer finished");
  }

 private:
  std::shared_ptr<Graph> graph_;
  gf_run_where where_ = GF_RUN_IN_PROCESS;
  gf_run_state state_ = GF_RUN_SUCCEEDED;
  RunStats snapshot_{};
  std::string summary_;
  std::vector<TaskRecord> tasks_;
  std::vector<std::string> errors_;
};

}  // namespace gf
