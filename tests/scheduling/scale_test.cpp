// scale_test.cpp: per-graph checks cost at most n log n in what the caller gives them. Each test
// feeds one check 200,000 of the input that made an earlier version compare pairwise (~2e10
// comparisons, minutes); ctest's TIMEOUT for this binary is what fails such a version, so no
// test here measures time itself.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

constexpr uint32_t kMany = 200000;

// Long enough that comparing two copies is not free.
const std::string kSharedName(64, 'n');

int nothing(gf_task_ctx *, void *) {
  return 0;
}

gf_task_desc kernel_task(const char *name) {
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = name;
  d.kernel = "scale.noop";
  return d;
}

}  // namespace

TEST(Scale, ManyTasksSharingOneNameAreRefusedAtSubmit) {
  Graph g = make_graph();
  gf_task_desc d = GF_TASK_DESC_INIT;
  d.name = kSharedName.c_str();
  d.cpu_fn = nothing;
  for (uint32_t i = 0; i < kMany; ++i) {
    gf_task t;
    ASSERT_EQ(gf_graph_add_task(&t, g.get(), &d), GF_OK) << last_error();
  }
  Pool pool = make_pool(host_config(1, -1));
  gf_run *run = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_GRAPH, gf_graph_submit(&run, pool.get(), g.get(), nullptr));
  EXPECT_EQ(run, nullptr);
  EXPECT_NE(m.find("duplicate task name '" + kSharedName + "' (tasks #0 and #1)"),
            std::string::npos)
      << m;
}

TEST(Scale, DuplicateReportedIsTheFirstAScanInTaskOrderMeets) {
  // Names a, b, c, b, a: the first repeat met in task order is b (#1 and #3).
  Graph g = make_graph();
  for (const char *name : {"a", "b", "c", "b", "a"}) {
    gf_task_desc d = kernel_task(name);
    gf_task t;
    GF_ASSERT_OK(gf_graph_add_task(&t, g.get(), &d));
  }
  Pool pool = make_pool(host_config(1, -1));
  gf_run *run = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_GRAPH, gf_graph_submit(&run, pool.get(), g.get(), nullptr));
  EXPECT_NE(m.find("duplicate task name 'b' (tasks #1 and #3)"), std::string::npos) << m;
}

TEST(Scale, DocumentOfTasksSharingOneNameIsRefused) {
  std::string json = "{\"tasks\": [";
  json.reserve(kMany * (kSharedName.size() + 40));
  for (uint32_t i = 0; i < kMany; ++i) {
    json += i ? "," : "";
    json += "{\"name\": \"" + kSharedName + "\", \"kernel\": \"k\"}";
  }
  json += "]}";
  gf_graph *g = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_GRAPH,
                       gf_graph_deserialize(&g, json.data(), json.size(), GF_GRAPH_FORMAT_JSON, 0));
  EXPECT_EQ(g, nullptr);
  EXPECT_NE(m.find("duplicate task name '" + kSharedName + "' (tasks #0 and #1)"),
            std::string::npos)
      << m;
}

TEST(Scale, TaskWithManyInputsAndOutputs) {
  Graph g = make_graph();
  std::vector<gf_data> ins(kMany), outs(kMany);
  for (uint32_t i = 0; i < kMany; ++i) {
    GF_ASSERT_OK(gf_graph_add_host_buffer(&ins[i], g.get(), nullptr, &i, sizeof i, 0));
    outs[i] = must_add_buffer(g.get(), nullptr, 8);
  }
  gf_task_desc d = kernel_task("wide");
  d.inputs = ins.data();
  d.input_count = kMany;
  d.outputs = outs.data();
  d.output_count = kMany;
  gf_task t;
  GF_EXPECT_OK(gf_graph_add_task(&t, g.get(), &d));

  // The same lists once more, but with the last output also among the inputs.
  std::vector<gf_data> outs2(kMany);
  for (uint32_t i = 0; i < kMany; ++i) outs2[i] = must_add_buffer(g.get(), nullptr, 8);
  std::vector<gf_data> reads(ins);
  reads.back() = outs2.back();
  gf_task_desc e = kernel_task("wide2");
  e.inputs = reads.data();
  e.input_count = kMany;
  e.outputs = outs2.data();
  e.output_count = kMany;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_GRAPH, gf_graph_add_task(&t, g.get(), &e));
  EXPECT_NE(m.find("task 'wide2' lists data #" + std::to_string(3 * kMany - 1) + " twice"),
            std::string::npos)
      << m;
}

TEST(Scale, TaskWithManyResources) {
  Graph g = make_graph();
  std::vector<std::string> names(kMany);
  std::vector<gf_resource> res(kMany);
  for (uint32_t i = 0; i < kMany; ++i) {
    names[i] = kSharedName + std::to_string(i);
    res[i] = gf_resource{names[i].c_str(), 1};
  }
  gf_task_desc d = kernel_task("greedy");
  d.resources = res.data();
  d.resource_count = kMany;
  gf_task t;
  GF_EXPECT_OK(gf_graph_add_task(&t, g.get(), &d));

  res.back().name = names[kMany / 2].c_str();
  d.name = "greedy2";
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &d));
  EXPECT_NE(m.find("names resource '" + names[kMany / 2] + "' twice"), std::string::npos) << m;
}

TEST(Scale, ManyMetadataKeys) {
  Graph g = make_graph();
  std::string key;
  for (uint32_t i = 0; i < kMany; ++i) {
    key = kSharedName + std::to_string(i);
    GF_ASSERT_OK(gf_graph_set_metadata(g.get(), key.c_str(), "v"));
  }
  GF_ASSERT_OK(gf_graph_set_metadata(g.get(), (kSharedName + "7").c_str(), "replaced"));
  uint32_t count = 0;
  GF_ASSERT_OK(gf_graph_metadata_count(&count, g.get()));
  EXPECT_EQ(count, kMany);
  const char *k = nullptr, *v = nullptr;
  GF_ASSERT_OK(gf_graph_metadata_get(&k, &v, g.get(), 7));
  EXPECT_EQ(std::string(k), kSharedName + "7");
  EXPECT_STREQ(v, "replaced");
}
