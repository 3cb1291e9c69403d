// LeaseBook::set_policy: a policy replaced while leases are held and requests wait (what
// gf_service_update_policy and SIGHUP of `gpuflow serve` do to the service's book).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "service/lease_book.hpp"
#include "service/policy_change.hpp"

namespace gf::service {
namespace {

std::vector<DeviceSlot> gpus(int n) {
  std::vector<DeviceSlot> out;
  for (int i = 0; i < n; ++i) {
    DeviceSlot s;
    s.ordinal = i;
    s.uuid = "GPU-" + std::to_string(i);
    s.memory = uint64_t{1} << 30;
    out.push_back(s);
  }
  return out;
}

LeaseAsk gpus_ask(double g) {
  LeaseAsk a;
  a.gpus = g;
  return a;
}

ClientInfo of_user(uint32_t uid) {
  ClientInfo c;
  c.uid = uid;
  c.user = std::to_string(uid);
  return c;
}

TEST(LeaseBookPolicy, ALoweredCapKeepsLeasesAndHoldsBackTheNextGrant) {
  Policy p;
  p.user_gpu_cap = 2;
  LeaseBook book(gpus(3), 4, p);
  book.add_client(1, of_user(100));
  ASSERT_FALSE(book.submit(1, 1, gpus_ask(1), 0));
  ASSERT_EQ(book.schedule(0).size(), 1u);
  p.user_gpu_cap = 1;
  book.set_policy(p, 1);
  EXPECT_EQ(book.leases().size(), 1u) << "a held lease stays";
  ASSERT_FALSE(book.submit(1, 2, gpus_ask(1), 1)) << "within the cap alone: queued";
  EXPECT_TRUE(book.schedule(2).empty()) << "with what the user holds, past the new cap";
  EXPECT_EQ(book.queued_count(1), 1u) << "the request waits";
  p.user_gpu_cap = 0;
  book.set_policy(p, 3);
  EXPECT_EQ(book.schedule(3).size(), 1u) << "the cap lifted, the waiting request goes";
  book.check_invariant();
}

TEST(LeaseBookPolicy, UsageAccruedKeepsItsValueAndTheNewHalfLifeAppliesFromThen) {
  Policy p;
  p.usage_half_life_s = 100;
  LeaseBook book(gpus(1), 0, p);
  book.add_client(1, of_user(100));
  ASSERT_FALSE(book.submit(1, 1, gpus_ask(1), 0));
  ASSERT_EQ(book.schedule(0).size(), 1u);
  ASSERT_TRUE(book.release(1, 1, false, 100));
  const double h = 100 / std::log(2.0);
  const double accrued = book.clients(100)[0].usage;
  EXPECT_NEAR(accrued, h * 0.5, 1e-6);
  p.usage_half_life_s = 10;
  book.set_policy(p, 100);
  EXPECT_NEAR(book.clients(100)[0].usage, accrued, 1e-9) << "not rewritten by the new half-life";
  EXPECT_NEAR(book.clients(110)[0].usage, accrued / 2, 1e-6) << "halved in the new half-life";
}

TEST(LeaseBookPolicy, NewWeightsApplyToUsersAlreadyKnown) {
  LeaseBook book(gpus(1), 0, {});
  book.add_client(1, of_user(100));
  book.add_client(2, of_user(200));
  // Each user had the device for 10 s, user 100 first: its usage has decayed longer, so at
  // equal weights it goes first.
  ASSERT_FALSE(book.submit(1, 1, gpus_ask(1), 0));
  ASSERT_EQ(book.schedule(0).size(), 1u);
  ASSERT_TRUE(book.release(1, 1, false, 10));
  ASSERT_FALSE(book.submit(2, 1, gpus_ask(1), 10));
  ASSERT_EQ(book.schedule(10).size(), 1u);
  ASSERT_TRUE(book.release(2, 2, false, 20));
  ASSERT_FALSE(book.submit(1, 2, gpus_ask(1), 20));
  ASSERT_FALSE(book.submit(2, 2, gpus_ask(1), 20));
  EXPECT_EQ(book.queued(20).front().client, 1u);
  Policy p;
  p.user_weights = {{200, 2}};
  book.set_policy(p, 20);
  EXPECT_EQ(book.queued(20).front().client, 2u) << "user 200 now weighs 2";
}

TEST(LeaseBookPolicy, AnInvalidPolicyChangesNothing) {
  Policy p;
  p.user_gpu_cap = 1;
  LeaseBook book(gpus(2), 0, p);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto &[field, bad] :
       {std::pair<const char *, Policy>{"usage_half_life_s", Policy{0, {}, 0, 0}},
        {"client_gpu_cap", Policy{300, {}, -1, 0}},
        {"user_gpu_cap", Policy{300, {}, 0, nan}},
        {"weight", Policy{300, {{5, 0}}, 0, 0}}}) {
    try {
      book.set_policy(bad, 0);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), GF_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
    EXPECT_EQ(book.policy().user_gpu_cap, 1) << field;
  }
}

TEST(LeaseBookPolicy, TheChangeIsToldFieldByField) {
  Policy before;
  Policy after = before;
  EXPECT_EQ(policy_change(before, after), "unchanged");
  after.user_gpu_cap = 2;
  after.user_weights = {{0, 3}};  // uid 0 is root everywhere
  EXPECT_EQ(policy_change(before, after), "user_gpu_cap 0 -> 2; weight of root 1 -> 3");
  before = after;
  after.user_weights = {{4000000000u, 0.5}};
  after.usage_half_life_s = 60;
  EXPECT_EQ(policy_change(before, after),
            "usage_half_life_s 300 -> 60; weight of root 3 -> 1; weight of 4000000000 1 -> 0.5");
}

}  // namespace
}  // namespace gf::service
