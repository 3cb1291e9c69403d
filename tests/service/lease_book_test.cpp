#include "service/lease_book.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "core/error.hpp"

namespace gf::service {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

FixedPoint fp(double v) {
  return FixedPoint::from_double(v);
}

std::vector<DeviceSlot> gpus(int n, uint64_t memory = 16 * kGiB) {
  std::vector<DeviceSlot> out;
  for (int i = 0; i < n; ++i) {
    DeviceSlot s;
    s.ordinal = i;
    s.uuid = "GPU-" + std::to_string(i);
    s.name = "test";
    s.memory = memory;
    out.push_back(s);
  }
  return out;
}

LeaseAsk ask(double g, uint64_t memory = 0, double cpus = 0) {
  LeaseAsk a;
  a.gpus = g;
  a.gpu_memory = memory;
  a.cpus = cpus;
  return a;
}

ClientInfo who(uint32_t uid, double weight = 1) {
  ClientInfo c;
  c.uid = uid;
  c.user = std::to_string(uid);  // ("u" + … trips GCC 12's -Wrestrict false positive at -O3)
  c.user.insert(c.user.begin(), 'u');
  c.weight = weight;
  return c;
}

// Holds the book to its invariant and to capacity after an operation.
void check(const LeaseBook &book) {
  book.check_invariant();
  for (const auto &d : book.devices()) {
    EXPECT_LE(d.share_in_use, fp(1)) << "device " << d.slot.ordinal;
    EXPECT_LE(d.memory_in_use, d.slot.memory) << "device " << d.slot.ordinal;
  }
  EXPECT_LE(book.cpus_in_use(), fp(book.cpus()));
}

// The operations, each followed by check(): the invariant holds after every one.
std::vector<Lease> schedule_(LeaseBook &b, double now) {
  auto out = b.schedule(now);
  check(b);
  return out;
}
// Why the request was refused ("" when it was queued); every refusal at submit is infeasible.
std::string submit_(LeaseBook &b, ClientId c, RequestId r, const LeaseAsk &a, double now) {
  Refusal out = b.submit(c, r, a, now);
  check(b);
  if (out) {
    EXPECT_EQ(out.status, GF_ERR_INFEASIBLE) << out.why;
  }
  return out.why;
}
bool release_(LeaseBook &b, ClientId c, LeaseId l, bool privileged, double now) {
  bool out = b.release(c, l, privileged, now);
  check(b);
  return out;
}
bool cancel_(LeaseBook &b, ClientId c, RequestId r) {
  bool out = b.cancel(c, r);
  check(b);
  return out;
}
std::vector<LeaseId> remove_client_(LeaseBook &b, ClientId c, double now) {
  auto out = b.remove_client(c, now);
  check(b);
  return out;
}
std::vector<LeaseId> revoke_for_(LeaseBook &b, ClientId c, double now) {
  auto out = b.revoke_for(c, now);
  check(b);
  return out;
}

std::vector<int32_t> ordinals(const Lease &l) {
  std::vector<int32_t> out;
  for (const auto &d : l.devices) out.push_back(d.ordinal);
  return out;
}

// Simulated time: leases end `hold[client]` seconds after their grant; a client in `again`
// submits that ask once more as soon as a lease of its ends (and schedule() runs after each
// event, as the service does). `busy` sums device units × seconds held per client.
struct Sim {
  explicit Sim(LeaseBook &b) : book(b) {}
  LeaseBook &book;
  double now = 0;
  RequestId next = 1;
  std::map<LeaseId, double> ends;
  std::map<ClientId, double> hold;
  std::map<ClientId, LeaseAsk> again;
  std::map<ClientId, double> busy;
  std::vector<std::pair<double, Lease>> grants;

  void submit(ClientId c, const LeaseAsk &a) {
    ASSERT_EQ(submit_(book, c, next++, a, now), "");
    check(book);
  }
  void schedule() {
    for (const auto &l : schedule_(book, now)) {
      ends[l.id] = now + hold.at(l.client);
      grants.emplace_back(now, l);
    }
    check(book);
  }
  void run_until(double t) {
    while (true) {
      auto first = std::min_element(ends.begin(), ends.end(), [](const auto &a, const auto &b) {
        return a.second < b.second;
      });
      if (first == ends.end() || first->second > t) break;
      LeaseId id = first->first;
      now = first->second;
      ends.erase(first);
      const Lease *l = book.lease(id);
      ASSERT_NE(l, nullptr);
      ClientId c = l->client;
      double units = 0;
      for (const auto &d : l->devices) units += d.share.to_double();
      busy[c] += units * (now - l->since);
      ASSERT_TRUE(release_(book, c, id, false, now));
      check(book);
      if (again.contains(c)) submit(c, again.at(c));
      schedule();
    }
    now = t;
    schedule();
  }
  size_t granted_to(ClientId c, double from, double to) const {
    return static_cast<size_t>(std::count_if(grants.begin(), grants.end(), [&](const auto &g) {
      return g.second.client == c && g.first >= from && g.first <= to;
    }));
  }
};

// Two flooding clients, each lease held 1 s: the device time over 400 s.
std::pair<double, double> flood(LeaseBook &book, ClientId a, ClientId b) {
  Sim sim(book);
  for (ClientId c : {a, b}) {
    sim.hold[c] = 1;
    sim.again[c] = ask(1);
    sim.submit(c, ask(1));
  }
  sim.schedule();
  sim.run_until(400);
  return {sim.busy[a], sim.busy[b]};
}

}  // namespace

// --- placement

TEST(LeaseBook, WholeDevicesTakeOnlyEntirelyFreeDevices) {
  LeaseBook book(gpus(2), 8, {});
  book.add_client(1, who(100));
  ASSERT_EQ(submit_(book, 1, 1, ask(0.5), 0), "");
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(ordinals(g[0]), std::vector<int32_t>{0});
  check(book);

  ASSERT_EQ(submit_(book, 1, 2, ask(2), 0), "");
  EXPECT_TRUE(schedule_(book, 0).empty()) << "device 0 is partly used: two whole ones do not fit";
  ASSERT_TRUE(cancel_(book, 1, 2));
  ASSERT_EQ(submit_(book, 1, 3, ask(1), 0), "");
  g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(ordinals(g[0]), std::vector<int32_t>{1});
  EXPECT_EQ(g[0].devices[0].share, fp(1));
  EXPECT_EQ(g[0].devices[0].memory, 16 * kGiB) << "gpu_memory 0: all of the device";
  check(book);

  // gpu_memory > 0 on whole devices: that many bytes of each, the whole share still.
  LeaseBook two(gpus(2), 8, {});
  two.add_client(1, who(100));
  ASSERT_EQ(submit_(two, 1, 1, ask(2, 3 * kGiB), 0), "");
  g = schedule_(two, 0);
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(g[0].devices.size(), 2u);
  for (const auto &d : g[0].devices) {
    EXPECT_EQ(d.share, fp(1));
    EXPECT_EQ(d.memory, 3 * kGiB);
  }
  ASSERT_EQ(submit_(two, 1, 2, ask(0.1, 1 * kGiB), 0), "");
  EXPECT_TRUE(schedule_(two, 0).empty()) << "a whole device takes the whole share";
  check(two);
}

TEST(LeaseBook, FractionsGoWhereTheyFitMostTightly) {
  LeaseBook book(gpus(3), 8, {});
  book.add_client(1, who(100));
  RequestId id = 1;
  auto one = [&](double share) {
    EXPECT_EQ(submit_(book, 1, id++, ask(share), 0), "");
    auto g = schedule_(book, 0);
    EXPECT_EQ(g.size(), 1u);
    check(book);
    return g.empty() ? -1 : g[0].devices.at(0).ordinal;
  };
  EXPECT_EQ(one(0.5), 0);
  EXPECT_EQ(one(0.25), 0) << "the used device before an empty one";
  EXPECT_EQ(one(0.5), 1) << "does not fit device 0 (0.75 used)";
  EXPECT_EQ(one(0.25), 0) << "device 0 (0.75) is tighter than device 1 (0.5)";
  EXPECT_EQ(one(0.5), 1) << "0.5 + 0.5 is exactly 1";
  auto devices = book.devices();
  EXPECT_EQ(devices[0].share_in_use, fp(1));
  EXPECT_EQ(devices[1].share_in_use, fp(1));
  EXPECT_EQ(devices[2].share_in_use, fp(0));
  EXPECT_EQ(devices[0].memory_in_use, 16 * kGiB) << "0.5 + 0.25 + 0.25 of the memory";
}

TEST(LeaseBook, FractionMemoryIsTheShareRoundedDownOrAsAsked) {
  LeaseBook book(gpus(2, 1001), 8, {});
  book.add_client(1, who(100));
  ASSERT_EQ(submit_(book, 1, 1, ask(0.5), 0), "");
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].devices[0].memory, 500u) << "floor(0.5 x 1001)";
  // 0.25 of the share but 900 bytes: device 0 has 501 left, so device 1.
  ASSERT_EQ(submit_(book, 1, 2, ask(0.25, 900), 0), "");
  g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].devices[0].ordinal, 1);
  EXPECT_EQ(g[0].devices[0].memory, 900u);
  // Share left on both, memory on neither for 600 bytes: waits.
  ASSERT_EQ(submit_(book, 1, 3, ask(0.1, 600), 0), "");
  EXPECT_TRUE(schedule_(book, 0).empty());
  check(book);
}

TEST(LeaseBook, DevicesRestrictTheChoice) {
  LeaseBook book(gpus(4), 8, {});
  book.add_client(1, who(100));
  LeaseAsk a = ask(2);
  a.devices = {3, 1};
  ASSERT_EQ(submit_(book, 1, 1, a, 0), "");
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(ordinals(g[0]), (std::vector<int32_t>{1, 3}));
  LeaseAsk f = ask(0.5);
  f.devices = {3};
  ASSERT_EQ(submit_(book, 1, 2, f, 0), "");
  EXPECT_TRUE(schedule_(book, 0).empty()) << "device 3 is taken; 0 and 2 are not allowed";
  check(book);
}

TEST(LeaseBook, CpuOnlyLeases) {
  LeaseBook book(gpus(1), 4, {});
  book.add_client(1, who(100));
  ASSERT_EQ(submit_(book, 1, 1, ask(0, 0, 2.5), 0), "");
  ASSERT_EQ(submit_(book, 1, 2, ask(0, 0, 1.5), 0), "");
  ASSERT_EQ(submit_(book, 1, 3, ask(0, 0, 0.5), 0), "");
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(g[0].devices.empty());
  EXPECT_EQ(g[0].cpus, fp(2.5));
  EXPECT_EQ(book.cpus_in_use(), fp(4));
  EXPECT_EQ(book.devices()[0].share_in_use, fp(0));
  EXPECT_EQ(book.queued(0).size(), 1u);
  check(book);
}

TEST(LeaseBook, SubmitRefusesWhatCanNeverBeGranted) {
  Policy p;
  p.client_gpu_cap = 2;
  p.user_gpu_cap = 3;
  std::vector<DeviceSlot> slots = gpus(3);
  slots[2].memory = 32 * kGiB;
  LeaseBook book(slots, 8, p);
  book.add_client(1, who(100));
  auto with_devices = [](LeaseAsk a, std::vector<int32_t> d) {
    a.devices = std::move(d);
    return a;
  };
  struct Case {
    LeaseAsk ask;
    std::vector<std::string> says;
  };
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Case> cases = {
      {ask(1.5), {"gpus 1.5", "whole number"}},
      {ask(-1), {"gpus -1"}},
      {ask(nan), {"gpus nan"}},
      {ask(std::numeric_limits<double>::infinity()), {"gpus inf"}},
      {ask(4), {"4 GPUs", "the node has 3 GPUs"}},
      {with_devices(ask(2), {0}), {"2 GPUs", "1 allowed device"}},
      {with_devices(ask(1), {7}), {"device 7 does not exist", "0, 1, 2"}},
      {ask(1, 64 * kGiB), {"gpu_memory 68719476736", "at most 34359738368"}},
      {with_devices(ask(1, 20 * kGiB), {0, 1}), {"allowed device", "17179869184"}},
      {ask(2, 20 * kGiB), {"only 1 device"}},
      {ask(0, 0, 9), {"9 CPUs", "the node has 8"}},
      {ask(0, 0, -2), {"cpus -2"}},
      {ask(0), {"asks for nothing"}},
      {ask(0, kGiB), {"gpu_memory", "without gpus"}},
      {ask(0.00001), {"smallest share"}},
      {ask(3), {"3 GPUs", "a client may hold at most 2"}},
  };
  RequestId id = 1;
  for (const auto &c : cases) {
    std::string why = submit_(book, 1, id++, c.ask, 0);
    for (const auto &s : c.says) EXPECT_NE(why.find(s), std::string::npos) << why << " / " << s;
    EXPECT_TRUE(book.queued(0).empty()) << why;
    check(book);
  }
  ASSERT_EQ(submit_(book, 1, 99, ask(1), 0), "");
  EXPECT_NE(submit_(book, 1, 99, ask(1), 0).find("already queued"), std::string::npos);
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NE(submit_(book, 1, 99, ask(1), 0).find("already holds lease"), std::string::npos);
  EXPECT_NE(submit_(book, 42, 1, ask(1), 0).find("unknown client 42"), std::string::npos);
  EXPECT_TRUE(book.queued(0).empty());

  LeaseBook none(gpus(0), 8, {});
  none.add_client(1, who(100));
  EXPECT_EQ(submit_(none, 1, 1, ask(1), 0), "asks for 1 GPU; the node has 0 GPUs");
  EXPECT_EQ(submit_(none, 1, 2, ask(0.5), 0), "asks for 1 GPU; the node has 0 GPUs");
  EXPECT_EQ(submit_(none, 1, 3, ask(0, 0, 8), 0), "");

  Policy user_cap;
  user_cap.user_gpu_cap = 1;
  LeaseBook capped(gpus(3), 8, user_cap);
  capped.add_client(1, who(100));
  EXPECT_NE(submit_(capped, 1, 1, ask(2), 0).find("a user may hold at most 1"), std::string::npos);
}

TEST(LeaseBook, ConstructionAndClientsRejectBadValues) {
  EXPECT_THROW(LeaseBook(gpus(1), -1, {}), Error);
  auto dup = gpus(2);
  dup[1].ordinal = 0;
  EXPECT_THROW(LeaseBook(dup, 1, {}), Error);
  Policy bad;
  bad.user_weights[5] = 0;
  EXPECT_THROW(LeaseBook(gpus(1), 1, bad), Error);
  Policy half;
  half.usage_half_life_s = 0;
  EXPECT_THROW(LeaseBook(gpus(1), 1, half), Error);

  LeaseBook book(gpus(1), 1, {});
  EXPECT_THROW(book.add_client(1, who(1, 0)), Error);
  EXPECT_THROW(book.add_client(1, who(1, std::numeric_limits<double>::quiet_NaN())), Error);
  book.add_client(1, who(1));
  EXPECT_THROW(book.add_client(1, who(1)), Error);
}

// --- order

TEST(LeaseBook, WithinAClientPriorityThenArrival) {
  LeaseBook book(gpus(1), 8, {});
  book.add_client(1, who(100));
  LeaseAsk low = ask(1), high = ask(1);
  high.priority = 5;
  ASSERT_EQ(submit_(book, 1, 1, low, 0), "");
  ASSERT_EQ(submit_(book, 1, 2, high, 1), "");
  ASSERT_EQ(submit_(book, 1, 3, low, 2), "");
  ASSERT_EQ(submit_(book, 1, 4, high, 3), "");
  std::vector<RequestId> order;
  for (const auto &q : book.queued(3)) order.push_back(q.request);
  EXPECT_EQ(order, (std::vector<RequestId>{2, 4, 1, 3}));
  auto g = schedule_(book, 3);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].request, 2u);
}

TEST(LeaseBook, UsageIsDecayedDominantShare) {
  Policy p;
  p.usage_half_life_s = 100;
  LeaseBook book(gpus(2, 10 * kGiB), 4, p);
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  book.add_client(3, who(300));
  ASSERT_EQ(submit_(book, 1, 1, ask(2), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);
  auto views = book.clients(100);
  EXPECT_NEAR(views[0].dominant_share, 1.0, 1e-12);
  double h = 100 / std::log(2.0);
  EXPECT_NEAR(views[0].usage, h * 0.5, 1e-6) << "held the whole node for one half-life";
  ASSERT_TRUE(release_(book, 1, 1, false, 100));
  EXPECT_NEAR(book.clients(200)[0].usage, h * 0.25, 1e-6) << "halved in one more half-life";
  EXPECT_NEAR(book.clients(150)[0].usage, h * 0.5 / std::sqrt(2.0), 1e-6);
  // A `now` earlier than one already seen counts as that one: usage never grows backwards.
  ASSERT_EQ(submit_(book, 1, 2, ask(0, 0, 1), 50), "");
  EXPECT_NEAR(book.clients(0)[0].usage, h * 0.5, 1e-6);

  // Memory or CPUs can be the dominant share.
  ASSERT_EQ(submit_(book, 2, 1, ask(0.1, 10 * kGiB), 100), "");
  ASSERT_EQ(submit_(book, 3, 1, ask(0, 0, 3.5), 100), "");
  ASSERT_EQ(schedule_(book, 100).size(), 2u);
  views = book.clients(100);
  EXPECT_NEAR(views[1].dominant_share, 0.5, 1e-12) << "all the memory of one device of two";
  EXPECT_NEAR(views[1].gpus_in_use, 0.1, 1e-12);
  EXPECT_NEAR(views[2].dominant_share, 0.875, 1e-12) << "3.5 of 4 CPUs";
  EXPECT_EQ(views[1].leases, 1u);
  EXPECT_EQ(views[0].queued, 1u) << "client 1's 1 CPU does not fit next to 3.5 of 4";
  check(book);
}

TEST(LeaseBookFairShare, ClientsOfOneUserSplitByTheirWeights) {
  LeaseBook book(gpus(1), 8, {});
  book.add_client(1, who(100, 1));
  book.add_client(2, who(100, 3));
  auto [a, b] = flood(book, 1, 2);
  EXPECT_GT(a + b, 395) << "the device is never left idle";
  EXPECT_NEAR(b / a, 3.0, 0.3) << a << " s vs " << b << " s";
}

TEST(LeaseBookFairShare, UsersSplitByUserWeights) {
  Policy p;
  p.user_weights = {{100, 1}, {200, 3}};
  LeaseBook book(gpus(1), 8, p);
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  auto [a, b] = flood(book, 1, 2);
  EXPECT_NEAR(b / a, 3.0, 0.3) << a << " s vs " << b << " s";
}

TEST(LeaseBookFairShare, AClaimedWeightGainsNothingAgainstOtherUsers) {
  LeaseBook book(gpus(1), 8, {});
  book.add_client(1, who(100, 100));
  book.add_client(2, who(100, 1));
  book.add_client(3, who(200, 1));
  Sim sim(book);
  for (ClientId c : {1, 2, 3}) {
    sim.hold[c] = 1;
    sim.again[c] = ask(1);
    sim.submit(c, ask(1));
  }
  sim.schedule();
  sim.run_until(400);
  double mine = sim.busy[1] + sim.busy[2], theirs = sim.busy[3];
  EXPECT_NEAR(mine / theirs, 1.0, 0.1) << mine << " s vs " << theirs << " s";
  EXPECT_GT(sim.busy[1], sim.busy[2]) << "within the user, the weight counts";
}

// --- reserve, then backfill

TEST(LeaseBook, AWideRequestIsNotStarvedByAStreamOfNarrowOnes) {
  LeaseBook book(gpus(4), 8, {});
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  Sim sim(book);
  sim.hold[1] = 1;
  sim.hold[2] = 1;
  sim.again[1] = ask(1);
  // Client 1 starts a lease every 0.25 s and keeps two more queued: staggered, so some device
  // frees every 0.25 s and one of its requests is always there to take it.
  for (double t : {0.0, 0.25, 0.5, 0.75}) {
    sim.run_until(t);
    sim.submit(1, ask(1));
    sim.schedule();
  }
  sim.submit(1, ask(1));
  sim.submit(1, ask(1));
  sim.run_until(2.1);
  ASSERT_EQ(book.leases().size(), 4u);
  ASSERT_GT(sim.granted_to(1, 1, 2.1), 3u) << "the stream runs";

  sim.submit(2, ask(4));
  sim.schedule();
  auto q = book.queued(sim.now);
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(q[0].client, 2u);
  EXPECT_TRUE(q[0].reserved);
  sim.run_until(3.1);  // every lease running at 2.1 has ended by 3.0
  ASSERT_EQ(sim.granted_to(2, 2.1, 3.1), 1u) << "the 4-GPU request waited past its bound";
  EXPECT_EQ(sim.granted_to(1, 2.1, 3.0), 0u) << "nothing backfilled onto reserved devices";
  sim.run_until(10);
  EXPECT_GT(sim.granted_to(1, 4, 10), 10u) << "the stream goes on after";
}

TEST(LeaseBook, LaterRequestsBackfillWhatNoReservationClaims) {
  LeaseBook book(gpus(4), 8, {});
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  book.add_client(3, who(300));
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);  // device 0
  LeaseAsk wide = ask(2);
  wide.devices = {0, 1};
  ASSERT_EQ(submit_(book, 2, 1, wide, 1), "");
  ASSERT_EQ(submit_(book, 3, 1, ask(1), 2), "");
  auto q = book.queued(2);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].client, 2u);
  EXPECT_TRUE(q[0].reserved);
  EXPECT_EQ(q[1].client, 3u);
  EXPECT_FALSE(q[1].reserved);
  auto g = schedule_(book, 2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 3u);
  EXPECT_EQ(ordinals(g[0]), std::vector<int32_t>{2}) << "device 1 is reserved";
  // A fraction may not go onto the reserved, free device 1 either.
  ASSERT_EQ(submit_(book, 3, 2, ask(0.5), 2), "");
  g = schedule_(book, 2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(ordinals(g[0]), std::vector<int32_t>{3});
  ASSERT_TRUE(release_(book, 1, 1, false, 3));
  g = schedule_(book, 3);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 2u);
  EXPECT_EQ(ordinals(g[0]), (std::vector<int32_t>{0, 1}));
  check(book);
}

// --- caps

TEST(LeaseBook, ClientCapMakesRequestsWait) {
  Policy p;
  p.client_gpu_cap = 1.5;
  LeaseBook book(gpus(4), 8, p);
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  EXPECT_NE(submit_(book, 1, 1, ask(2), 0), "");
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 0), "");
  ASSERT_EQ(submit_(book, 1, 3, ask(0.5), 0), "");
  ASSERT_EQ(submit_(book, 1, 4, ask(0.5), 0), "");
  ASSERT_EQ(submit_(book, 2, 1, ask(1), 0), "");
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 3u) << "1 + 0.5 for client 1, 1 for client 2";
  auto q = book.queued(0);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].request, 4u);
  EXPECT_FALSE(q[0].reserved) << "waiting on its own cap claims nothing";
  LeaseId half = 0;
  for (const auto &l : g) {
    if (l.request == 3) half = l.id;
  }
  ASSERT_TRUE(release_(book, 1, half, false, 1));
  g = schedule_(book, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].request, 4u);
  check(book);
}

TEST(LeaseBook, UserCapCountsAllTheUsersClients) {
  Policy p;
  p.user_gpu_cap = 2;
  LeaseBook book(gpus(4), 8, p);
  book.add_client(1, who(100));
  book.add_client(2, who(100));
  book.add_client(3, who(200));
  ASSERT_EQ(submit_(book, 1, 1, ask(2), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);
  ASSERT_EQ(submit_(book, 2, 1, ask(1), 1), "");
  ASSERT_EQ(submit_(book, 3, 1, ask(2), 1), "");
  auto g = schedule_(book, 1);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 3u) << "another user is not held by uid 100's cap";
  EXPECT_EQ(book.queued(1).size(), 1u);
  remove_client_(book, 1, 2);
  g = schedule_(book, 2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 2u);
  check(book);
}

// --- release, cancel, remove

TEST(LeaseBook, OnlyTheHolderOrAPrivilegedCallerReleases) {
  LeaseBook book(gpus(2), 8, {});
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 0), "");
  auto g = schedule_(book, 0);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FALSE(release_(book, 2, g[0].id, false, 1));
  EXPECT_NE(book.lease(g[0].id), nullptr);
  EXPECT_TRUE(release_(book, 2, g[0].id, true, 1));
  EXPECT_EQ(book.lease(g[0].id), nullptr);
  EXPECT_FALSE(release_(book, 1, g[0].id, false, 1)) << "already released";
  EXPECT_FALSE(release_(book, 1, 999, true, 1));
  EXPECT_TRUE(release_(book, 1, g[1].id, false, 1));
  EXPECT_TRUE(book.leases().empty());
  check(book);
}

TEST(LeaseBook, CancelWithdrawsOnlyTheCallersQueuedRequest) {
  LeaseBook book(gpus(1), 8, {});
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 0), "");
  EXPECT_FALSE(cancel_(book, 1, 1)) << "granted, not queued";
  EXPECT_FALSE(cancel_(book, 2, 2)) << "another client's";
  EXPECT_FALSE(cancel_(book, 1, 3)) << "never asked";
  EXPECT_TRUE(cancel_(book, 1, 2));
  EXPECT_FALSE(cancel_(book, 1, 2));
  EXPECT_TRUE(book.queued(0).empty());
  check(book);
}

TEST(LeaseBook, RemovingAClientFreesItsDevicesForOthers) {
  LeaseBook book(gpus(2), 8, {});
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  ASSERT_EQ(submit_(book, 1, 1, ask(2, 0, 4), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 0), "");
  ASSERT_EQ(submit_(book, 2, 1, ask(2, 0, 8), 1), "");
  EXPECT_TRUE(schedule_(book, 1).empty());
  auto gone = remove_client_(book, 1, 2);
  EXPECT_EQ(gone.size(), 1u);
  EXPECT_TRUE(remove_client_(book, 1, 2).empty()) << "already gone";
  EXPECT_EQ(book.clients(2).size(), 1u);
  auto g = schedule_(book, 2);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 2u);
  EXPECT_EQ(book.queued(2).size(), 0u) << "client 1's queued request went with it";
  check(book);
}

// --- revocation

TEST(LeaseBook, RevokeForMarksTheNewestLeasesOfTheMostOverShareHolder) {
  LeaseBook book(gpus(3), 8, {});
  book.add_client(1, who(100));
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);  // lease 1, device 0
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 5), "");
  ASSERT_EQ(schedule_(book, 5).size(), 1u);  // lease 2, device 1
  book.add_client(2, who(200));
  ASSERT_EQ(submit_(book, 2, 1, ask(1), 50), "");
  ASSERT_EQ(schedule_(book, 50).size(), 1u);  // lease 3, device 2
  // Client 3 asks for a whole device: client 1 (100 GPU-s) is further over than 2 (0).
  book.add_client(3, who(300));
  ASSERT_EQ(submit_(book, 3, 1, ask(1), 50), "");
  EXPECT_TRUE(schedule_(book, 50).empty());
  auto marked = revoke_for_(book, 3, 50);
  EXPECT_EQ(marked, std::vector<LeaseId>{2}) << "client 1's newest";
  EXPECT_TRUE(book.lease(2)->revoking);
  EXPECT_FALSE(book.lease(1)->revoking);
  EXPECT_EQ(book.devices()[1].share_in_use, fp(1)) << "revoking is still held";
  EXPECT_TRUE(revoke_for_(book, 3, 51).empty()) << "enough is already asked back";
  EXPECT_TRUE(schedule_(book, 51).empty());
  check(book);
  ASSERT_TRUE(release_(book, 1, 2, false, 52));
  auto g = schedule_(book, 52);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 3u);
  EXPECT_EQ(ordinals(g[0]), std::vector<int32_t>{1});
  check(book);
}

TEST(LeaseBook, RevokeForPassesOverLeasesThatWouldNotHelp) {
  LeaseBook book(gpus(2), 8, {});
  book.add_client(1, who(100));
  LeaseAsk on1 = ask(1), on0 = ask(1);
  on1.devices = {1};
  on0.devices = {0};
  ASSERT_EQ(submit_(book, 1, 1, on1, 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);  // lease 1 on device 1
  ASSERT_EQ(submit_(book, 1, 2, on0, 1), "");
  ASSERT_EQ(schedule_(book, 1).size(), 1u);  // lease 2 (newer) on device 0
  book.add_client(2, who(100));              // the same user: compared by client keys
  ASSERT_EQ(submit_(book, 2, 1, on1, 10), "");
  EXPECT_EQ(revoke_for_(book, 2, 10), std::vector<LeaseId>{1});
  EXPECT_FALSE(book.lease(2)->revoking);
  check(book);
}

TEST(LeaseBook, RevokeForLeavesHoldersWithinTheirShareAlone) {
  LeaseBook book(gpus(1), 8, {});
  book.add_client(1, who(100));
  book.add_client(2, who(200));
  ASSERT_EQ(submit_(book, 2, 1, ask(1), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);
  ASSERT_TRUE(release_(book, 2, 1, false, 100));  // client 2 used the device for 100 s
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 100), "");
  ASSERT_EQ(schedule_(book, 100).size(), 1u);
  ASSERT_EQ(submit_(book, 2, 2, ask(1), 101), "");
  EXPECT_TRUE(revoke_for_(book, 2, 101).empty()) << "client 1 is below client 2's due";
  EXPECT_FALSE(book.lease(2)->revoking);
  EXPECT_TRUE(revoke_for_(book, 1, 101).empty()) << "nothing queued";
  EXPECT_TRUE(revoke_for_(book, 9, 101).empty()) << "unknown client";
  // The other way round, client 2 would be asked to give back.
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 101), "");
  ASSERT_TRUE(release_(book, 1, 2, false, 102));
  ASSERT_TRUE(cancel_(book, 1, 2));
  auto g = schedule_(book, 102);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].client, 2u);
  ASSERT_EQ(submit_(book, 1, 3, ask(1), 103), "");
  EXPECT_EQ(revoke_for_(book, 1, 103), std::vector<LeaseId>{g[0].id});
  check(book);
}

// --- everything at random

TEST(LeaseBook, RandomOperationsKeepTheInvariant) {
  const uint32_t seed = 20261123;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };

  std::vector<DeviceSlot> slots = gpus(4, 8 * kGiB);
  slots[3].memory = 24 * kGiB;
  Policy p;
  p.usage_half_life_s = 30;
  p.user_weights = {{1, 2}, {2, 0.5}};
  p.client_gpu_cap = 3;
  p.user_gpu_cap = 3.5;
  LeaseBook book(slots, 6, p);
  const std::vector<double> shares = {0, 0.1, 0.25, 0.3333, 0.5, 0.75, 1, 1, 2, 3, 4, 1.5, -1};
  const std::vector<uint64_t> memories = {0, 0, 0, kGiB, 6 * kGiB, 9 * kGiB, 30 * kGiB};
  const std::vector<double> cpus = {0, 0, 0.5, 1, 2, 7};

  std::map<ClientId, std::set<RequestId>> mine;  // what each client believes is queued
  std::set<ClientId> present;
  double now = 0;
  RequestId next = 1;
  size_t grants = 0, refusals = 0, revoked = 0;
  for (int step = 0; step < 5000; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    now += chance(0.3) ? 0 : std::uniform_real_distribution<double>(0, 2)(rng);
    auto client = static_cast<ClientId>(1 + pick(6));
    size_t op = pick(10);
    if (!present.contains(client)) {
      book.add_client(client, who(static_cast<uint32_t>(client % 3), 0.5 + double(pick(4))));
      present.insert(client);
    } else if (op < 4) {
      LeaseAsk a = ask(shares[pick(shares.size())], memories[pick(memories.size())],
                       cpus[pick(cpus.size())]);
      a.priority = static_cast<int32_t>(pick(3));
      if (chance(0.2)) a.devices = {static_cast<int32_t>(pick(5)), static_cast<int32_t>(pick(4))};
      RequestId id = chance(0.05) && !mine[client].empty() ? *mine[client].begin() : next++;
      std::string why = submit_(book, client, id, a, now);
      if (why.empty()) {
        mine[client].insert(id);
      } else {
        ++refusals;
      }
    } else if (op == 4 && !mine[client].empty()) {
      RequestId id = *std::next(mine[client].begin(), static_cast<long>(pick(mine[client].size())));
      EXPECT_TRUE(cancel_(book, client, id));
      mine[client].erase(id);
    } else if (op < 7) {
      auto leases = book.leases();
      if (!leases.empty()) {
        const Lease &l = leases[pick(leases.size())];
        bool privileged = chance(0.1);
        bool ok = release_(book, client, l.id, privileged, now);
        EXPECT_EQ(ok, privileged || l.client == client);
      }
    } else if (op == 7 && chance(0.2)) {
      remove_client_(book, client, now);
      present.erase(client);
      mine.erase(client);
    } else if (op == 8) {
      revoked += revoke_for_(book, client, now).size();
    }
    check(book);
    for (const auto &l : schedule_(book, now)) {
      ++grants;
      EXPECT_EQ(mine[l.client].erase(l.request), 1u) << "granted a request not queued";
    }
    check(book);
    size_t queued = 0;
    for (const auto &[c, ids] : mine) queued += ids.size();
    ASSERT_EQ(book.queued(now).size(), queued);
    if (HasFailure()) break;
  }
  // The run exercised what it is for (these counts are fixed by the seed).
  std::string counts = std::to_string(grants) + " grants, " + std::to_string(refusals) +
                       " refusals, " + std::to_string(revoked) + " revoked";
  EXPECT_GT(grants, 300u) << counts;
  EXPECT_GT(refusals, 100u) << counts;
  EXPECT_GT(revoked, 10u) << counts;
}

// ---- Leases that outlive their holder or the service (docs/service.md, "A lease owns its job")

namespace {

Lease restored_lease(LeaseId id, std::vector<DeviceShare> devices, double cpus = 0) {
  Lease l;
  l.id = id;
  l.name = "restored";
  l.devices = std::move(devices);
  l.cpus = fp(cpus);
  return l;
}

}  // namespace

TEST(LeaseBook, ARestoredLeaseHoldsItsDeviceAndLaterIdsFollowIt) {
  LeaseBook book(gpus(2), 4, Policy{});
  book.add_client(1, who(1000));
  book.restore(1, restored_lease(41, {{0, fp(1), 16 * kGiB}}));
  check(book);
  book.add_client(2, who(1001));
  ASSERT_EQ(submit_(book, 2, 1, ask(1), 0), "");
  std::vector<Lease> granted = schedule_(book, 0);
  ASSERT_EQ(granted.size(), 1u);
  EXPECT_EQ(granted[0].devices.at(0).ordinal, 1) << "device 0 is the restored lease's";
  EXPECT_GT(granted[0].id, 41u);
  // No third device: the next request waits for the restored lease.
  ASSERT_EQ(submit_(book, 2, 2, ask(1), 0), "");
  EXPECT_TRUE(schedule_(book, 0).empty());
  book.remove_client(1, 1);
  EXPECT_EQ(schedule_(book, 1).size(), 1u);
}

TEST(LeaseBook, ARestoredLeaseThatDoesNotFitIsRefusedNamingWhy) {
  LeaseBook book(gpus(1), 2, Policy{});
  book.add_client(1, who(1000));
  book.restore(1, restored_lease(1, {{0, fp(0.5), 8 * kGiB}}));
  auto refused = [&](Lease l, const std::string &why) {
    try {
      book.restore(1, std::move(l));
      ADD_FAILURE() << "restored: " << why;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    check(book);
  };
  refused(restored_lease(2, {{0, fp(0.75), 1}}), "does not have room");
  refused(restored_lease(3, {{0, fp(0.25), 9 * kGiB}}), "does not have room");
  refused(restored_lease(1, {{0, fp(0.25), 1}}), "the id is taken");
  refused(restored_lease(4, {{7, fp(0.25), 1}}), "device 7 does not exist");
  refused(restored_lease(5, {{0, fp(0.1), 1}, {0, fp(0.1), 1}}), "appears twice");
  refused(restored_lease(6, {}, 3), "CPUs do not fit");
  refused(restored_lease(8, {}), "holds nothing");
  book.restore(1, restored_lease(9, {{0, fp(0.5), 8 * kGiB}}, 2));
  check(book);
}

TEST(LeaseBook, AHandedOverLeaseKeepsCountingForItsNewHolder) {
  LeaseBook book(gpus(1), 0, Policy{});
  book.add_client(1, who(1000));
  book.add_client(2, who(1000));  // the keeper: the same user
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  std::vector<Lease> granted = schedule_(book, 0);
  ASSERT_EQ(granted.size(), 1u);
  EXPECT_TRUE(book.hand_over(granted[0].id, 2, 1));
  check(book);
  EXPECT_TRUE(book.remove_client(1, 2).empty()) << "the lease is the keeper's now";
  EXPECT_EQ(book.lease(granted[0].id)->client, 2u);
  EXPECT_FALSE(book.hand_over(granted[0].id, 99, 2)) << "no such client";
  EXPECT_FALSE(book.hand_over(12345, 2, 2)) << "no such lease";
  EXPECT_EQ(book.remove_client(2, 3), std::vector<LeaseId>{granted[0].id});
  check(book);
}

TEST(LeaseBook, SkippedLeaseIdsAreNeverHandedOut) {
  LeaseBook book(gpus(1), 0, Policy{});
  book.skip_lease_ids(1000);
  book.skip_lease_ids(10);  // never backwards
  EXPECT_EQ(book.next_lease_id(), 1000u);
  book.add_client(1, who(1000));
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  EXPECT_EQ(schedule_(book, 0).at(0).id, 1000u);
}

TEST(LeaseBook, FitsNowSaysWhetherAQueuedRequestWouldWait) {
  Policy policy;
  policy.client_gpu_cap = 1;
  LeaseBook book(gpus(2), 0, policy);
  book.add_client(1, who(1000));
  ASSERT_EQ(submit_(book, 1, 1, ask(1), 0), "");
  EXPECT_TRUE(book.fits_now(1, 1));
  ASSERT_EQ(schedule_(book, 0).size(), 1u);
  EXPECT_FALSE(book.fits_now(1, 1)) << "granted: no longer queued";
  ASSERT_EQ(submit_(book, 1, 2, ask(1), 0), "");
  EXPECT_FALSE(book.fits_now(1, 2)) << "a device is free, but the client's cap is reached";
  book.add_client(2, who(1001));
  ASSERT_EQ(submit_(book, 2, 1, ask(1), 0), "");
  EXPECT_TRUE(book.fits_now(2, 1));
  ASSERT_EQ(submit_(book, 2, 2, ask(0.5), 0), "");
  ASSERT_EQ(schedule_(book, 0).size(), 1u);  // client 2's whole device
  EXPECT_FALSE(book.fits_now(2, 2)) << "both devices are held";
  EXPECT_FALSE(book.fits_now(3, 1)) << "no such client";
}

}  // namespace gf::service
