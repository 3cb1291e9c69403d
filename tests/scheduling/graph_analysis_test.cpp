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

}  // namespace gf

namespace gf {

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

}  // namespace gf
