// What every test process of this project starts with, whatever the shell that ran ctest had: no
// device list handed down by a node, a container runtime or Slurm (cmake/test_environment.cmake),
// so a test's pool of 4 emulated devices has all 4. devices.lists_kept_from_tests runs these
// through ctest with every list set.
#include <gtest/gtest.h>

#include <cstdlib>

#include "test_support.hpp"

namespace {
using namespace gft;

TEST(TestEnvironment, NoHandedDownDeviceListReachesATest) {
  for (const char *variable :
       {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const char *value = std::getenv(variable);
    EXPECT_EQ(value, nullptr) << variable << "=" << (value ? value : "");
  }
}

TEST(TestEnvironment, AnEmulatedPoolHasAllItsDevices) {
  Pool pool = make_pool(host_config(1, 4));
  ASSERT_NE(pool, nullptr);
  uint32_t devices = 0;
  ASSERT_EQ(gf_pool_device_count(&devices, pool.get()), GF_OK);
  EXPECT_EQ(devices, 4u);
}

}  // namespace
