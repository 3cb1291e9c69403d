// Internal errors: one exception type carrying the gf_status it maps to and a message naming the
// culprit. Thrown inside the runtime, caught at the C boundary (capi/guard.hpp) and nowhere else.
#pragma once

#include <stdexcept>
#include <string>

#include "gpuflow.h"

namespace gf {

class Error : public std::runtime_error {
 public:
  Error(gf_status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  gf_status status() const { return status_; }

 private:
  gf_status status_;
};

[[noreturn]] inline void fail(gf_status status, std::string message) {
  throw Error(status, std::move(message));
}

}  // namespace gf
