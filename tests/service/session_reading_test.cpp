// How a connection reads the frames around an answer, against a stand-in service: whatever the
// service sends with an answer still reaches its protocol; answers out of order still find
// their calls; an answer in pieces is whole; garbage after an answer, or a close during a call,
// still ends the connection with its cause. (Issue 29 tried callers reading their own answers,
// to save a thread hand-off; these tests guard the reading whoever does it.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "stand_in_service.hpp"
#include "wire/framing.hpp"

namespace {

using namespace gft;  // the stand-in, its frame helpers and fb (stand_in_service.hpp)
using gf::client::Ended;

std::vector<uint8_t> status_reply(uint64_t request_id, uint32_t pid) {
  fb::FlatBufferBuilder b;
  return gf::wire::frame_of(b, gf::wire::CreateStatusReply(b, request_id, pid));
}

std::vector<uint8_t> revoke(uint64_t lease) {
  fb::FlatBufferBuilder b;
  return gf::wire::frame_of(b, gf::wire::CreateLeaseRevoke(b, lease));
}

// The request id of the next StatusRequest the client sends (0 once it is gone).
uint64_t next_status_request(int fd, gf::wire::FrameReader &reader) {
  const std::vector<uint8_t> request = read_message(fd, reader);
  if (request.empty()) return 0;
  const auto *status = gf::wire::message_of(request)->body_as_StatusRequest();
  return status ? status->request_id() : 0;
}

uint32_t pid_of(const std::vector<uint8_t> &payload) {
  return gf::wire::message_of(payload)->body_as_StatusReply()->service_pid();
}

TEST(SessionReading, FramesAfterAnAnswerInTheSameWriteStillReachTheirProtocol) {
  StandIn service([](int fd, gf::wire::FrameReader &reader) {
    const uint64_t id = next_status_request(fd, reader);
    if (id == 0) return;
    std::vector<uint8_t> bytes = status_reply(id, 42);
    for (uint64_t lease : {5, 6}) {
      const std::vector<uint8_t> more = revoke(lease);
      bytes.insert(bytes.end(), more.begin(), more.end());
    }
    write_all(fd, bytes);  // one write: the caller reads its answer and the revokes with it
    read_message(fd, reader);
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_reading_test", 1);
  EXPECT_EQ(pid_of(c->leases().status()), 42u);
  EXPECT_TRUE(wait_until([&] { return c->leases().revoked(5) && c->leases().revoked(6); }));
  EXPECT_TRUE(c->alive());
}

TEST(SessionReading, AnswersInTheOtherOrderFindTheirCalls) {
  std::atomic<bool> first_came{false};
  StandIn service([&first_came](int fd, gf::wire::FrameReader &reader) {
    const uint64_t first = next_status_request(fd, reader);
    first_came = true;
    const uint64_t second = next_status_request(fd, reader);
    if (first == 0 || second == 0) return;
    write_all(fd, status_reply(second, static_cast<uint32_t>(second)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    write_all(fd, status_reply(first, static_cast<uint32_t>(first)));
    read_message(fd, reader);
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_reading_test", 1);
  // Two threads wait at once: one of them reads the socket, and the other's answer comes first.
  // Each answer's service_pid is its request id, and the first thread's request came first.
  uint32_t pids[2] = {0, 0};
  auto ask = [&](int i) { pids[i] = pid_of(c->leases().status()); };
  std::thread one(ask, 0);
  ASSERT_TRUE(wait_until([&] { return first_came.load(); }));
  std::thread two(ask, 1);
  one.join();
  two.join();
  EXPECT_NE(pids[0], 0u);
  EXPECT_NE(pids[1], 0u);
  EXPECT_LT(pids[0], pids[1]) << "each call got the answer to its own request id";
}

TEST(SessionReading, AnAnswerInPiecesIsReadWhole) {
  StandIn service([](int fd, gf::wire::FrameReader &reader) {
    const uint64_t id = next_status_request(fd, reader);
    if (id == 0) return;
    const std::vector<uint8_t> bytes = status_reply(id, 77);
    for (uint8_t byte : bytes) {
      write_all(fd, {byte});
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    read_message(fd, reader);
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_reading_test", 1);
  EXPECT_EQ(pid_of(c->leases().status()), 77u);
  EXPECT_TRUE(c->alive());
}

TEST(SessionReading, GarbageAfterAnAnswerEndsTheConnectionAsGarbage) {
  StandIn service([](int fd, gf::wire::FrameReader &reader) {
    const uint64_t id = next_status_request(fd, reader);
    if (id == 0) return;
    std::vector<uint8_t> bytes = status_reply(id, 9);
    bytes.insert(bytes.end(), {0, 0, 0, 0});  // a frame of length 0
    write_all(fd, bytes);
    read_message(fd, reader);
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_reading_test", 1);
  EXPECT_EQ(pid_of(c->leases().status()), 9u);
  ASSERT_TRUE(wait_until([&] { return !c->alive(); }));
  EXPECT_EQ(c->closing().cause, Ended::kGarbage);
}

TEST(SessionReading, AServiceThatClosesDuringACallFailsItWithTheClose) {
  StandIn service([](int fd, gf::wire::FrameReader &reader) { next_status_request(fd, reader); });
  auto c = gf::client::Connection::open(service.endpoint(), "session_reading_test", 1);
  try {
    c->leases().status();
    ADD_FAILURE() << "a status call answered by a closed connection";
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_SYSTEM);
    EXPECT_EQ(std::string(e.what()), "the gpuflow service at " + service.endpoint() +
                                         " is gone: the service closed the connection");
  }
  EXPECT_EQ(c->closing().cause, Ended::kPeerClosed);
}

}  // namespace
