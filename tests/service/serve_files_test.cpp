// The files `gpuflow serve` and the gpuflow command read are regular files, read without waiting
// on them (core/regular_file.hpp): a configuration, a plugin, a token file or a graph document
// that is a FIFO, a directory or a device is refused naming its path and what it is, at start
// and at a SIGHUP's re-read, and the service goes on answering, reloading and stopping.
//
// Waits are bounded only to turn a hang into a failure; nothing asserts how fast anything is.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "processes.hpp"

using namespace gfsvc;

namespace {

struct WrongFile {
  std::string path;
  std::string is;  // what the refusal says it is: "is a FIFO (named pipe), not a regular file"
};

class ServeFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    ASSERT_EQ(::mkdir(directory.c_str(), 0700), 0);
    std::filesystem::create_symlink(fifo, link_to_fifo);
  }
  // Each kind of wrong file a path may name instead of a regular one.
  std::vector<WrongFile> wrong_files() const {
    const std::string fifo_is = "is a FIFO (named pipe), not a regular file";
    return {{fifo, fifo_is},
            {directory, "is a directory, not a regular file"},
            {"/dev/zero", "is a character device, not a regular file"},
            {"/dev/null", "is a character device, not a regular file"},
            {link_to_fifo, fifo_is}};
  }
  void write(const std::string &path, const std::string &text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  // `args` to the gpuflow command, with `env` added, waited for: (exit status, standard error).
  std::pair<std::optional<int>, std::string> run(std::vector<std::string> args,
                                                 std::vector<std::string> env = {}) {
    args.insert(args.begin(), GPUFLOW_CLI_PATH);
    Proc p(args, dir / ("command" + std::to_string(++commands) + ".err"), env);
    const std::optional<int> status = p.wait(30000 * kTimeFactor);
    return {status, p.stderr_text()};
  }
  static bool failed(const std::optional<int> &status) {
    return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 2;
  }
  // Whether the service's log comes to contain `text`; false if it does not before the deadline.
  static bool log_comes_to_contain(Service &service, const std::string &text) {
    for (int tries = 0; tries < 2000 * kTimeFactor; ++tries) {
      if (contains(service.log(), text)) return true;
      if (service.proc().wait(0)) return contains(service.log(), text);
      ::usleep(10000);
    }
    return false;
  }

  TempDir dir;
  const std::string fifo = dir / "fifo", directory = dir / "directory",
                    link_to_fifo = dir / "link-to-fifo";
  int commands = 0;
};

TEST_F(ServeFilesTest, AConfigurationThatIsNotARegularFileStopsTheStartNamingIt) {
  std::vector<WrongFile> cases = wrong_files();
  const std::string large = dir / "large.toml";
  write(large, "# " + std::string(size_t{1} << 20, 'x') + "\n");
  cases.push_back({large, "is larger than 1048576 bytes"});
  cases.push_back({dir / "missing.toml", "does not exist"});
  for (const auto &[path, is] : cases) {
    auto [status, err] = run({"serve", "--config", path, "--socket", dir / "never.sock"});
    ASSERT_TRUE(status) << path << ": gpuflow serve did not stop\n" << err;
    EXPECT_TRUE(failed(status)) << path << ": " << exit_text(status) << "\n" << err;
    EXPECT_TRUE(contains(err, "gpuflow serve: the configuration file " + path + " " + is)) << err;
  }
}

TEST_F(ServeFilesTest, APluginThatIsNotARegularFileStopsTheStartNamingIt) {
  for (const auto &[path, is] : wrong_files()) {
    auto [status, err] = run({"serve", "--backend", "host", "--emulated-devices", "1", "--socket",
                              dir / "gf.sock", "--plugin", path});
    ASSERT_TRUE(status) << path << ": gpuflow serve did not stop\n" << err;
    EXPECT_TRUE(failed(status)) << path << ": " << exit_text(status) << "\n" << err;
    EXPECT_TRUE(contains(err, "the plugin " + path + " " + is)) << err;
  }
}

// The re-read of a SIGHUP meets each kind of wrong file in the configuration's place: each is
// refused and logged, the policy stays, and the service still answers, reloads and stops.
TEST_F(ServeFilesTest, AReloadFromAWrongFileKeepsThePolicyAndALaterReloadTakesEffect) {
  const std::string config = dir / "serve.toml";
  write(config, "[policy]\nuser_gpu_cap = 0\n");
  Service service(dir, 2, {"--config", config});
  ASSERT_TRUE(service.ready()) << service.log();
  const std::string zero = dir / "link-to-zero", large = dir / "large";
  std::filesystem::create_symlink("/dev/zero", zero);
  write(large, "# " + std::string(size_t{1} << 20, 'x') + "\n");
  const std::vector<WrongFile> cases = {{fifo, "is a FIFO (named pipe), not a regular file"},
                                        {directory, "is a directory, not a regular file"},
                                        {zero, "is a character device, not a regular file"},
                                        {large, "is larger than 1048576 bytes"}};
  for (const auto &[replacement, is] : cases) {
    std::filesystem::remove_all(config);
    ASSERT_EQ(::rename(replacement.c_str(), config.c_str()), 0) << replacement;
    service.proc().signal(SIGHUP);
    ASSERT_TRUE(log_comes_to_contain(
        service,
        "not re-read, the policy stays as it was: the configuration file " + config + " " + is))
        << replacement << "\n"
        << service.log();
    auto [rc, out] = run_cli(dir, {"status", "--pool", service.endpoint()});
    EXPECT_EQ(rc, 0) << "after " << replacement << " in its place:\n" << out;
  }

  std::filesystem::remove_all(config);
  write(config, "[policy]\nuser_gpu_cap = 1\n");
  service.proc().signal(SIGHUP);
  ASSERT_TRUE(log_comes_to_contain(service, "user_gpu_cap 0 -> 1")) << service.log();
  auto [rc, out] =
      run_cli(dir, {"lease", "--pool", service.endpoint(), "--gpus", "2", "--", "true"});
  EXPECT_EQ(rc, 2) << "a 2-GPU lease above the new cap of 1 was not refused:\n" << out;
  EXPECT_TRUE(contains(out, "a user may hold at most 1")) << out;

  service.proc().signal(SIGTERM);
  const std::optional<int> status = service.proc().wait(30000 * kTimeFactor);
  ASSERT_TRUE(status) << "SIGTERM did not stop the service\n" << service.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << exit_text(status);
}

// A client's copy of a token file is read before it connects: no service needs to be there.
TEST_F(ServeFilesTest, AClientsTokenFileThatIsNotARegularFileIsRefusedNamingIt) {
  for (const auto &[path, is] : wrong_files()) {
    auto [status, err] = run({"status", "--pool", "tcp://127.0.0.1:9", "--token-file", path});
    ASSERT_TRUE(status) << path << ": gpuflow status did not end\n" << err;
    EXPECT_TRUE(failed(status)) << path << ": " << exit_text(status) << "\n" << err;
    EXPECT_TRUE(contains(err, "the token file " + path + " " + is)) << err;
  }
  auto [status, err] =
      run({"status", "--pool", "tcp://127.0.0.1:9"}, {"GPUFLOW_TOKEN_FILE=" + fifo});
  ASSERT_TRUE(status) << "gpuflow status did not end\n" << err;
  EXPECT_TRUE(failed(status)) << exit_text(status) << "\n" << err;
  EXPECT_TRUE(contains(err, "the token file " + fifo + " is a FIFO")) << err;
}

// Each command that reads a document, `run --dask` too (whose Python would open the path itself).
TEST_F(ServeFilesTest, AGraphDocumentThatIsNotARegularFileIsRefusedNamingIt) {
  const std::vector<std::vector<std::string>> readers = {
      {"validate"},
      {"convert", "GRAPH", dir / "out.json", "--json"},
      {"run", "GRAPH", "--backend", "host"},
      {"run", "GRAPH", "--dask", "tcp://127.0.0.1:9"}};
  for (const std::vector<std::string> &command : readers) {
    for (const auto &[path, is] : wrong_files()) {
      std::vector<std::string> args = command;
      if (args.size() == 1) args.push_back("GRAPH");
      std::replace(args.begin(), args.end(), std::string("GRAPH"), path);
      auto [status, err] = run(args);
      ASSERT_TRUE(status) << command[0] << " " << path << " did not end\n" << err;
      EXPECT_TRUE(failed(status)) << command[0] << " " << path << ": " << exit_text(status);
      EXPECT_TRUE(contains(err, "gpuflow: the graph document " + path + " " + is)) << err;
    }
  }
}

}  // namespace
