// gf_lease_release sends its release without waiting for an answer (issue 29): the devices are
// still free for the same pool's next request at once, and for another pool's as soon as the
// service reads the release. Public ABI, a service in this process.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>

#include "in_process_service.hpp"
#include "test_support.hpp"

namespace {
using namespace gft;

ServiceHandle one_device_service(const SocketDir &dir, LogLines &log) {
  gf_pool_config pool = host_config(1, 1);
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.pool = &pool;
  const std::string socket = dir.path + "/gf.sock";
  c.socket_path = socket.c_str();
  log.attach(c);
  return start(c);
}

// Requests on one connection are read in order: right after a release, asking "now or never"
// for the same whole device gets it, every time.
TEST(LeaseRelease, TheSamePoolsNextRequestFindsTheDeviceFree) {
  SocketDir dir;
  LogLines log;
  ServiceHandle service = one_device_service(dir, log);
  Pool pool = connect_to(service.get());
  for (int i = 0; i < 50; ++i) {
    gf_status status = GF_ERR_INTERNAL;
    LeaseHandle lease = acquire(pool.get(), 1, 0, &status);
    ASSERT_EQ(status, GF_OK) << "round " << i << ": " << describe(status);
    ASSERT_EQ(gf_lease_release(lease.release()), GF_OK);
  }
}

// Another pool waiting for the device gets it once the release is read; the service logs it.
TEST(LeaseRelease, APoolWaitingForTheDeviceGetsItAfterTheRelease) {
  SocketDir dir;
  LogLines log;
  ServiceHandle service = one_device_service(dir, log);
  Pool holder = connect_to(service.get());
  Pool waiter = connect_to(service.get());
  gf_status status = GF_ERR_INTERNAL;
  LeaseHandle held = acquire(holder.get(), 1, 1000, &status);
  ASSERT_EQ(status, GF_OK) << describe(status);
  gf_status waited = GF_ERR_INTERNAL;
  LeaseHandle got;
  std::thread waiting([&] { got = acquire(waiter.get(), 1, 10000, &waited); });
  // The second pool's request waits in the service before the device comes back.
  ASSERT_TRUE(wait_until([&] { return someone_waits(holder.get()); }));
  ASSERT_EQ(gf_lease_release(held.release()), GF_OK);
  waiting.join();
  EXPECT_EQ(waited, GF_OK) << describe(waited);
  EXPECT_NE(got, nullptr);
  EXPECT_TRUE(wait_until([&] { return log.has("released lease 1"); }));
}

// A release while the service is away (stopped for a restart) is done once it is back: the
// restarted service kept the lease for this process, the pool takes it back and releases it.
TEST(LeaseRelease, ReleasingWhileTheServiceIsAwayHandsItBackOnceItReturns) {
  SocketDir dir;
  LogLines log, again;
  ServiceHandle service = one_device_service(dir, log);
  Pool pool = connect_to(service.get());
  gf_status status = GF_ERR_INTERNAL;
  LeaseHandle lease = acquire(pool.get(), 1, 1000, &status);
  ASSERT_EQ(status, GF_OK) << describe(status);
  service.reset();
  EXPECT_EQ(gf_lease_release(lease.release()), GF_OK) << last_error();
  ServiceHandle restarted = one_device_service(dir, again);
  ASSERT_NE(restarted, nullptr);
  EXPECT_TRUE(wait_until([&] { return again.has("released lease 1"); })) << again.text;
  EXPECT_TRUE(again.has("lease 1 taken back by")) << again.text;
  // The device is free for anyone again.
  Pool other = connect_to(restarted.get());
  LeaseHandle next = acquire(other.get(), 1, 10000, &status);
  EXPECT_EQ(status, GF_OK) << describe(status);
}

// A lease the restarted service did not keep (its saved grants were lost) is gone for good: it
// reads as revoked, and releasing it says why.
TEST(LeaseRelease, ALeaseTheRestartedServiceDidNotKeepIsGoneForGood) {
  SocketDir dir;
  LogLines log, again;
  ServiceHandle service = one_device_service(dir, log);
  Pool pool = connect_to(service.get());
  gf_status status = GF_ERR_INTERNAL;
  LeaseHandle lease = acquire(pool.get(), 1, 1000, &status);
  ASSERT_EQ(status, GF_OK) << describe(status);
  service.reset();
  std::remove((dir.path + "/gf.sock.leases.a").c_str());
  std::remove((dir.path + "/gf.sock.leases.b").c_str());
  ServiceHandle restarted = one_device_service(dir, again);
  ASSERT_NE(restarted, nullptr);
  gf_bytes reply = {nullptr, 0};
  ASSERT_TRUE(wait_until(
      [&] { return gf_pool_service_status(&reply, pool.get(), GF_STATUS_JSON) == GF_OK; }));
  gf_bytes_free(&reply);
  int32_t revoked = 0;
  ASSERT_EQ(gf_lease_revoked(&revoked, lease.get()), GF_OK) << last_error();
  EXPECT_EQ(revoked, 1) << "a lease the restarted service does not know reads as held";
  EXPECT_EQ(gf_lease_release(lease.release()), GF_ERR_SYSTEM);
  EXPECT_NE(last_error().find("restarted without lease 1"), std::string::npos) << last_error();
}

}  // namespace
