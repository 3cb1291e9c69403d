// What both graph-in-service test files use: a guard that kills the service if the test
// process dies, and a builder of graph documents through the public ABI.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuflow.h"
#include "processes.hpp"
#include "test_support.hpp"

namespace gis {

using namespace gfsvc;
using gft::last_error;

// Kills `pid` (a `gpuflow serve` this test started) if this process ends before the guard goes,
// however it ends: a test that crashes on a product bug leaves no service running behind it.
// A forked process waits for the end of a pipe only this process holds (close-on-exec: no
// child it spawns inherits it).
class KillWithMe {
 public:
  explicit KillWithMe(pid_t pid) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    reaper_ = ::fork();
    if (reaper_ == 0) {
      for (int fd = 3; fd < 1024; ++fd) {
        if (fd != fds[0]) ::close(fd);
      }
      char c;
      while (::read(fds[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::kill(pid, SIGKILL);
      ::_exit(0);
    }
    ::close(fds[0]);
    write_end_ = fds[1];
  }
  ~KillWithMe() {
    if (reaper_ > 0) {
      ::kill(reaper_, SIGKILL);
      ::waitpid(reaper_, nullptr, 0);
    }
    if (write_end_ >= 0) ::close(write_end_);
  }
  KillWithMe(const KillWithMe &) = delete;
  KillWithMe &operator=(const KillWithMe &) = delete;

 private:
  pid_t reaper_ = -1;
  int write_end_ = -1;
};

// A graph built through the C ABI. The first error is kept (error()) and later calls do nothing,
// so a test asserts once after building.
class GraphBuilder {
 public:
  GraphBuilder() { check(gf_graph_create(&g_), "gf_graph_create"); }
  ~GraphBuilder() { gf_graph_destroy(g_); }
  GraphBuilder(const GraphBuilder &) = delete;
  GraphBuilder &operator=(const GraphBuilder &) = delete;

  gf_graph *get() const { return g_; }
  const std::string &error() const { return error_; }

  gf_data bytes(const char *name, const void *data, uint64_t size) {
    gf_data d{0};
    if (ok())
      check(gf_graph_add_host_buffer(&d, g_, name, data, size, 0), name ? name : "an input");
    return d;
  }
  gf_data i64(const char *name, int64_t value) { return bytes(name, &value, sizeof value); }
  gf_data text(const char *name, const std::string &text) {
    return bytes(name, text.data(), text.size());
  }
  gf_data buffer(const char *name, uint64_t size, uint32_t flags = 0) {
    gf_buffer_desc b = GF_BUFFER_DESC_INIT;
    b.name = name;
    b.size = size;
    b.flags = flags;
    gf_data d{0};
    if (ok()) check(gf_graph_add_buffer(&d, g_, &b), name ? name : "a buffer");
    return d;
  }
  gf_task kernel(const char *name, const char *kernel, const std::vector<gf_data> &inputs,
                 const std::vector<gf_data> &outputs,
                 const std::vector<gf_resource> &resources = {}, uint32_t retries = 0) {
    gf_task_desc t = GF_TASK_DESC_INIT;
    t.name = name;
    t.kernel = kernel;
    return add(t, inputs, outputs, resources, retries);
  }
  gf_task callback(const char *name, gf_task_fn fn, const std::vector<gf_data> &inputs,
                   const std::vector<gf_data> &outputs) {
    gf_task_desc t = GF_TASK_DESC_INIT;
    t.name = name;
    t.cpu_fn = fn;
    return add(t, inputs, outputs, {}, 0);
  }
  // A command task: argv, in `working_dir` (nullptr: the default), logging under `log_dir`.
  gf_task command(const char *name, const std::vector<std::string> &argv, const char *working_dir,
                  const std::string &log_dir) {
    std::vector<const char *> args;
    for (const std::string &a : argv) args.push_back(a.c_str());
    gf_command_desc c = GF_COMMAND_DESC_INIT;
    c.argv = args.data();
    c.argc = static_cast<uint32_t>(args.size());
    c.working_dir = working_dir;
    c.log_dir = log_dir.c_str();
    c.timeout_s = 60;
    gf_task_desc t = GF_TASK_DESC_INIT;
    t.name = name;
    t.command = &c;
    return add(t, {}, {}, {}, 0);
  }
  void after(gf_task task, gf_task before) {
    if (ok()) check(gf_graph_add_dependency(g_, task, before), "gf_graph_add_dependency");
  }
  // The graph as a document in `format`.
  std::string document(gf_graph_format format) {
    gf_bytes out{};
    if (!ok() || !check(gf_graph_serialize(&out, g_, format), "gf_graph_serialize")) return {};
    std::string text(static_cast<const char *>(out.data), out.size);
    gf_bytes_free(&out);
    return text;
  }

 private:
  bool ok() const { return error_.empty(); }
  bool check(gf_status s, const std::string &what) {
    if (s != GF_OK && error_.empty()) error_ = what + ": " + last_error();
    return s == GF_OK;
  }
  gf_task add(gf_task_desc &t, const std::vector<gf_data> &inputs,
              const std::vector<gf_data> &outputs, const std::vector<gf_resource> &resources,
              uint32_t retries) {
    t.inputs = inputs.data();
    t.input_count = static_cast<uint32_t>(inputs.size());
    t.outputs = outputs.data();
    t.output_count = static_cast<uint32_t>(outputs.size());
    t.resources = resources.data();
    t.resource_count = static_cast<uint32_t>(resources.size());
    t.retries = retries;
    gf_task task{0};
    if (ok()) check(gf_graph_add_task(&task, g_, &t), t.name ? t.name : "a task");
    return task;
  }

  gf_graph *g_ = nullptr;
  std::string error_;
};

}  // namespace gis
