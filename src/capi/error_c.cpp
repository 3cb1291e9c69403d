#include <atomic>
#include <cstdint>

#include "capi/guard.hpp"

namespace gf::capi {
namespace {

// How many threads hold a message. Every successful call clears its thread's message, and reaching
// a thread_local from a shared library costs a call to __tls_get_addr: with no message held
// anywhere (the usual case) a call need not look, which matters on a task body's
// gf_task_ctx_input/output. A thread always sees its own
// changes to the count, so it never skips clearing a message of its own.
std::atomic<uint64_t> threads_with_message{0};

struct LastError {
  std::string text;
  ~LastError() {
    if (!text.empty()) threads_with_message.fetch_sub(1, std::memory_order_relaxed);
  }
};
thread_local LastError last_error;

}  // namespace

void set_last_error(std::string message) {
  const bool had = !last_error.text.empty();
  last_error.text = std::move(message);
  const bool has = !last_error.text.empty();
  if (has && !had) threads_with_message.fetch_add(1, std::memory_order_relaxed);
  if (had && !has) threads_with_message.fetch_sub(1, std::memory_order_relaxed);
}
void clear_last_error() {
  if (threads_with_message.load(std::memory_order_relaxed) == 0) return;
  if (last_error.text.empty()) return;
  last_error.text.clear();
  threads_with_message.fetch_sub(1, std::memory_order_relaxed);
}
const char *last_error_text() {
  return last_error.text.c_str();
}

}  // namespace gf::capi

extern "C" {

GF_API const char *gf_last_error(void) {
  return gf::capi::last_error_text();
}

GF_API const char *gf_status_name(gf_status status) {
  switch (status) {
    case GF_OK:
      return "GF_OK";
    case GF_TIMEOUT:
      return "GF_TIMEOUT";
    case GF_ERR_INVALID_ARGUMENT:
      return "GF_ERR_INVALID_ARGUMENT";
    case GF_ERR_INVALID_HANDLE:
      return "GF_ERR_INVALID_HANDLE";
    case GF_ERR_STRUCT_SIZE:
      return "GF_ERR_STRUCT_SIZE";
    case GF_ERR_VERSION_MISMATCH:
      return "GF_ERR_VERSION_MISMATCH";
    case GF_ERR_INVALID_GRAPH:
      return "GF_ERR_INVALID_GRAPH";
    case GF_ERR_INFEASIBLE:
      return "GF_ERR_INFEASIBLE";
    case GF_ERR_OUT_OF_MEMORY:
      return "GF_ERR_OUT_OF_MEMORY";
    case GF_ERR_TASK_FAILED:
      return "GF_ERR_TASK_FAILED";
    case GF_ERR_CANCELLED:
      return "GF_ERR_CANCELLED";
    case GF_ERR_STATE:
      return "GF_ERR_STATE";
    case GF_ERR_NOT_FOUND:
      return "GF_ERR_NOT_FOUND";
    case GF_ERR_SHUT_DOWN:
      return "GF_ERR_SHUT_DOWN";
    case GF_ERR_SYSTEM:
      return "GF_ERR_SYSTEM";
    case GF_ERR_INTERNAL:
      return "GF_ERR_INTERNAL";
    case GF_STATUS_FORCE32:
      break;
  }
  return "GF_UNKNOWN_STATUS";
}

}  // extern "C"
