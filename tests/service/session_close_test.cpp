// A connection against a stand-in service on a unix socket (no real service): answers reach their
// calls by request id and notices their protocol, and the way the connection ends is a typed
// cause (client::Ended) whose words every failed call carries.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "stand_in_service.hpp"
#include "wire/framing.hpp"

namespace {

namespace fb = flatbuffers;
using gf::client::Ended;
using gft::read_message;
using gft::StandIn;
using gft::wait_until;  // test_support.hpp
using gft::write_all;

// The error a call on a gone connection throws.
std::string gone_error(gf::client::Connection &c) {
  try {
    c.leases().status();
  } catch (const gf::Error &e) {
    EXPECT_EQ(e.status(), GF_ERR_SYSTEM);
    return e.what();
  }
  return "no error";
}

TEST(SessionClose, GoodbyeIsTheServiceStopping) {
  StandIn service([](int fd, gf::wire::FrameReader &) {
    fb::FlatBufferBuilder b;
    write_all(fd, gf::wire::frame_of(b, gf::wire::CreateGoodbye(b, b.CreateString("upgrade"))));
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_close_test", 1);
  ASSERT_TRUE(wait_until([&] { return !c->alive(); }));
  EXPECT_EQ(c->closing().cause, Ended::kGoodbye);
  EXPECT_EQ(c->closing().detail, "upgrade");
  EXPECT_EQ(gone_error(*c), "the gpuflow service at " + service.endpoint() +
                                " is gone: the service is stopping: upgrade");
  EXPECT_TRUE(c->leases().revoked(1)) << "every lease ended with the connection";
}

TEST(SessionClose, GarbageIsWhatItSent) {
  StandIn service([](int fd, gf::wire::FrameReader &) { write_all(fd, {0, 0, 0, 0}); });
  auto c = gf::client::Connection::open(service.endpoint(), "session_close_test", 1);
  ASSERT_TRUE(wait_until([&] { return !c->alive(); }));
  EXPECT_EQ(c->closing().cause, Ended::kGarbage);
  // "a frame of length 0" or "a frame of 0 bytes": which check sees it first depends on the reads.
  EXPECT_EQ(
      gone_error(*c).rfind(
          "the gpuflow service at " + service.endpoint() + " is gone: it sent a frame of ", 0),
      0u);
}

TEST(SessionClose, ACloseKeepsTheServicesLastWord) {
  StandIn service([](int fd, gf::wire::FrameReader &) {
    fb::FlatBufferBuilder b;
    write_all(fd, gf::wire::frame_of(
                      b, gf::wire::CreateError(b, 0, GF_ERR_STATE, b.CreateString("go away"))));
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_close_test", 1);
  ASSERT_TRUE(wait_until([&] { return !c->alive(); }));
  EXPECT_EQ(c->closing().cause, Ended::kPeerClosed);
  EXPECT_EQ(gone_error(*c), "the gpuflow service at " + service.endpoint() +
                                " is gone: the service closed the connection, saying: go away");
}

TEST(SessionRouting, AnswersFindTheirCallAndNoticesTheirProtocol) {
  StandIn service([](int fd, gf::wire::FrameReader &reader) {
    const std::vector<uint8_t> request = read_message(fd, reader);
    if (request.empty()) return;
    const auto *status = gf::wire::message_of(request)->body_as_StatusRequest();
    if (!status) return;
    fb::FlatBufferBuilder revoke;
    write_all(fd, gf::wire::frame_of(revoke, gf::wire::CreateLeaseRevoke(revoke, 5)));
    fb::FlatBufferBuilder refused;  // another id: nobody waits for it
    write_all(fd, gf::wire::frame_of(refused, gf::wire::CreateError(
                                                  refused, status->request_id() + 100, GF_ERR_STATE,
                                                  refused.CreateString("not yours"))));
    fb::FlatBufferBuilder reply;
    write_all(fd, gf::wire::frame_of(
                      reply, gf::wire::CreateStatusReply(reply, status->request_id(), 1234)));
    read_message(fd, reader);  // until the client goes
  });
  auto c = gf::client::Connection::open(service.endpoint(), "session_close_test", 1);
  const std::vector<uint8_t> payload = c->leases().status();
  EXPECT_EQ(gf::wire::message_of(payload)->body_as_StatusReply()->service_pid(), 1234u);
  EXPECT_TRUE(c->leases().revoked(5)) << "LeaseRevoke reached the lease protocol first";
  EXPECT_FALSE(c->leases().revoked(6));
  EXPECT_TRUE(c->alive());
}

}  // namespace
