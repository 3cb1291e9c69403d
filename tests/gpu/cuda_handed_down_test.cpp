// Real GPUs handed down (issue 28): a CUDA pool drives exactly the devices CUDA_VISIBLE_DEVICES,
// Slurm or Kubernetes name, and refuses a list naming one that does not exist. Each test runs in
// a process of its own (ctest), so CUDA_VISIBLE_DEVICES can be set before the runtime starts.
// Skips, saying why, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {
using namespace gft;

const char *const kVariables[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "NVIDIA_VISIBLE_DEVICES"};

// Creates a CUDA pool; on failure `error` holds the message.
Pool cuda_pool(std::string &error) {
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = GF_BACKEND_CUDA;
  c.cpu_workers = 1;
  gf_pool *p = nullptr;
  if (gf_pool_create(&p, &c) != GF_OK) error = last_error();
  return Pool(p);
}

std::vector<std::string> uuids_of(const gf_pool *pool) {
  uint32_t n = 0;
  EXPECT_EQ(gf_pool_device_count(&n, pool), GF_OK);
  std::vector<std::string> out;
  for (uint32_t d = 0; d < n; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    EXPECT_EQ(gf_pool_device_info(&info, pool, d), GF_OK);
    out.push_back(info.uuid);
  }
  return out;
}

std::string source_of(const gf_pool *pool) {
  const char *source = nullptr;
  EXPECT_EQ(gf_pool_devices_source(&source, pool), GF_OK);
  return source ? source : "<null>";
}

#define SKIP_WITHOUT_GPU(error)                             \
  if ((error).find("no usable GPU") != std::string::npos || \
      (error).find("no CUDA backend") != std::string::npos) \
  GTEST_SKIP() << (error)

TEST(CudaHandedDown, SlurmAndKubernetesListsPickAmongWhatCudaShows) {
  unsetenv("CUDA_VISIBLE_DEVICES");
  for (const char *v : kVariables) unsetenv(v);
  std::string error;
  std::vector<std::string> node;
  {
    Pool all = cuda_pool(error);
    SKIP_WITHOUT_GPU(error);
    ASSERT_TRUE(all) << error;
    node = uuids_of(all.get());
    EXPECT_EQ(source_of(all.get()), "all the node shows");
  }
  ASSERT_FALSE(node.empty());
  const std::string last = std::to_string(node.size() - 1);
  setenv("SLURM_STEP_GPUS", last.c_str(), 1);
  {
    Pool step = cuda_pool(error);
    ASSERT_TRUE(step) << error;
    EXPECT_EQ(uuids_of(step.get()), (std::vector<std::string>{node.back()}));
    EXPECT_EQ(source_of(step.get()), "SLURM_STEP_GPUS=" + last);
  }
  unsetenv("SLURM_STEP_GPUS");
  const std::string prefix = node.front().substr(0, 12);  // "GPU-" and 8 hex digits
  setenv("NVIDIA_VISIBLE_DEVICES", prefix.c_str(), 1);
  {
    Pool k8s = cuda_pool(error);
    ASSERT_TRUE(k8s) << error;
    EXPECT_EQ(uuids_of(k8s.get()), (std::vector<std::string>{node.front()}));
  }
  unsetenv("NVIDIA_VISIBLE_DEVICES");
  // One more entry than CUDA shows devices, the last one missing: refused, naming it.
  std::string list;
  for (size_t d = 0; d < node.size(); ++d) list += std::to_string(d) + ",";
  const std::string missing = std::to_string(node.size() + 5);
  list += missing;
  setenv("SLURM_JOB_GPUS", list.c_str(), 1);
  gf_pool_config c = GF_POOL_CONFIG_INIT;
  c.backend = GF_BACKEND_CUDA;
  c.cpu_workers = 1;
  gf_pool *p = nullptr;
  std::string m = GF_EXPECT_STATUS(GF_ERR_NOT_FOUND, gf_pool_create(&p, &c));
  EXPECT_NE(m.find("SLURM_JOB_GPUS='" + list + "' names device '" + missing + "'"),
            std::string::npos)
      << m;
  unsetenv("SLURM_JOB_GPUS");
}

TEST(CudaHandedDown, CudaVisibleDevicesIsWhatTheRuntimeShows) {
  for (const char *v : kVariables) unsetenv(v);
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  setenv("SLURM_STEP_GPUS", "5,6", 1);  // a step's node numbers: CUDA_VISIBLE_DEVICES wins
  std::string error;
  Pool pool = cuda_pool(error);
  SKIP_WITHOUT_GPU(error);
  ASSERT_TRUE(pool) << error;
  EXPECT_EQ(uuids_of(pool.get()).size(), 1u);
  EXPECT_EQ(source_of(pool.get()), "CUDA_VISIBLE_DEVICES=0");
}

TEST(CudaHandedDown, CudaVisibleDevicesNamingAMissingDeviceIsRefused) {
  for (const char *v : kVariables) unsetenv(v);
  setenv("CUDA_VISIBLE_DEVICES", "0,77", 1);
  std::string error;
  Pool pool = cuda_pool(error);
  SKIP_WITHOUT_GPU(error);
  EXPECT_FALSE(pool);
  EXPECT_NE(error.find("CUDA_VISIBLE_DEVICES='0,77' names device '77', which does not exist"),
            std::string::npos)
      << error;
}

}  // namespace
