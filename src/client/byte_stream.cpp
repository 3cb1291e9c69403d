#include "client/byte_stream.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace gf::client {

ByteStream::~ByteStream() {
  ::close(fd_);
}

std::string ByteStream::write_all(const uint8_t *bytes, size_t size) {
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::send(fd_, bytes + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_for(POLLOUT, -1);
      continue;
    }
    if (n <= 0) return std::strerror(n == 0 ? EPIPE : errno);
    sent += static_cast<size_t>(n);
  }
  return {};
}

ssize_t ByteStream::read_some(char *buffer, size_t size, int timeout_ms, std::string &why) {
  for (;;) {
    if (timeout_ms >= 0 && !wait_for(POLLIN, timeout_ms)) return -1;
    ssize_t n = ::recv(fd_, buffer, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_for(POLLIN, -1);
      continue;
    }
    if (n < 0) {
      why = std::strerror(errno);
      return -2;
    }
    return n;
  }
}

void ByteStream::shut() {
  ::shutdown(fd_, SHUT_RDWR);
}

bool ByteStream::wait_for(short events, int timeout_ms) const {
  pollfd p{fd_, events, 0};
  for (;;) {
    const int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    return rc != 0;
  }
}

}  // namespace gf::client
