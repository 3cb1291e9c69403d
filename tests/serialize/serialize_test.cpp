// Graphs as documents: everything a graph holds survives binary and JSON round trips; what cannot
// be written is refused naming the culprit; deserialized graphs run.
#include <cstring>
#include <string>

#include "../api/test_support.hpp"

using namespace gft;

namespace {

struct Bytes {
  gf_bytes b{nullptr, 0};
  ~Bytes() { gf_bytes_free(&b); }
  std::string str() const { return std::string(static_cast<const char *>(b.data), b.size); }
};

std::string serialize(gf_graph *g, gf_graph_format format) {
  Bytes out;
  gf_status s = gf_graph_serialize(&out.b, g, format);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return out.str();
}

Graph deserialize(const std::string &bytes, gf_graph_format format = GF_GRAPH_FORMAT_AUTO,
                  uint32_t flags = 0) {
  gf_graph *g = nullptr;
  gf_status s = gf_graph_deserialize(&g, bytes.data(), bytes.size(), format, flags);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return Graph(g);
}

gf_task add(gf_graph *g, gf_task_desc d) {
  gf_task t{0};
  gf_status s = gf_graph_add_task(&t, g, &d);
  EXPECT_EQ(s, GF_OK) << describe(s);
  return t;
}

// A graph with one of everything a document can hold.
Graph rich_graph() {
  Graph g = make_graph();
  gf_data literal, text, produced, value, kept;
  const unsigned char raw[] = {0, 1, 2, 254, 255};
  GF_EXPECT_OK(gf_graph_add_host_buffer(&literal, g.get(), "raw", raw, sizeof raw, 0));
  GF_EXPECT_OK(gf_graph_add_host_buffer(&text, g.get(), "params", "1 2 3", 5, 0));
  gf_buffer_desc b = GF_BUFFER_DESC_INIT;
  b.name = "mid";
  b.size = 4096;
  GF_EXPECT_OK(gf_graph_add_buffer(&produced, g.get(), &b));
  GF_EXPECT_OK(gf_graph_add_value(&value, g.get(), "obj", 77, 0));
  b.name = "result";
  b.size = 0;
  b.flags = GF_DATA_KEEP;
  GF_EXPECT_OK(gf_graph_add_buffer(&kept, g.get(), &b));

  gf_resource gpu[] = {{"GPU", 0.5}, {"gpu_memory", 1e6}};
  gf_data in1[] = {literal, text};
  gf_data out1[] = {produced, value};
  gf_task_desc k = GF_TASK_DESC_INIT;
  k.name = "produce";
  k.kernel = "lib.produce";
  k.resources = gpu;
  k.resource_count = 2;
  k.priority = -3;
  k.retries = 2;
  k.inputs = in1;
  k.input_count = 2;
  k.outputs = out1;
  k.output_count = 2;
  gf_task first = add(g.get(), k);

  const char *argv[] = {"sh", "-c", "echo \"quoted\" \\ and\ttab"};
  const char *env[] = {"A=1", "B=two words"};
  gf_command_desc c = GF_COMMAND_DESC_INIT;
  c.argv = argv;
  c.argc = 3;
  c.env = env;
  c.env_count = 2;
  c.working_dir = "/tmp";
  c.timeout_s = 2.5;
  c.log_dir = "/tmp/logs";
  gf_resource label = {"bigmem", 1};
  gf_data in2[] = {produced, value};
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.command = &c;
  t.resources = &label;
  t.resource_count = 1;
  t.inputs = in2;
  t.input_count = 2;
  t.outputs = &kept;
  t.output_count = 1;
  t.after = &first;
  t.after_count = 1;
  gf_task second = add(g.get(), t);

  gf_task_desc last = GF_TASK_DESC_INIT;
  last.name = "ünïcode name";
  last.kernel = "lib.noop";
  gf_task third = add(g.get(), last);
  GF_EXPECT_OK(gf_graph_add_dependency(g.get(), third, second));
  GF_EXPECT_OK(gf_graph_add_dependency(g.get(), third, first));
  GF_EXPECT_OK(gf_graph_set_metadata(g.get(), "workflow", "demo"));
  GF_EXPECT_OK(gf_graph_set_metadata(g.get(), "empty", ""));
  return g;
}

}  // namespace

TEST(Serialize, BinaryRoundTripIsLossless) {
  Graph g = rich_graph();
  std::string first = serialize(g.get(), GF_GRAPH_FORMAT_BINARY);
  ASSERT_GT(first.size(), 8u);
  EXPECT_EQ(first.substr(4, 4), "GFLW");
  Graph back = deserialize(first, GF_GRAPH_FORMAT_BINARY);
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_BINARY), first);
  uint64_t tasks = 0, data = 0;
  GF_EXPECT_OK(gf_graph_task_count(&tasks, back.get()));
  GF_EXPECT_OK(gf_graph_data_count(&data, back.get()));
  EXPECT_EQ(tasks, 3u);
  EXPECT_EQ(data, 5u);
  uint32_t meta = 0;
  GF_EXPECT_OK(gf_graph_metadata_count(&meta, back.get()));
  ASSERT_EQ(meta, 2u);
  const char *key = nullptr, *value = nullptr;
  GF_EXPECT_OK(gf_graph_metadata_get(&key, &value, back.get(), 0));
  EXPECT_STREQ(key, "workflow");
  EXPECT_STREQ(value, "demo");
}

TEST(Serialize, JsonRoundTripIsLosslessAndReadable) {
  Graph g = rich_graph();
  std::string json = serialize(g.get(), GF_GRAPH_FORMAT_JSON);
  EXPECT_NE(json.find("\"kernel\": \"lib.produce\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"text\": \"1 2 3\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"timeout_s\": 2.5"), std::string::npos) << json;
  Graph back = deserialize(json);  // detected as JSON
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_JSON), json);
  // JSON and binary describe the same graph.
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_BINARY),
            serialize(g.get(), GF_GRAPH_FORMAT_BINARY));
}

TEST(Serialize, BorrowedHostBytesAreWrittenAndCopiedBack) {
  Graph g = make_graph();
  std::string bytes(1000, 'x');
  bytes[10] = '\0';
  gf_data d;
  GF_ASSERT_OK(gf_graph_add_host_buffer(&d, g.get(), "big", bytes.data(), bytes.size(),
                                        GF_HOST_BUFFER_BORROW));
  std::string doc = serialize(g.get(), GF_GRAPH_FORMAT_BINARY);
  Graph back = deserialize(doc);
  bytes.assign(bytes.size(), 'y');  // the document, not the caller's memory, holds them now
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_BINARY), doc);
}

TEST(Serialize, CallbackBodiesAndHostValuesCannotBeWritten) {
  Graph g = make_graph();
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "native";
  t.cpu_fn = [](gf_task_ctx *, void *) { return 0; };
  add(g.get(), t);
  Bytes out;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                                   gf_graph_serialize(&out.b, g.get(), GF_GRAPH_FORMAT_JSON));
  EXPECT_NE(m.find("task 'native' has a C callback body"), std::string::npos) << m;
  EXPECT_EQ(out.b.data, nullptr);

  Graph h = make_graph();
  gf_data v;
  GF_ASSERT_OK(gf_graph_add_host_value(&v, h.get(), "pyobj", nullptr, nullptr, 8));
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                       gf_graph_serialize(&out.b, h.get(), GF_GRAPH_FORMAT_BINARY));
  EXPECT_NE(m.find("data 'pyobj' is an opaque host value"), std::string::npos) << m;
}

TEST(Serialize, BodyKindsAreExclusive) {
  Graph g = make_graph();
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "both";
  t.kernel = "k";
  t.cpu_fn = [](gf_task_ctx *, void *) { return 0; };
  gf_task out;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&out, g.get(), &t));
  EXPECT_NE(m.find("more than one kind of body"), std::string::npos) << m;
  t.cpu_fn = nullptr;
  t.kernel = "bad name!";
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&out, g.get(), &t));
  EXPECT_NE(m.find("kernel 'bad name!'"), std::string::npos) << m;
}

TEST(Serialize, OlderTaskDescSizeIsAccepted) {
  Graph g = make_graph();
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.struct_size = offsetof(gf_task_desc, kernel);  // a caller built before the kernel field
  t.cpu_fn = [](gf_task_ctx *, void *) { return 0; };
  gf_task out;
  GF_EXPECT_OK(gf_graph_add_task(&out, g.get(), &t));
}

TEST(Serialize, DeserializedGraphIsFrozenUnlessMutable) {
  Graph g = rich_graph();
  std::string doc = serialize(g.get(), GF_GRAPH_FORMAT_BINARY);
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.kernel = "more";
  gf_task out;
  Graph frozen = deserialize(doc);
  GF_EXPECT_STATUS(GF_ERR_STATE, gf_graph_add_task(&out, frozen.get(), &t));
  Graph open = deserialize(doc, GF_GRAPH_FORMAT_AUTO, GF_DESERIALIZE_MUTABLE);
  GF_EXPECT_OK(gf_graph_add_task(&out, open.get(), &t));
}

TEST(Serialize, DeserializedKernelGraphRunsAndResultsAreReachable) {
  Pool pool = make_pool(host_config(2, 2));
  gf_kernel_desc k = GF_KERNEL_DESC_INIT;
  k.name = "t.add1";
  k.cpu_fn = [](gf_task_ctx *ctx, void *) {
    const void *in;
    uint64_t size;
    void *out;
    if (gf_task_ctx_input(&in, &size, ctx, 0) != GF_OK) return 1;
    if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
    int64_t v;
    std::memcpy(&v, in, 8);
    v += 1;
    std::memcpy(out, &v, 8);
    return 0;
  };
  GF_ASSERT_OK(gf_pool_register_kernel(pool.get(), &k));
  const char *json = R"({"data": [{"name": "x", "bytes": [41, 0, 0, 0, 0, 0, 0, 0]},
                                   {"name": "y", "size": 8, "keep": true}],
                         "tasks": [{"name": "inc", "kernel": "t.add1",
                                    "inputs": [0], "outputs": [1]}]})";
  Graph g = deserialize(json);
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 10000));
  gf_data y;
  GF_ASSERT_OK(gf_graph_data_at(&y, g.get(), 1));
  int64_t value = 0;
  uint64_t size = 0;
  GF_ASSERT_OK(gf_run_fetch(&size, run.get(), y, &value, sizeof value));
  EXPECT_EQ(value, 42);
}

TEST(Serialize, EventsReportEveryAttemptWithItsWorker) {
  Pool pool = make_pool(host_config(1, 1));
  struct Seen {
    std::atomic<int> started{0}, finished{0}, ok{0};
  } seen;
  GF_ASSERT_OK(gf_pool_set_event_callback(
      pool.get(),
      [](const gf_event *e, void *p) {
        auto &s = *static_cast<Seen *>(p);
        EXPECT_EQ(e->struct_size, sizeof(gf_event));
        if (e->kind == GF_EVENT_TASK_STARTED) s.started++;
        if (e->kind == GF_EVENT_TASK_FINISHED) s.finished++, s.ok += e->ok;
      },
      &seen));
  Graph g = make_graph();
  for (int i = 0; i < 5; ++i) {
    gf_task_desc t = GF_TASK_DESC_INIT;
    t.cpu_fn = [](gf_task_ctx *, void *) { return 0; };
    add(g.get(), t);
  }
  RunPtr run(submit(pool.get(), g.get()));
  GF_ASSERT_OK(gf_run_wait(run.get(), 10000));
  GF_ASSERT_OK(gf_pool_set_event_callback(pool.get(), nullptr, nullptr));
  EXPECT_EQ(seen.started.load(), 5);
  EXPECT_EQ(seen.finished.load(), 5);
  EXPECT_EQ(seen.ok.load(), 5);
}

TEST(Serialize, CostKeysRoundTripAndOnlyGivenKeysAreWritten) {
  Graph g = make_graph();
  gf_task_desc t = GF_TASK_DESC_INIT;
  t.name = "a-1";
  t.kernel = "lib.a";
  t.cost_key = "kind \xc3\xa9";
  add(g.get(), t);
  t.name = "b-2";  // derived key "b": not written
  t.kernel = "lib.b";
  t.cost_key = nullptr;
  add(g.get(), t);
  t.name = nullptr;
  t.kernel = "lib.c";
  t.cost_key = "kind \xc3\xa9";
  add(g.get(), t);

  std::string json = serialize(g.get(), GF_GRAPH_FORMAT_JSON);
  size_t count = 0;
  for (size_t at = json.find("\"cost_key\""); at != std::string::npos;
       at = json.find("\"cost_key\"", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 2u) << json;
  Graph from_json = deserialize(json);
  EXPECT_EQ(serialize(from_json.get(), GF_GRAPH_FORMAT_JSON), json);
  std::string binary = serialize(g.get(), GF_GRAPH_FORMAT_BINARY);
  Graph from_binary = deserialize(binary, GF_GRAPH_FORMAT_BINARY);
  EXPECT_EQ(serialize(from_binary.get(), GF_GRAPH_FORMAT_BINARY), binary);
  EXPECT_EQ(serialize(from_json.get(), GF_GRAPH_FORMAT_BINARY), binary);
  EXPECT_EQ(serialize(from_binary.get(), GF_GRAPH_FORMAT_JSON), json);
}

TEST(Serialize, DocumentsWithoutCostKeysStayReadableAndBadKeysAreRejected) {
  const std::string old_doc = R"({"format_version": 1, "tasks": [{"name": "x-1", "kernel": "k"}]})";
  Graph g = deserialize(old_doc);
  EXPECT_EQ(serialize(g.get(), GF_GRAPH_FORMAT_JSON).find("cost_key"), std::string::npos);

  const std::string bad =
      R"({"format_version": 1, "tasks": [{"name": "x-1", "kernel": "k", "cost_key": ""}]})";
  gf_graph *out = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_INVALID_GRAPH,
                       gf_graph_deserialize(&out, bad.data(), bad.size(), GF_GRAPH_FORMAT_AUTO, 0));
  EXPECT_NE(m.find("task 'x-1' has cost_key"), std::string::npos) << m;
  EXPECT_EQ(out, nullptr);
}
