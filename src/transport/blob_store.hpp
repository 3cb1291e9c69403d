// One client's blobs on the service: id -> bytes, at most `cap` bytes at once (buffers being
// filled by a put count from the moment the put is accepted). Every byte is also counted in a
// service-wide tally, so "nothing leaks" is one number to check: a blob's bytes leave the tally
// when its last user (the store, a send in flight) lets go of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/refusal.hpp"
#include "gpuflow.h"

namespace gf::transport {

// Bytes of blobs alive in a service (all clients, in-flight transfers included), and the large
// buffers of blobs that went, kept for the next put of the same size: a fresh 256 MiB buffer
// costs 65,536 page faults while UCX fills it (glibc maps anything over 32 MiB anew every time),
// a reused one none. At most kKeptBytes are kept, and none once no blob is alive.
class BlobTally {
 public:
  static constexpr uint64_t kKeptMin = uint64_t{1} << 20;
  static constexpr uint64_t kKeptBytes = uint64_t{512} << 20;
  std::atomic<uint64_t> bytes{0};
  // A kept buffer of exactly `size` bytes, or null.
  std::unique_ptr<uint8_t[]> take(uint64_t size);
  // A buffer of a blob that went; `now_alive`: the blob bytes still alive after it.
  void give(std::unique_ptr<uint8_t[]> buffer, uint64_t size, uint64_t now_alive);
  uint64_t kept() const;

 private:
  mutable std::mutex mu_;
  std::deque<std::pair<uint64_t, std::unique_ptr<uint8_t[]>>> kept_;  // oldest first
  uint64_t kept_bytes_ = 0;
};

class Blob {
 public:
  // Allocates `size` bytes, not zeroed (a put overwrites all of them). Throws gf::Error
  // (GF_ERR_OUT_OF_MEMORY) when the allocation fails.
  Blob(uint64_t size, std::shared_ptr<BlobTally> tally);
  ~Blob();
  Blob(const Blob &) = delete;
  Blob &operator=(const Blob &) = delete;
  uint8_t *data() { return data_.get(); }
  uint64_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  uint64_t size_;
  std::shared_ptr<BlobTally> tally_;
};

using gf::Refusal;  // core/refusal.hpp: the status the client gets, and words naming the cause

class BlobStore {
 public:
  BlobStore(uint64_t cap, std::shared_ptr<BlobTally> tally) : cap_(cap), tally_(std::move(tally)) {}

  // A buffer for an incoming put of `size` bytes, charged to this client now; or nullptr and
  // `refused` when it would pass the cap (GF_ERR_INVALID_ARGUMENT; a blob it replaces is not
  // counted against it) or memory ran out (GF_ERR_OUT_OF_MEMORY).
  std::shared_ptr<Blob> reserve(uint64_t id, uint64_t size, Refusal &refused);
  // The put finished: `blob` becomes blob `id` (replacing any older one). Its reservation ends.
  void commit(uint64_t id, std::shared_ptr<Blob> blob);
  // The put failed: its reservation ends and its buffer is dropped.
  void abandon(uint64_t size);
  // Makes a blob filled elsewhere blob `id`, charged to the cap like a put; false and `refused`
  // when it would pass the cap.
  bool adopt(uint64_t id, std::shared_ptr<Blob> blob, Refusal &refused);
  std::shared_ptr<Blob> find(uint64_t id) const;
  bool drop(uint64_t id);
  // Everything goes (the client left).
  void clear();
  uint64_t bytes() const { return stored_ + reserved_; }
  uint64_t cap() const { return cap_; }

 private:
  bool fits(uint64_t id, uint64_t size, Refusal &refused) const;  // within the cap
  uint64_t cap_;
  std::shared_ptr<BlobTally> tally_;
  std::map<uint64_t, std::shared_ptr<Blob>> blobs_;
  uint64_t stored_ = 0, reserved_ = 0;
};

}  // namespace gf::transport
