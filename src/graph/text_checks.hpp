// The check every string a graph keeps passes: UTF-8, so that any graph gpuflow accepts can be
// written as JSON as well as binary.
#pragma once

#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace gf {

// Refuses `text` unless it is UTF-8; `what()` names its owner and field, e.g. "task #3 name".
template <class What>
void require_utf8(std::string_view text, What &&what) {
  size_t at = utf8_error_at(text);
  if (at != std::string_view::npos) {
    fail(GF_ERR_INVALID_ARGUMENT, what() + " " + utf8_complaint(text, at));
  }
}

}  // namespace gf
