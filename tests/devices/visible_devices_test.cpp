// The lists of devices handed down to a pool (devices/visible_devices.hpp): every format CUDA,
// Slurm and Kubernetes write, their precedence, and refusals that name variable and entry. Pure:
// the environment is a map, the node a list of UUIDs.
#include "devices/visible_devices.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace {
using gf::HandedDown;

using Env = std::map<std::string, std::string>;

HandedDown parse(const Env &env) {
  return gf::handed_down([&env](const char *variable) -> const char * {
    auto it = env.find(variable);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

const std::vector<std::string> kNode = {
    "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
    "GPU-8932aaaa-0000-0000-0000-000000000001",
    "GPU-1c2d3e4f-0000-0000-0000-000000000002",
    "MIG-5b4c3d2e-1111-2222-3333-444455556666",
};
const std::string kNodeWords = "this node shows 4 devices";

std::vector<int> select(const Env &env, const std::vector<std::string> &node = kNode) {
  return gf::select_devices(parse(env), node, kNodeWords);
}

// The message of the gf::Error `call` throws, checked to have `status`.
template <typename Call>
std::string refusal(gf_status status, Call call) {
  try {
    call();
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no refusal";
  return {};
}

TEST(HandedDown, NothingSetIsAllTheNodeShows) {
  HandedDown list = parse({});
  EXPECT_TRUE(list.all);
  EXPECT_EQ(list.source, "all the node shows");
  EXPECT_EQ(select({}), (std::vector<int>{0, 1, 2, 3}));
}

TEST(HandedDown, CudaOrdinalsInTheirOrder) {
  HandedDown list = parse({{"CUDA_VISIBLE_DEVICES", "3, 1"}});
  EXPECT_EQ(list.variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(list.source, "CUDA_VISIBLE_DEVICES=3, 1");
  EXPECT_EQ(select({{"CUDA_VISIBLE_DEVICES", "3, 1"}}), (std::vector<int>{3, 1}));
}

TEST(HandedDown, CudaMinusOneAndEmptyAreNoDevice) {
  EXPECT_TRUE(select({{"CUDA_VISIBLE_DEVICES", "-1"}}).empty());
  EXPECT_TRUE(select({{"CUDA_VISIBLE_DEVICES", ""}}).empty());
  // CUDA ends the list at the first negative ordinal; so does the pool.
  EXPECT_EQ(select({{"CUDA_VISIBLE_DEVICES", "2,-1,0"}}), (std::vector<int>{2}));
}

TEST(HandedDown, CudaUuidsFullAndUniquePrefixes) {
  EXPECT_EQ(select({{"CUDA_VISIBLE_DEVICES", "GPU-1c2d3e4f-0000-0000-0000-000000000002"}}),
            (std::vector<int>{2}));
  EXPECT_EQ(select({{"CUDA_VISIBLE_DEVICES", "GPU-8932f,GPU-1c"}}), (std::vector<int>{0, 2}));
  std::string m = refusal(GF_ERR_INVALID_ARGUMENT, [] {
    select({{"CUDA_VISIBLE_DEVICES", "GPU-8932"}});
  });
  EXPECT_NE(m.find("'GPU-8932' is the start of " + kNode[0] + " and of " + kNode[1]),
            std::string::npos)
      << m;
}

TEST(HandedDown, MigUuidsAreDevicesOfTheirOwn) {
  EXPECT_EQ(select({{"CUDA_VISIBLE_DEVICES", "MIG-5b4c3d2e-1111-2222-3333-444455556666,0"}}),
            (std::vector<int>{3, 0}));
  std::string m = refusal(GF_ERR_NOT_FOUND, [] {
    select({{"CUDA_VISIBLE_DEVICES", "MIG-00000000-1111-2222-3333-444455556666"}});
  });
  EXPECT_NE(m.find("CUDA_VISIBLE_DEVICES='MIG-00000000-1111-2222-3333-444455556666' names device "
                   "'MIG-00000000-1111-2222-3333-444455556666', which does not exist: " +
                   kNodeWords),
            std::string::npos)
      << m;
}

TEST(HandedDown, MissingDeviceIsRefusedByName) {
  std::string m = refusal(GF_ERR_NOT_FOUND, [] { select({{"CUDA_VISIBLE_DEVICES", "1,7"}}); });
  EXPECT_EQ(m, "CUDA_VISIBLE_DEVICES='1,7' names device '7', which does not exist: " + kNodeWords);
  m = refusal(GF_ERR_NOT_FOUND, [] { select({{"CUDA_VISIBLE_DEVICES", "GPU-ffff"}}); });
  EXPECT_NE(m.find("names device 'GPU-ffff'"), std::string::npos) << m;
}

TEST(HandedDown, GarbageAndRepeatsAreRefusedByName) {
  std::string m = refusal(GF_ERR_INVALID_ARGUMENT, [] {
    parse({{"CUDA_VISIBLE_DEVICES", "0,gpu1"}});
  });
  EXPECT_EQ(m,
            "CUDA_VISIBLE_DEVICES='0,gpu1': entry 'gpu1' is neither a device ordinal nor a "
            "device UUID (GPU-… or MIG-…)");
  m = refusal(GF_ERR_INVALID_ARGUMENT, [] { parse({{"SLURM_JOB_GPUS", "1,,2"}}); });
  EXPECT_NE(m.find("SLURM_JOB_GPUS='1,,2': entry ''"), std::string::npos) << m;
  m = refusal(GF_ERR_INVALID_ARGUMENT, [] { parse({{"CUDA_VISIBLE_DEVICES", "1,1"}}); });
  EXPECT_EQ(m, "CUDA_VISIBLE_DEVICES='1,1' names device '1' twice");
  // The same device twice, once by ordinal and once by UUID.
  m = refusal(GF_ERR_INVALID_ARGUMENT, [] { select({{"CUDA_VISIBLE_DEVICES", "2,GPU-1c2d"}}); });
  EXPECT_NE(m.find("names device " + kNode[2] + " twice ('GPU-1c2d')"), std::string::npos) << m;
}

TEST(HandedDown, SlurmStepBeforeJob) {
  EXPECT_EQ(select({{"SLURM_JOB_GPUS", "0,1,2"}}), (std::vector<int>{0, 1, 2}));
  HandedDown list = parse({{"SLURM_JOB_GPUS", "0,1,2"}, {"SLURM_STEP_GPUS", "2"}});
  EXPECT_EQ(list.variable, "SLURM_STEP_GPUS");
  EXPECT_EQ(select({{"SLURM_JOB_GPUS", "0,1,2"}, {"SLURM_STEP_GPUS", "2"}}), (std::vector<int>{2}));
  EXPECT_TRUE(select({{"SLURM_STEP_GPUS", ""}, {"SLURM_JOB_GPUS", "1"}}).empty());
}

TEST(HandedDown, CudaVisibleDevicesWinsOverSlurmAndKubernetes) {
  // Inside a Slurm step Slurm sets both: CUDA_VISIBLE_DEVICES is what the CUDA runtime honours.
  Env step = {{"SLURM_STEP_GPUS", "2,3"},
              {"SLURM_JOB_GPUS", "0,1,2,3"},
              {"CUDA_VISIBLE_DEVICES", "0"},
              {"NVIDIA_VISIBLE_DEVICES", "all"}};
  EXPECT_EQ(parse(step).source, "CUDA_VISIBLE_DEVICES=0");
  EXPECT_EQ(select(step), (std::vector<int>{0}));
  EXPECT_EQ(parse({{"SLURM_JOB_GPUS", "1"}, {"NVIDIA_VISIBLE_DEVICES", "0"}}).variable,
            "SLURM_JOB_GPUS");
}

TEST(HandedDown, SlurmOrdinalsAlreadyAppliedByTheDeviceCgroup) {
  // The step sees only its 2 GPUs, renumbered 0 and 1: the node's 5 and 6 are those.
  const std::vector<std::string> seen = {kNode[0], kNode[2]};
  EXPECT_EQ(select({{"SLURM_STEP_GPUS", "5,6"}}, seen), (std::vector<int>{0, 1}));
  // A list of another length was not applied: its missing device is refused.
  std::string m = refusal(GF_ERR_NOT_FOUND, [&] { select({{"SLURM_STEP_GPUS", "1,6,7"}}, seen); });
  EXPECT_NE(m.find("SLURM_STEP_GPUS='1,6,7' names device '6'"), std::string::npos) << m;
}

TEST(HandedDown, KubernetesAllNoneVoidAndLists) {
  EXPECT_EQ(select({{"NVIDIA_VISIBLE_DEVICES", "all"}}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(select({{"NVIDIA_VISIBLE_DEVICES", "none"}}).empty());
  EXPECT_TRUE(select({{"NVIDIA_VISIBLE_DEVICES", "void"}}).empty());
  EXPECT_TRUE(select({{"NVIDIA_VISIBLE_DEVICES", ""}}).empty());
  EXPECT_EQ(select({{"NVIDIA_VISIBLE_DEVICES", "GPU-1c2d3e4f,1"}}), (std::vector<int>{2, 1}));
  EXPECT_EQ(parse({{"NVIDIA_VISIBLE_DEVICES", "all"}}).source, "NVIDIA_VISIBLE_DEVICES=all");
  std::string m = refusal(GF_ERR_INVALID_ARGUMENT, [] {
    parse({{"NVIDIA_VISIBLE_DEVICES", "everything"}});
  });
  EXPECT_NE(m.find("NVIDIA_VISIBLE_DEVICES='everything': entry 'everything'"), std::string::npos)
      << m;
}

TEST(HandedDown, NamedListsSayTheirSource) {
  HandedDown list = gf::named_devices("the service's", {kNode[2], "GPU-00000000-gone"});
  EXPECT_EQ(list.source, "the service's");
  std::string m = refusal(GF_ERR_NOT_FOUND, [&] { gf::select_devices(list, kNode, kNodeWords); });
  EXPECT_EQ(m, "the service's list names device 'GPU-00000000-gone', which does not exist: " +
                   kNodeWords);
}

}  // namespace
