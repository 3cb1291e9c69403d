// gf_service_update_policy: a running service's weights, caps and half-life replaced (what
// `gpuflow serve` does on SIGHUP), leases held and requests queued staying as they are.
#include <atomic>
#include <cmath>
#include <string>
#include <thread>

#include "in_process_service.hpp"

namespace {
using namespace gft;

struct Started {
  gf_pool_config pool = host_config(2, 3);
  LogLines log;
  ServiceHandle service;
  SocketDir dir;
  std::string socket = dir.path + "/gf.sock";

  explicit Started(double user_gpu_cap) {
    gf_service_config c = GF_SERVICE_CONFIG_INIT;
    c.pool = &pool;
    c.socket_path = socket.c_str();
    c.user_gpu_cap = user_gpu_cap;
    log.attach(c);
    service = start(c);
  }
  gf_status update(const gf_service_config &c) {
    return gf_service_update_policy(service.get(), &c);
  }
};

gf_service_config capped(double user_gpu_cap) {
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.user_gpu_cap = user_gpu_cap;
  return c;
}

TEST(ServicePolicy, ALoweredCapMakesTheNextRequestWaitWhileLeasesHeldStay) {
  Started s(2);
  ASSERT_NE(s.service, nullptr);
  // Two clients of this user: the cap counts what they hold together.
  Pool a = connect_to(s.service.get());
  Pool b = connect_to(s.service.get());
  gf_status st;
  LeaseHandle held = acquire(a.get(), 1, 5000, &st);
  ASSERT_EQ(st, GF_OK) << describe(st);

  GF_ASSERT_OK(s.update(capped(1)));
  EXPECT_TRUE(s.log.has("policy: user_gpu_cap 2 -> 1")) << s.log.text;
  int32_t revoked = -1;
  GF_EXPECT_OK(gf_lease_revoked(&revoked, held.get()));
  EXPECT_EQ(revoked, 0) << "a lease held past the new cap stays, not asked back";
  LeaseHandle refused = acquire(b.get(), 1, 300, &st);
  EXPECT_EQ(st, GF_TIMEOUT) << "under cap 2 it would have been granted: " << describe(st);

  // A request waiting when the cap goes up again is granted by the pass the update runs.
  std::atomic<gf_status> waited{GF_OK};
  std::atomic<bool> done{false};
  LeaseHandle later;
  std::thread waiter([&] {
    gf_status w;
    later = acquire(b.get(), 1, 20000, &w);
    waited = w;
    done = true;
  });
  // The update comes only once the request waits in the service's queue: no pass but the
  // update's can grant it then (the lease that fills the cap stays held).
  EXPECT_TRUE(wait_until([&] { return someone_waits(a.get()); })) << s.log.text;
  EXPECT_FALSE(done) << "granted at cap 1";
  GF_EXPECT_OK(s.update(capped(2)));
  waiter.join();
  EXPECT_EQ(waited.load(), GF_OK) << describe(waited.load());
  EXPECT_TRUE(s.log.has("policy: user_gpu_cap 1 -> 2")) << s.log.text;
}

TEST(ServicePolicy, InvalidValuesAreRefusedNamingTheFieldAndNothingChanges) {
  Started s(1);
  ASSERT_NE(s.service, nullptr);
  struct Case {
    const char *field;
    gf_service_config config;
  };
  Case cases[] = {{"client_gpu_cap", capped(2)},
                  {"user_gpu_cap", capped(-1)},
                  {"usage_half_life_s", capped(2)},
                  {"user_weights", capped(2)},
                  {"user_weights", capped(2)}};
  cases[0].config.client_gpu_cap = std::nan("");
  cases[2].config.usage_half_life_s = 1e300;
  cases[3].config.user_weights = "root=heavy";
  cases[4].config.user_weights = "no-such-user-gpuflow-test=2";
  for (const Case &k : cases) {
    const std::string m = GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, s.update(k.config));
    EXPECT_NE(m.find(std::string("gf_service_config.") + k.field), std::string::npos) << m;
  }
  gf_service_config wrong_size = capped(2);
  wrong_size.struct_size = 3;
  GF_EXPECT_STATUS(GF_ERR_STRUCT_SIZE, s.update(wrong_size));
  GF_EXPECT_STATUS(GF_ERR_INVALID_ARGUMENT, gf_service_update_policy(s.service.get(), nullptr));
  EXPECT_FALSE(s.log.has("policy:")) << "nothing was applied: " << s.log.text;
  // Still cap 1: a second GPU for this user waits.
  Pool a = connect_to(s.service.get());
  gf_status st;
  LeaseHandle held = acquire(a.get(), 1, 5000, &st);
  ASSERT_EQ(st, GF_OK) << describe(st);
  LeaseHandle more = acquire(a.get(), 1, 300, &st);
  EXPECT_EQ(st, GF_TIMEOUT) << describe(st);
}

TEST(ServicePolicy, TheLogSaysWhatChanged) {
  Started s(0);
  ASSERT_NE(s.service, nullptr);
  gf_service_config c = capped(2);
  c.user_weights = "root=3";
  c.socket_path = "/ignored/elsewhere.sock";  // every field but the policy's is ignored
  c.listen_fd = 12345;
  GF_ASSERT_OK(s.update(c));
  EXPECT_TRUE(s.log.has("policy: user_gpu_cap 0 -> 2; weight of root 1 -> 3\n")) << s.log.text;
  c.user_weights = "0=3";  // the same user by uid; half-life 0 is the default it already has
  GF_ASSERT_OK(s.update(c));
  EXPECT_TRUE(s.log.has("policy: unchanged\n")) << s.log.text;
  c.usage_half_life_s = 60;
  c.user_weights = nullptr;
  GF_ASSERT_OK(s.update(c));
  EXPECT_TRUE(s.log.has("policy: usage_half_life_s 300 -> 60; weight of root 3 -> 1\n"))
      << s.log.text;
  EXPECT_EQ(std::string(gf_service_endpoint(s.service.get())), "unix://" + s.socket);
}

// The callback runs on the service's loop: an update from there would wait on itself.
struct FromLog {
  LogLines lines;
  gf_service *service = nullptr;
  std::atomic<int> status{1};
  static void write(const char *line, void *self) {
    auto *me = static_cast<FromLog *>(self);
    LogLines::write(line, &me->lines);
    if (me->service && std::string(line).rfind("policy:", 0) == 0) {
      const gf_service_config c = GF_SERVICE_CONFIG_INIT;
      me->status = gf_service_update_policy(me->service, &c);
    }
  }
};

TEST(ServicePolicy, NotFromALogCallbackNorOnAServiceThatIsGone) {
  SocketDir dir;
  const std::string socket = dir.path + "/gf.sock";
  const gf_pool_config pool = host_config(1, 1);
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.pool = &pool;
  c.socket_path = socket.c_str();
  FromLog log;
  c.log = FromLog::write;
  c.log_user_data = &log;
  gf_service *raw = nullptr;
  GF_ASSERT_OK(gf_service_start(&raw, &c));
  log.service = raw;
  GF_EXPECT_OK(gf_service_update_policy(raw, &c));
  EXPECT_EQ(log.status.load(), GF_ERR_STATE) << "refused rather than waiting on itself";
  gf_service_stop(raw);
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_service_update_policy(raw, &c));
  GF_EXPECT_STATUS(GF_ERR_INVALID_HANDLE, gf_service_update_policy(nullptr, &c));
}

}  // namespace
