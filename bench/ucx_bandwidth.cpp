// Client <-> service bandwidth over the UCX data plane (issue 13): puts of one blob of SIZE
// bytes, ITERS times, to the `gpuflow serve` at ENDPOINT; the median and best of ROUNDS. Also a
// small-message round trip (get of an 8-byte blob: one control round trip plus one UCX eager
// message) and a plain memcpy ceiling. One JSON line per measurement on standard output.
//
//   ucx_bandwidth put ENDPOINT SIZE ITERS [IN_FLIGHT]
//                                              {"what":"put","size":…,"mib_per_s":…}
// IN_FLIGHT (default 1) threads put their own blobs at once, as ucx_perftest keeps a window of
// messages in flight: control round trips then overlap with other puts' bytes.
//   ucx_bandwidth rtt ENDPOINT ITERS           {"what":"rtt","usec_median":…}
//   ucx_bandwidth memcpy SIZE ITERS            {"what":"memcpy","size":…,"mib_per_s":…}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.hpp"
#include "core/error.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: ucx_bandwidth put ENDPOINT SIZE ITERS | rtt ENDPOINT ITERS | "
                 "memcpy SIZE ITERS\n");
    return 2;
  }
  const std::string what = argv[1];
  try {
    if (what == "memcpy") {
      const size_t size = std::strtoull(argv[2], nullptr, 10);
      const int iters = std::atoi(argv[3]);
      std::vector<uint8_t> a(size, 1), b(size, 2);
      std::memcpy(b.data(), a.data(), size);  // pages touched before timing, as UCX's are
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        a[0] = static_cast<uint8_t>(i);
        std::memcpy(b.data(), a.data(), size);
      }
      const double s = seconds_since(t);
      std::printf(
          "{\"what\":\"memcpy\",\"size\":%zu,\"iters\":%d,\"mib_per_s\":%.1f,\"check\":%d}\n", size,
          iters, static_cast<double>(size) * iters / s / (1 << 20), b[0]);
      return 0;
    }
    auto c = gf::client::Connection::open(argv[2], "ucx_bandwidth", 1);
    if (what == "put" && argc >= 5) {
      const size_t size = std::strtoull(argv[3], nullptr, 10);
      const int iters = std::atoi(argv[4]);
      const int in_flight = std::max(1, argc >= 6 ? std::atoi(argv[5]) : 1);
      const int each = std::max(1, iters / in_flight);
      std::vector<std::vector<uint8_t>> buffers(in_flight, std::vector<uint8_t>(size, 7));
      for (int k = 0; k < in_flight; ++k)  // wire-up and first touch outside the timing
        c->blobs().put(1 + k, buffers[k].data(), size);
      std::vector<std::string> errors(in_flight);
      auto t = std::chrono::steady_clock::now();
      std::vector<std::thread> threads;
      for (int k = 0; k < in_flight; ++k) {
        threads.emplace_back([&, k] {
          try {
            for (int i = 0; i < each; ++i) c->blobs().put(1 + k, buffers[k].data(), size);
          } catch (const gf::Error &e) {
            errors[k] = e.what();
          }
        });
      }
      for (auto &th : threads) th.join();
      const double s = seconds_since(t);
      for (const auto &e : errors) {
        if (!e.empty()) throw gf::Error(GF_ERR_SYSTEM, e);
      }
      const double puts = static_cast<double>(each) * in_flight;
      std::printf(
          "{\"what\":\"put\",\"size\":%zu,\"iters\":%.0f,\"in_flight\":%d,\"mib_per_s\":%.1f,"
          "\"usec_per_put\":%.1f,\"transports\":\"%s\"}\n",
          size, puts, in_flight, static_cast<double>(size) * puts / s / (1 << 20), s / puts * 1e6,
          c->blobs().data_plane_transports().c_str());
      return 0;
    }
    if (what == "rtt") {
      const int iters = std::atoi(argv[3]);
      const uint64_t v = 42;
      c->blobs().put(1, &v, sizeof v);
      std::vector<double> usec;
      for (int i = 0; i < iters; ++i) {
        auto t = std::chrono::steady_clock::now();
        std::vector<uint8_t> back = c->blobs().get(1);
        usec.push_back(seconds_since(t) * 1e6);
        if (back.size() != sizeof v) return 1;
      }
      std::vector<double> put_usec;
      for (int i = 0; i < iters; ++i) {
        auto t = std::chrono::steady_clock::now();
        c->blobs().put(1, &v, sizeof v);
        put_usec.push_back(seconds_since(t) * 1e6);
      }
      std::printf(
          "{\"what\":\"rtt\",\"iters\":%d,\"get_usec_median\":%.1f,\"put_usec_median\":%.1f}\n",
          iters, median(usec), median(put_usec));
      return 0;
    }
  } catch (const gf::Error &e) {
    std::fprintf(stderr, "ucx_bandwidth: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "ucx_bandwidth: bad arguments\n");
  return 2;
}
