// Stops that end (docs/service.md, "Faults" and "A lease owns its job"): `gpuflow serve` and
// `gpuflow lease` driven into the places where a stop could be kept waiting (an answer that does
// not come, a backlog of requests, a job someone stopped), then sent SIGTERM. Each case checks
// that the process ended and that it ended by the path meant for it (its exit status, its last
// words); the waits only bound how long a hang can hold the test, far past any grace involved.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "processes.hpp"
#include "wire/framing.hpp"

using namespace gfsvc;

namespace {

namespace fb = flatbuffers;
namespace wire = gf::wire;

// Far past every grace period and deadline of the paths under test (10 s at most): only a hang
// runs into it.
const int kEndMs = 60000 * kTimeFactor;

int connect_unix(const std::string &path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends what it can: the peer may close mid-way.
bool send_all(int fd, const std::vector<uint8_t> &bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The next verified frame within timeout_ms; nullopt on timeout, end of stream or a bad frame.
std::optional<std::vector<uint8_t>> next_frame(int fd, wire::FrameReader &reader, int timeout_ms) {
  std::vector<uint8_t> payload;
  std::string error;
  const int64_t start = now_ns();
  while (!reader.next(payload, error)) {
    const int left = timeout_ms - static_cast<int>(ms_since(start));
    pollfd p{fd, POLLIN, 0};
    if (!error.empty() || left <= 0 || ::poll(&p, 1, left) <= 0) return std::nullopt;
    char chunk[64 << 10];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    error = reader.feed(chunk, static_cast<size_t>(n));
  }
  return payload;
}

std::vector<uint8_t> hello_frame(const std::string &name) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b,
                        wire::CreateHello(b, wire::kProtocolVersion, b.CreateString(name), 1.0, 0));
}

std::vector<uint8_t> status_request_frame(uint64_t id) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(b, wire::CreateStatusRequest(b, id));
}

std::vector<uint8_t> lease_request_frame(uint64_t id) {
  fb::FlatBufferBuilder b;
  return wire::frame_of(
      b, wire::CreateLeaseRequest(b, id, 1, 0, 0.0, 0, 0, -1, b.CreateString("flood")));
}

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The state letter of /proc/PID/stat ('T': stopped), or 0 when there is no such process.
char state_of(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

// Waits (bounded) until `pid` is in the state `want` is true of.
template <typename Want>
bool wait_state(pid_t pid, Want want) {
  const int64_t start = now_ns();
  while (!want(state_of(pid))) {
    if (ms_since(start) > kEndMs) return false;
    ::usleep(2000);
  }
  return true;
}

// A stand-in service on `path`: greets one client at a time, grants its lease requests and
// never answers a LeaseBind, so that its client waits for that answer; says which bodies came.
class BindNeverAnswered {
 public:
  explicit BindNeverAnswered(std::string path) : path_(std::move(path)) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path_.c_str());
    if (::bind(listener_, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::listen(listener_, 4) != 0) {
      ADD_FAILURE() << "stand-in service at " << path_ << ": " << std::strerror(errno);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~BindNeverAnswered() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
  }
  std::string endpoint() const { return "unix://" + path_; }
  // Waits (bounded) for a LeaseBind to come.
  bool bind_came() {
    const int64_t start = now_ns();
    while (!bind_came_) {
      if (ms_since(start) > kEndMs) return false;
      ::usleep(2000);
    }
    return true;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      talk(fd);
      ::close(fd);
    }
  }
  void talk(int fd) {
    wire::FrameReader reader;
    uint64_t leases = 0;
    while (!stop_) {
      std::optional<std::vector<uint8_t>> payload = next_frame(fd, reader, 20);
      if (!payload) {
        pollfd p{fd, POLLIN | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) return;
        continue;
      }
      const wire::Message *m = wire::message_of(*payload);
      fb::FlatBufferBuilder b;
      if (m->body_as_Hello()) {
        send_all(fd, wire::frame_of(
                         b, wire::CreateWelcome(
                                b, wire::kProtocolVersion, 1, static_cast<uint32_t>(::getpid()),
                                b.CreateVector(std::vector<fb::Offset<wire::DeviceInfo>>{
                                    wire::CreateDeviceInfo(
                                        b, 0, b.CreateString("GPU-stand-in"), b.CreateString(""),
                                        b.CreateString("stand-in"), uint64_t{256} << 20, true)}),
                                4.0, b.CreateString("host"), 1e10, false, 0,
                                /*binds_process_groups=*/true)));
      } else if (const auto *r = m->body_as_LeaseRequest()) {
        send_all(fd,
                 wire::frame_of(b, wire::CreateLeaseGranted(b, r->request_id(), ++leases, 0, 0.0)));
      } else if (m->body_as_LeaseBind()) {
        bind_came_ = true;  // and no answer
      }
    }
  }

  std::string path_;
  int listener_ = -1;
  std::atomic<bool> stop_{false}, bind_came_{false};
  std::thread thread_;
};

// Stops `job` from outside (SIGSTOP, as a user or a debugger would) and waits until it is.
bool stopped_from_outside(pid_t job) {
  ::kill(job, SIGSTOP);
  return wait_state(job, [](char s) { return s == 'T'; });
}

class StopsTest : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }

  std::vector<std::string> lease(const Service &s, const std::vector<std::string> &command) {
    std::vector<std::string> argv = {GPUFLOW_CLI_PATH, "lease", "--pool", s.endpoint(), "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }

  // A job that says its pid and then sleeps: `sh -c 'sleep 300; true'`, the shell waiting on
  // its child as a real job's does.
  std::unique_ptr<Proc> start_sleeper(const Service &s, pid_t &job) {
    auto p = std::make_unique<Proc>(lease(s, {"sh", "-c", "echo $$\nsleep 300\ntrue"}),
                                    dir / "lease.err");
    std::optional<std::string> line = p->line(kEndMs);
    EXPECT_TRUE(line) << p->story();
    job = line ? std::stoi(*line) : 0;
    return p;
  }

  TempDir dir;
};

int exit_code(std::optional<int> status) {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

// SIGTERM to the wrapper of a job whose shell waits on its child: the job ends by that SIGTERM
// (COMMAND's status 128 + SIGTERM, not the SIGKILL after the grace).
TEST_F(StopsTest, LeaseEndsAWaitingShellsJobBySigterm) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  pid_t job = 0;
  auto wrapper = start_sleeper(service, job);
  ASSERT_GT(job, 0);
  wrapper->signal(SIGTERM);
  EXPECT_EQ(exit_code(wrapper->wait(kEndMs)), 128 + SIGTERM) << wrapper->story();
}

// A job someone stopped (SIGSTOP, no terminal): the wrapper neither stops with it nor waits for
// the grace period: its SIGTERM comes with a SIGCONT, so the job ends by SIGTERM.
TEST_F(StopsTest, LeaseEndsAStoppedJobBySigterm) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  pid_t job = 0;
  auto wrapper = start_sleeper(service, job);
  ASSERT_GT(job, 0);
  ASSERT_TRUE(stopped_from_outside(job)) << state_of(job);
  wrapper->signal(SIGTERM);
  EXPECT_EQ(exit_code(wrapper->wait(kEndMs)), 128 + SIGTERM) << wrapper->story();
}

// The same job stopped and continued before the SIGTERM: the wrapper, which saw it stop, did not
// stop itself (it would stay stopped, deaf to SIGTERM, after the job went on).
TEST_F(StopsTest, LeaseEndsAJobStoppedAndContinuedBySigterm) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  pid_t job = 0;
  auto wrapper = start_sleeper(service, job);
  ASSERT_GT(job, 0);
  ASSERT_TRUE(stopped_from_outside(job)) << state_of(job);
  ::kill(job, SIGCONT);
  ASSERT_TRUE(wait_state(job, [](char s) { return s != 'T'; })) << state_of(job);
  // The wrapper is running (it took the job's stop without stopping itself) ...
  EXPECT_NE(state_of(wrapper->pid()), 'T');
  wrapper->signal(SIGTERM);
  // ... and ends by the job's SIGTERM.
  EXPECT_EQ(exit_code(wrapper->wait(kEndMs)), 128 + SIGTERM) << wrapper->story();
}

// SIGTERM while the wrapper waits for the service to bind the job's process group to the lease
// (the service does not answer): the wrapper ends at once, before COMMAND ran, rather than when
// the answer's deadline passes.
TEST_F(StopsTest, LeaseEndsAtOnceWhileItsBindingIsUnanswered) {
  BindNeverAnswered service(dir / "stand-in.sock");
  const std::string ran = dir / "ran";
  Proc wrapper({GPUFLOW_CLI_PATH, "lease", "--pool", service.endpoint(), "--", "touch", ran},
               dir / "lease.err");
  ASSERT_TRUE(service.bind_came()) << wrapper.story();
  wrapper.signal(SIGTERM);
  std::optional<int> status = wrapper.wait(kEndMs);
  EXPECT_EQ(exit_code(status), 128 + SIGTERM) << exit_text(status) << wrapper.story();
  EXPECT_TRUE(contains(wrapper.stderr_text(), "Terminated before the command started"))
      << wrapper.story();
  EXPECT_FALSE(std::filesystem::exists(ran)) << "COMMAND ran after the stop";
}

// A client floods the service with 20,000 requests (status and lease requests, alternately) and
// does not read the answers; SIGTERM comes while the service works through them. The stop does
// not wait for the backlog: the service ends by its stop (its last words), having dropped the
// client for the stop rather than for not reading.
TEST_F(StopsTest, ServeStopsInTheMiddleOfAFloodOfRequests) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  const int fd = connect_unix(service.socket());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  wire::FrameReader reader;
  ASSERT_TRUE(send_all(fd, hello_frame("flood")));
  std::optional<std::vector<uint8_t>> welcome = next_frame(fd, reader, kEndMs);
  ASSERT_TRUE(welcome && wire::message_of(*welcome)->body_as_Welcome()) << service.log();
  std::vector<uint8_t> flood;
  for (uint64_t id = 1; id <= 20000; ++id) {
    const std::vector<uint8_t> f = id % 2 ? status_request_frame(id) : lease_request_frame(id);
    flood.insert(flood.end(), f.begin(), f.end());
  }
  // From another thread: the socket's buffer fills, and the service drains it as it goes (then
  // stops reading: the send fails once the service has gone).
  std::thread flooder([fd, &flood] { send_all(fd, flood); });
  // The service is working on the flood: it answered its first request.
  const bool answered = next_frame(fd, reader, kEndMs).has_value();
  service.proc().signal(SIGTERM);
  std::optional<int> status = service.proc().wait(kEndMs);
  ::shutdown(fd, SHUT_RDWR);
  flooder.join();
  ASSERT_TRUE(answered) << service.log();
  const std::string log = service.log();
  EXPECT_EQ(exit_code(status), 0) << exit_text(status) << "\n" << log;
  EXPECT_TRUE(contains(log, "'flood') disconnected: the service is stopping")) << log;
  EXPECT_TRUE(contains(log, "gpuflow serve: stopped")) << log;
}

}  // namespace
