// The page's files, built into the library from src/dashboard/assets/ (CMake writes assets.cpp):
// nothing is fetched at view time.
#pragma once

#include <string_view>

namespace gf::dashboard {

std::string_view index_html();

}  // namespace gf::dashboard
