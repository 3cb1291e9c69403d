// The bytes of a connection to a service, as the session reads and writes them: over the socket
// itself (a unix socket, or tcp+insecure://), or through TLS (client/tls_stream.hpp). Reads come
// from one thread (the handshake's, then the reader's) while others write.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gf::client {

class ByteStream {
 public:
  explicit ByteStream(int fd) : fd_(fd) {}
  virtual ~ByteStream();  // closes the socket
  ByteStream(const ByteStream &) = delete;
  ByteStream &operator=(const ByteStream &) = delete;

  // Writes all of it; returns empty, or why it failed (the connection is then unusable).
  virtual std::string write_all(const uint8_t *bytes, size_t size);
  // Up to `size` bytes, waiting at most `timeout_ms` (< 0: as long as it takes): the count, 0
  // when the peer closed, -1 when the time ran out, -2 when reading failed (`why` says how).
  virtual ssize_t read_some(char *buffer, size_t size, int timeout_ms, std::string &why);
  // Wakes a reader waiting in read_some (it then sees the end); writes fail from then on.
  void shut();

 protected:
  // Waits for `events` on the socket within `timeout_ms`: false when the time ran out.
  bool wait_for(short events, int timeout_ms) const;
  const int fd_;
};

}  // namespace gf::client
