// The service's lease protocol without a process or a socket (service/lease_handler.hpp): a
// LeaseBook, recording clients in place of connections, and a clock the test moves. What a
// client hears back is read from the frames it was sent.
#include "service/lease_handler.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "wire/records.hpp"

namespace gf::service {
namespace {

namespace fb = flatbuffers;

// A client that keeps every frame it is sent, as a connection would write them.
class RecordingClient final : public Client {
 public:
  void send(std::vector<uint8_t> frame) override {
    if (!closing) frames.push_back(std::move(frame));
  }
  void drop(const std::string &reason, bool) override {
    closing = true;
    dropped = reason;
  }
  const wire::Message &message(size_t i) const {
    return *wire::GetMessage(frames.at(i).data() + sizeof(uint32_t));
  }
  const wire::Message &last() const { return message(frames.size() - 1); }

  std::vector<std::vector<uint8_t>> frames;
  std::string dropped;
};

struct Request {
  RequestId id = 1;
  double gpus = 0, cpus = 0;
  int64_t timeout_ms = -1;
};
Request gpus(RequestId id, double n, int64_t timeout_ms = -1) {
  return {id, n, 0, timeout_ms};
}
Request cpus(RequestId id, double n) {
  return {id, 0, n, -1};
}

class LeaseHandlerTest : public ::testing::Test {
 protected:
  static std::vector<DeviceSlot> one_device() {
    DeviceSlot slot;
    slot.ordinal = 0;
    slot.name = "test device";
    slot.uuid = "GPU-test";
    slot.memory = uint64_t{1} << 34;
    return {slot};
  }

  RecordingClient &connect(uint32_t uid, const std::string &user) {
    auto c = std::make_unique<RecordingClient>();
    c->id = clients.next_id();
    c->peer.uid = uid;
    c->peer.pid = 1000 + static_cast<uint32_t>(c->id);
    c->peer.user = user;
    c->greeted = true;
    ClientInfo info;
    info.uid = uid;
    info.pid = c->peer.pid;
    info.user = user;
    book.add_client(c->id, info);
    clients.add(*c);
    owned.push_back(std::move(c));
    return *owned.back();
  }

  void request(Client &c, const Request &r) {
    fb::FlatBufferBuilder b;
    wire::LeaseAsk ask;
    ask.gpus = r.gpus;
    ask.cpus = r.cpus;
    b.Finish(wire::encode(b, r.id, ask, r.timeout_ms));
    leases.on_lease_request(c, *fb::GetRoot<wire::LeaseRequest>(b.GetBufferPointer()));
  }

  // `c` asks for the one device and gets it: the lease's id.
  LeaseId granted(RecordingClient &c) {
    request(c, gpus(1, 1));
    leases.schedule();
    return c.last().body_as_LeaseGranted()->lease_id();
  }

  // `c` hands `lease` back with request id `id`; quiet: waiting for no answer (wire.fbs).
  void release(Client &c, RequestId id, LeaseId lease, bool quiet = false) {
    fb::FlatBufferBuilder m;
    m.Finish(wire::CreateLeaseRelease(m, id, lease, quiet));
    leases.on_lease_release(c, *fb::GetRoot<wire::LeaseRelease>(m.GetBufferPointer()));
  }

  // `c` holds the one device and has as many requests for it waiting as one client may.
  void hold_and_fill_queue(RecordingClient &c) {
    request(c, gpus(1, 1));
    leases.schedule();
    ASSERT_EQ(c.last().body_type(), wire::Body::LeaseGranted);
    for (RequestId id = 2; id < 2 + kMaxQueuedPerClient; ++id) request(c, gpus(id, 1));
    ASSERT_EQ(book.queued_count(c.id), kMaxQueuedPerClient);
  }

  LeaseBook book{one_device(), 4, Policy{}};
  ClientTable clients;
  Deadlines deadlines;
  double t = 0;
  std::vector<std::string> lines;
  Log log = [this](const std::string &line) { lines.push_back(line); };
  Clock now = [this] { return t; };
  JobKeeper jobs{book, 10, [this] { return clients.next_id(); }, log};
  // Never opened: it saves nothing, as a service whose grants file could not be had.
  GrantSaver saver{book, jobs, [](ClientId) { return HolderProcess{}; }, 0, log};
  LeaseHandler leases{{book, jobs, saver, clients, deadlines, log, now}};
  std::vector<std::unique_ptr<RecordingClient>> owned;
};

TEST_F(LeaseHandlerTest, AFloodPastTheClientBoundIsRefusedWhileAnotherClientIsServed) {
  RecordingClient &flood = connect(1000, "flood");
  RecordingClient &good = connect(1001, "good");
  hold_and_fill_queue(flood);
  const size_t frames = flood.frames.size();
  request(flood, gpus(5000, 1));
  ASSERT_EQ(flood.frames.size(), frames + 1);
  const wire::LeaseRefused *refused = flood.last().body_as_LeaseRefused();
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->request_id(), 5000u);
  EXPECT_EQ(refused->status(), GF_ERR_STATE);
  EXPECT_NE(wire::str(refused->reason()).find("the most one client may have"), std::string::npos);
  EXPECT_EQ(book.queued_count(flood.id), kMaxQueuedPerClient);
  EXPECT_TRUE(flood.dropped.empty()) << "a refused request keeps its client";

  // A request of another client that fits is granted at the next pass, flood or not.
  request(good, cpus(1, 1));
  leases.schedule_if_due();
  const wire::LeaseGranted *granted = good.last().body_as_LeaseGranted();
  ASSERT_NE(granted, nullptr);
  EXPECT_EQ(granted->request_id(), 1u);
}

TEST_F(LeaseHandlerTest, ARequestThatFitsNowIsNotKeptOutByTheBound) {
  RecordingClient &c = connect(1000, "busy");
  hold_and_fill_queue(c);
  request(c, cpus(9000, 1));  // CPUs are free: it would not wait
  leases.schedule_if_due();
  const wire::LeaseGranted *granted = c.last().body_as_LeaseGranted();
  ASSERT_NE(granted, nullptr);
  EXPECT_EQ(granted->request_id(), 9000u);
}

TEST_F(LeaseHandlerTest, ARequestWithIdZeroIsRefusedNamingTheField) {
  RecordingClient &c = connect(1000, "someone");
  request(c, gpus(0, 1));
  ASSERT_EQ(c.frames.size(), 1u);
  const wire::LeaseRefused *refused = c.last().body_as_LeaseRefused();
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->status(), GF_ERR_INVALID_ARGUMENT);
  EXPECT_NE(wire::str(refused->reason()).find("LeaseRequest.request_id"), std::string::npos);
  EXPECT_EQ(book.queued_count(c.id), 0u);
  EXPECT_TRUE(c.dropped.empty());
}

TEST_F(LeaseHandlerTest, ARequestTheNodeCannotGrantIsRefusedAsInfeasible) {
  RecordingClient &c = connect(1000, "someone");
  request(c, gpus(1, 2));  // the node has one device
  const wire::LeaseRefused *refused = c.last().body_as_LeaseRefused();
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->status(), GF_ERR_INFEASIBLE);
  EXPECT_NE(wire::str(refused->reason()).find("the node has 1 GPU"), std::string::npos);
}

TEST_F(LeaseHandlerTest, ARequestTimesOutAtItsDeadlineAndNotBefore) {
  RecordingClient &holder = connect(1000, "holder");
  RecordingClient &waiter = connect(1001, "waiter");
  request(holder, gpus(1, 1));
  leases.schedule();
  request(waiter, gpus(7, 1, 500));
  leases.schedule_if_due();
  t = 0.4;
  deadlines.expire(t);
  EXPECT_TRUE(waiter.frames.empty());
  t = 0.5;
  deadlines.expire(t);
  ASSERT_EQ(waiter.frames.size(), 1u);
  const wire::LeaseRefused *refused = waiter.last().body_as_LeaseRefused();
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->request_id(), 7u);
  EXPECT_EQ(refused->status(), GF_TIMEOUT);
  EXPECT_EQ(book.queued_count(waiter.id), 0u);
}

TEST_F(LeaseHandlerTest, OnlyTheHolderReleasesALeaseAndItsDepartureFreesTheRest) {
  RecordingClient &a = connect(1000, "a");
  RecordingClient &b = connect(1001, "b");
  const LeaseId lease = granted(a);
  release(b, 3, lease);
  const wire::Error *error = b.last().body_as_Error();
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->status(), GF_ERR_NOT_FOUND);
  EXPECT_NE(book.lease(lease), nullptr);

  request(b, gpus(2, 1));
  clients.remove(a.id);
  EXPECT_EQ(leases.client_gone(a), "; 1 lease(s) released, 0 request(s) dropped");
  leases.schedule_if_due();  // a departure is a reason for a pass
  ASSERT_NE(b.last().body_as_LeaseGranted(), nullptr);
}

// A release that asks for an answer (every client before issue 29's) is still answered.
TEST_F(LeaseHandlerTest, AnAnsweredReleaseIsAnsweredWithItsRequestId) {
  RecordingClient &a = connect(1000, "a");
  const LeaseId lease = granted(a);
  release(a, 2, lease);
  const wire::Released *released = a.last().body_as_Released();
  ASSERT_NE(released, nullptr);
  EXPECT_EQ(released->request_id(), 2u);
  EXPECT_EQ(released->lease_id(), lease);
  EXPECT_EQ(book.lease(lease), nullptr);
}

// A quiet release (wire.fbs) frees the devices for whoever waits, and its holder hears nothing.
TEST_F(LeaseHandlerTest, AQuietReleaseFreesTheDevicesWithoutAnAnswer) {
  RecordingClient &a = connect(1000, "a");
  RecordingClient &b = connect(1001, "b");
  const LeaseId lease = granted(a);
  request(b, gpus(1, 1));
  leases.schedule_if_due();
  ASSERT_EQ(b.frames.size(), 0u) << "b waits while a holds the device";
  const size_t heard = a.frames.size();
  release(a, 0, lease, true);
  EXPECT_EQ(a.frames.size(), heard) << "a quiet release is not answered";
  EXPECT_EQ(book.lease(lease), nullptr);
  leases.schedule_if_due();  // a release is a reason for a pass
  ASSERT_EQ(b.frames.size(), 1u);
  EXPECT_NE(b.last().body_as_LeaseGranted(), nullptr);
}

// A quiet release the service refuses is logged, not answered: nobody reads the answer, and an
// Error without a request id would read as the connection's last word.
TEST_F(LeaseHandlerTest, ARefusedQuietReleaseIsLoggedNotAnswered) {
  RecordingClient &a = connect(1000, "a");
  RecordingClient &b = connect(1001, "b");
  const LeaseId lease = granted(a);
  release(b, 0, lease, true);
  EXPECT_EQ(b.frames.size(), 0u);
  EXPECT_NE(book.lease(lease), nullptr) << "only its holder releases it";
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(
      lines.back().find("quiet release refused: lease " + std::to_string(lease) + " is not yours"),
      std::string::npos)
      << lines.back();
}

// A lease saved before a restart, kept for this test's own process (a holder that still runs).
LeaseId keep_for_this_process(JobKeeper &jobs, double now) {
  Lease lease;
  lease.id = 7;
  lease.request = 1;
  lease.devices = {{0, FixedPoint::from_double(1), uint64_t{1} << 34}};
  HolderProcess holder;
  holder.pid = static_cast<uint32_t>(::getpid());
  holder.start = jobs::start_time(holder.pid);
  holder.uid = 1000;
  holder.user = "alice";
  holder.name = "notebook";
  jobs.keep_restored(lease, holder, 0, now);
  return lease.id;
}

void reclaim(LeaseHandler &leases, Client &c, RequestId id, LeaseId lease) {
  fb::FlatBufferBuilder m;
  m.Finish(wire::CreateLeaseReclaim(m, id, lease));
  leases.on_lease_reclaim(c, *fb::GetRoot<wire::LeaseReclaim>(m.GetBufferPointer()));
}

TEST_F(LeaseHandlerTest, OnlyTheProcessAKeptLeaseWasKeptForTakesItBack) {
  const LeaseId kept = keep_for_this_process(jobs, t);
  ASSERT_NE(book.lease(kept), nullptr);
  const ClientId keeper = book.lease(kept)->client;

  RecordingClient &other = connect(1000, "alice");  // another pid of the same user
  reclaim(leases, other, 5, kept);
  const wire::Error *refused = other.last().body_as_Error();
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->request_id(), 5u);
  EXPECT_EQ(refused->status(), GF_ERR_NOT_FOUND);
  EXPECT_NE(refused->message()->str().find("kept for pid " + std::to_string(::getpid())),
            std::string::npos)
      << refused->message()->str();
  EXPECT_EQ(book.lease(kept)->client, keeper) << "a refused reclaim moved the lease";

  RecordingClient &remote = connect(1000, "alice");
  remote.peer.remote = true;
  remote.peer.pid = static_cast<uint32_t>(::getpid());
  reclaim(leases, remote, 6, kept);
  ASSERT_NE(remote.last().body_as_Error(), nullptr);
  EXPECT_EQ(remote.last().body_as_Error()->status(), GF_ERR_STATE);

  RecordingClient &holder = connect(1000, "alice");
  holder.peer.pid = static_cast<uint32_t>(::getpid());
  holder.peer.start = jobs::start_time(holder.peer.pid);
  reclaim(leases, holder, 8, kept);
  const wire::LeaseGranted *back = holder.last().body_as_LeaseGranted();
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->request_id(), 8u);
  EXPECT_EQ(back->lease_id(), kept);
  ASSERT_EQ(back->devices()->size(), 1u);
  EXPECT_EQ(back->devices()->Get(0)->uuid()->str(), "GPU-test");
  EXPECT_EQ(book.lease(kept)->client, holder.id);
  EXPECT_FALSE(jobs.keeping()) << "the keeper outlived the lease it kept";

  // Taken back once: a second reclaim finds nothing kept, and the lease is the holder's to
  // release.
  reclaim(leases, holder, 9, kept);
  ASSERT_NE(holder.last().body_as_Error(), nullptr);
  EXPECT_EQ(holder.last().body_as_Error()->status(), GF_ERR_NOT_FOUND);
  release(holder, 10, kept);
  EXPECT_EQ(book.lease(kept), nullptr);
}

}  // namespace
}  // namespace gf::service
