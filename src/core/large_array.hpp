// An allocator for the per-task and per-data arrays of large graphs: arrays of 8 MiB or more get
// memory of their own, aligned to 2 MiB and marked for transparent huge pages (madvise), so that
// a run's first touch of them faults once per 2 MiB instead of once per 4 KiB, and the
// scheduler's scattered reads of them miss the TLB far less. Profiled on a 262,143-task tree:
// first-touch page faults of the run's fresh arrays were most of submit; glibc's malloc with huge
// pages made the run 1.4-1.5x faster. Smaller arrays, and systems where huge pages are off
// (madvise then does nothing), take the plain allocator's path. GPUFLOW_HUGE_PAGES=0 turns it off
// (the kernel may compact memory to find a huge page on such a fault). Mappings given back are
// kept a while for the next arrays of their size (large_array::unmap).
#pragma once

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

// Memory for `bytes` (>= kThreshold) aligned to a huge page, or nullptr: a mapping of the same
// length given back earlier if one is kept (its contents are whatever was left there), else a
// fresh one (zero-filled).
void *map(size_t bytes);
// Gives back memory from map(). The latest mappings are kept for reuse, within kKeptBytes, and
// marked free to the kernel (MADV_FREE): under memory pressure it takes their pages back; until
// then the next run of a graph of about the same size writes its arrays into pages already
// there. Profiled (issue 29): the kernel zeroing a run's fresh arrays was a third of a
// 200,000-task tree's prepare, which no worker can overlap.
void unmap(void *p, size_t bytes);
inline constexpr size_t kKeptMappings = 8;
inline constexpr size_t kKeptBytes = size_t{512} << 20;
// Mappings kept for reuse, and their bytes (for tests).
size_t kept_count();
size_t kept_bytes();

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
