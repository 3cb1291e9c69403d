// Connected pools ride through a restart of their service (docs/service.md, "Restarts"): a pool
// in this process against a `gpuflow serve` process that is killed with SIGKILL and started
// again on the same socket, and against an in-process service on a handed-over socket stopped
// and started again as systemd's socket activation restarts it. The pool reconnects, takes back
// the lease the restarted service kept for it, and runs what comes next; what needs a device
// while no service is there fails naming the outage.
#include <gpuflow.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstddef>
#include <string>

#include "in_process_service.hpp"
#include "processes.hpp"
#include "test_support.hpp"

namespace {

using gfsvc::kTimeFactor;
using gfsvc::Service;
using gfsvc::TempDir;

gft::Pool connect(const std::string &endpoint) {
  gf_pool_config c = gft::host_config(1, 1);
  c.endpoint = endpoint.c_str();
  return gft::make_pool(c);
}

// The service's status through the pool, or why it could not be had.
bool service_status(gf_pool *pool, std::string &out) {
  gf_bytes status = {nullptr, 0};
  if (gf_pool_service_status(&status, pool, GF_STATUS_JSON) != GF_OK) {
    out = gft::last_error();
    return false;
  }
  out.assign(static_cast<const char *>(status.data), status.size);
  gf_bytes_free(&status);
  return true;
}

bool reconnected(gf_pool *pool) {
  std::string ignored;
  return gft::wait_until([&] { return service_status(pool, ignored); },
                         std::chrono::milliseconds(60000 * kTimeFactor));
}

// A graph of one GPU task that counts its runs.
gft::Graph one_gpu_task(std::shared_ptr<std::atomic<int>> runs) {
  gft::Graph g = gft::make_graph();
  gft::TaskSpec t;
  t.name = "after";
  t.gpu = gft::counting_body(std::move(runs));
  gft::must_add_task(g.get(), t);
  return g;
}

// A GPU task that says it started and runs until the test lets it go.
gf_task add_holding_task(gf_graph *g, std::shared_ptr<std::atomic<bool>> started,
                         std::shared_ptr<std::atomic<bool>> go) {
  gft::TaskSpec hold;
  hold.name = "hold";
  hold.gpu = [started, go](gf_task_ctx *) {
    started->store(true);
    while (!go->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  };
  return gft::must_add_task(g, hold);
}

// How the run of `graph` ended; `why`: the error gf_run_wait gave when it failed.
gf_run_state run_to_end(gf_pool *pool, gf_graph *graph, std::string *why = nullptr) {
  gft::RunPtr run(gft::submit(pool, graph));
  if (!run) return GF_RUN_STATE_FORCE32;
  const gf_status waited = gf_run_wait(run.get(), 60000 * kTimeFactor);
  EXPECT_NE(waited, GF_TIMEOUT) << "the run never ended";
  if (waited != GF_OK && why) *why = gft::last_error();
  return gft::run_state(run.get());
}

void kill_service(Service &s) {
  s.proc().signal(SIGKILL);
  ASSERT_TRUE(s.proc().wait(20000 * kTimeFactor));
}

TEST(Reconnect, ABusyPoolKeepsItsDeviceThroughAKillAndARestart) {
  TempDir dir;
  auto first = std::make_unique<Service>(dir, 1);
  ASSERT_TRUE(first->ready()) << first->log();
  gft::Pool pool = connect(first->endpoint());
  ASSERT_NE(pool, nullptr) << gft::last_error();

  // A GPU task that runs until the test lets it go, and one after it that needs the device
  // again once the service is back.
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto go = std::make_shared<std::atomic<bool>>(false);
  auto later = std::make_shared<std::atomic<int>>(0);
  gft::Graph g = gft::make_graph();
  gf_task held = add_holding_task(g.get(), started, go);
  gft::TaskSpec next;
  next.name = "next";
  next.gpu = gft::counting_body(later);
  next.after = {held};
  gf_task after = gft::must_add_task(g.get(), next);
  gft::RunPtr run(gft::submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(gft::wait_until([&] { return started->load(); },
                              std::chrono::milliseconds(30000 * kTimeFactor)));

  kill_service(*first);
  std::string why;
  ASSERT_TRUE(gft::wait_until([&] { return !service_status(pool.get(), why); }));
  EXPECT_NE(why.find("gpuflow service at " + first->endpoint() + " is gone"), std::string::npos)
      << why;

  Service second(dir, 1, {}, "serve2.log");
  ASSERT_TRUE(second.ready()) << second.log();
  EXPECT_NE(second.log().find("lease 1"), std::string::npos)
      << "the restarted service did not keep the running task's lease: " << second.log();
  ASSERT_TRUE(reconnected(pool.get())) << second.log();
  ASSERT_TRUE(gft::wait_until(
      [&] { return second.log().find("lease 1 taken back by") != std::string::npos; },
      std::chrono::milliseconds(30000 * kTimeFactor)))
      << second.log();

  go->store(true);
  ASSERT_EQ(gf_run_wait(run.get(), 60000 * kTimeFactor), GF_OK) << gft::last_error();
  EXPECT_EQ(gft::run_state(run.get()), GF_RUN_SUCCEEDED) << gft::task_error(run.get(), after);
  EXPECT_EQ(later->load(), 1);

  // And the graphs after it run on the new connection.
  auto runs = std::make_shared<std::atomic<int>>(0);
  gft::Graph again = one_gpu_task(runs);
  EXPECT_EQ(run_to_end(pool.get(), again.get()), GF_RUN_SUCCEEDED);
  EXPECT_EQ(runs->load(), 1);

  // Its lease went back once idle: nothing is kept for it as a job any more.
  std::string status;
  ASSERT_TRUE(gft::wait_until([&] {
    return service_status(pool.get(), status) && status.find("job of") == std::string::npos &&
           status.find("\"leases\":[]") != std::string::npos;
  })) << status;
}

TEST(Reconnect, WhatNeedsADeviceDuringTheOutageFailsNamingItAndLaterGraphsRun) {
  TempDir dir;
  auto first = std::make_unique<Service>(dir, 1);
  ASSERT_TRUE(first->ready()) << first->log();
  gft::Pool pool = connect(first->endpoint());
  ASSERT_NE(pool, nullptr) << gft::last_error();
  auto runs = std::make_shared<std::atomic<int>>(0);
  gft::Graph g = one_gpu_task(runs);
  ASSERT_EQ(run_to_end(pool.get(), g.get()), GF_RUN_SUCCEEDED);
  // The pool has handed its device back (after its linger): a lease it still held would stay its
  // own through the outage, and a task could run on it.
  std::string status;
  ASSERT_TRUE(gft::wait_until([&] {
    return service_status(pool.get(), status) && status.find("\"leases\":[]") != std::string::npos;
  })) << status;

  const std::string endpoint = first->endpoint();
  kill_service(*first);
  first.reset();
  std::string why;
  ASSERT_TRUE(gft::wait_until([&] { return !service_status(pool.get(), why); }));

  std::string error;
  EXPECT_EQ(run_to_end(pool.get(), g.get(), &error), GF_RUN_FAILED);
  EXPECT_NE(error.find("gpuflow service at " + endpoint + " is gone"), std::string::npos) << error;
  EXPECT_NE(error.find("reconnecting to " + endpoint), std::string::npos) << error;
  EXPECT_EQ(runs->load(), 1) << "a task ran with no service to lease its device from";

  Service second(dir, 1, {}, "serve2.log");
  ASSERT_TRUE(second.ready()) << second.log();
  ASSERT_TRUE(reconnected(pool.get())) << second.log();
  EXPECT_EQ(run_to_end(pool.get(), g.get()), GF_RUN_SUCCEEDED);
  EXPECT_EQ(runs->load(), 2);
}

TEST(Reconnect, ALeaseHeldThroughARestartIsTakenBackAndReleasedOnTheNewConnection) {
  TempDir dir;
  auto first = std::make_unique<Service>(dir, 2);
  ASSERT_TRUE(first->ready()) << first->log();
  gft::Pool pool = connect(first->endpoint());
  ASSERT_NE(pool, nullptr) << gft::last_error();
  gf_status st;
  gft::LeaseHandle kept = gft::acquire(pool.get(), 1, 5000, &st);
  ASSERT_EQ(st, GF_OK) << gft::last_error();
  gft::LeaseHandle let_go = gft::acquire(pool.get(), 1, 5000, &st);
  ASSERT_EQ(st, GF_OK) << gft::last_error();
  uint64_t kept_id = 0, let_go_id = 0;
  ASSERT_EQ(gf_lease_info(&kept_id, nullptr, nullptr, kept.get()), GF_OK);
  ASSERT_EQ(gf_lease_info(&let_go_id, nullptr, nullptr, let_go.get()), GF_OK);

  kill_service(*first);
  std::string why;
  ASSERT_TRUE(gft::wait_until([&] { return !service_status(pool.get(), why); }));
  // During the outage the holder goes on: the lease is not asked back, and one released now is
  // handed back once a service answers.
  int32_t revoked = -1;
  ASSERT_EQ(gf_lease_revoked(&revoked, kept.get()), GF_OK) << gft::last_error();
  EXPECT_EQ(revoked, 0);
  EXPECT_EQ(gf_lease_release(let_go.release()), GF_OK) << gft::last_error();

  Service second(dir, 2, {}, "serve2.log");
  ASSERT_TRUE(second.ready()) << second.log();
  ASSERT_TRUE(reconnected(pool.get())) << second.log();
  ASSERT_EQ(gf_lease_revoked(&revoked, kept.get()), GF_OK) << gft::last_error();
  EXPECT_EQ(revoked, 0);
  const std::string back = "lease " + std::to_string(kept_id) + " taken back by";
  const std::string released = "released lease " + std::to_string(let_go_id);
  ASSERT_TRUE(gft::wait_until(
      [&] {
        const std::string log = second.log();
        return log.find(back) != std::string::npos && log.find(released) != std::string::npos;
      },
      std::chrono::milliseconds(30000 * kTimeFactor)))
      << second.log();
  // The kept lease is this client's again: its release reaches the service, and nothing is left.
  EXPECT_EQ(gf_lease_release(kept.release()), GF_OK) << gft::last_error();
  std::string status;
  ASSERT_TRUE(gft::wait_until([&] {
    return service_status(pool.get(), status) && status.find("\"leases\":[]") != std::string::npos;
  })) << status
      << second.log();
}

// A listening unix socket at `path`, as systemd's socket unit makes it.
int listening_socket(const std::string &path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0) << path;
  EXPECT_EQ(::listen(fd, 16), 0);
  return fd;
}

gft::ServiceHandle serve_on(int listening, const gf_pool_config &pool, gft::LogLines &log) {
  gf_service_config c = GF_SERVICE_CONFIG_INIT;
  c.pool = &pool;
  c.listen_fd = ::dup(listening);  // the service closes what it is given
  log.attach(c);
  return gft::start(c);
}

TEST(Reconnect, ASocketActivatedRestartLosesNothingOfARunningTask) {
  gft::SocketDir dir;
  const std::string path = dir.path + "/gpuflow.sock";
  const int listening = listening_socket(path);
  const gf_pool_config devices = gft::host_config(2, 1);
  gft::LogLines first_log, second_log;
  gft::ServiceHandle first = serve_on(listening, devices, first_log);
  ASSERT_NE(first, nullptr);
  gft::Pool pool = connect("unix://" + path);
  ASSERT_NE(pool, nullptr) << gft::last_error();

  auto started = std::make_shared<std::atomic<bool>>(false);
  auto go = std::make_shared<std::atomic<bool>>(false);
  gft::Graph g = gft::make_graph();
  add_holding_task(g.get(), started, go);
  gft::RunPtr run(gft::submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(gft::wait_until([&] { return started->load(); }));

  // systemctl restart: the service stops (its clients hear Goodbye) and a new one gets the same
  // socket; the pool's next try waits in its backlog if it comes first.
  first.reset();
  gft::ServiceHandle second = serve_on(listening, devices, second_log);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(reconnected(pool.get())) << second_log.text;
  ASSERT_TRUE(gft::wait_until([&] { return second_log.has("taken back by"); },
                              std::chrono::milliseconds(30000 * kTimeFactor)))
      << second_log.text;
  go->store(true);
  ASSERT_EQ(gf_run_wait(run.get(), 60000 * kTimeFactor), GF_OK) << gft::last_error();
  EXPECT_EQ(gft::run_state(run.get()), GF_RUN_SUCCEEDED);

  auto runs = std::make_shared<std::atomic<int>>(0);
  gft::Graph again = one_gpu_task(runs);
  EXPECT_EQ(run_to_end(pool.get(), again.get()), GF_RUN_SUCCEEDED);
  EXPECT_EQ(runs->load(), 1);
  pool.reset();
  second.reset();
  ::close(listening);
}

}  // namespace
