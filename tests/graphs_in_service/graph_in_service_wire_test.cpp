// GraphSubmit messages no C ABI call sends (a missing blob, garbage documents, another client's
// blob), from a client of the static runtime, to a real `gpuflow serve --plugin`: each is refused
// naming what is wrong, and the service and its other clients carry on.
#include <condition_variable>
#include <mutex>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "graph_in_service_support.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;
using namespace gis;

namespace {

// ---- GraphSubmit messages no C ABI call sends ----

uint64_t service_blob_bytes(gf::client::Connection &c) {
  std::vector<uint8_t> payload = c.leases().status();
  return gf::wire::message_of(payload)->body_as_StatusReply()->blob_bytes();
}

// Submits blob `blob` as run `run_id`; "" when accepted, else the refusal as "STATUS: message".
std::string refusal(gf::client::Connection &c, uint64_t run_id, uint64_t blob,
                    const std::string &cwd, std::atomic<int> &finished_calls) {
  try {
    c.runs().submit_graph(
        run_id, blob, cwd, "",
        [&finished_calls](const std::vector<uint8_t> *, const std::string &) { finished_calls++; });
  } catch (const gf::Error &e) {
    return std::string(gf_status_name(e.status())) + ": " + e.what();
  }
  return {};
}

std::string valid_document(const char *kernel) {
  GraphBuilder g;
  const gf_data a = g.i64("a", 21);
  g.kernel("add", kernel, {a, a}, {g.buffer("out", 8)});
  const std::string doc = g.document(GF_GRAPH_FORMAT_BINARY);
  EXPECT_EQ(g.error(), "");
  return doc;
}

// A GraphSubmit naming a blob that does not exist, blobs that are no graph document (text,
// random bytes behind the binary identifier, a truncated document), a document naming a kernel
// the service lacks, and a relative working directory: each refused with a status and words
// saying what was wrong, the blob consumed, and the connection, the service and other clients
// carry on: the next valid document runs and its output comes back.
TEST(GraphInServiceWire, GarbageSubmissionsAreRefusedWithoutHarm) {
  TempDir dir;
  Service service(dir, 1, {"--plugin", TEST_KERNELS_PATH});
  KillWithMe reaper(service.proc().pid());
  ASSERT_TRUE(service.ready()) << service.log();
  auto c = gf::client::Connection::open(service.endpoint(), "graph_in_service_wire", 1);
  ASSERT_TRUE(c->welcome().data_plane);
  c->blobs().open_data_plane();  // what a client's first put does
  std::atomic<int> finished{0};
  uint64_t run = 1;

  std::string why = refusal(*c, run++, 4242, "", finished);
  EXPECT_EQ(why.rfind("GF_ERR_NOT_FOUND: ", 0), 0u) << why;
  EXPECT_TRUE(contains(why, "no blob 4242")) << why;

  const std::string valid = valid_document("test.add");
  ASSERT_GT(valid.size(), 16u);
  std::string identified(256, '\x5a');
  std::memcpy(identified.data() + 4, "GFLW", 4);
  const std::vector<std::pair<std::string, std::string> > garbage = {
      {"text", "this is not a graph document"},
      {"identified", identified},
      {"truncated", valid.substr(0, valid.size() / 2)},
      {"empty", ""},
  };
  uint64_t blob = 100;
  for (const auto &[what, bytes] : garbage) {
    c->blobs().put(blob, bytes.data(), bytes.size());
    why = refusal(*c, run++, blob, "", finished);
    EXPECT_EQ(why.rfind("GF_ERR_INVALID_GRAPH: ", 0), 0u) << what << ": " << why;
    EXPECT_THROW(c->blobs().get(blob), gf::Error) << what << ": the document blob is consumed";
    ++blob;
  }
  const std::string unknown = valid_document("other.kernel");
  c->blobs().put(blob, unknown.data(), unknown.size());
  why = refusal(*c, run++, blob++, "", finished);
  EXPECT_EQ(why.rfind("GF_ERR_NOT_FOUND: ", 0), 0u) << why;
  EXPECT_TRUE(contains(why, "other.kernel")) << why;
  c->blobs().put(blob, valid.data(), valid.size());
  why = refusal(*c, run++, blob++, "relative/dir", finished);
  EXPECT_EQ(why.rfind("GF_ERR_INVALID_ARGUMENT: ", 0), 0u) << why;
  EXPECT_TRUE(contains(why, "working directory")) << why;
  EXPECT_EQ(finished.load(), 0) << "refused runs never finish";
  EXPECT_EQ(service_blob_bytes(*c), 0u) << "refused documents leave no blob behind";
  EXPECT_TRUE(c->alive());

  // The same connection runs a valid document and reads its output back.
  std::mutex mu;
  std::condition_variable cv;
  bool ended = false;
  std::vector<uint8_t> payload;
  c->blobs().put(blob, valid.data(), valid.size());
  const uint64_t tasks = c->runs().submit_graph(
      run, blob, "/", "", [&](const std::vector<uint8_t> *p, const std::string &) {
        std::lock_guard lock(mu);
        if (p) payload = *p;
        ended = true;
        cv.notify_all();
      });
  EXPECT_EQ(tasks, 1u);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::milliseconds(30000 * kTimeFactor), [&] { return ended; }));
  }
  ASSERT_FALSE(payload.empty());
  const gf::wire::RunFinished *f = gf::wire::message_of(payload)->body_as_RunFinished();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->state(), GF_RUN_SUCCEEDED);
  EXPECT_EQ(f->succeeded(), 1u);
  // The report lists the outputs, each a blob of this client.
  ASSERT_NE(f->report_blob(), 0u);
  const std::vector<uint8_t> report_bytes = c->blobs().get(f->report_blob());
  EXPECT_EQ(report_bytes.size(), f->report_size());
  flatbuffers::Verifier verifier(report_bytes.data(), report_bytes.size());
  ASSERT_TRUE(verifier.VerifyBuffer<gf::wire::RunReport>(nullptr));
  const auto *report = flatbuffers::GetRoot<gf::wire::RunReport>(report_bytes.data());
  ASSERT_TRUE(report->outputs());
  ASSERT_EQ(report->outputs()->size(), 1u);
  const uint64_t output_blob = report->outputs()->Get(0)->blob_id();
  const std::vector<uint8_t> out = c->blobs().get(output_blob);
  ASSERT_EQ(out.size(), 8u);
  int64_t v = 0;
  std::memcpy(&v, out.data(), 8);
  EXPECT_EQ(v, 42);
  // Dropping the report drops the outputs it lists.
  c->blobs().drop_blob(f->report_blob());
  EXPECT_THROW(c->blobs().get(output_blob), gf::Error);

  // Another client is unaffected.
  auto other = gf::client::Connection::open(service.endpoint(), "other", 1);
  other->blobs().put(1, valid.data(), valid.size());
  EXPECT_EQ(refusal(*other, 1, 1, "/", finished), "");
}

}  // namespace
