// Cost keys: what tasks share learnt duration estimates by (gf_task_desc.cost_key).
#pragma once

#include <cstddef>
#include <string_view>

namespace gf {

// As names in graph documents.
inline constexpr size_t kMaxCostKey = 4096;

// The default key a task name gives: its prefix up to the first digit or separator (any ASCII
// character other than a letter), after leading ( [ ' " _ and spaces, as Dask's key_split does:
// "inc-123" -> "inc", "('sum-abc', 0)" -> "sum", "chunk_3_4" -> "chunk". Bytes of multi-byte
// UTF-8 characters count as letters. Empty when the name gives none ("", "123", "-x").
std::string_view cost_key_prefix(std::string_view name);

// 1 to kMaxCostKey bytes of well-formed UTF-8 without control characters (C0, DEL, C1).
bool valid_cost_key(std::string_view key);

}  // namespace gf
