// A stand-in for the service on a unix socket, for tests of the client's connection core: it
// takes one client, welcomes it, and plays the test's script on the socket (no real service).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "wire/framing.hpp"

namespace gft {

namespace fb = flatbuffers;

inline void write_all(int fd, const std::vector<uint8_t> &bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// The next message the client sent, or an empty payload once it is gone.
inline std::vector<uint8_t> read_message(int fd, gf::wire::FrameReader &reader) {
  std::vector<uint8_t> payload;
  std::string error;
  char buffer[4096];
  while (!reader.next(payload, error)) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0 || !error.empty()) return {};
    reader.feed(buffer, static_cast<size_t>(n));
  }
  return payload;
}

// Takes one client, welcomes it, then plays `script` on the socket and closes it.
class StandIn {
 public:
  using Script = std::function<void(int fd, gf::wire::FrameReader &reader)>;
  explicit StandIn(Script script) {
    char dir[] = "/tmp/gf-session-XXXXXX";
    dir_ = ::mkdtemp(dir);
    path_ = dir_ + "/s.sock";
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path_.c_str());
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr *>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    thread_ = std::thread([this, script] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      gf::wire::FrameReader reader;
      if (!read_message(fd, reader).empty()) {  // the Hello
        fb::FlatBufferBuilder b;
        write_all(fd,
                  gf::wire::frame_of(b, gf::wire::CreateWelcome(b, gf::wire::kProtocolVersion, 7, 1,
                                                                0, 1, b.CreateString("host"))));
        script(fd, reader);
      }
      ::close(fd);
    });
  }
  ~StandIn() {
    thread_.join();
    ::close(listener_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string endpoint() const { return "unix://" + path_; }

 private:
  std::string dir_, path_;
  int listener_ = -1;
  std::thread thread_;
};

}  // namespace gft
