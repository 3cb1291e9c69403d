// A refusal: the gf_status a caller gets and the words naming the culprit, as a value. The one
// convention for "no, and why" that is not an exception: functions whose callers go on either
// way (a service answering a client, a check that reports) return it; GF_OK means not refused.
// Callers decide by `status`, never by searching `why`.
#pragma once

#include <string>
#include <utility>

#include "gpuflow.h"

namespace gf {

struct Refusal {
  gf_status status = GF_OK;
  std::string why;

  Refusal() = default;
  Refusal(gf_status s, std::string words) : status(s), why(std::move(words)) {}
  explicit operator bool() const { return status != GF_OK; }
};

}  // namespace gf
