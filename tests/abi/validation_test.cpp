// validation_test.cpp: graph-wide checks made by gf_graph_submit. A rejected graph must not run
// at all (every body here counts its invocations), and the message must name the task.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace gft;

namespace {

class Validation : public ::testing::Test {
 protected:
  std::shared_ptr<std::atomic<int>> ran = std::make_shared<std::atomic<int>>(0);

  Body body() { return counting_body(ran); }

  TaskSpec cpu_task(const std::string &name) {
    TaskSpec s;
    s.name = name;
    s.cpu = body();
    return s;
  }

  // Submits g to a fresh pool with config c and expects `want`; then shuts the pool down
  // (joining its workers), checks that nothing ran, and returns the message.
  std::string submit_rejected(const gf_pool_config &c, gf_graph *g, gf_status want) {
    Pool pool = make_pool(c);
    EXPECT_NE(pool, nullptr);
    if (!pool) return "";
    gf_run *run = nullptr;
    const gf_status s = gf_graph_submit(&run, pool.get(), g, nullptr);
    const std::string msg = last_error();
    EXPECT_EQ(s, want) << gf_status_name(s) << ": " << msg;
    EXPECT_EQ(run, nullptr);
    if (s == GF_OK && run != nullptr) {
      gf_run_wait(run, kWaitMs);
      gf_run_destroy(run);
    }
    pool.reset();
    EXPECT_EQ(ran->load(), 0) << "a task of a rejected graph ran";
    return msg;
  }

  // Rejected with `want`, and the message holds one of `names`.
  void expect_rejected(const gf_pool_config &c, gf_graph *g, gf_status want,
                       std::initializer_list<const char *> names) {
    const std::string msg = submit_rejected(c, g, want);
    bool named = false;
    for (const char *n : names) named = named || msg.find(n) != std::string::npos;
    EXPECT_TRUE(named) << "message does not name the task: \"" << msg << "\"";
  }

  // Rejected with `want`, and the message holds every one of `parts`.
  void expect_rejected_saying(const gf_pool_config &c, gf_graph *g, gf_status want,
                              std::initializer_list<const char *> parts) {
    const std::string msg = submit_rejected(c, g, want);
    for (const char *part : parts) {
      EXPECT_NE(msg.find(part), std::string::npos) << "\"" << part << "\" not in \"" << msg << "\"";
    }
  }

  // Submits g and expects it to run to success; returns the number of bodies that ran.
  int expect_runs(const gf_pool_config &c, gf_graph *g) {
    Pool pool = make_pool(c);
    RunPtr run(submit(pool.get(), g));
    if (!run) return -1;
    const gf_status s = gf_run_wait(run.get(), kWaitMs);
    EXPECT_EQ(s, GF_OK) << describe(s);
    return ran->load();
  }
};

TEST_F(Validation, CycleThroughDependencies) {
  Graph g = make_graph();
  gf_task a = must_add_task(g.get(), cpu_task("cyc_a"));
  TaskSpec sb = cpu_task("cyc_b");
  sb.after = {a};
  gf_task b = must_add_task(g.get(), sb);
  TaskSpec sc = cpu_task("cyc_c");
  sc.after = {b};
  gf_task c = must_add_task(g.get(), sc);
  must_add_task(g.get(), cpu_task("bystander"));
  // a after c closes the cycle a -> b -> c -> a; allowed while building.
  GF_ASSERT_OK(gf_graph_add_dependency(g.get(), a, c));
  expect_rejected(host_config(2, -1), g.get(), GF_ERR_INVALID_GRAPH, {"cyc_a", "cyc_b", "cyc_c"});
}

TEST_F(Validation, SelfDependency) {
  Graph g = make_graph();
  gf_task a = must_add_task(g.get(), cpu_task("selfish"));
  const gf_status s = gf_graph_add_dependency(g.get(), a, a);
  if (s == GF_OK) {
    expect_rejected(host_config(1, -1), g.get(), GF_ERR_INVALID_GRAPH, {"selfish"});
  } else {
    // Rejecting it right away is acceptable too, as long as it is an argument/graph error.
    EXPECT_TRUE(s == GF_ERR_INVALID_ARGUMENT || s == GF_ERR_INVALID_GRAPH) << describe(s);
  }
}

TEST_F(Validation, CycleThroughData) {
  Graph g = make_graph();
  gf_data d1 = must_add_buffer(g.get(), "d1", 64);
  gf_data d2 = must_add_buffer(g.get(), "d2", 64);
  TaskSpec p = cpu_task("data_p");
  p.inputs = {d2};
  p.outputs = {d1};
  must_add_task(g.get(), p);
  TaskSpec q = cpu_task("data_q");
  q.inputs = {d1};
  q.outputs = {d2};
  must_add_task(g.get(), q);
  must_add_task(g.get(), cpu_task("bystander"));
  expect_rejected(host_config(2, -1), g.get(), GF_ERR_INVALID_GRAPH, {"data_p", "data_q"});
}

TEST_F(Validation, CycleMixingDataAndDependencies) {
  Graph g = make_graph();
  gf_data d = must_add_buffer(g.get(), "d", 64);
  TaskSpec p = cpu_task("mix_producer");
  p.outputs = {d};
  gf_task tp = must_add_task(g.get(), p);
  TaskSpec q = cpu_task("mix_consumer");
  q.inputs = {d};
  gf_task tq = must_add_task(g.get(), q);
  GF_ASSERT_OK(gf_graph_add_dependency(g.get(), tp, tq));  // producer after its consumer
  expect_rejected(host_config(1, -1), g.get(), GF_ERR_INVALID_GRAPH,
                  {"mix_producer", "mix_consumer"});
}

TEST_F(Validation, DanglingInput) {
  Graph g = make_graph();
  gf_data orphan = must_add_buffer(g.get(), "orphan", 64);
  must_add_task(g.get(), cpu_task("independent"));
  TaskSpec c = cpu_task("reads_orphan");
  c.inputs = {orphan};
  must_add_task(g.get(), c);
  expect_rejected(host_config(1, -1), g.get(), GF_ERR_INVALID_GRAPH, {"reads_orphan"});
}

TEST_F(Validation, DanglingValueInput) {
  Graph g = make_graph();
  gf_data orphan{0};
  GF_ASSERT_OK(gf_graph_add_value(&orphan, g.get(), "orphan_value", 8, 0));
  TaskSpec c = cpu_task("reads_orphan_value");
  c.inputs = {orphan};
  must_add_task(g.get(), c);
  expect_rejected(host_config(1, -1), g.get(), GF_ERR_INVALID_GRAPH, {"reads_orphan_value"});
}

TEST_F(Validation, TwoProducers) {
  Graph g = make_graph();
  gf_data d = must_add_buffer(g.get(), "shared_out", 64);
  TaskSpec p1 = cpu_task("producer_one");
  p1.outputs = {d};
  must_add_task(g.get(), p1);
  TaskSpec p2 = cpu_task("producer_two");
  p2.outputs = {d};
  gf_task t{0};
  const gf_status s = add_task(&t, g.get(), p2);
  if (s != GF_OK) {
    // Early detection is acceptable if it is reported as a graph error naming the task.
    EXPECT_EQ(s, GF_ERR_INVALID_GRAPH) << describe(s);
    return;
  }
  expect_rejected(host_config(2, -1), g.get(), GF_ERR_INVALID_GRAPH,
                  {"producer_one", "producer_two"});
}

TEST_F(Validation, ProducingAHostInputIsASecondProducer) {
  Graph g = make_graph();
  const char bytes[4] = {1, 2, 3, 4};
  gf_data h{0};
  GF_ASSERT_OK(gf_graph_add_host_buffer(&h, g.get(), "host_in", bytes, sizeof bytes, 0));
  TaskSpec p = cpu_task("overwrites_host_input");
  p.outputs = {h};
  gf_task t{0};
  const gf_status s = add_task(&t, g.get(), p);
  if (s != GF_OK) {
    EXPECT_TRUE(s == GF_ERR_INVALID_GRAPH || s == GF_ERR_INVALID_ARGUMENT) << describe(s);
    return;
  }
  expect_rejected(host_config(1, -1), g.get(), GF_ERR_INVALID_GRAPH, {"overwrites_host_input"});
}

TEST_F(Validation, DuplicateTaskNames) {
  Graph g = make_graph();
  must_add_task(g.get(), cpu_task("twin"));
  must_add_task(g.get(), cpu_task("other"));
  gf_task t{0};
  const gf_status s = add_task(&t, g.get(), cpu_task("twin"));
  if (s != GF_OK) {
    EXPECT_EQ(s, GF_ERR_INVALID_GRAPH) << describe(s);
    return;
  }
  expect_rejected(host_config(1, -1), g.get(), GF_ERR_INVALID_GRAPH, {"twin"});
}

TEST_F(Validation, UnnamedTasksAreNotDuplicates) {
  Graph g = make_graph();
  for (int i = 0; i < 3; ++i) {
    TaskSpec s;
    s.cpu = body();
    must_add_task(g.get(), s);
  }
  EXPECT_EQ(expect_runs(host_config(1, -1), g.get()), 3);
}

// --- Infeasible requests ---------------------------------------------------------------------

TEST_F(Validation, MoreGpuThanAnyWorkerHas) {
  Graph g = make_graph();
  must_add_task(g.get(), cpu_task("fine"));
  TaskSpec s;
  s.name = "wants_two_gpus";
  s.gpu = body();
  s.resources = {{"GPU", 2.0}};
  must_add_task(g.get(), s);
  expect_rejected(
      host_config(1, 2), g.get(), GF_ERR_INFEASIBLE,
      {"wants_two_gpus", "GPU=2", "the most any worker that could run it has of 'GPU' is 1"});
}

TEST_F(Validation, UnknownLabel) {
  Graph g = make_graph();
  TaskSpec s = cpu_task("wants_unicorn");
  s.gpu = body();
  s.resources = {{"unicorn", 1.0}};
  must_add_task(g.get(), s);
  expect_rejected(host_config(1, 1), g.get(), GF_ERR_INFEASIBLE, {"wants_unicorn"});
}

TEST_F(Validation, GpuOnlyTaskOnAPoolWithoutGpusSaysSo) {
  Graph g = make_graph();
  TaskSpec s;
  s.name = "needs_a_device";
  s.gpu = body();
  s.resources = {{"GPU", 1.0}};
  must_add_task(g.get(), s);
  expect_rejected_saying(host_config(1, -1), g.get(), GF_ERR_INFEASIBLE,
                         {"needs_a_device", "only a GPU body", "no GPU workers"});
}

TEST_F(Validation, ResourceNamesAreCaseSensitive) {
  Graph g = make_graph();
  TaskSpec s;
  s.name = "lowercase_gpu";
  s.gpu = body();
  s.resources = {{"gpu", 1.0}};
  must_add_task(g.get(), s);
  expect_rejected_saying(host_config(1, 1), g.get(), GF_ERR_INFEASIBLE,
                         {"lowercase_gpu", "no worker of this pool has a resource named 'gpu'",
                          "did you mean 'GPU'?"});
}

TEST_F(Validation, MoreGpuMemoryThanTheDevice) {
  Graph g = make_graph();
  TaskSpec s;
  s.name = "memory_hog";
  s.gpu = body();
  s.resources = {{"GPU", 0.5}, {"gpu_memory", static_cast<double>(65ull << 20)}};
  must_add_task(g.get(), s);
  expect_rejected(host_config(1, 2, 64ull << 20), g.get(), GF_ERR_INFEASIBLE, {"memory_hog"});
}

TEST_F(Validation, GpuOnlyTaskWithoutGpuWorkers) {
  Graph g = make_graph();
  must_add_task(g.get(), cpu_task("fine"));
  TaskSpec s;
  s.name = "needs_a_device";
  s.gpu = body();
  must_add_task(g.get(), s);
  expect_rejected(host_config(2, -1), g.get(), GF_ERR_INFEASIBLE, {"needs_a_device"});
}

TEST_F(Validation, CpuOnlyTaskAskingForGpu) {
  Graph g = make_graph();
  TaskSpec s = cpu_task("cpu_body_gpu_request");
  s.resources = {{"GPU", 0.5}};
  must_add_task(g.get(), s);
  expect_rejected(host_config(1, 2), g.get(), GF_ERR_INFEASIBLE, {"cpu_body_gpu_request"});
}

TEST_F(Validation, MoreCpuThanAWorkerHas) {
  Graph g = make_graph();
  TaskSpec s = cpu_task("two_cores");
  s.resources = {{"cpu", 2.0}};  // each CPU worker advertises cpu=1; amounts do not add up
  must_add_task(g.get(), s);
  expect_rejected(host_config(4, -1), g.get(), GF_ERR_INFEASIBLE, {"two_cores"});
}

TEST_F(Validation, LabelOnlyOnTheOtherKindOfWorker) {
  const gf_resource labels[] = {{"bigmem", 1.0}};
  gf_pool_config c = host_config(1, 1);
  c.cpu_worker_labels = labels;
  c.cpu_worker_label_count = 1;
  Graph g = make_graph();
  TaskSpec s;
  s.name = "gpu_wants_bigmem";
  s.gpu = body();
  s.resources = {{"bigmem", 1.0}};
  must_add_task(g.get(), s);
  expect_rejected(c, g.get(), GF_ERR_INFEASIBLE, {"gpu_wants_bigmem"});
}

TEST_F(Validation, InfeasibleInEveryKindWithBothBodies) {
  Graph g = make_graph();
  TaskSpec s = cpu_task("both_bodies_no_gpu");
  s.gpu = body();
  s.resources = {{"GPU", 0.5}};
  must_add_task(g.get(), s);
  expect_rejected(host_config(2, -1), g.get(), GF_ERR_INFEASIBLE, {"both_bodies_no_gpu"});
}

// Submit checks each request once for the kinds of body its tasks have, and walks the tasks only
// to name the culprit: the first in task order, among many that share its request.
TEST_F(Validation, FirstTaskThatCannotRunIsNamedAmongMany) {
  Graph g = make_graph();
  for (int i = 0; i < 100; ++i) must_add_task(g.get(), cpu_task("fine_" + std::to_string(i)));
  TaskSpec first;
  first.name = "gpu_only_first";
  first.gpu = body();
  must_add_task(g.get(), first);
  for (int i = 100; i < 200; ++i) must_add_task(g.get(), cpu_task("fine_" + std::to_string(i)));
  TaskSpec second = first;
  second.name = "gpu_only_second";
  must_add_task(g.get(), second);
  const std::string msg = submit_rejected(host_config(2, -1), g.get(), GF_ERR_INFEASIBLE);
  EXPECT_NE(msg.find("gpu_only_first"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("gpu_only_second"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("fine_"), std::string::npos) << msg;
}

// The positive counterparts: feasible on one kind of worker is feasible.
TEST_F(Validation, LabelOnOneKindIsFeasibleWithBothBodies) {
  const gf_resource labels[] = {{"bigmem", 1.0}};
  gf_pool_config c = host_config(1, 1);
  c.cpu_worker_labels = labels;
  c.cpu_worker_label_count = 1;
  Graph g = make_graph();
  auto kind = std::make_shared<std::atomic<int>>(0);
  TaskSpec s;
  s.name = "either_kind_bigmem";
  s.resources = {{"bigmem", 1.0}};
  s.cpu = [kind, r = ran](gf_task_ctx *) {
    r->fetch_add(1);
    kind->store(1);
    return 0;
  };
  s.gpu = [kind, r = ran](gf_task_ctx *) {
    r->fetch_add(1);
    kind->store(2);
    return 0;
  };
  must_add_task(g.get(), s);
  EXPECT_EQ(expect_runs(c, g.get()), 1);
  EXPECT_EQ(kind->load(), 1) << "only CPU workers have bigmem";
}

TEST_F(Validation, ExactCapacityIsFeasible) {
  Graph g = make_graph();
  TaskSpec s;
  s.name = "whole_device";
  s.gpu = body();
  s.resources = {{"GPU", 1.0}, {"gpu_memory", static_cast<double>(64ull << 20)}};
  must_add_task(g.get(), s);
  TaskSpec t = cpu_task("whole_core");
  t.resources = {{"cpu", 1.0}};
  must_add_task(g.get(), t);
  EXPECT_EQ(expect_runs(host_config(1, 1, 64ull << 20), g.get()), 2);
}

TEST_F(Validation, RejectedSubmitLeavesThePoolUsable) {
  Pool pool = make_pool(host_config(1, -1));
  Graph bad = make_graph();
  TaskSpec s;
  s.name = "needs_a_device";
  s.gpu = body();
  must_add_task(bad.get(), s);
  gf_run *r = nullptr;
  GF_EXPECT_STATUS(GF_ERR_INFEASIBLE, gf_graph_submit(&r, pool.get(), bad.get(), nullptr));
  EXPECT_EQ(r, nullptr);

  Graph good = make_graph();
  must_add_task(good.get(), cpu_task("ok"));
  RunPtr run(submit(pool.get(), good.get()));
  ASSERT_NE(run, nullptr);
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(ran->load(), 1);
}

}  // namespace
