// gpuflow-relay: started by a gpuflow service for each remote client's data plane, never by hand
// (docs/transport.md, "Remote clients"). It holds the UCX TCP socket that the service's own
// process must not (UCX 1.13 aborts on crafted TCP bytes), and relays tagged messages between
// the remote client (TCP, peer-error mode) and the service (shared memory).
//
//   gpuflow-relay --net-device DEV --max-message BYTES --peer NAME
//   stdin:  "<service worker address, hex> <remote client's worker address, hex>\n"
//   stdout: "<this relay's shared-memory address, hex> <its TCP address, hex>\n"
// It ends when the service closes its stdin (exit 0), or when either side fails (exit 1, the
// reason as the last line on standard error).
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "transport/endpoint.hpp"
#include "transport/hex.hpp"
#include "transport/tag_relay.hpp"
#include "transport/ucx_context.hpp"

namespace {

struct Arguments {
  std::string net_device, peer = "the remote client";
  uint64_t max_message = 0;
  uint64_t tag_space = 0;  // the client's id: its tags carry it in their upper 32 bits
};

Arguments parse(int argc, char **argv) {
  Arguments a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) gf::fail(GF_ERR_INVALID_ARGUMENT, flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--net-device") {
      a.net_device = value;
    } else if (flag == "--max-message") {
      a.max_message = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--tag-space") {
      a.tag_space = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--peer") {
      a.peer = value;
    } else {
      gf::fail(GF_ERR_INVALID_ARGUMENT, "unknown option " + flag);
    }
  }
  if (a.net_device.empty() || a.max_message == 0 || a.tag_space == 0) {
    gf::fail(GF_ERR_INVALID_ARGUMENT,
             "usage: gpuflow-relay --net-device DEV --max-message BYTES --tag-space CLIENT_ID "
             "[--peer NAME] (started "
             "by a gpuflow service, not by hand)");
  }
  return a;
}

// Relays until the service closes stdin (true) or a side fails (false, with `why`).
bool relay(gf::transport::TagRelay &pump, gf::transport::Worker &inner,
           gf::transport::Worker &outer, std::string &why) {
  for (;;) {
    if (!pump.pump()) {
      why = pump.error();
      return false;
    }
    // pump() drained both workers and took what arrived; draining again here would queue new
    // arrivals unseen until the next wake-up. Armed as they are: busy means go round again.
    if (!inner.arm() || !outer.arm()) continue;
    pollfd fds[3] = {{inner.event_fd(), POLLIN, 0}, {outer.event_fd(), POLLIN, 0}, {0, POLLIN, 0}};
    // The wake-up descriptors alone can miss TCP wire-up events: never sleep long.
    ::poll(fds, 3, pump.busy() ? 1 : 50);
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
      char byte;
      if (::read(0, &byte, 1) <= 0) return true;  // the service let go
    }
  }
}

int run(int argc, char **argv) {
  const Arguments args = parse(argc, argv);
  std::string service_hex, remote_hex;
  if (!(std::cin >> service_hex >> remote_hex)) {
    gf::fail(GF_ERR_INVALID_ARGUMENT, "expected two worker addresses on standard input");
  }
  const std::vector<uint8_t> service_address = gf::transport::from_hex(service_hex);
  const std::vector<uint8_t> remote_address = gf::transport::from_hex(remote_hex);
  // Toward the service every message goes by rendezvous: a send ends only when the service's
  // receive matches it, so what the client sends unannounced waits here, counted and bounded,
  // instead of piling up in the service's worker.
  auto inner = gf::transport::Worker::create("gpuflow-relay", true);
  auto outer = gf::transport::Worker::create_networked("gpuflow-relay", args.net_device);
  std::printf("%s %s\n", gf::transport::to_hex(inner->address()).c_str(),
              gf::transport::to_hex(outer->address()).c_str());
  std::fflush(stdout);
  std::unique_ptr<gf::transport::TagRelay> pump;
  auto on_error = [&pump](const std::string &why) {
    if (pump) pump->fail(why);
  };
  auto to_service =
      std::make_unique<gf::transport::Endpoint>(*inner, service_address, "the service", on_error);
  auto to_remote =
      std::make_unique<gf::transport::Endpoint>(*outer, remote_address, args.peer, on_error);
  pump = std::make_unique<gf::transport::TagRelay>(
      gf::transport::TagRelay::Side{inner.get(), to_service.get(), "the service"},
      gf::transport::TagRelay::Side{outer.get(), to_remote.get(), args.peer, args.tag_space},
      args.max_message);
  std::string why;
  const bool clean = relay(*pump, *inner, *outer, why);
  to_remote->close();
  to_service->close();
  inner->settle();
  outer->settle();
  if (!clean) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
