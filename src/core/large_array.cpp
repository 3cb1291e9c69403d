#include "core/large_array.hpp"

#include <sys/mman.h>

#include <mutex>
#include <vector>

namespace gf::large_array {
namespace {

struct Kept {
  void *p;
  size_t length;  // mapped_bytes of the array it held
};

// Oldest first. Mappings come and go once per large array of a run or graph, so one mutex and a
// short list are plenty.
struct KeptMappings {
  std::mutex mu;
  std::vector<Kept> list;
  size_t bytes = 0;
};

KeptMappings &kept() {
  static auto *mappings = new KeptMappings;  // never destroyed: arrays may go at exit
  return *mappings;
}

void *map_fresh(size_t length) {
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

}  // namespace

void *map(size_t bytes) {
  const size_t length = mapped_bytes(bytes);
  {
    KeptMappings &k = kept();
    std::lock_guard lock(k.mu);
    for (size_t i = k.list.size(); i-- > 0;) {  // the latest first
      if (k.list[i].length != length) continue;
      void *p = k.list[i].p;
      k.list.erase(k.list.begin() + static_cast<std::ptrdiff_t>(i));
      k.bytes -= length;
      return p;
    }
  }
  return map_fresh(length);
}

void unmap(void *p, size_t bytes) {
  const size_t length = mapped_bytes(bytes);
  std::vector<Kept> dropped;
  {
    KeptMappings &k = kept();
    std::lock_guard lock(k.mu);
    if (length > kKeptBytes) {
      dropped.push_back({p, length});
    } else {
      while (!k.list.empty() &&
             (k.list.size() >= kKeptMappings || k.bytes + length > kKeptBytes)) {
        dropped.push_back(k.list.front());
        k.bytes -= k.list.front().length;
        k.list.erase(k.list.begin());
      }
      // The kernel may take the pages back whenever it needs memory; a later write keeps them.
      madvise(p, length, MADV_FREE);
      k.list.push_back({p, length});
      k.bytes += length;
    }
  }
  for (const Kept &d : dropped) munmap(d.p, d.length);
}

size_t kept_count() {
  KeptMappings &k = kept();
  std::lock_guard lock(k.mu);
  return k.list.size();
}

size_t kept_bytes() {
  KeptMappings &k = kept();
  std::lock_guard lock(k.mu);
  return k.bytes;
}

}  // namespace gf::large_array
