#include "scheduler/run_state.hpp"

#include "graph/task_error.hpp"

namespace gf {

namespace {

template <class Array>
size_t capacity_bytes(const Array &a) {
  return a.capacity() * sizeof(typename Array::value_type);
}

// Whether kept room for `kept` elements suits `wanted`: enough, and not so much that a small
// run would hold a large run's memory.
bool suits(size_t kept, size_t wanted) {
  return wanted > 0 && kept >= wanted && kept <= 2 * wanted;
}

}  // namespace

void RunState::set_error(TaskIndex t, std::string what) {
  errors[t] = task_error_text(graph(), t, std::move(what));
}

RunState::~RunState() {
  if (spare_arrays) spare_arrays->give_back(std::move(tasks), std::move(data));
}

void SpareRunArrays::give_back(TaskRuns &&tasks, DataRuns &&data) {
  tasks.clear();
  data.clear();  // outside the mutex: each data object's copies and value ops go
  if (capacity_bytes(tasks) + capacity_bytes(data) > kKeptBytes) return;
  TaskRuns dropped_tasks;  // an older set: freed once the mutex is released
  DataRuns dropped_data;
  std::lock_guard lock(mu_);
  dropped_tasks.swap(tasks_);
  dropped_data.swap(data_);
  tasks_.swap(tasks);
  data_.swap(data);
}

void SpareRunArrays::take(TaskRuns &tasks, size_t task_count, DataRuns &data, size_t data_count) {
  TaskRuns kept_tasks;
  DataRuns kept_data;
  {
    std::lock_guard lock(mu_);
    kept_tasks.swap(tasks_);
    kept_data.swap(data_);
  }
  if (suits(kept_tasks.capacity(), task_count)) tasks.swap(kept_tasks);
  if (suits(kept_data.capacity(), data_count)) data.swap(kept_data);
  // What did not suit is freed here, before the caller allocates its own.
}

size_t SpareRunArrays::kept_bytes() {
  std::lock_guard lock(mu_);
  return capacity_bytes(tasks_) + capacity_bytes(data_);
}

}  // namespace gf
