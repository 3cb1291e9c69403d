// gf_lease_release sends its release without waiting for an answer (issue 29): the devices are
// still free for the same pool's next request at once, and for another pool's as soon as the
// service reads the release. Public ABI, a service in this process.
#include <gtest/gtest.h>

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

// A release on a connection whose service stopped still says so.
TEST(LeaseRelease, ReleasingWhenTheServiceIsGoneIsAnError) {
  SocketDir dir;
  LogLines log;
  ServiceHandle service = one_device_service(dir, log);
  Pool pool = connect_to(service.get());
  gf_status status = GF_ERR_INTERNAL;
  LeaseHandle lease = acquire(pool.get(), 1, 1000, &status);
  ASSERT_EQ(status, GF_OK) << describe(status);
  service.reset();
  EXPECT_EQ(gf_lease_release(lease.release()), GF_ERR_SYSTEM);
}

}  // namespace
