// A pool drives exactly the devices handed down to it, here on 4 emulated devices: each variable
// a scheduler or container runtime sets, the devices' own identity kept, where the list came
// from reported, and a list naming a device that does not exist refused at creation by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {
using namespace gft;

const char *const kVariables[] = {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
                                  "NVIDIA_VISIBLE_DEVICES"};

using Settings = std::vector<std::pair<const char *, const char *>>;

// The test's environment holds exactly `settings` of the variables, until it ends.
class Handed {
 public:
  explicit Handed(const Settings &settings) {
    for (const char *v : kVariables) unsetenv(v);
    for (const auto &[variable, value] : settings) setenv(variable, value, 1);
  }
  ~Handed() {
    for (const char *v : kVariables) unsetenv(v);
  }
};

std::string emulated(int node_ordinal) {
  std::string digits = std::to_string(node_ordinal);
  return "GPU-00000000-gpuf-emul-0000-" + std::string(12 - digits.size(), '0') + digits;
}

// The pool's devices by UUID, and where their list came from.
struct Driven {
  std::vector<std::string> uuids;
  std::string source;
};

Driven driven(const gf_pool *pool) {
  Driven d;
  uint32_t count = 0;
  EXPECT_EQ(gf_pool_device_count(&count, pool), GF_OK);
  for (uint32_t i = 0; i < count; ++i) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    EXPECT_EQ(gf_pool_device_info(&info, pool, i), GF_OK);
    EXPECT_EQ(info.ordinal, static_cast<int32_t>(i));
    EXPECT_EQ(info.emulated, 1u);
    d.uuids.push_back(info.uuid);
  }
  const char *source = nullptr;
  EXPECT_EQ(gf_pool_devices_source(&source, pool), GF_OK);
  d.source = source ? source : "<null>";
  return d;
}

Driven driven_with(const Settings &settings) {
  Handed handed(settings);
  Pool pool = make_pool(host_config(1, 4));
  if (!pool) return {};
  return driven(pool.get());
}

TEST(HandedDownPool, NothingHandedDownDrivesTheWholeNode) {
  Driven d = driven_with({});
  EXPECT_EQ(d.uuids,
            (std::vector<std::string>{emulated(0), emulated(1), emulated(2), emulated(3)}));
  EXPECT_EQ(d.source, "all the node shows");
}

TEST(HandedDownPool, CudaVisibleDevicesByOrdinalKeepsIdentity) {
  Driven d = driven_with({{"CUDA_VISIBLE_DEVICES", "1,3"}});
  EXPECT_EQ(d.uuids, (std::vector<std::string>{emulated(1), emulated(3)}));
  EXPECT_EQ(d.source, "CUDA_VISIBLE_DEVICES=1,3");
}

TEST(HandedDownPool, CudaVisibleDevicesByUuidAndPrefix) {
  const std::string list = emulated(2) + ",GPU-00000000-gpuf-emul-0000-000000000000";
  Driven d = driven_with({{"CUDA_VISIBLE_DEVICES", list.c_str()}});
  EXPECT_EQ(d.uuids, (std::vector<std::string>{emulated(2), emulated(0)}));
}

TEST(HandedDownPool, CudaVisibleDevicesMinusOneIsNoDevice) {
  Driven d = driven_with({{"CUDA_VISIBLE_DEVICES", "-1"}});
  EXPECT_TRUE(d.uuids.empty());
  EXPECT_EQ(d.source, "CUDA_VISIBLE_DEVICES=-1");
}

TEST(HandedDownPool, SlurmStepGpusOverJobGpus) {
  Driven d = driven_with({{"SLURM_JOB_GPUS", "0,2,3"}, {"SLURM_STEP_GPUS", "2"}});
  EXPECT_EQ(d.uuids, (std::vector<std::string>{emulated(2)}));
  EXPECT_EQ(d.source, "SLURM_STEP_GPUS=2");
  d = driven_with({{"SLURM_JOB_GPUS", "0,3"}});
  EXPECT_EQ(d.uuids, (std::vector<std::string>{emulated(0), emulated(3)}));
}

TEST(HandedDownPool, InsideASlurmStepCudaVisibleDevicesWins) {
  Driven d = driven_with({{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "1"}});
  EXPECT_EQ(d.uuids, (std::vector<std::string>{emulated(1)}));
  EXPECT_EQ(d.source, "CUDA_VISIBLE_DEVICES=1");
}

TEST(HandedDownPool, KubernetesNvidiaVisibleDevices) {
  EXPECT_EQ(driven_with({{"NVIDIA_VISIBLE_DEVICES", "all"}}).uuids.size(), 4u);
  EXPECT_TRUE(driven_with({{"NVIDIA_VISIBLE_DEVICES", "none"}}).uuids.empty());
  EXPECT_TRUE(driven_with({{"NVIDIA_VISIBLE_DEVICES", "void"}}).uuids.empty());
  const std::string one = emulated(3);
  EXPECT_EQ(driven_with({{"NVIDIA_VISIBLE_DEVICES", one.c_str()}}).uuids,
            (std::vector<std::string>{one}));
}

TEST(HandedDownPool, MissingDeviceRefusedAtCreationByName) {
  Handed handed(Settings{{"CUDA_VISIBLE_DEVICES", "1,7"}});
  gf_pool_config config = host_config(1, 4);
  gf_pool *pool = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_NOT_FOUND, gf_pool_create(&pool, &config));
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(m.find("CUDA_VISIBLE_DEVICES='1,7' names device '7', which does not exist"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("4 emulated devices"), std::string::npos) << m;
}

TEST(HandedDownPool, GarbageRefusedAtCreationByName) {
  Handed handed(Settings{{"SLURM_JOB_GPUS", "gpu:2"}});
  gf_pool_config config = host_config(1, 4);
  gf_pool *pool = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_create(&pool, &config));
  EXPECT_NE(m.find("SLURM_JOB_GPUS='gpu:2': entry 'gpu:2'"), std::string::npos) << m;
}

// A GPU node hands its list down to everything it starts (the NVIDIA container runtime sets
// NVIDIA_VISIBLE_DEVICES=0 in every process of the container): a CPU-only pool, no emulated
// devices, names none of those GPUs and still starts, and runs its tasks.
TEST(HandedDownPool, ACpuOnlyPoolStartsWhateverGpusTheNodeHandsDown) {
  for (const Settings &settings :
       {Settings{{"NVIDIA_VISIBLE_DEVICES", "0"}}, Settings{{"CUDA_VISIBLE_DEVICES", "3,5"}},
        Settings{{"SLURM_STEP_GPUS", "1"}}}) {
    Handed handed(settings);
    Pool pool = make_pool(host_config(1, -1));
    ASSERT_TRUE(pool) << settings.front().first;
    uint32_t count = 99;
    EXPECT_EQ(gf_pool_device_count(&count, pool.get()), GF_OK);
    EXPECT_EQ(count, 0u) << settings.front().first;
    Graph g = make_graph();
    TaskSpec t;
    t.name = "on-a-cpu";
    t.cpu = [](gf_task_ctx *) { return 0; };
    must_add_task(g.get(), t);
    RunPtr run(submit(pool.get(), g.get()));
    GF_EXPECT_OK(gf_run_wait(run.get(), 30000));
  }
}

// A GPU task of the pool runs on a device it was handed, and sees it numbered from 0.
TEST(HandedDownPool, TasksRunOnTheHandedDevicesOnly) {
  Handed handed(Settings{{"CUDA_VISIBLE_DEVICES", "3"}});
  Pool pool = make_pool(host_config(1, 4));
  ASSERT_TRUE(pool);
  Graph g = make_graph();
  TaskSpec t;
  t.name = "on-gpu";
  t.gpu = [](gf_task_ctx *ctx) { return task_env(ctx).device == 0 ? 0 : 1; };
  must_add_task(g.get(), t);
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 30000));
}

}  // namespace
