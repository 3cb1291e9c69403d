// Resource amounts in fixed point (1/10000 units), so that 0.5 + 0.5 GPU is exactly 1 and a
// ledger never drifts through rounding.
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
  static FixedPoint from_double(double value) {
    return FixedPoint(static_cast<int64_t>(std::llround(value * kScale)));
  }
  // Largest amount a caller may ask for: keeps sums of many amounts far from overflow.
  static constexpr double kMaxAmount = 1e14;
  static bool representable(double value) {
    return std::isfinite(value) && value >= 0 && value <= kMaxAmount;
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

}  // namespace gf
