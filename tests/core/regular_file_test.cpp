// Files read only when they are regular files (core/regular_file.hpp): each kind of wrong file is
// refused, named with its path and what it is, without waiting on it.
#include "core/regular_file.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace gf::core {
namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

class RegularFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/gf-regular-file-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    dir = name;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::string write(const std::string &name, const std::string &contents) {
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  // The error reading `path` gives; the test fails if it was read.
  std::string refusal(const std::string &path, size_t max_bytes = 1024,
                      Links links = Links::kFollow) {
    const FileText read = read_regular_file(path, max_bytes, "the test file", links);
    EXPECT_FALSE(read) << path << " was read: " << read.contents.size() << " bytes";
    return read.error;
  }

  std::string dir;
};

TEST_F(RegularFileTest, ReadsARegularFileWhole) {
  const std::string path = write("ok.toml", "[pool]\nbackend = \"host\"\n");
  const FileText read = read_regular_file(path, 1024, "the test file");
  ASSERT_TRUE(read) << read.error;
  EXPECT_EQ(read.contents, "[pool]\nbackend = \"host\"\n");
  EXPECT_TRUE(S_ISREG(read.status.st_mode));
  EXPECT_EQ(regular_file_problem(path, "the test file"), "");
}

TEST_F(RegularFileTest, ReadsAnEmptyFileAsEmpty) {
  const FileText read = read_regular_file(write("empty", ""), 1024, "the test file");
  ASSERT_TRUE(read) << read.error;
  EXPECT_EQ(read.contents, "");
}

TEST_F(RegularFileTest, RefusesADirectory) {
  EXPECT_EQ(refusal(dir), "the test file " + dir + " is a directory, not a regular file");
  EXPECT_EQ(regular_file_problem(dir, "the test file"),
            "the test file " + dir + " is a directory, not a regular file");
}

// A FIFO with no writer: opened for reading the usual way, it would wait here for ever.
TEST_F(RegularFileTest, RefusesAFifoWithoutWaitingOnIt) {
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal(fifo), "the test file " + fifo + " is a FIFO (named pipe), not a regular file");
  EXPECT_TRUE(contains(regular_file_problem(fifo, "the plugin"), "is a FIFO"));
}

TEST_F(RegularFileTest, RefusesCharacterDevicesEvenOneThatNeverEnds) {
  EXPECT_EQ(refusal("/dev/null"),
            "the test file /dev/null is a character device, not a regular file");
  // /dev/zero would fill any buffer: refused for what it is, before the size bound applies.
  EXPECT_EQ(refusal("/dev/zero", size_t{1} << 30),
            "the test file /dev/zero is a character device, not a regular file");
}

TEST_F(RegularFileTest, RefusesASocket) {
  const std::string path = dir + "/socket";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof address.sun_path);
  path.copy(address.sun_path, path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr *>(&address), sizeof address), 0);
  EXPECT_EQ(refusal(path), "the test file " + path + " is a socket, not a regular file");
  ::close(fd);
}

TEST_F(RegularFileTest, FollowsALinkToWhatItNamesAndJudgesThat) {
  const std::string fifo = dir + "/fifo", to_fifo = dir + "/to-fifo", to_file = dir + "/to-file";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink(fifo, to_fifo);
  std::filesystem::create_symlink(write("real", "text"), to_file);
  EXPECT_EQ(refusal(to_fifo),
            "the test file " + to_fifo + " is a FIFO (named pipe), not a regular file");
  const FileText read = read_regular_file(to_file, 1024, "the test file");
  ASSERT_TRUE(read) << read.error;
  EXPECT_EQ(read.contents, "text");
}

TEST_F(RegularFileTest, RefusesAnyLinkWhenToldNotToFollowOne) {
  const std::string fifo = dir + "/fifo", to_fifo = dir + "/to-fifo", to_file = dir + "/to-file";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink(fifo, to_fifo);
  std::filesystem::create_symlink(write("real", "text"), to_file);
  for (const std::string &link : {to_fifo, to_file}) {
    const std::string why = refusal(link, 1024, Links::kRefuse);
    EXPECT_TRUE(contains(why, "the test file " + link + " is a symbolic link")) << why;
  }
}

TEST_F(RegularFileTest, RefusesAFileLargerThanTheBoundAndReadsOneAtIt) {
  const std::string at = write("at", std::string(100, 'x'));
  const std::string over = write("over", std::string(101, 'x'));
  const FileText read = read_regular_file(at, 100, "the test file");
  ASSERT_TRUE(read) << read.error;
  EXPECT_EQ(read.contents.size(), 100u);
  EXPECT_EQ(refusal(over, 100), "the test file " + over + " is larger than 100 bytes");
}

TEST_F(RegularFileTest, SaysAMissingFileDoesNotExist) {
  const std::string path = dir + "/missing";
  const FileText read = read_regular_file(path, 1024, "the test file");
  EXPECT_EQ(read.error, "the test file " + path + " does not exist");
  EXPECT_EQ(read.error_number, ENOENT);
  EXPECT_EQ(regular_file_problem(path, "the test file"), read.error);
}

TEST_F(RegularFileTest, SaysWhyAFileTheSystemRefusesCannotBeRead) {
  // A path through a regular file (ENOTDIR) is refused by the system for root too, unlike a file
  // of mode 0000, which root reads all the same.
  const std::string path = write("plain", "text") + "/below";
  const FileText read = read_regular_file(path, 1024, "the test file");
  EXPECT_EQ(read.error, "the test file " + path + " cannot be read: " + std::strerror(ENOTDIR));
  EXPECT_EQ(read.error_number, ENOTDIR);
  EXPECT_TRUE(read.contents.empty());
}

TEST_F(RegularFileTest, SaysWhyAnUnreadableFileCannotBeRead) {
  const std::string path = write("secret", "text");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const FileText read = read_regular_file(path, 1024, "the test file");
  if (::geteuid() == 0) {
    // Root reads a file of mode 0000 all the same (the case above covers the refusal).
    EXPECT_TRUE(read) << read.error;
    EXPECT_EQ(read.contents, "text");
    return;
  }
  EXPECT_EQ(read.error, "the test file " + path + " cannot be read: " + std::strerror(EACCES));
  EXPECT_EQ(read.error_number, EACCES);
}

}  // namespace
}  // namespace gf::core
