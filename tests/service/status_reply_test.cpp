// The status reply is bounded by construction (service/status_reply.hpp): whatever the book
// holds, the frame fits wire::kMaxFrame and says what it left out.
#include "service/status_reply.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/utf8.hpp"

namespace gf::service {
namespace {

std::vector<DeviceSlot> devices(int n) {
  std::vector<DeviceSlot> out;
  for (int i = 0; i < n; ++i) {
    DeviceSlot s;
    s.ordinal = i;
    s.uuid = "GPU-00000000-gpuf-emul-0000-" + std::to_string(100000000000 + i);
    s.pci_bus_id = "0000:00:00." + std::to_string(i);
    s.name = "test device";
    s.memory = uint64_t{1} << 34;
    out.push_back(s);
  }
  return out;
}

struct Reply {
  std::vector<uint8_t> frame;
  std::vector<uint8_t> payload;
  const wire::StatusReply *status = nullptr;
};

// Builds the reply for a privileged asker and reads it back through the client's own reader.
Reply reply_of(const LeaseBook &book, const ClientPeers &peers, StatusLimits limits = {}) {
  StatusContext context;
  context.asker_privileged = true;
  Reply r;
  r.frame = status_reply_frame(book, context, 7, peers, limits);
  wire::FrameReader reader;
  EXPECT_EQ(reader.feed(reinterpret_cast<const char *>(r.frame.data()), r.frame.size()), "");
  std::string error;
  EXPECT_TRUE(reader.next(r.payload, error)) << error;
  if (!r.payload.empty()) r.status = wire::message_of(r.payload)->body_as_StatusReply();
  return r;
}

Peer someone() {
  Peer p;
  p.uid = 1000;
  p.pid = 42;
  p.user = "someone";
  return p;
}

LeaseAsk named(double gpus, double cpus, const std::string &name) {
  LeaseAsk a;
  a.gpus = gpus;
  a.cpus = cpus;
  a.name = name;
  return a;
}

TEST(StatusReply, ListsAreCappedAndCountWhatTheyLeaveOut) {
  LeaseBook book(devices(1), 64, {});
  ClientInfo info;
  info.uid = 1000;
  info.user = "someone";
  info.name = "many";
  book.add_client(1, info);
  const std::string long_name(4096, 'n');
  RequestId next = 1;
  double t = 0;
  for (int i = 0; i < 30; ++i, ++next, t += 1) {  // ended
    ASSERT_EQ(book.submit(1, next, named(0, 0.01, long_name), t).why, "");
    ASSERT_EQ(book.schedule(t).size(), 1u);
    ASSERT_TRUE(book.release(1, book.leases().back().id, false, t));
  }
  for (int i = 0; i < 20; ++i, ++next) {
    ASSERT_EQ(book.submit(1, next, named(0, 0.01, long_name), t).why, "");
  }
  ASSERT_EQ(book.schedule(t).size(), 20u);
  for (int i = 0; i < 5; ++i, ++next) {  // queued: they do not fit beside the 20
    ASSERT_EQ(book.submit(1, next, named(0, 64, long_name), t).why, "");
  }
  ASSERT_EQ(book.schedule(t).size(), 0u);
  ClientPeers peers{{1, {someone(), "many"}}};

  StatusLimits limits;
  limits.leases = 8, limits.queued = 2, limits.clients = 1, limits.ended = 10;
  limits.name_bytes = 100;
  Reply r = reply_of(book, peers, limits);
  ASSERT_NE(r.status, nullptr);
  EXPECT_EQ(r.status->leases()->size(), 8u);
  EXPECT_EQ(r.status->leases_omitted(), 12u);
  EXPECT_EQ(r.status->queued()->size(), 2u);
  EXPECT_EQ(r.status->queued_omitted(), 3u);
  EXPECT_EQ(r.status->clients()->size(), 1u);
  EXPECT_EQ(r.status->clients_omitted(), 0u);
  EXPECT_EQ(r.status->ended()->size(), 10u);
  EXPECT_EQ(r.status->ended_omitted(), 20u);
  // The most recent ended leases, oldest of them first.
  EXPECT_EQ(r.status->ended()->Get(9)->lease_id(), book.ended()[29].lease.id);
  EXPECT_EQ(r.status->ended()->Get(0)->lease_id(), book.ended()[20].lease.id);
  // Names cut to the bound, marked as cut.
  const std::string shown = r.status->leases()->Get(0)->name()->str();
  EXPECT_EQ(shown, utf8_abbreviated(long_name, 100));
  EXPECT_LE(shown.size(), 100u);
  EXPECT_EQ(shown.substr(shown.size() - 3), "\xe2\x80\xa6");
}

TEST(StatusReply, ATooLargeReplyDropsHistoryFirstAndStillFits) {
  // Whole-node leases of 128 devices: each ended one lists 128 grants, so a full history alone
  // is far over the frame limit, however short the names.
  const int kDevices = 128;
  LeaseBook book(devices(kDevices), 4, {});
  ClientInfo info;
  info.uid = 1000;
  info.user = "someone";
  book.add_client(1, info);
  const std::string long_name(4096, 'n');
  double t = 0;
  for (RequestId id = 1; id <= kEndedLeasesKept; ++id, t += 1) {
    ASSERT_EQ(book.submit(1, id, named(kDevices, 0, long_name), t).why, "");
    ASSERT_EQ(book.schedule(t).size(), 1u);
    ASSERT_TRUE(book.release(1, book.leases().back().id, false, t));
  }
  ClientPeers peers{{1, {someone(), ""}}};
  Reply r = reply_of(book, peers);
  ASSERT_NE(r.status, nullptr);
  EXPECT_LE(r.frame.size(), 4 + size_t{wire::kMaxFrame});
  EXPECT_GT(r.status->ended_omitted(), 0u);
  EXPECT_GT(r.status->ended()->size(), 0u);
  EXPECT_EQ(r.status->ended()->size() + r.status->ended_omitted(), kEndedLeasesKept);
  EXPECT_EQ(r.status->devices()->size(), static_cast<size_t>(kDevices));
}

}  // namespace
}  // namespace gf::service
