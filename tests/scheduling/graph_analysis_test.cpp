#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "graph/graph.hpp"

namespace gf {
namespace {

int noop(gf_task_ctx *, void *) {
  return 0;
}

gf_task add(Graph &g, const char *name, std::vector<gf_data> in = {},
            std::vector<gf_data> out = {}) {
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = name;
  d.cpu_fn = noop;
  d.inputs = in.data();
  d.input_count = static_cast<uint32_t>(in.size());
  d.outputs = out.data();
  d.output_count = static_cast<uint32_t>(out.size());
  return g.add_task(d);
}

std::string error_of(Graph &g) {
  try {
    g.freeze();
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GraphAnalysis, CycleIsNamedTaskByTask) {
  Graph g;
  gf_task a = add(g, "a"), b = add(g, "b"), c = add(g, "c");
  add(g, "bystander");
  g.add_dependency(b, a);
  g.add_dependency(c, b);
  g.add_dependency(a, c);
  std::string error = error_of(g);
  EXPECT_NE(error.find("cycle"), std::string::npos) << error;
  for (const char *name : {"'a'", "'b'", "'c'"}) {
    EXPECT_NE(error.find(name), std::string::npos) << error;
  }
  EXPECT_EQ(error.find("bystander"), std::string::npos) << error;
  EXPECT_FALSE(g.frozen());
}

TEST(GraphAnalysis, CycleThroughDataIsFound) {
  Graph g;
  gf_data x = g.add_buffer("x", 8, 0), y = g.add_buffer("y", 8, 0);
  add(g, "p", {y}, {x});
  add(g, "q", {x}, {y});
  EXPECT_NE(error_of(g).find("cycle"), std::string::npos);
}

TEST(GraphAnalysis, DanglingInputAndDuplicateNames) {
  Graph g;
  gf_data orphan = g.add_buffer("orphan", 8, 0);
  add(g, "reader", {orphan});
  std::string error = error_of(g);
  EXPECT_NE(error.find("'reader'"), std::string::npos) << error;
  EXPECT_NE(error.find("'orphan'"), std::string::npos) << error;

  Graph h;
  add(h, "twin");
  add(h, "twin");
  EXPECT_NE(error_of(h).find("duplicate task name 'twin'"), std::string::npos);
}

TEST(GraphAnalysis, SecondProducerIsRejectedAtOnce) {
  Graph g;
  gf_data x = g.add_buffer("x", 8, 0);
  add(g, "first", {}, {x});
  EXPECT_THROW(add(g, "second", {}, {x}), Error);
  EXPECT_EQ(g.task_count(), 1u);
}

TEST(GraphAnalysis, RankFinishesOneBranchBeforeTheNext) {
  // Two independent reductions: (a1, a2 -> a) and (b1, b2 -> b), then a, b -> root.
  Graph g;
  auto buf = [&](const char *n) { return g.add_buffer(n, 8, 0); };
  gf_data da1 = buf("a1"), da2 = buf("a2"), db1 = buf("b1"), db2 = buf("b2"), da = buf("a"),
          db = buf("b");
  gf_task b1 = add(g, "b1", {}, {db1}), a1 = add(g, "a1", {}, {da1});
  gf_task b2 = add(g, "b2", {}, {db2}), a2 = add(g, "a2", {}, {da2});
  gf_task a = add(g, "a", {da1, da2}, {da});
  gf_task b = add(g, "b", {db1, db2}, {db});
  gf_task root = add(g, "root", {da, db});
  const GraphAnalysis &an = g.freeze();
  auto rank = [&](gf_task t) { return an.order[g.task_index(t, "t")]; };
  // Whichever branch starts first is finished before the other one opens.
  bool a_first = rank(a1) < rank(b1);
  gf_task first_leaves[2] = {a_first ? a1 : b1, a_first ? a2 : b2};
  gf_task first_join = a_first ? a : b;
  gf_task second_leaves[2] = {a_first ? b1 : a1, a_first ? b2 : a2};
  for (gf_task leaf : first_leaves) EXPECT_LT(rank(leaf), rank(first_join));
  for (gf_task leaf : second_leaves) EXPECT_GT(rank(leaf), rank(first_join));
  EXPECT_EQ(rank(root), 6u);
  EXPECT_EQ(an.roots.size(), 4u);
  EXPECT_TRUE(std::is_sorted(an.roots.begin(), an.roots.end(),
                             [&](TaskIndex x, TaskIndex y) { return an.order[x] < an.order[y]; }));
}

TEST(GraphAnalysis, DeepChainDoesNotOverflowTheStack) {
  Graph g;
  gf_task prev = add(g, nullptr);
  for (int i = 0; i < 200000; ++i) {
    gf_task next = add(g, nullptr);
    g.add_dependency(next, prev);
    prev = next;
  }
  const GraphAnalysis &an = g.freeze();
  EXPECT_EQ(an.roots.size(), 1u);
  EXPECT_EQ(an.order[g.task_index(prev, "t")], 200000u);
}

TEST(GraphAnalysis, FrozenGraphRefusesAdditions) {
  Graph g;
  add(g, "only");
  g.freeze();
  try {
    add(g, "late");
    FAIL() << "added to a frozen graph";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_STATE);
  }
}

TEST(GraphAnalysis, ReferencesFromAnotherGraphAreRejected) {
  Graph g, other;
  gf_data foreign = other.add_buffer("foreign", 8, 0);
  EXPECT_EQ(g.find_data(foreign), kNoIndex);
  try {
    add(g, "user", {foreign});
    FAIL() << "accepted a foreign data reference";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("'user'"), std::string::npos);
  }
}

TEST(GraphAnalysis, CycleIsPrintedInRunningOrder) {
  Graph g;
  gf_task a = add(g, "a"), b = add(g, "b");
  g.add_dependency(b, a);  // a -> b
  g.add_dependency(a, b);  // b -> a
  std::string error = error_of(g);
  bool a_first = error.find("cycle: task 'a' -> task 'b' -> task 'a'") != std::string::npos;
  bool b_first = error.find("cycle: task 'b' -> task 'a' -> task 'b'") != std::string::npos;
  EXPECT_TRUE(a_first || b_first) << error;
}

// Freeze takes the data edges from add_task's list when every task was added after the producers
// of what it reads, and walks the tasks otherwise: both must give the same analysis.
TEST(GraphAnalysis, EdgesListedAtAdditionMatchTheWalk) {
  Graph g;
  std::vector<gf_data> made;
  std::vector<gf_task> tasks;
  uint32_t seed = 7;
  auto next = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 8) % 1000; };
  for (int t = 0; t < 300; ++t) {
    std::vector<size_t> picked;
    std::vector<gf_data> in;
    for (int k = 0; k < 3 && !made.empty(); ++k) {
      const size_t i = next() % made.size();
      if (std::find(picked.begin(), picked.end(), i) != picked.end()) continue;
      picked.push_back(i);
      in.push_back(made[i]);
    }
    gf_data out = g.add_buffer(nullptr, 8, 0);
    tasks.push_back(add(g, nullptr, in, {out}));
    made.push_back(out);
    if (t > 10 && next() % 4 == 0) g.add_dependency(tasks.back(), tasks[next() % (t - 1)]);
  }
  // The same tasks as a part of the graph: built without add_task, so freeze walks them.
  std::vector<TaskIndex> all(g.task_count());
  for (TaskIndex t = 0; t < all.size(); ++t) all[t] = t;
  Graph::Part part = g.part(
      all,
      [](DataIndex) {
        return std::pair<const void *, uint64_t>{nullptr, 0};
      },
      [](DataIndex) { return false; });
  const GraphAnalysis &listed = g.freeze();
  const GraphAnalysis &walked = part.graph->freeze();
  EXPECT_EQ(listed.successor_begin, walked.successor_begin);
  EXPECT_EQ(listed.successors, walked.successors);
  EXPECT_EQ(listed.predecessor_count, walked.predecessor_count);
  EXPECT_EQ(listed.order, walked.order);
  EXPECT_EQ(listed.roots, walked.roots);
  EXPECT_GT(listed.successors.size(), 300u);
}

// A consumer added before its producer: the edge is found all the same.
TEST(GraphAnalysis, ConsumerAddedBeforeItsProducer) {
  Graph g;
  gf_data x = g.add_buffer("x", 8, 0);
  gf_task reader = add(g, "reader", {x});
  gf_task maker = add(g, "maker", {}, {x});
  const GraphAnalysis &an = g.freeze();
  const TaskIndex r = g.task_index(reader, "reader"), m = g.task_index(maker, "maker");
  ASSERT_EQ(an.roots, std::vector<TaskIndex>{m});
  ASSERT_EQ(an.successor_begin[m + 1] - an.successor_begin[m], 1u);
  EXPECT_EQ(an.successors[an.successor_begin[m]], r);
  EXPECT_EQ(an.predecessor_count[r], 1u);
}

// A failed freeze leaves the graph as built: freezing again finds the same cycle, which runs
// through an edge only add_task's list knows about.
TEST(GraphAnalysis, FailedFreezeKeepsTheEdgesItWasGiven) {
  Graph g;
  gf_data x = g.add_buffer("x", 8, 0);
  gf_task a = add(g, "a", {}, {x});
  gf_task b = add(g, "b", {x});
  g.add_dependency(a, b);  // a after b, and b reads what a makes
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string error = error_of(g);
    EXPECT_NE(error.find("cycle"), std::string::npos) << "attempt " << attempt << ": " << error;
    EXPECT_FALSE(g.frozen());
  }
}

// Without edges every task is a root and its own branch: ranked, and listed, in task order.
TEST(GraphAnalysis, IndependentTasksRankInTaskOrder) {
  Graph g;
  for (int i = 0; i < 5; ++i) add(g, nullptr);
  const GraphAnalysis &an = g.freeze();
  EXPECT_EQ(an.order, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(an.roots, (std::vector<TaskIndex>{0, 1, 2, 3, 4}));
  EXPECT_EQ(an.successor_begin, (std::vector<uint32_t>(6, 0)));
  EXPECT_EQ(an.predecessor_count, (std::vector<uint32_t>(5, 0)));
}

TEST(GraphAnalysis, AlikePreviousMarksRunsOfPlainTasksOfOneKeyAndPriority) {
  // Scheduler::start joins consecutive roots into one queue entry on this mark alone: any
  // difference that placement, priorities or estimates would see must break it.
  Graph g;
  int other_fn_data = 0;
  auto add_one = [&](auto &&change) {
    gf_task_desc d = GF_TASK_DESC_INIT;
    d.cpu_fn = noop;
    d.cost_key = "work";
    change(d);
    return g.find_task(g.add_task(d));
  };
  auto same = [](gf_task_desc &) {};
  const gf_data buffer = g.add_buffer(nullptr, 8, 0);
  std::vector<std::pair<TaskIndex, bool>> want;
  want.emplace_back(add_one(same), false);  // the first task follows nothing
  want.emplace_back(add_one(same), true);
  want.emplace_back(add_one(same), true);
  want.emplace_back(add_one([](gf_task_desc &d) { d.priority = 3; }), false);
  want.emplace_back(add_one([](gf_task_desc &d) { d.priority = 3; }), true);
  want.emplace_back(add_one([](gf_task_desc &d) { d.cost_key = "other"; }), false);
  want.emplace_back(add_one([](gf_task_desc &d) { d.gpu_fn = noop; }), false);  // may run on GPUs
  want.emplace_back(add_one(same), false);  // the one before was not plain
  static const gf_resource slot{"slot", 1};
  want.emplace_back(add_one([](gf_task_desc &d) {
                      d.resources = &slot;
                      d.resource_count = 1;
                    }),
                    false);
  want.emplace_back(add_one(same), false);
  want.emplace_back(add_one([&](gf_task_desc &d) {
                      d.outputs = &buffer;
                      d.output_count = 1;
                    }),
                    true);  // outputs do not matter: no inputs, a CPU slot
  gf_data made = buffer;
  want.emplace_back(add_one([&](gf_task_desc &d) {
                      d.inputs = &made;
                      d.input_count = 1;
                    }),
                    false);  // reads data: placed where it is
  want.emplace_back(add_one([](gf_task_desc &d) {
                      d.cpu_fn = nullptr;
                      d.kernel = "k.noop";
                    }),
                    false);  // a kernel's body is resolved per pool
  want.emplace_back(add_one([&](gf_task_desc &d) { d.user_data = &other_fn_data; }), false);
  want.emplace_back(add_one([&](gf_task_desc &d) { d.user_data = &other_fn_data; }), true);
  for (auto [t, alike] : want) EXPECT_EQ(g.alike_previous(t), alike) << "task #" << t;
  EXPECT_TRUE(g.has_alike_tasks());
}

TEST(GraphAnalysis, AGraphOfMixedBodiesHasNoAlikeTasks) {
  // The scheduler skips its folds of alike tasks for such a graph without looking at each task.
  Graph g;
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.cpu_fn = noop;
  d.gpu_fn = noop;
  for (int i = 0; i < 4; ++i) g.add_task(d);
  EXPECT_FALSE(g.has_alike_tasks());
  d.gpu_fn = nullptr;
  g.add_task(d);
  EXPECT_FALSE(g.has_alike_tasks());  // the task before it may run on GPUs
  g.add_task(d);
  EXPECT_TRUE(g.has_alike_tasks());
}

}  // namespace gf
