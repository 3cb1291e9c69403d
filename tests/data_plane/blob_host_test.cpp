// The service's side of one client's data plane (transport::BlobHost), driven directly on a libuv
// loop, with a second worker in this process standing in for the client: an answer that closes
// the host while puts expire (the service drops a client from inside such an answer), the cap on
// bytes still on their way to a client, and drains only within the client's own tag space.
#include <gtest/gtest.h>
#include <uv.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/blob_host.hpp"
#include "transport/endpoint.hpp"
#include "transport/request.hpp"
#include "transport/ucx_api.hpp"
#include "transport/ucx_context.hpp"

using namespace gf::transport;

namespace {

constexpr uint64_t kClient = 7;

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

class BlobHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    plane_ = std::make_unique<LoopPlane>(&loop_, "blob_host_test service");
    client_ = Worker::create("blob_host_test client");
    to_service_ = std::make_unique<Endpoint>(*client_, plane_->worker().address(), "the service",
                                             [](const std::string &) {});
  }
  void TearDown() override {
    host_.reset();
    to_service_.reset();
    client_->settle();
    plane_->close();
    uv_run(&loop_, UV_RUN_DEFAULT);
    plane_.reset();
    client_.reset();
    uv_loop_close(&loop_);
  }
  BlobHost &host(uint64_t cap, double put_timeout_s = 30) {
    host_ = std::make_unique<BlobHost>(*plane_, kClient, "client 7", client_->address(), cap,
                                       put_timeout_s, [](const std::string &) {});
    return *host_;
  }
  // Progresses both sides until `done` or about 10 s have passed.
  bool until(const std::function<bool()> &done) {
    for (int i = 0; i < 100000 && !done(); ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      client_->drain();
    }
    return done();
  }
  // Puts `bytes` as blob `blob` the way a client does: announced, then sent with its tag.
  void put(uint64_t blob, const std::vector<uint8_t> &bytes, uint64_t tag) {
    bool stored = false;
    std::string error = "no answer";
    ASSERT_FALSE(host_->put(blob, bytes.size(), tag, 0, [&](const std::string &e) {
      stored = true;
      error = e;
    }));
    bool sent = false;
    tag_send(to_service_->get(), bytes.data(), bytes.size(), tag,
             [&](ucs_status_t, size_t) { sent = true; });
    ASSERT_TRUE(until([&] { return stored && sent; }));
    ASSERT_EQ(error, "");
  }

  uv_loop_t loop_{};
  std::unique_ptr<LoopPlane> plane_;
  std::unique_ptr<Worker> client_;
  std::unique_ptr<Endpoint> to_service_;
  std::unique_ptr<BlobHost> host_;
};

// The first expired put's answer closes the host (the service found the client's socket full and
// dropped it): the other puts are answered once, by the close, and nothing else is touched.
TEST_F(BlobHostTest, AnAnswerThatClosesTheHostWhilePutsExpire) {
  BlobHost &h = host(1 << 20, 0);
  std::vector<std::string> answers;
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_FALSE(h.put(i, 16, tag_space_of(kClient) | i, 0, [&](const std::string &error) {
      answers.push_back(error);
      if (answers.size() == 1) h.close("dropped: it does not read its replies");
    }));
  }
  EXPECT_EQ(h.bytes(), 48u);
  h.expire(100);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_TRUE(contains(answers[0], "no bytes with tag")) << answers[0];
  EXPECT_EQ(answers[1], "dropped: it does not read its replies");
  EXPECT_EQ(answers[2], "dropped: it does not read its replies");
  EXPECT_TRUE(h.closed());
  EXPECT_EQ(h.bytes(), 0u);
  h.expire(200);  // nothing left to answer
  EXPECT_EQ(answers.size(), 3u);
}

// A get's send holds its blob until the client takes it, dropped or not: the bytes on their way
// to a client stay within its cap, so a client that asks and never receives cannot pin more.
TEST_F(BlobHostTest, BytesOnTheirWayToAClientStayWithinItsCap) {
  BlobHost &h = host(4 << 20);
  const std::vector<uint8_t> bytes(3 << 20, 0x5a);
  put(1, bytes, tag_space_of(kClient) | 1);
  uint64_t size = 0;
  bool first_sent = false;
  ASSERT_FALSE(h.get(1, tag_space_of(kClient) | 2, size, [&](const std::string &error) {
    EXPECT_EQ(error, "");
    first_sent = true;
  }));
  EXPECT_EQ(size, bytes.size());
  EXPECT_TRUE(h.drop(1));  // gone from the store, still on its way
  put(1, bytes, tag_space_of(kClient) | 3);
  const Refusal refused = h.get(1, tag_space_of(kClient) | 4, size, [](const std::string &) {});
  EXPECT_EQ(refused.status, GF_ERR_STATE);
  EXPECT_TRUE(contains(refused.why, "already on their way")) << refused.why;
  // Once the client takes the first, the next goes.
  std::vector<uint8_t> back(bytes.size());
  bool received = false;
  tag_recv(client_->get(), back.data(), back.size(), tag_space_of(kClient) | 2,
           [&](ucs_status_t status, size_t) { received = status == UCS_OK; });
  ASSERT_TRUE(until([&] { return received && first_sent; }));
  EXPECT_EQ(back, bytes);
  bool second_sent = false;
  EXPECT_FALSE(h.get(1, tag_space_of(kClient) | 5, size, [&](const std::string &error) {
    EXPECT_EQ(error, "");
    second_sent = true;
  }));
  tag_recv(client_->get(), back.data(), back.size(), tag_space_of(kClient) | 5,
           [](ucs_status_t, size_t) {});
  EXPECT_TRUE(until([&] { return second_sent; }));
}

// A refused put's bytes are drained only on the client's own free tags; the drain takes them
// (the client's send ends) and the host stays as it was.
TEST_F(BlobHostTest, DrainsTakeOnlyTheClientsOwnFreeTags) {
  BlobHost &h = host(1 << 20);
  EXPECT_FALSE(h.drain((kClient + 1) << 32 | 1)) << "another client's tag";
  EXPECT_FALSE(h.drain(1)) << "a tag outside every client's space";
  ASSERT_FALSE(h.put(1, 8, tag_space_of(kClient) | 1, 0, [](const std::string &) {}));
  EXPECT_FALSE(h.drain(tag_space_of(kClient) | 1)) << "a tag in use";
  uint64_t tag = tag_space_of(kClient) | 2;
  for (size_t size : {size_t{100}, size_t{2} << 20}) {  // eager, then rendezvous
    ASSERT_TRUE(h.drain(++tag));
    std::vector<uint8_t> bytes(size, 1);
    bool sent = false;
    ucs_status_t status = UCS_ERR_NO_MESSAGE;
    tag_send(to_service_->get(), bytes.data(), bytes.size(), tag, [&](ucs_status_t s, size_t) {
      sent = true;
      status = s;
    });
    // Sent (an eager send ends here at once), and taken there: nothing left unexpected.
    auto left_there = [&] {
      ucp_tag_recv_info_t info{};
      return ucx().ucp_tag_probe_nb(plane_->worker().get(), tag, ~uint64_t{0}, 0, &info) != nullptr;
    };
    ASSERT_TRUE(until([&] { return sent; }));
    for (int i = 0; i < 1000; ++i) uv_run(&loop_, UV_RUN_NOWAIT);  // it has come by now
    EXPECT_FALSE(left_there()) << size << " bytes were never drained";
    EXPECT_EQ(status, UCS_OK);
  }
  EXPECT_EQ(h.bytes(), 8u);  // only the put still waiting for its bytes
}

}  // namespace
