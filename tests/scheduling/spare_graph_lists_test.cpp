// spare_graph_lists_test.cpp: a destroyed graph's lists are reused by the next graph built, which
// sees none of what the first held, and a set past the bound is never kept.
#include <gtest/gtest.h>

#include "graph/graph.hpp"
#include "graph/spare_lists.hpp"

namespace gf {
namespace {

int body(gf_task_ctx *, void *) {
  return 0;
}

Graph::Lists filled_lists(size_t tasks) {
  Graph::Lists lists;
  lists.tasks.resize(tasks);
  lists.data.resize(tasks);
  lists.data[0].name = "a name long enough to live on the heap, not inline in the string";
  lists.input_refs.assign(tasks, 1);
  lists.edges.emplace_back(1, 0);
  return lists;
}

TEST(SpareGraphLists, TheNextGraphGetsTheSameMemoryEmpty) {
  SpareGraphLists spare;
  Graph::Lists lists = filled_lists(1000);
  const TaskDesc *task_memory = lists.tasks.data();
  spare.give_back(lists);
  EXPECT_TRUE(lists.tasks.empty() && lists.tasks.capacity() == 0);
  EXPECT_GE(spare.kept_bytes(), 1000 * sizeof(TaskDesc));

  Graph::Lists next;
  spare.take(next);
  EXPECT_TRUE(next.tasks.empty() && next.data.empty() && next.input_refs.empty() &&
              next.edges.empty());
  EXPECT_EQ(next.tasks.data(), task_memory);
  EXPECT_GE(next.tasks.capacity(), 1000u);
  EXPECT_EQ(spare.kept_bytes(), 0u);  // handed over, not shared
}

TEST(SpareGraphLists, ListsPastTheBoundAreFreedNotKept) {
  SpareGraphLists spare;
  Graph::Lists huge;
  huge.tasks.reserve(SpareGraphLists::kKeptBytes / sizeof(TaskDesc) + 1);
  spare.give_back(huge);
  EXPECT_EQ(spare.kept_bytes(), 0u);
  // Only the two latest sets are kept, and a graph takes the larger.
  Graph::Lists oldest = filled_lists(300), small = filled_lists(10), later = filled_lists(20);
  spare.give_back(oldest);
  spare.give_back(small);
  spare.give_back(later);
  Graph::Lists first, second, third;
  spare.take(first);
  EXPECT_EQ(first.tasks.capacity(), 20u);
  spare.take(second);
  EXPECT_EQ(second.tasks.capacity(), 10u);
  spare.take(third);
  EXPECT_EQ(third.tasks.capacity(), 0u);
  EXPECT_EQ(spare.kept_bytes(), 0u);
}

// Through graphs, as users build them: the second graph reuses the first one's lists and holds
// exactly what it was given.
TEST(SpareGraphLists, AGraphBuiltInAReusedListHoldsOnlyItsOwnTasks) {
  {
    Graph first;
    gf_task_desc desc = GF_TASK_DESC_INIT;
    desc.cpu_fn = body;
    for (int i = 0; i < 500; ++i) {
      const std::string name = "first-" + std::to_string(i);
      desc.name = name.c_str();
      first.add_task(desc);
    }
  }
  Graph second;
  gf_task_desc desc = GF_TASK_DESC_INIT;
  desc.cpu_fn = body;
  desc.name = "only";
  gf_data out = second.add_buffer("out", 8, 0);
  desc.outputs = &out;
  desc.output_count = 1;
  const gf_task only = second.add_task(desc);
  ASSERT_EQ(second.task_count(), 1u);
  ASSERT_EQ(second.data_count(), 1u);
  const TaskDesc &task = second.task(second.task_index(only, "only"));
  EXPECT_EQ(second.task_name(task), "only");
  EXPECT_EQ(task.input_count, 0u);
  EXPECT_EQ(task.output_count, 1u);
  EXPECT_EQ(second.data(0).name, "out");
  EXPECT_EQ(second.data(0).producer, 0u);
  EXPECT_NO_THROW(second.freeze());
}

}  // namespace
}  // namespace gf
