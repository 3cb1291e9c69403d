// Named kernels: registered through the ABI or by plugins; plugin load errors name the path.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "test_support.hpp"

using namespace gft;

namespace {

std::string plugin(const char *name) {
  return std::string(GF_TEST_PLUGIN_DIR) + "/test_plugin_" + name + ".so";
}

int set_seven(gf_task_ctx *ctx, void *) {
  void *out;
  if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
  int64_t v = 7;
  std::memcpy(out, &v, 8);
  return 0;
}

}  // namespace

TEST(Kernels, PluginKernelRunsByName) {
  Pool pool = make_pool(host_config(1, 1));
  GF_ASSERT_OK(gf_pool_load_plugin(pool.get(), plugin("good").c_str()));
  uint32_t count = 0;
  GF_ASSERT_OK(gf_pool_kernel_count(&count, pool.get()));
  ASSERT_EQ(count, 1u);
  const char *name = nullptr;
  GF_ASSERT_OK(gf_pool_kernel_name(&name, pool.get(), 0));
  EXPECT_STREQ(name, "test.double");

  Graph g = make_graph();
  int64_t x = 21;
  gf_data in, out;
  GF_ASSERT_OK(gf_graph_add_host_buffer(&in, g.get(), "x", &x, 8, 0));
  out = must_add_buffer(g.get(), "y", 8, GF_DATA_KEEP);
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.kernel = "test.double";
  t.inputs = &in;
  t.input_count = 1;
  t.outputs = &out;
  t.output_count = 1;
  gf_task task;
  GF_ASSERT_OK(gf_graph_add_task(&task, g.get(), &t));
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 10000));
  int64_t y = 0;
  uint64_t size;
  GF_ASSERT_OK(gf_run_fetch(&size, run.get(), out, &y, 8));
  EXPECT_EQ(y, 42);
}

TEST(Kernels, PluginLoadErrorsNameThePath) {
  Pool pool = make_pool(host_config(1, -1));
  std::string missing = plugin("does_not_exist");
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_NOT_FOUND, gf_pool_load_plugin(pool.get(), missing.c_str()));
  EXPECT_NE(m.find(missing), std::string::npos) << m;
  EXPECT_NE(m.find("no such file"), std::string::npos) << m;

  m = GF_EXPECT_STATUS(GF_ERR_NOT_FOUND,
                       gf_pool_load_plugin(pool.get(), plugin("noentry").c_str()));
  EXPECT_NE(m.find(plugin("noentry")), std::string::npos) << m;
  EXPECT_NE(m.find("does not export the entry point gf_plugin_describe"), std::string::npos) << m;

  m = GF_EXPECT_STATUS(GF_ERR_VERSION_MISMATCH,
                       gf_pool_load_plugin(pool.get(), plugin("badabi").c_str()));
  EXPECT_NE(m.find(plugin("badabi")), std::string::npos) << m;
  EXPECT_NE(m.find("plugin ABI version 999"), std::string::npos) << m;

  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                       gf_pool_load_plugin(pool.get(), plugin("failinit").c_str()));
  EXPECT_NE(m.find("no license for this kernel"), std::string::npos) << m;

  // A C++ plugin whose init throws: a load error naming the path and what() (the kernel it
  // registered before throwing stays registered, as with any init that fails part way).
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                       gf_pool_load_plugin(pool.get(), plugin("throwinit").c_str()));
  EXPECT_NE(m.find("plugin '" + plugin("throwinit") + "' (test-throwinit) failed to initialise"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("plugin exploded"), std::string::npos) << m;
  EXPECT_EQ(m.find("internal error"), std::string::npos) << m;

  // Not a shared library at all.
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_load_plugin(pool.get(), "/etc/hostname"));
  EXPECT_NE(m.find("plugin '/etc/hostname': cannot be loaded"), std::string::npos) << m;
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_load_plugin(pool.get(), nullptr));
  // Not a regular file: refused for what it is, never opened (dlopen would wait on a FIFO).
  const std::string fifo = ::testing::TempDir() + "kernels_test_plugin.fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string &path : {fifo, std::string("/dev/zero"), std::string("/tmp")}) {
    m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_load_plugin(pool.get(), path.c_str()));
    EXPECT_NE(m.find("the plugin " + path + " is a"), std::string::npos) << m;
    EXPECT_NE(m.find(", not a regular file"), std::string::npos) << m;
  }
  ::unlink(fifo.c_str());

  uint32_t count = 99;
  GF_ASSERT_OK(gf_pool_kernel_count(&count, pool.get()));
  EXPECT_EQ(count, 1u);  // throwinit.before
}

TEST(Kernels, LoadingTwiceIntoOnePoolIsRefusedButTwoPoolsAreIndependent) {
  Pool a = make_pool(host_config(1, -1));
  Pool b = make_pool(host_config(1, -1));
  GF_ASSERT_OK(gf_pool_load_plugin(a.get(), plugin("good").c_str()));
  GF_ASSERT_OK(gf_pool_load_plugin(b.get(), plugin("good").c_str()));
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                                   gf_pool_load_plugin(a.get(), plugin("good").c_str()));
  EXPECT_NE(m.find("kernel 'test.double' is already registered"), std::string::npos) << m;
}

TEST(Kernels, RegisteredKernelOwnsItsUserData) {
  static std::atomic<int> destroyed{0};
  destroyed = 0;
  {
    Pool pool = make_pool(host_config(1, -1));
    gf_kernel_desc k = GF_KERNEL_DESC_INIT;
    k.name = "seven";
    k.cpu_fn = set_seven;
    k.user_data = &destroyed;
    k.user_data_destroy = [](void *p) { ++*static_cast<std::atomic<int> *>(p); };
    GF_ASSERT_OK(gf_pool_register_kernel(pool.get(), &k));
    gf_kernel_desc dup = k;
    dup.user_data_destroy = nullptr;
    GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_register_kernel(pool.get(), &dup));
    gf_kernel_desc nobody = GF_KERNEL_DESC_INIT;
    nobody.name = "empty";
    GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_pool_register_kernel(pool.get(), &nobody));
    gf_kernel_desc badsize = k;
    badsize.struct_size = 3;
    GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, gf_pool_register_kernel(pool.get(), &badsize));

    Graph g = make_graph();
    gf_data out = must_add_buffer(g.get(), "o", 8, GF_DATA_KEEP);
    gf_task_desc t = GF_TASK_DESC_INIT;
    t.kernel = "seven";
    t.outputs = &out;
    t.output_count = 1;
    gf_task task;
    GF_ASSERT_OK(gf_graph_add_task(&task, g.get(), &t));
    RunPtr run(submit(pool.get(), g.get()));
    GF_ASSERT_OK(gf_run_wait(run.get(), 10000));
    EXPECT_EQ(destroyed.load(), 0);
  }
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(Kernels, KernelWithOnlyAGpuBodyIsInfeasibleWithoutDevices) {
  Pool pool = make_pool(host_config(1, -1));
  gf_kernel_desc k = GF_KERNEL_DESC_INIT;
  k.name = "gpu.only";
  k.gpu_fn = set_seven;
  GF_ASSERT_OK(gf_pool_register_kernel(pool.get(), &k));
  Graph g = make_graph();
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "needs-gpu";
  t.kernel = "gpu.only";
  gf_task task;
  GF_ASSERT_OK(gf_graph_add_task(&task, g.get(), &t));
  std::string m = GF_EXPECT_STATUS(GF_ERR_INFEASIBLE, gf_graph_check(g.get(), pool.get()));
  EXPECT_NE(m.find("needs-gpu"), std::string::npos) << m;
}
