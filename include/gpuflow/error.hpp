// gpuflow/error.hpp — part of gpuflow.hpp (include that): gpuflow::Error, the checks that turn
// a gf_status into it, and the small types and helpers every other part shares.
#ifndef GPUFLOW_ERROR_HPP
#define GPUFLOW_ERROR_HPP

#include <gpuflow.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpuflow {

// ---------------------------------------------------------------------------------------------
// Errors

// A failed gpuflow call: its status and the library's message naming the culprit.
class Error : public std::runtime_error {
 public:
  Error(gf_status status, std::string message)
      : std::runtime_error(name(status) + ": " + message),
        status_(status),
        message_(std::move(message)) {}
  gf_status status() const noexcept { return status_; }
  // The library's message alone (what() is "GF_ERR_NAME: message").
  const std::string &message() const noexcept { return message_; }

 private:
  static std::string name(gf_status status) {
    const char *n = gf_status_name(status);
    return n ? n : "GF_STATUS(" + std::to_string(static_cast<int>(status)) + ")";
  }
  gf_status status_;
  std::string message_;
};

namespace detail {

// Copies the message first: gf_status_name is a gpuflow call, after which it would be stale.
[[noreturn]] inline void throw_last(gf_status status) {
  std::string message = gf_last_error();
  throw Error(status, std::move(message));
}
inline void check(gf_status status) {
  if (status != GF_OK) throw_last(status);
}
// For calls where GF_TIMEOUT is an outcome, not an error: true on GF_OK, false on GF_TIMEOUT.
inline bool check_timeout(gf_status status) {
  if (status == GF_TIMEOUT) return false;
  check(status);
  return true;
}
// The C ABI reads NULL (not "") as "unset" for optional strings.
inline const char *c_str_or_null(const std::string &s) {
  return s.empty() ? nullptr : s.c_str();
}
inline std::string copy_or_empty(const char *s) {
  return s ? std::string(s) : std::string();
}
inline int64_t to_ms(std::chrono::milliseconds timeout) {
  return static_cast<int64_t>(timeout.count());
}

}  // namespace detail

// The library loaded at run time, "major.minor.patch" (may differ from this header's minor).
inline std::string_view version() {
  return gf_version_string();
}

// Task and data references are gpuflow.h's small value types, used as they are.
using Task = gf_task;
using Data = gf_data;

// A named amount of a resource: {"GPU", 0.5}, {"gpu_memory", 1 << 30}, {"bigmem", 1}.
struct Resource {
  std::string name;
  double amount = 0.0;
};

namespace detail {

struct PoolDestroy {
  void operator()(gf_pool *p) const noexcept { gf_pool_destroy(p); }
};
struct GraphDestroy {
  void operator()(gf_graph *g) const noexcept { gf_graph_destroy(g); }
};
struct RunDestroy {
  void operator()(gf_run *r) const noexcept { gf_run_destroy(r); }
};
struct LeaseRelease {
  void operator()(gf_lease *l) const noexcept { (void)gf_lease_release(l); }
};
struct ServiceStop {
  void operator()(gf_service *s) const noexcept { gf_service_stop(s); }
};

// Library-owned bytes (gf_bytes) copied into a string and freed.
inline std::string take_bytes(gf_bytes &bytes) {
  std::string out;
  try {
    out.assign(static_cast<const char *>(bytes.data), static_cast<size_t>(bytes.size));
  } catch (...) {
    gf_bytes_free(&bytes);
    throw;
  }
  gf_bytes_free(&bytes);
  return out;
}

}  // namespace detail

}  // namespace gpuflow

#endif  // GPUFLOW_ERROR_HPP
