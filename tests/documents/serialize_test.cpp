// Graphs as documents: everything a graph holds survives binary and JSON round trips; what cannot
// be written is refused naming the culprit; deserialized graphs run.
#include <cstring>
#include <string>

#include "test_support.hpp"

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

TEST(Serialize, TextThatIsNotUtf8IsRefusedAtTheAbiNamingTheField) {
  // Every string a graph keeps must be UTF-8, so that every graph that is accepted can be
  // written as JSON too (JSON printing used to fail with GF_ERR_INTERNAL).
  const char *bad = "caf\xe9";             // Latin-1
  const char *surrogate = "\xed\xa0\x80";  // U+D800, not a character
  Graph g = make_graph();
  gf_data d;
  gf_buffer_desc b = GF_BUFFER_DESC_INIT;
  b.name = bad;
  std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_buffer(&d, g.get(), &b));
  EXPECT_NE(m.find("data #0 name is not valid UTF-8 (byte 3 is 0xe9)"), std::string::npos) << m;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_value(&d, g.get(), surrogate, 8, 0));
  EXPECT_NE(m.find("data #0 name is not valid UTF-8 (byte 0 is 0xed)"), std::string::npos) << m;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                       gf_graph_add_host_buffer(&d, g.get(), bad, "x", 1, 0));
  EXPECT_NE(m.find("data #0 name is not valid UTF-8"), std::string::npos) << m;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT,
                       gf_graph_add_host_value(&d, g.get(), bad, nullptr, nullptr, 8));
  EXPECT_NE(m.find("data #0 name is not valid UTF-8"), std::string::npos) << m;

  gf_task t;
  gf_task_desc k = GF_TASK_DESC_INIT;
  k.kernel = "lib.k";
  k.name = bad;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &k));
  EXPECT_NE(m.find("task #0 name is not valid UTF-8 (byte 3 is 0xe9)"), std::string::npos) << m;
  k.name = "good";
  gf_resource r = {bad, 1};
  k.resources = &r;
  k.resource_count = 1;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &k));
  EXPECT_NE(m.find("task 'good': resource #0 name is not valid UTF-8"), std::string::npos) << m;

  const char *argv[] = {"echo", bad};
  const char *env[] = {"A=\xff"};
  gf_command_desc c = GF_COMMAND_DESC_INIT;
  c.argv = argv;
  c.argc = 2;
  gf_task_desc ct = GF_TASK_DESC_INIT;
  ct.name = "cmd";
  ct.command = &c;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &ct));
  EXPECT_NE(m.find("task 'cmd': command argv[1] is not valid UTF-8"), std::string::npos) << m;
  argv[1] = "ok";
  c.env = env;
  c.env_count = 1;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &ct));
  EXPECT_NE(m.find("task 'cmd': command env[0] is not valid UTF-8"), std::string::npos) << m;
  c.env_count = 0;
  c.working_dir = bad;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &ct));
  EXPECT_NE(m.find("task 'cmd': command working_dir is not valid UTF-8"), std::string::npos) << m;
  c.working_dir = nullptr;
  c.log_dir = bad;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_add_task(&t, g.get(), &ct));
  EXPECT_NE(m.find("task 'cmd': command log_dir is not valid UTF-8"), std::string::npos) << m;

  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_set_metadata(g.get(), bad, "v"));
  EXPECT_NE(m.find("metadata key is not valid UTF-8"), std::string::npos) << m;
  m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_set_metadata(g.get(), "k", bad));
  EXPECT_NE(m.find("metadata value of key 'k' is not valid UTF-8"), std::string::npos) << m;

  // Nothing was added, and what a graph does accept is written in both formats.
  uint64_t count = 9;
  GF_ASSERT_OK(gf_graph_task_count(&count, g.get()));
  EXPECT_EQ(count, 0u);
  GF_ASSERT_OK(gf_graph_data_count(&count, g.get()));
  EXPECT_EQ(count, 0u);
  k.name = "caf\xc3\xa9 \xf0\x9f\x9a\x80";  // café 🚀
  k.resource_count = 0;
  add(g.get(), k);
  gf_data latin;
  GF_ASSERT_OK(gf_graph_add_host_buffer(&latin, g.get(), "bytes", bad, 4, 0));  // bytes are bytes
  std::string json = serialize(g.get(), GF_GRAPH_FORMAT_JSON);
  Graph back = deserialize(json);
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_BINARY),
            serialize(g.get(), GF_GRAPH_FORMAT_BINARY));
}

TEST(Serialize, LargeBinaryLiteralsAreBase64InJson) {
  // 1 MiB of binary: one decimal number per byte made 4 MB of JSON; base64 takes 4/3.
  std::string raw(1 << 20, '\0');
  uint32_t x = 12345;
  for (auto &c : raw) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  Graph g = make_graph();
  gf_data d;
  GF_ASSERT_OK(gf_graph_add_host_buffer(&d, g.get(), "blob", raw.data(), raw.size(), 0));
  const unsigned char small[] = {0, 1, 255};
  GF_ASSERT_OK(gf_graph_add_host_buffer(&d, g.get(), "small", small, sizeof small, 0));
  std::string json = serialize(g.get(), GF_GRAPH_FORMAT_JSON);
  EXPECT_LT(json.size(), raw.size() / 3 * 4 + 4096);
  EXPECT_NE(json.find("\"format_version\": 2"), std::string::npos) << json.substr(0, 200);
  EXPECT_NE(json.find("\"base64\": \""), std::string::npos);
  EXPECT_NE(json.find("\"bytes\": [\n        0,\n        1,\n        255\n      ]"),
            std::string::npos)
      << "short binary literals stay readable as numbers";
  std::string binary = serialize(g.get(), GF_GRAPH_FORMAT_BINARY);
  EXPECT_EQ(binary.find("base64"), std::string::npos);
  Graph back = deserialize(json);
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_BINARY), binary);
  EXPECT_EQ(serialize(back.get(), GF_GRAPH_FORMAT_JSON), json);
}

TEST(Serialize, TextLiteralsStayTextThroughBothFormats) {
  // Over 64 KiB, with non-ASCII characters, and with a control character: text given as text
  // comes back as text from JSON and from binary (it used to come back as bytes).
  std::string big;
  while (big.size() < 100000) big += "line " + std::to_string(big.size()) + " caf\u00e9\n";
  std::string json = "{\"data\": [{\"name\": \"big\", \"text\": \"" + big + "\"}, " +
                     "{\"name\": \"accents\", \"text\": \"h\u00e9llo \u00fcn\u00efcode\"}, " +
                     "{\"name\": \"bell\", \"text\": \"ding\\u0007\"}]}";
  for (size_t at; (at = json.find('\n')) != std::string::npos;) json.replace(at, 1, "\\n");
  Graph g = deserialize(json, GF_GRAPH_FORMAT_JSON, GF_DESERIALIZE_MUTABLE);
  std::string binary = serialize(g.get(), GF_GRAPH_FORMAT_BINARY);
  Graph from_binary = deserialize(binary, GF_GRAPH_FORMAT_BINARY, GF_DESERIALIZE_MUTABLE);
  for (gf_graph *graph : {g.get(), from_binary.get()}) {
    std::string out = serialize(graph, GF_GRAPH_FORMAT_JSON);
    EXPECT_EQ(out.find("\"bytes\""), std::string::npos) << out.substr(0, 300);
    EXPECT_NE(out.find("\"name\": \"big\",\n      \"text\": \"line 0 caf\\u00E9\\nline "),
              std::string::npos)
        << out.substr(0, 300);
    EXPECT_NE(out.find("\"text\": \"ding\\u0007\""), std::string::npos);
    EXPECT_EQ(serialize(graph, GF_GRAPH_FORMAT_BINARY), binary);
  }
}

TEST(Serialize, VersionOneDocumentsWithByteArraysStillRead) {
  std::string bytes;
  std::string json = R"({"format_version": 1, "data": [{"name": "raw", "bytes": [)";
  for (int i = 0; i < 300; ++i) {
    bytes += static_cast<char>(i * 37);
    json += (i ? ", " : "") + std::to_string(static_cast<unsigned char>(bytes.back()));
  }
  json += "]}]}";
  Graph old = deserialize(json, GF_GRAPH_FORMAT_JSON, GF_DESERIALIZE_MUTABLE);
  Graph abi = make_graph();
  gf_data d;
  GF_ASSERT_OK(gf_graph_add_host_buffer(&d, abi.get(), "raw", bytes.data(), bytes.size(), 0));
  EXPECT_EQ(serialize(old.get(), GF_GRAPH_FORMAT_BINARY),
            serialize(abi.get(), GF_GRAPH_FORMAT_BINARY));
  EXPECT_EQ(serialize(old.get(), GF_GRAPH_FORMAT_JSON), serialize(abi.get(), GF_GRAPH_FORMAT_JSON));
}

TEST(Serialize, GraphsTooLargeForOneDocumentAreRefused) {
  // FlatBuffers documents hold at most 2 GiB, and its builder does not check. The bytes are
  // borrowed and never read: the writer refuses before it builds anything.
  static const char tiny[1] = {0};
  Graph g = make_graph();
  gf_data d;
  GF_ASSERT_OK(gf_graph_add_host_buffer(&d, g.get(), "huge", tiny, uint64_t{3} << 30,
                                        GF_HOST_BUFFER_BORROW));
  for (gf_graph_format format : {GF_GRAPH_FORMAT_BINARY, GF_GRAPH_FORMAT_JSON}) {
    Bytes out;
    std::string m =
        GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_graph_serialize(&out.b, g.get(), format));
    EXPECT_NE(m.find("a document holds at most 2 GiB"), std::string::npos) << m;
    EXPECT_NE(m.find("its largest literal, data 'huge', alone takes"), std::string::npos) << m;
    EXPECT_EQ(out.b.data, nullptr);
  }
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
