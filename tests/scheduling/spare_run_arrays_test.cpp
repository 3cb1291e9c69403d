// spare_run_arrays_test.cpp: a finished run's arrays are reused by the next run of about their
// size, and never make a pool hold more memory than it would without them.
#include <gtest/gtest.h>

#include "scheduler/run_state.hpp"

namespace gf {
namespace {

TaskRuns filled_tasks(size_t n) {
  TaskRuns tasks;
  tasks.reserve(n);
  for (size_t i = 0; i < n; ++i) tasks.emplace_back().remaining_deps = 7;
  return tasks;
}

DataRuns filled_data(size_t n) {
  DataRuns data;
  data.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    DataRun &d = data.emplace_back();
    d.consumers_left = 3;
    d.replicas.push_back(Replica{kHostSpace, true, nullptr});
    d.replicas.push_back(Replica{1, true, nullptr});  // past the inline one: a vector to free
  }
  return data;
}

TEST(SpareRunArrays, TheNextRunOfAboutTheSameSizeGetsTheSameMemoryEmpty) {
  SpareRunArrays spare;
  TaskRuns tasks = filled_tasks(1000);
  DataRuns data = filled_data(500);
  const TaskRun *task_memory = tasks.data();
  const DataRun *data_memory = data.data();
  spare.give_back(std::move(tasks), std::move(data));
  EXPECT_GT(spare.kept_bytes(), 0u);

  TaskRuns next_tasks;
  DataRuns next_data;
  spare.take(next_tasks, 900, next_data, 400);  // a little smaller: still suits
  EXPECT_TRUE(next_tasks.empty());
  EXPECT_TRUE(next_data.empty());
  EXPECT_EQ(next_tasks.data(), task_memory);
  EXPECT_EQ(next_data.data(), data_memory);
  EXPECT_GE(next_tasks.capacity(), 900u);
  EXPECT_EQ(spare.kept_bytes(), 0u);  // handed over, not shared
}

TEST(SpareRunArrays, MemoryThatDoesNotSuitIsFreedNotKept) {
  SpareRunArrays spare;
  spare.give_back(filled_tasks(1000), filled_data(1000));
  TaskRuns tasks;
  DataRuns data;
  spare.take(tasks, 100, data, 5000);  // far smaller, and larger: neither suits
  EXPECT_EQ(tasks.capacity(), 0u);
  EXPECT_EQ(data.capacity(), 0u);
  EXPECT_EQ(spare.kept_bytes(), 0u);

  // A set larger than the bound is not kept at all.
  const size_t too_many = SpareRunArrays::kKeptBytes / sizeof(TaskRun) + 1;
  TaskRuns huge;
  huge.reserve(too_many);
  spare.give_back(std::move(huge), DataRuns{});
  EXPECT_EQ(spare.kept_bytes(), 0u);
}

TEST(SpareRunArrays, OnlyTheLatestSetIsKept) {
  SpareRunArrays spare;
  spare.give_back(filled_tasks(1000), filled_data(10));
  spare.give_back(filled_tasks(50), filled_data(10));
  TaskRuns tasks;
  DataRuns data;
  spare.take(tasks, 1000, data, 10);  // the first set went when the second came
  EXPECT_EQ(tasks.capacity(), 0u);
  EXPECT_GE(data.capacity(), 10u);
}

}  // namespace
}  // namespace gf
