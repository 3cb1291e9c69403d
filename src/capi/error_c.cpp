#include "capi/guard.hpp"

namespace gf::capi {
namespace {
thread_local std::string last_error;
}

void set_last_error(std::string message) {
  last_error = std::move(message);
}
void clear_last_error() {
  last_error.clear();
}
const char *last_error_text() {
  return last_error.c_str();
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
