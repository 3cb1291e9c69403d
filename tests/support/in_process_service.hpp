// A service in this process (gf_service_start) and what its tests share: a private directory for
// its socket, its log lines, and pools connected to it. Public ABI only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "test_support.hpp"

namespace gft {

struct ServiceStop {
  void operator()(gf_service *s) const { gf_service_stop(s); }
};
using ServiceHandle = std::unique_ptr<gf_service, ServiceStop>;

struct LeaseRelease {
  void operator()(gf_lease *l) const { gf_lease_release(l); }
};
using LeaseHandle = std::unique_ptr<gf_lease, LeaseRelease>;

// A fresh directory, removed with its contents at the end.
struct SocketDir {
  std::string path;
  SocketDir() {
    char name[] = "/tmp/gf-site-test-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~SocketDir() { std::system(("rm -rf " + path).c_str()); }
};

// The service's log lines, written from its thread.
struct LogLines {
  std::mutex mu;
  std::string text;
  static void write(const char *line, void *self) {
    auto *log = static_cast<LogLines *>(self);
    std::lock_guard lock(log->mu);
    log->text += std::string(line) + "\n";
  }
  bool has(const std::string &needle) {
    std::lock_guard lock(mu);
    return text.find(needle) != std::string::npos;
  }
  void attach(gf_service_config &c) {
    c.log = write;
    c.log_user_data = this;
  }
};

inline ServiceHandle start(const gf_service_config &c) {
  gf_service *s = nullptr;
  const gf_status st = gf_service_start(&s, &c);
  EXPECT_EQ(st, GF_OK) << describe(st);
  return ServiceHandle(s);
}

inline Pool connect_to(const gf_service *service) {
  gf_pool_config c = host_config(1, 1);
  c.endpoint = gf_service_endpoint(service);
  return make_pool(c);
}

inline LeaseHandle acquire(gf_pool *pool, double gpus, int64_t timeout_ms, gf_status *status) {
  gf_lease_request r = GF_LEASE_REQUEST_INIT;
  r.gpus = gpus;
  gf_lease *lease = nullptr;
  *status = gf_lease_acquire(&lease, pool, &r, timeout_ms);
  return LeaseHandle(lease);
}

// Whether a lease request waits in the service, from its status.
inline bool someone_waits(gf_pool *pool) {
  gf_bytes status = {nullptr, 0};
  if (gf_pool_service_status(&status, pool, GF_STATUS_JSON) != GF_OK) return false;
  const std::string json(static_cast<const char *>(status.data), status.size);
  gf_bytes_free(&status);
  return json.find("\"queued\":[{") != std::string::npos;
}

}  // namespace gft
