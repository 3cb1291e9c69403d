// A client process for the data-plane tests (transport_test.cpp): connects to the service at
// argv[1] and does what argv[2] says, printing one line per step on standard output.
//   roundtrip SIZE  put a patterned blob, get it back, compare: "ok" or "mismatch"
//   stall SIZE      announce a put and never send its bytes: "announced", then sleeps
//   loop SIZE       puts the same blob over and over: "put N" after each
//   nobody          as uid/gid 65534, asks for a data plane: "opened" or "refused STATUS WHY"
// Errors end it with "error STATUS WHY" and exit 1.
#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "pattern.hpp"

namespace {

void say(const std::string &line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: blob_client ENDPOINT MODE [SIZE]\n");
    return 2;
  }
  const std::string endpoint = argv[1], mode = argv[2];
  const size_t size = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  try {
    if (mode == "nobody") {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
        say("error setuid failed");
        return 1;
      }
      auto c = gf::client::Connection::open(endpoint, "nobody", 1);
      try {
        c->blobs().open_data_plane();
        say("opened");
      } catch (const gf::Error &e) {
        say("refused " + std::to_string(e.status()) + " " + e.what());
      }
      return 0;
    }
    auto c = gf::client::Connection::open(endpoint, "blob_client " + mode, 1);
    const std::vector<uint8_t> bytes = pattern(size, size);
    if (mode == "roundtrip") {
      c->blobs().put(1, bytes.data(), bytes.size());
      say(c->blobs().get(1) == bytes ? "ok" : "mismatch");
    } else if (mode == "stall") {
      c->blobs().announce_put(1, size);
      say("announced");
      for (;;) ::pause();
    } else if (mode == "loop") {
      for (int n = 1;; ++n) {
        c->blobs().put(1, bytes.data(), bytes.size());
        say("put " + std::to_string(n));
      }
    } else {
      say("error unknown mode " + mode);
      return 2;
    }
  } catch (const gf::Error &e) {
    say("error " + std::to_string(e.status()) + " " + e.what());
    return 1;
  }
  return 0;
}
