// An allocator for the per-task and per-data arrays of large graphs: arrays of 8 MiB or more get
// memory of their own, aligned to 2 MiB and marked for transparent huge pages (madvise), so that
// a run's first touch of them faults once per 2 MiB instead of once per 4 KiB, and the
// scheduler's scattered reads of them miss the TLB far less. Profiled on a 262,143-task tree:
// first-touch page faults of the run's fresh arrays were most of submit; glibc's malloc with huge
// pages made the run 1.4-1.5x faster. Smaller arrays, and systems where huge pages are off
// (madvise then does nothing), take the plain allocator's path. GPUFLOW_HUGE_PAGES=0 turns it off
// (the kernel may compact memory to find a huge page on such a fault).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace gf {

namespace large_array {

inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kThreshold = size_t{8} << 20;

inline bool enabled() {
  static const bool on = [] {
    const char *v = std::getenv("GPUFLOW_HUGE_PAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

inline size_t mapped_bytes(size_t bytes) {
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

// Memory for `bytes` (>= kThreshold) aligned to a huge page, or nullptr.
inline void *map(size_t bytes) {
  const size_t length = mapped_bytes(bytes);
  void *raw =
      mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + length + kHugePage;
  if (end > aligned + length)
    munmap(reinterpret_cast<void *>(aligned + length), end - aligned - length);
  void *p = reinterpret_cast<void *>(aligned);
  madvise(p, length, MADV_HUGEPAGE);
  return p;
}

inline void unmap(void *p, size_t bytes) {
  munmap(p, mapped_bytes(bytes));
}

}  // namespace large_array

template <class T>
struct LargeArrayAllocator {
  using value_type = T;
  LargeArrayAllocator() = default;
  template <class U>
  LargeArrayAllocator(const LargeArrayAllocator<U> &) {}  // NOLINT: rebinding, as allocators do

  T *allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < large_array::kThreshold || !large_array::enabled()) {
      return std::allocator<T>().allocate(n);
    }
    void *p = large_array::map(bytes);
    if (!p) throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t n) {
    const size_t bytes = n * sizeof(T);
    // Decided by size alone, as allocate() did: enabled() never changes once read.
    if (bytes < large_array::kThreshold || !large_array::enabled()) {
      std::allocator<T>().deallocate(p, n);
    } else {
      large_array::unmap(p, bytes);
    }
  }
  template <class U>
  bool operator==(const LargeArrayAllocator<U> &) const {
    return true;
  }
};

}  // namespace gf
