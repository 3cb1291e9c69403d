// Untrusted documents: every rejection path says what is wrong and where, and nothing is built.
#include <flatbuffers/flatbuffers.h>

#include <cstdio>
#include <string>
#include <vector>

#include "serialize/graph_generated.h"
#include "test_support.hpp"

using namespace gft;
namespace fb = gpuflow::format;

namespace {

// Expects gf_graph_deserialize to refuse `bytes` with `status` and a message containing `want`.
void expect_rejected(const std::string &bytes, const std::string &want,
                     gf_status status = GF_ERR_INVALID_GRAPH,
                     gf_graph_format format = GF_GRAPH_FORMAT_AUTO) {
  gf_graph *g = reinterpret_cast<gf_graph *>(1);
  std::string m =
      GF_EXPECT_STATUS(status, gf_graph_deserialize(&g, bytes.data(), bytes.size(), format, 0));
  EXPECT_EQ(g, nullptr);
  EXPECT_NE(m.find(want), std::string::npos) << "message: " << m << "\nwanted: " << want;
}

std::string finish(flatbuffers::FlatBufferBuilder &b, flatbuffers::Offset<fb::Graph> root) {
  b.Finish(root, fb::GraphIdentifier());
  return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
}

// A valid two-task document: "a" produces data #0, "b" reads it.
std::string valid_doc() {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Data>> data{
      fb::CreateDataDirect(b, "d", fb::DataKind::Buffer, 8)};
  std::vector<uint32_t> zero{0};
  std::vector<flatbuffers::Offset<fb::Task>> tasks{
      fb::CreateTaskDirect(b, "a", "k", 0, nullptr, 0, 0, nullptr, &zero),
      fb::CreateTaskDirect(b, "b", "k", 0, nullptr, 0, 0, &zero)};
  return finish(b, fb::CreateGraphDirect(b, 1, &data, &tasks));
}

}  // namespace

TEST(Reject, ValidDocumentIsAccepted) {
  std::string doc = valid_doc();
  gf_graph *g = nullptr;
  GF_ASSERT_OK(gf_graph_deserialize(&g, doc.data(), doc.size(), GF_GRAPH_FORMAT_BINARY, 0));
  gf_graph_destroy(g);
}

TEST(Reject, TruncatedBuffer) {
  std::string doc = valid_doc();
  expect_rejected(doc.substr(0, 6), "truncated: 6 bytes");
  for (size_t keep : {doc.size() / 2, doc.size() - 4, size_t{12}}) {
    expect_rejected(doc.substr(0, keep), "fails FlatBuffers verification", GF_ERR_INVALID_GRAPH,
                    GF_GRAPH_FORMAT_BINARY);
  }
  expect_rejected("", "neither a binary gpuflow graph");
}

TEST(Reject, WrongIdentifier) {
  std::string doc = valid_doc();
  doc.replace(4, 4, "NOPE");
  expect_rejected(doc, "wrong file identifier 'NOPE' at byte 4", GF_ERR_INVALID_GRAPH,
                  GF_GRAPH_FORMAT_BINARY);
  expect_rejected(doc, "neither a binary gpuflow graph");  // AUTO cannot tell what it is
}

TEST(Reject, OutOfRangeIndices) {
  expect_rejected(
      R"({"data": [{"size": 8}], "tasks": [{"name": "b", "kernel": "k", "inputs": [0, 99]}]})",
      "task #0 'b': input #1 refers to data #99; the graph has 1 data objects");
  expect_rejected(R"({"tasks": [{"kernel": "k", "outputs": [3]}]})",
                  "task #0: output #0 refers to data #3");
  expect_rejected(R"({"tasks": [{"kernel": "k"}, {"kernel": "k", "after": [0, 7]}]})",
                  "task #1: after #1 refers to task #7; the graph has 2 tasks");
}

TEST(Reject, Cycle) {
  expect_rejected(R"({"tasks": [{"name": "a", "kernel": "k", "after": [1]},
                                {"name": "b", "kernel": "k", "after": [0]}]})",
                  "cycle: task");
  expect_rejected(R"({"tasks": [{"name": "self", "kernel": "k", "after": [0]}]})",
                  "task 'self' cannot run after itself");
  // Through data: each reads what the other produces.
  expect_rejected(R"({"data": [{"size": 1}, {"size": 1}],
                      "tasks": [{"name": "p", "kernel": "k", "inputs": [1], "outputs": [0]},
                                {"name": "q", "kernel": "k", "inputs": [0], "outputs": [1]}]})",
                  "cycle: task");
}

TEST(Reject, SemanticErrorsNameTheirPlace) {
  expect_rejected(R"({"tasks": [{"name": "x"}]})", "task #0 'x' has no body");
  expect_rejected(R"({"tasks": [{"kernel": "k", "command": {"argv": ["true"]}}]})",
                  "gives both a kernel and a command");
  expect_rejected(R"({"tasks": [{"kernel": "no spaces"}]})", "names kernel 'no spaces'");
  expect_rejected(R"({"tasks": [{"command": {"argv": [""]}}]})", "argv[0] is empty");
  expect_rejected(R"({"tasks": [{"command": {"argv": ["x"], "env": ["NOEQUALS"]}}]})",
                  "command env #0 'NOEQUALS' is not of the form NAME=value");
  expect_rejected(R"({"tasks": [{"command": {"argv": ["x"], "timeout_s": -1}}]})",
                  "timeout_s must be finite and non-negative");
  expect_rejected(R"({"tasks": [{"kernel": "k", "resources": [{"name": "GPU", "amount": -1}]}]})",
                  "resource 'GPU' amount");
  expect_rejected(R"({"data": [{"size": 8}], "tasks": [{"name": "a", "kernel": "k", "outputs": [0]},
                                                        {"name": "b", "kernel": "k", "outputs": [0]}]})",
                  "both produce data #0");
  expect_rejected(
      R"({"data": [{"size": 8}], "tasks": [{"name": "r", "kernel": "k", "inputs": [0]}]})",
      "task 'r' reads data #0, which no task produces");
  expect_rejected(R"({"tasks": [{"name": "t", "kernel": "k"}, {"name": "t", "kernel": "k"}]})",
                  "duplicate task name 't'");
  expect_rejected(R"({"data": [{"text": "ab", "bytes": [1]}]})",
                  "gives more than one of bytes, text and base64");
  expect_rejected(R"({"data": [{"base64": "AAE=", "bytes": [1]}]})",
                  "gives more than one of bytes, text and base64");
  expect_rejected(R"({"data": [{"name": "b", "base64": "abc"}]})",
                  "data #0 'b' base64 is not valid base64 (RFC 4648 with '=' padding) at "
                  "character 3 of 3");
  expect_rejected(R"({"data": [{"base64": "a=bc"}]})", "at character 1 of 4");
  expect_rejected(R"({"data": [{"base64": "AAF="}]})", "at character 2 of 4");  // stray bits
  expect_rejected(R"({"data": [{"base64": "AAE=", "size": 3}]})",
                  "declares size 3 but its literal has 2 bytes");
  expect_rejected(R"({"data": [{"text": "abc", "size": 5}]})",
                  "declares size 5 but its literal has 3 bytes");
  expect_rejected(R"({"data": [{"size": 9007199254740993}]})", "data #0 declares size");
  expect_rejected(R"({"metadata": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}]})",
                  "metadata entry #1 repeats key 'a'");
  expect_rejected(R"({"tasks": [{"kernel": "k", "name": "nul\u0000inside"}]})",
                  "task #0 name contains a NUL character");
  expect_rejected(R"({"tasks": [ {"kernel": "k", "unknown_field": 1} ]})", "JSON:");
  expect_rejected(R"({"format_version": 99})", "format version 99 is newer",
                  GF_ERR_VERSION_MISMATCH);
}

TEST(Reject, TextThatIsNotUtf8IsRefusedNamingTheField) {
  // Binary documents can hold any bytes in a string: each text field is checked, so that every
  // graph read can be written as JSON (this used to fail later, as GF_ERR_INTERNAL).
  const std::string bad = "caf\xe9";
  auto doc = [&](auto &&make) {
    flatbuffers::FlatBufferBuilder b;
    return finish(b, make(b));
  };
  auto one_task = [&](flatbuffers::FlatBufferBuilder &b, flatbuffers::Offset<fb::Task> task) {
    std::vector<flatbuffers::Offset<fb::Task>> tasks{task};
    return fb::CreateGraphDirect(b, 1, nullptr, &tasks);
  };
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    return one_task(b, fb::CreateTaskDirect(b, bad.c_str(), "k"));
                  }),
                  "task #0 name is not valid UTF-8 (byte 3 is 0xe9)");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    return one_task(b, fb::CreateTaskDirect(b, "t", bad.c_str()));
                  }),
                  "task #0 't' kernel is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    std::vector<flatbuffers::Offset<fb::Resource>> res{
                        fb::CreateResourceDirect(b, bad.c_str(), 1)};
                    return one_task(b, fb::CreateTaskDirect(b, "t", "k", 0, &res));
                  }),
                  "task #0 't' resource #0 name is not valid UTF-8");
  auto command_task = [&](flatbuffers::FlatBufferBuilder &b, const char *arg, const char *env,
                          const char *cwd, const char *log_dir) {
    std::vector<std::string> argv{"echo", arg};
    std::vector<std::string> envs{env};
    auto c = fb::CreateCommand(b, b.CreateVectorOfStrings(argv), b.CreateVectorOfStrings(envs),
                               b.CreateString(cwd), 0, b.CreateString(log_dir));
    return one_task(b, fb::CreateTask(b, b.CreateString("c"), 0, c));
  };
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    return command_task(b, bad.c_str(), "A=1", "/", "/");
                  }),
                  "task #0 'c' command argv[1] is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    return command_task(b, "x", ("A=" + bad).c_str(), "/", "/");
                  }),
                  "task #0 'c' command env[0] is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    return command_task(b, "x", "A=1", bad.c_str(), "/");
                  }),
                  "task #0 'c' working_dir is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    return command_task(b, "x", "A=1", "/", bad.c_str());
                  }),
                  "task #0 'c' log_dir is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    std::vector<flatbuffers::Offset<fb::Data>> data{
                        fb::CreateDataDirect(b, bad.c_str(), fb::DataKind::Buffer, 8)};
                    return fb::CreateGraphDirect(b, 1, &data);
                  }),
                  "data #0 name is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    std::vector<flatbuffers::Offset<fb::Data>> data{fb::CreateDataDirect(
                        b, "lit", fb::DataKind::Buffer, 0, false, nullptr, bad.c_str())};
                    return fb::CreateGraphDirect(b, 1, &data);
                  }),
                  "data #0 'lit' text is not valid UTF-8 (byte 3 is 0xe9); give binary content "
                  "as bytes");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    std::vector<flatbuffers::Offset<fb::KeyValue>> meta{
                        fb::CreateKeyValueDirect(b, bad.c_str(), "v")};
                    return fb::CreateGraphDirect(b, 1, nullptr, nullptr, &meta);
                  }),
                  "metadata entry #0 key is not valid UTF-8");
  expect_rejected(doc([&](flatbuffers::FlatBufferBuilder &b) {
                    std::vector<flatbuffers::Offset<fb::KeyValue>> meta{
                        fb::CreateKeyValueDirect(b, "k", bad.c_str())};
                    return fb::CreateGraphDirect(b, 1, nullptr, nullptr, &meta);
                  }),
                  "metadata entry #0 value is not valid UTF-8");
  // In JSON the parser already refuses what is not text.
  expect_rejected(R"({"tasks": [{"name": "a\udc00", "kernel": "k"}]})",
                  "JSON: 1: 28: error: illegal Unicode sequence");
  expect_rejected("{\"tasks\": [{\"name\": \"caf\xe9\", \"kernel\": \"k\"}]}", "JSON:");
}

TEST(Reject, OversizedCounts) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Data>> data{fb::CreateDataDirect(b, "d")};
  std::vector<uint32_t> many(70000, 0);
  std::vector<flatbuffers::Offset<fb::Task>> tasks{
      fb::CreateTaskDirect(b, "wide", "k", 0, nullptr, 0, 0, &many)};
  expect_rejected(finish(b, fb::CreateGraphDirect(b, 1, &data, &tasks)),
                  "task #0 'wide' input list has 70000 entries; at most 65536 are allowed");

  flatbuffers::FlatBufferBuilder c;
  std::vector<std::string> args(5000, "x");
  auto argv = c.CreateVectorOfStrings(args);
  auto cmd = fb::CreateCommand(c, argv);
  std::vector<flatbuffers::Offset<fb::Task>> t2{
      fb::CreateTask(c, c.CreateString("argful"), 0, cmd)};
  expect_rejected(finish(c, fb::CreateGraphDirect(c, 1, nullptr, &t2)),
                  "task #0 'argful' command argv has 5000 entries; at most 4096");

  flatbuffers::FlatBufferBuilder d;
  std::vector<flatbuffers::Offset<fb::Resource>> res;
  for (int i = 0; i < 65; ++i)
    res.push_back(fb::CreateResourceDirect(d, ("r" + std::to_string(i)).c_str(), 1));
  std::vector<flatbuffers::Offset<fb::Task>> t3{fb::CreateTaskDirect(d, "greedy", "k", 0, &res)};
  expect_rejected(finish(d, fb::CreateGraphDirect(d, 1, nullptr, &t3)),
                  "resource list has 65 entries; at most 64");
}

// FlatBuffers lets many entries point at one table, list or string: a small document could
// describe a huge graph. Reading refuses, before allocating, a document whose graph (each shared
// part counted once per use) exceeds 32 x its size + 16 MiB, naming what is too big.
TEST(Reject, SharedInputListAmplificationIsRefused) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Data>> data{
      fb::CreateDataDirect(b, "x", fb::DataKind::Buffer, 0, false, nullptr, "x")};
  std::vector<uint32_t> zeros(16384, 0);
  auto shared = b.CreateVector(zeros);
  auto kernel = b.CreateString("k");
  std::vector<flatbuffers::Offset<fb::Task>> tasks;
  for (int i = 0; i < 4000; ++i) {
    fb::TaskBuilder t(b);
    t.add_kernel(kernel);
    t.add_inputs(shared);
    tasks.push_back(t.Finish());
  }
  std::string doc = finish(b, fb::CreateGraphDirect(b, 1, &data, &tasks));
  EXPECT_LT(doc.size(), 128u * 1024);
  expect_rejected(doc, "document would allocate about");
  expect_rejected(doc, "(tasks' input, output, after and resource lists: ");
  expect_rejected(doc, "allowed (32 x the document's size + 16 MiB)");
}

TEST(Reject, SharedLiteralAmplificationIsRefused) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<uint8_t> mib(1 << 20, 7);
  auto shared = b.CreateVector(mib);
  std::vector<flatbuffers::Offset<fb::Data>> data;
  for (int i = 0; i < 300; ++i) {
    fb::DataBuilder d(b);
    d.add_bytes(shared);
    data.push_back(d.Finish());
  }
  std::string doc = finish(b, fb::CreateGraphDirect(b, 1, &data));
  EXPECT_LT(doc.size(), 1100u * 1024);
  expect_rejected(doc, "(literal inputs (bytes and text): 300 MiB)");
}

TEST(Reject, SharedCommandAndMetadataAmplificationIsRefused) {
  // One command with 4096 arguments, named by 20,000 tasks: each task would copy it.
  flatbuffers::FlatBufferBuilder b;
  std::vector<std::string> args(4096, std::string(20, 'a'));
  auto cmd = fb::CreateCommand(b, b.CreateVectorOfStrings(args));
  std::vector<flatbuffers::Offset<fb::Task>> tasks;
  for (int i = 0; i < 20000; ++i) {
    fb::TaskBuilder t(b);
    t.add_command(cmd);
    t.add_priority(i + 1);  // distinct tables, so the verifier meets the command 20,000 times
    tasks.push_back(t.Finish());
  }
  expect_rejected(finish(b, fb::CreateGraphDirect(b, 1, nullptr, &tasks)),
                  "(commands' argv, env and paths: ");

  // 4096 metadata entries sharing one 1 MiB value.
  flatbuffers::FlatBufferBuilder c;
  auto value = c.CreateString(std::string(1 << 20, 'v'));
  std::vector<flatbuffers::Offset<fb::KeyValue>> meta;
  for (int i = 0; i < 4096; ++i) {
    meta.push_back(fb::CreateKeyValue(c, c.CreateString("k" + std::to_string(i)), value));
  }
  expect_rejected(finish(c, fb::CreateGraphDirect(c, 1, nullptr, nullptr, &meta)), "(metadata: ");
}

TEST(Reject, OrdinaryLargeDocumentsStillLoad) {
  // The seed example as shipped, and the seed workload at 60,000 chunk tasks written by gpuflow
  // itself in both formats, and a 4 MiB literal: all well under the expansion bound.
  std::string seed;
  {
    FILE *f = std::fopen(GF_TEST_EXAMPLES_DIR "/json/seed.json", "rb");
    ASSERT_NE(f, nullptr);
    char chunk[4096];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) seed.append(chunk, n);
    std::fclose(f);
  }
  gf_graph *g = nullptr;
  GF_ASSERT_OK(gf_graph_deserialize(&g, seed.data(), seed.size(), GF_GRAPH_FORMAT_AUTO, 0));
  gf_graph_destroy(g);

  Graph big = make_graph();
  std::vector<gf_data> partials;
  gf_resource gpu = {"GPU", 1};
  for (int i = 0; i < 60000; ++i) {
    std::string params = std::to_string(i) + " 0 250 250 42";
    gf_data in, out;
    GF_ASSERT_OK(gf_graph_add_host_buffer(&in, big.get(), ("params." + std::to_string(i)).c_str(),
                                          params.data(), params.size(), 0));
    out = must_add_buffer(big.get(), ("partial." + std::to_string(i)).c_str(), 8);
    gf_task_desc t = GF_TASK_DESC_INIT;
    std::string name = "chunk." + std::to_string(i);
    t.name = name.c_str();
    t.kernel = "seed.chunk";
    t.inputs = &in;
    t.input_count = 1;
    t.outputs = &out;
    t.output_count = 1;
    t.resources = &gpu;
    t.resource_count = i % 2;
    gf_task task;
    GF_ASSERT_OK(gf_graph_add_task(&task, big.get(), &t));
    partials.push_back(out);
  }
  std::vector<unsigned char> literal(4 << 20);
  for (size_t i = 0; i < literal.size(); ++i) literal[i] = static_cast<unsigned char>(i * 7);
  gf_data lit;
  GF_ASSERT_OK(
      gf_graph_add_host_buffer(&lit, big.get(), "blob", literal.data(), literal.size(), 0));
  partials.push_back(lit);
  gf_data total = must_add_buffer(big.get(), "total", 8, GF_DATA_KEEP);
  gf_task_desc sum = GF_TASK_DESC_INIT;
  sum.name = "sum";
  sum.kernel = "seed.sum";
  sum.inputs = partials.data();
  sum.input_count = static_cast<uint32_t>(partials.size());
  sum.outputs = &total;
  sum.output_count = 1;
  gf_task task;
  GF_ASSERT_OK(gf_graph_add_task(&task, big.get(), &sum));
  for (gf_graph_format format : {GF_GRAPH_FORMAT_BINARY, GF_GRAPH_FORMAT_JSON}) {
    gf_bytes doc{nullptr, 0};
    GF_ASSERT_OK(gf_graph_serialize(&doc, big.get(), format));
    g = nullptr;
    GF_EXPECT_OK(gf_graph_deserialize(&g, doc.data, doc.size, format, 0));
    gf_graph_destroy(g);
    gf_bytes_free(&doc);
  }
}

TEST(Reject, CorruptOffsetsAreCaughtByTheVerifier) {
  std::string doc = valid_doc();
  // Flip every byte in turn: nothing may crash, and what is accepted must still be a valid graph.
  for (size_t i = 0; i < doc.size(); ++i) {
    std::string bad = doc;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    gf_graph *g = nullptr;
    if (gf_graph_deserialize(&g, bad.data(), bad.size(), GF_GRAPH_FORMAT_AUTO, 0) == GF_OK) {
      gf_graph_destroy(g);
    } else {
      EXPECT_STRNE(gf_last_error(), "");
    }
  }
}

TEST(Reject, UnknownKernelAtSubmitNamesIt) {
  Pool pool = make_pool(host_config(1, -1));
  const std::string json = R"({"tasks": [{"name": "lost", "kernel": "nobody.has.this"}]})";
  gf_graph *raw = nullptr;
  GF_ASSERT_OK(gf_graph_deserialize(&raw, json.data(), json.size(), GF_GRAPH_FORMAT_JSON, 0));
  Graph g(raw);
  gf_run *run = nullptr;
  std::string m =
      GF_EXPECT_STATUS(GF_ERR_NOT_FOUND, gf_graph_submit(&run, pool.get(), g.get(), nullptr));
  EXPECT_NE(m.find("task 'lost' names kernel 'nobody.has.this'"), std::string::npos) << m;
  EXPECT_EQ(run, nullptr);
  m = GF_EXPECT_STATUS(GF_ERR_NOT_FOUND, gf_graph_check(g.get(), pool.get()));
  EXPECT_NE(m.find("nobody.has.this"), std::string::npos) << m;
}

TEST(Reject, MisalignedInputIsRead) {
  std::string doc = valid_doc();
  std::string shifted = " " + doc;  // doc now starts at an odd address
  gf_graph *g = nullptr;
  GF_ASSERT_OK(gf_graph_deserialize(&g, shifted.data() + 1, doc.size(), GF_GRAPH_FORMAT_BINARY, 0));
  gf_graph_destroy(g);
}
