// Resource amounts in fixed point (1/10000 units), so that 0.5 + 0.5 GPU is exactly 1 and a
// ledger never drifts through rounding.
//
// Range. Every amount the runtime accepts, from a caller or a document, is at most kMaxAmount
// units (raw 1e18): task requests, worker labels, device capacities, and byte counts turned into
// gpu_memory by from_bytes (at most kMaxBytes). INT64_MAX is about 9.2e18, so any sum of up to
// nine accepted amounts fits; the runtime adds at most three at once (a ledger line's in_use, a
// task's request and its declared outputs), and a line's in_use never exceeds its capacity.
// Checking at the boundary keeps the arithmetic below plain and free of overflow.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace gf {

class FixedPoint {
 public:
  static constexpr int64_t kScale = 10000;

  constexpr FixedPoint() = default;
  static constexpr FixedPoint from_raw(int64_t raw) { return FixedPoint(raw); }

  // Largest amount a caller may ask for or advertise: keeps sums of amounts far from overflow.
  static constexpr double kMaxAmount = 1e14;
  static constexpr int64_t kMaxRaw = static_cast<int64_t>(kMaxAmount) * kScale;
  // Finite, non-negative and at most kMaxAmount. A positive amount below one unit (1/10000)
  // passes here but rounds to zero: see rounds_to_zero.
  static bool representable(double value) {
    return std::isfinite(value) && value >= 0 && value <= kMaxAmount;
  }
  // A positive amount too small to be represented (below 1/20000 after rounding).
  static bool rounds_to_zero(double value) {
    return value > 0 && std::llround(value * kScale) == 0;
  }
  // Only for representable values.
  static FixedPoint from_double(double value) {
    return FixedPoint(static_cast<int64_t>(std::llround(value * kScale)));
  }

  // Bytes as an amount of gpu_memory: the one conversion every part of gpuflow uses. Sizes the
  // ABI accepts (buffer sizes, host inputs, outputs sized at run time, device memory) are at
  // most kMaxBytes, checked with bytes_representable. A larger count (which the ABI rejects)
  // becomes one unit more than kMaxRaw, more than any ledger line can hold, so charging it fails
  // instead of overflowing.
  static constexpr uint64_t kMaxBytes = static_cast<uint64_t>(kMaxAmount);
  static constexpr bool bytes_representable(uint64_t bytes) { return bytes <= kMaxBytes; }
  static constexpr FixedPoint from_bytes(uint64_t bytes) {
    return FixedPoint(bytes_representable(bytes) ? static_cast<int64_t>(bytes) * kScale
                                                 : kMaxRaw + 1);
  }

  constexpr int64_t raw() const { return raw_; }
  double to_double() const { return static_cast<double>(raw_) / kScale; }
  constexpr bool is_zero() const { return raw_ == 0; }

  constexpr FixedPoint operator+(FixedPoint o) const { return FixedPoint(raw_ + o.raw_); }
  constexpr FixedPoint operator-(FixedPoint o) const { return FixedPoint(raw_ - o.raw_); }
  constexpr FixedPoint &operator+=(FixedPoint o) {
    raw_ += o.raw_;
    return *this;
  }
  constexpr FixedPoint &operator-=(FixedPoint o) {
    raw_ -= o.raw_;
    return *this;
  }
  constexpr auto operator<=>(const FixedPoint &) const = default;

 private:
  constexpr explicit FixedPoint(int64_t raw) : raw_(raw) {}
  int64_t raw_ = 0;
};

static_assert(FixedPoint::kMaxRaw <= std::numeric_limits<int64_t>::max() / 9,
              "nine maximal amounts must add up without overflow");
static_assert(FixedPoint::from_bytes(FixedPoint::kMaxBytes).raw() == FixedPoint::kMaxRaw);

}  // namespace gf
