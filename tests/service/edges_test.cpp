// Edges of the node's service with real processes (issue 24, items 3, 5 and 6):
//
// - Names are data: a program whose name the kernel cuts mid-character, or that is not UTF-8 at
//   all, connects and leases; control characters in a program's or a lease's name reach neither
//   `gpuflow status` nor the service's log raw.
// - Replies that fit: thousands of leases with 4096-byte names leave `gpuflow status` (text and
//   JSON) readable, saying what it left out.
// - Start-up that cannot hang: a FIFO (or a directory, or a link) as the token file stops
//   `gpuflow serve` at once, naming it; stop signals work while its start waits (a plugin that
//   the test holds back, start_gate_plugin.c).
//
// Clients are name_client processes (name_client.c documents its modes), run under the file
// names the tests want their program names to be. Waits are bounded (a hang fails the test
// instead of the run); nothing asserts how fast anything is.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "processes.hpp"

using namespace gfsvc;

namespace {

const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD

std::string hex(const std::string &bytes) {
  std::string out;
  char pair[3];
  for (unsigned char c : bytes) {
    std::snprintf(pair, sizeof pair, "%02x", static_cast<unsigned>(c));
    out += pair;
  }
  return out;
}

// The raw bytes a terminal would act on, if `text` holds any: for failure messages.
std::string raw_controls_in(const std::string &text) {
  std::string found;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // Newlines end lines of the output itself; any other C0 control, DEL or C1 (as UTF-8) is raw.
    const bool c1 = c == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if ((c < 0x20 && c != '\n') || c == 0x7f || c1) {
      found += "byte " + std::to_string(i) + " is 0x" + hex(std::string(1, text[i])) + "; ";
    }
  }
  return found;
}

// Whether the file at `path` comes to contain `text`, polling a bounded number of times.
bool file_comes_to_contain(const Proc &proc, const std::string &text) {
  for (int tries = 0; tries < 2000 * kTimeFactor; ++tries) {
    if (contains(proc.stderr_text(), text)) return true;
    ::usleep(10000);
  }
  return false;
}

class EdgesTest : public ::testing::Test {
 protected:
  // name_client run as `file` (a link to it in the test's directory): its program name.
  std::unique_ptr<Proc> name_client(const std::string &file, const Service &service,
                                    std::vector<std::string> args) {
    const std::string path = dir / file;
    std::error_code ignored;
    std::filesystem::create_symlink(NAME_CLIENT_PATH, path, ignored);
    std::vector<std::string> argv = {path, service.endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Proc>(argv, dir / ("client" + std::to_string(++clients) + ".err"));
  }
  std::string status(const Service &service, bool json) {
    std::vector<std::string> args = {"status", "--pool", service.endpoint()};
    if (json) args.push_back("--json");
    auto [rc, out] = run_cli(dir, args);
    EXPECT_EQ(rc, 0) << out;
    return out;
  }
  // `gpuflow serve` with `extra` arguments and environment, not waited for.
  std::unique_ptr<Proc> serve(std::vector<std::string> extra, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {GPUFLOW_CLI_PATH,     "serve", "--backend", "host",
                                     "--emulated-devices", "1",     "--socket",  dir / "gf.sock"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Proc>(argv, dir / ("serve" + std::to_string(++serves) + ".log"), env);
  }

  TempDir dir;
  int clients = 0, serves = 0;
};

// ---- Names are data ----

TEST_F(EdgesTest, ProgramsNamedInAnyBytesConnectAndLease) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  struct Case {
    std::string file;   // the program's file name: argv[0] and, cut at 15 bytes, its comm
    std::string comm;   // what it names itself with prctl (empty: nothing)
    std::string shown;  // the name status must show
  };
  const std::vector<Case> cases = {
      // The kernel cuts both at 15 bytes inside a character; the whole names come through.
      {"训练任务_模型", "", "训练任务_模型"},
      {"entraîné_modèle", "", "entraîné_modèle"},
      // A file name that is not UTF-8.
      {"bad\xff\xfe-name", "", "bad" + kReplacement + kReplacement + "-name"},
      // Names the programs chose: bytes that are not UTF-8, and one the kernel cut.
      {"chooser-a",
       "\xff\xfe"
       "chosen",
       kReplacement + kReplacement + "chosen"},
      {"chooser-b", "训练任务_模型", "训练任务_"},
  };
  std::vector<std::unique_ptr<Proc>> running;
  for (const Case &c : cases) {
    std::vector<std::string> args = {"hold", hex("lease of " + c.shown)};
    if (!c.comm.empty()) args.push_back(hex(c.comm));
    running.push_back(name_client(c.file, service, args));
    ASSERT_NE(running.back()->expect("held", 20000 * kTimeFactor), "")
        << hex(c.file) << "\n"
        << running.back()->story() << service.log();
  }
  const std::string json = status(service, true);
  for (const Case &c : cases) {
    EXPECT_TRUE(contains(json, "\"name\":\"" + c.shown + "\"")) << hex(c.shown) << "\n" << json;
  }
  EXPECT_EQ(raw_controls_in(status(service, false)), "");
  for (auto &p : running) {
    p->close_stdin();
    EXPECT_NE(p->expect("bye", 20000 * kTimeFactor), "") << p->story();
  }
}

TEST_F(EdgesTest, ControlCharactersInNamesReachNeitherStatusNorTheLog) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  // Retitles the terminal, rings, clears the screen, returns to overwrite, forges a line.
  const std::string evil = "\x1b]0;pwned\x07\x1b[2J\rFAKE\nLINE";
  auto program = name_client("evil\x1b[2Jprog", service, {"hold", hex(evil)});
  ASSERT_NE(program->expect("held", 20000 * kTimeFactor), "") << program->story();
  // A name the program chose, with a C1 control and a right-to-left override in its lease's.
  auto chooser = name_client("chooser", service,
                             {"hold",
                              hex("abc\xe2\x80\xae"
                                  "cba\xc2\x9b"
                                  "2J"),
                              hex("\x1b[31m\r\n\x07x")});
  ASSERT_NE(chooser->expect("held", 20000 * kTimeFactor), "") << chooser->story();

  const std::string text = status(service, false);
  EXPECT_EQ(raw_controls_in(text), "") << text;
  EXPECT_FALSE(contains(text, "\nLINE")) << text;
  EXPECT_FALSE(contains(text, "\xe2\x80\xae")) << text;
  EXPECT_TRUE(contains(text, "\\x1b]0;pwned\\x07\\x1b[2J")) << text;  // the lease
  EXPECT_TRUE(contains(text, "evil\\x1b[2Jprog")) << text;            // the program
  EXPECT_TRUE(contains(text, "\\x1b[31m\\r\\n\\x07x")) << text;       // the chosen name
  EXPECT_TRUE(contains(text, "abc\\u202ecba\\u009b2J")) << text;

  const std::string json = status(service, true);
  EXPECT_EQ(raw_controls_in(json), "") << json;
  EXPECT_TRUE(contains(json, "\\u001b]0;pwned\\u0007")) << json;

  program->close_stdin();
  chooser->close_stdin();
  EXPECT_NE(program->expect("bye", 20000 * kTimeFactor), "") << program->story();
  EXPECT_NE(chooser->expect("bye", 20000 * kTimeFactor), "") << chooser->story();
  // The log names both clients when they connect and leave; its lines stay lines.
  const std::string log = service.log();
  EXPECT_EQ(raw_controls_in(log), "") << log;
  EXPECT_TRUE(contains(log, "evil\\x1b[2Jprog")) << log;
  EXPECT_TRUE(contains(log, "\\x1b[31m\\r\\n\\x07x")) << log;
}

// ---- Replies that fit ----

TEST_F(EdgesTest, StatusOfThousandsOfLongNamedLeasesStaysReadable) {
  Service service(dir, 1);
  ASSERT_TRUE(service.ready()) << service.log();
  // 1100 ended and 1100 held leases with 4096-byte names: 9 MB of names, twice the frame limit.
  const int kLeases = 1100;
  auto many = name_client("many", service,
                          {"many", std::to_string(kLeases), std::to_string(kLeases), "4096"});
  ASSERT_NE(many->expect("held " + std::to_string(kLeases), 120000 * kTimeFactor), "")
      << many->story();

  const std::string cut = std::string(253, 'x') + "\xe2\x80\xa6";  // 256 bytes with the "…"
  const std::string text = status(service, false);
  EXPECT_TRUE(contains(text, "(" + std::to_string(kLeases - 1024) + " more leases not shown)"))
      << text.substr(0, 4000);
  const std::string json = status(service, true);
  EXPECT_TRUE(contains(json, "\"leases_omitted\":" + std::to_string(kLeases - 1024)))
      << json.substr(0, 2000);
  EXPECT_TRUE(contains(json, "\"ended_omitted\":0,")) << json.substr(0, 2000);
  EXPECT_TRUE(contains(json, "\"name\":\"" + cut + "\"")) << json.substr(0, 2000);
  EXPECT_FALSE(contains(json, std::string(257, 'x'))) << json.substr(0, 2000);

  many->close_stdin();
  EXPECT_NE(many->expect("bye", 120000 * kTimeFactor), "") << many->story();
}

// ---- Start-up that cannot hang ----

TEST_F(EdgesTest, ATokenFileThatIsNotARegularFileStopsServeAtOnceNamingIt) {
  const std::string fifo = dir / "token.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string directory = dir / "token.dir";
  ASSERT_EQ(::mkdir(directory.c_str(), 0700), 0);
  const std::string real = dir / "token.real", link = dir / "token.link";
  {
    std::ofstream(real) << "0123456789abcdef0123456789abcdef\n";
    ::chmod(real.c_str(), 0600);
    std::filesystem::create_symlink(real, link);
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "is a FIFO"},
      {directory, "is a directory"},
      {link, "is a symbolic link"},
      {"/dev/zero", "is a character device"}};
  for (const auto &[path, says] : cases) {
    auto p = serve({"--listen", "127.0.0.1:0", "--token-file", path});
    const std::optional<int> status = p->wait(30000 * kTimeFactor);
    ASSERT_TRUE(status) << path << ": gpuflow serve did not stop\n" << p->story();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << exit_text(status);
    const std::string err = p->stderr_text();
    EXPECT_TRUE(contains(err, "the token file " + path + " " + says)) << err;
    EXPECT_FALSE(contains(err, "Sanitizer")) << err;
  }
}

class StartGate {
 public:
  explicit StartGate(std::string path) : path_(std::move(path)) {
    if (::mkfifo(path_.c_str(), 0600) != 0) ADD_FAILURE() << "mkfifo " << path_;
  }
  ~StartGate() { release(); }
  // Opens the gate's writing end once the service's start is reading it (in the plugin).
  bool open_when_waited_on(Proc &service) {
    for (int tries = 0; tries < 4000 * kTimeFactor; ++tries) {
      fd_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd_ >= 0) return true;
      if (errno != ENXIO || service.wait(0)) return false;  // ENXIO: nobody reads it yet
      ::usleep(5000);
    }
    return false;
  }
  // Lets the start go on: the plugin reads the end of the FIFO.
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string &path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST_F(EdgesTest, AStopSignalDuringStartStopsServeOnceStarted) {
  StartGate gate(dir / "gate");
  auto p = serve({"--plugin", START_GATE_PLUGIN_PATH}, {"GFSVC_START_GATE=" + gate.path()});
  ASSERT_TRUE(gate.open_when_waited_on(*p)) << p->story();
  p->signal(SIGTERM);
  ASSERT_TRUE(file_comes_to_contain(*p, "Terminated: stopping")) << p->story();
  EXPECT_FALSE(p->wait(0)) << "it ended before its start did";
  gate.release();
  const std::optional<int> status = p->wait(30000 * kTimeFactor);
  ASSERT_TRUE(status) << p->story();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exit_text(status);
  EXPECT_EQ(p->expect("gpuflow serve: listening", 1000 * kTimeFactor), "") << p->story();
  EXPECT_FALSE(contains(p->stderr_text(), "Sanitizer")) << p->story();
  struct stat st {};
  EXPECT_NE(::lstat((dir / "gf.sock").c_str(), &st), 0) << "the socket file is still there";
}

TEST_F(EdgesTest, ASecondStopSignalEndsAStartThatHangs) {
  StartGate gate(dir / "gate");
  auto p = serve({"--plugin", START_GATE_PLUGIN_PATH}, {"GFSVC_START_GATE=" + gate.path()});
  ASSERT_TRUE(gate.open_when_waited_on(*p)) << p->story();
  p->signal(SIGTERM);
  // The second only once the first was taken: two pending SIGTERMs would be one.
  ASSERT_TRUE(file_comes_to_contain(*p, "Terminated: stopping")) << p->story();
  p->signal(SIGTERM);
  const std::optional<int> status = p->wait(30000 * kTimeFactor);  // the gate is still closed
  ASSERT_TRUE(status) << "a second SIGTERM did not end a start that hangs\n" << p->story();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM) << exit_text(status);
  EXPECT_TRUE(contains(p->stderr_text(), "again: exiting at once")) << p->story();
}

}  // namespace
