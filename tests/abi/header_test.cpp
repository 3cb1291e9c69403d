// header_test.cpp: gpuflow.h from C++ — INIT macros match the init functions, layout rules of the
// ABI (struct_size first, fixed enum values), version and status names.
#include <gpuflow.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include "test_support.hpp"

namespace {

static_assert(offsetof(gf_pool_config, struct_size) == 0);
static_assert(offsetof(gf_worker_info, struct_size) == 0);
static_assert(offsetof(gf_ledger_entry, struct_size) == 0);
static_assert(offsetof(gf_buffer_desc, struct_size) == 0);
static_assert(offsetof(gf_task_desc, struct_size) == 0);
static_assert(offsetof(gf_submit_options, struct_size) == 0);
static_assert(offsetof(gf_run_stats, struct_size) == 0);
static_assert(offsetof(gf_task_env, struct_size) == 0);
static_assert(sizeof(gf_task) == sizeof(uint64_t) && sizeof(gf_data) == sizeof(uint64_t));
static_assert(sizeof(gf_status) == 4 && sizeof(gf_run_state) == 4 && sizeof(gf_task_state) == 4);
static_assert(std::is_trivially_copyable_v<gf_task_desc>);
static_assert(GF_OK == 0 && GF_TIMEOUT == 1 && GF_ERR_INVALID_ARGUMENT == -1 &&
              GF_ERR_INTERNAL == -14);
static_assert(GF_VERSION ==
              GF_VERSION_ENCODE(GF_VERSION_MAJOR, GF_VERSION_MINOR, GF_VERSION_PATCH));

template <class T>
bool same_field(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

TEST(Header, PoolConfigInitMatchesFunction) {
  gf_pool_config m = GF_POOL_CONFIG_INIT;
  gf_pool_config f;
  std::memset(&f, 0x5A, sizeof f);
  gf_pool_config_init(&f, sizeof f);
  EXPECT_EQ(m.struct_size, sizeof(gf_pool_config));
  EXPECT_TRUE(same_field(m.struct_size, f.struct_size));
  EXPECT_TRUE(same_field(m.backend, f.backend));
  EXPECT_TRUE(same_field(m.cpu_workers, f.cpu_workers));
  EXPECT_TRUE(same_field(m.emulated_devices, f.emulated_devices));
  EXPECT_TRUE(same_field(m.emulated_device_memory, f.emulated_device_memory));
  EXPECT_TRUE(same_field(m.emulated_bandwidth, f.emulated_bandwidth));
  EXPECT_TRUE(same_field(m.gpu_worker_threads, f.gpu_worker_threads));
  EXPECT_TRUE(same_field(m.cpu_worker_labels, f.cpu_worker_labels));
  EXPECT_TRUE(same_field(m.cpu_worker_label_count, f.cpu_worker_label_count));
  EXPECT_TRUE(same_field(m.gpu_worker_labels, f.gpu_worker_labels));
  EXPECT_TRUE(same_field(m.gpu_worker_label_count, f.gpu_worker_label_count));
}

TEST(Header, BufferDescInitMatchesFunction) {
  gf_buffer_desc m = GF_BUFFER_DESC_INIT;
  gf_buffer_desc f;
  std::memset(&f, 0x5A, sizeof f);
  gf_buffer_desc_init(&f, sizeof f);
  EXPECT_EQ(m.struct_size, sizeof(gf_buffer_desc));
  EXPECT_TRUE(same_field(m.struct_size, f.struct_size));
  EXPECT_TRUE(same_field(m.name, f.name));
  EXPECT_TRUE(same_field(m.size, f.size));
  EXPECT_TRUE(same_field(m.flags, f.flags));
}

TEST(Header, TaskDescInitMatchesFunction) {
  gf_task_desc m = GF_TASK_DESC_INIT;
  gf_task_desc f;
  std::memset(&f, 0x5A, sizeof f);
  gf_task_desc_init(&f, sizeof f);
  EXPECT_EQ(m.struct_size, sizeof(gf_task_desc));
  EXPECT_TRUE(same_field(m.struct_size, f.struct_size));
  EXPECT_TRUE(same_field(m.name, f.name));
  EXPECT_TRUE(same_field(m.cpu_fn, f.cpu_fn));
  EXPECT_TRUE(same_field(m.gpu_fn, f.gpu_fn));
  EXPECT_TRUE(same_field(m.user_data, f.user_data));
  EXPECT_TRUE(same_field(m.user_data_destroy, f.user_data_destroy));
  EXPECT_TRUE(same_field(m.resources, f.resources));
  EXPECT_TRUE(same_field(m.resource_count, f.resource_count));
  EXPECT_TRUE(same_field(m.priority, f.priority));
  EXPECT_TRUE(same_field(m.retries, f.retries));
  EXPECT_TRUE(same_field(m.inputs, f.inputs));
  EXPECT_TRUE(same_field(m.input_count, f.input_count));
  EXPECT_TRUE(same_field(m.outputs, f.outputs));
  EXPECT_TRUE(same_field(m.output_count, f.output_count));
  EXPECT_TRUE(same_field(m.after, f.after));
  EXPECT_TRUE(same_field(m.after_count, f.after_count));
}

TEST(Header, SubmitOptionsInitMatchesFunction) {
  gf_submit_options m = GF_SUBMIT_OPTIONS_INIT;
  gf_submit_options f;
  std::memset(&f, 0x5A, sizeof f);
  gf_submit_options_init(&f, sizeof f);
  EXPECT_EQ(m.struct_size, sizeof(gf_submit_options));
  EXPECT_TRUE(same_field(m.struct_size, f.struct_size));
  EXPECT_TRUE(same_field(m.on_complete, f.on_complete));
  EXPECT_TRUE(same_field(m.user_data, f.user_data));
}

TEST(Header, OutputStructInitMacrosSetStructSize) {
  gf_worker_info wi = GF_WORKER_INFO_INIT;
  gf_ledger_entry le = GF_LEDGER_ENTRY_INIT;
  gf_run_stats rs = GF_RUN_STATS_INIT;
  gf_task_env te = GF_TASK_ENV_INIT;
  EXPECT_EQ(wi.struct_size, sizeof(gf_worker_info));
  EXPECT_EQ(le.struct_size, sizeof(gf_ledger_entry));
  EXPECT_EQ(rs.struct_size, sizeof(gf_run_stats));
  EXPECT_EQ(te.struct_size, sizeof(gf_task_env));
}

TEST(Header, VersionMatchesHeader) {
  EXPECT_EQ(gf_version(), static_cast<uint32_t>(GF_VERSION));
  const char *s = gf_version_string();
  ASSERT_NE(s, nullptr);
  const std::string expected = std::to_string(GF_VERSION_MAJOR) + "." +
                               std::to_string(GF_VERSION_MINOR) + "." +
                               std::to_string(GF_VERSION_PATCH);
  EXPECT_EQ(std::string(s), expected);
}

TEST(Header, StatusNames) {
  const struct {
    gf_status status;
    const char *name;
  } cases[] = {
      {GF_OK, "GF_OK"},
      {GF_TIMEOUT, "GF_TIMEOUT"},
      {GF_ERR_INVALID_ARGUMENT, "GF_ERR_INVALID_ARGUMENT"},
      {GF_ERR_INVALID_HANDLE, "GF_ERR_INVALID_HANDLE"},
      {GF_ERR_STRUCT_SIZE, "GF_ERR_STRUCT_SIZE"},
      {GF_ERR_VERSION_MISMATCH, "GF_ERR_VERSION_MISMATCH"},
      {GF_ERR_INVALID_GRAPH, "GF_ERR_INVALID_GRAPH"},
      {GF_ERR_INFEASIBLE, "GF_ERR_INFEASIBLE"},
      {GF_ERR_OUT_OF_MEMORY, "GF_ERR_OUT_OF_MEMORY"},
      {GF_ERR_TASK_FAILED, "GF_ERR_TASK_FAILED"},
      {GF_ERR_CANCELLED, "GF_ERR_CANCELLED"},
      {GF_ERR_STATE, "GF_ERR_STATE"},
      {GF_ERR_NOT_FOUND, "GF_ERR_NOT_FOUND"},
      {GF_ERR_SHUT_DOWN, "GF_ERR_SHUT_DOWN"},
      {GF_ERR_SYSTEM, "GF_ERR_SYSTEM"},
      {GF_ERR_INTERNAL, "GF_ERR_INTERNAL"},
  };
  for (const auto &c : cases) {
    const char *n = gf_status_name(c.status);
    ASSERT_NE(n, nullptr) << c.name;
    EXPECT_STREQ(n, c.name);
  }
  // An unknown value still gets a (non-null) name rather than a crash.
  EXPECT_NE(gf_status_name(static_cast<gf_status>(-999)), nullptr);
  EXPECT_NE(gf_status_name(static_cast<gf_status>(12345)), nullptr);
}

TEST(Header, LastErrorIsEmptyAfterSuccessAndNeverNull) {
  ASSERT_NE(gf_last_error(), nullptr);
  gf_graph *g = nullptr;
  ASSERT_EQ(gf_graph_create(&g), GF_OK);
  ASSERT_NE(gf_last_error(), nullptr);
  EXPECT_STREQ(gf_last_error(), "");
  gf_graph_destroy(g);
}

}  // namespace

// A binding built against an older, shorter layout: the init function must not write past it.
TEST(Header, InitFunctionsNeverWritePastTheCallersStruct) {
  unsigned char buffer[sizeof(gf_task_desc) + 16];
  std::memset(buffer, 0xEE, sizeof buffer);
  const uint32_t older = 24;  // a prefix of the struct, as an old header would have it
  gf_task_desc_init(reinterpret_cast<gf_task_desc *>(buffer), older);
  uint32_t written = 0;
  std::memcpy(&written, buffer, sizeof written);
  EXPECT_EQ(written, older);
  for (size_t i = older; i < sizeof buffer; ++i) ASSERT_EQ(buffer[i], 0xEE) << "byte " << i;
  gf_pool_config_init(nullptr, sizeof(gf_pool_config));  // NULL is ignored
}
