#include "transport/blob_store.hpp"

#include <new>

#include "core/error.hpp"

namespace gf::transport {

std::unique_ptr<uint8_t[]> BlobTally::take(uint64_t size) {
  std::lock_guard lock(mu_);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->first != size) continue;
    std::unique_ptr<uint8_t[]> out = std::move(it->second);
    kept_bytes_ -= size;
    kept_.erase(it);
    return out;
  }
  return nullptr;
}

void BlobTally::give(std::unique_ptr<uint8_t[]> buffer, uint64_t size, uint64_t now_alive) {
  std::lock_guard lock(mu_);
  if (now_alive == 0) {  // nothing left to serve: keep nothing either
    kept_.clear();
    kept_bytes_ = 0;
    return;
  }
  if (size < kKeptMin || size > kKeptBytes) return;
  kept_.emplace_back(size, std::move(buffer));
  kept_bytes_ += size;
  while (kept_bytes_ > kKeptBytes) {
    kept_bytes_ -= kept_.front().first;
    kept_.pop_front();
  }
}

uint64_t BlobTally::kept() const {
  std::lock_guard lock(mu_);
  return kept_bytes_;
}

Blob::Blob(uint64_t size, std::shared_ptr<BlobTally> tally)
    : data_(tally->take(size)), size_(size), tally_(std::move(tally)) {
  if (!data_) data_.reset(new (std::nothrow) uint8_t[size == 0 ? 1 : size]);
  if (!data_) {
    fail(GF_ERR_OUT_OF_MEMORY, "no memory for a blob of " + std::to_string(size) + " bytes");
  }
  tally_->bytes += size_;
}

Blob::~Blob() {
  const uint64_t alive = tally_->bytes -= size_;
  tally_->give(std::move(data_), size_, alive);
}

bool BlobStore::fits(uint64_t id, uint64_t size, Refusal &refused) const {
  auto old = blobs_.find(id);
  const uint64_t replaced = old == blobs_.end() ? 0 : old->second->size();
  const uint64_t after = bytes() - replaced;
  if (size > cap_ || after > cap_ - size) {
    refused.status = GF_ERR_INVALID_ARGUMENT;
    refused.why = "blob " + std::to_string(id) + " of " + std::to_string(size) +
                  " bytes would pass this client's cap of " + std::to_string(cap_) + " bytes (" +
                  std::to_string(after) + " held)";
    return false;
  }
  return true;
}

bool BlobStore::adopt(uint64_t id, std::shared_ptr<Blob> blob, Refusal &refused) {
  if (!fits(id, blob->size(), refused)) return false;
  drop(id);
  stored_ += blob->size();
  blobs_[id] = std::move(blob);
  return true;
}

std::shared_ptr<Blob> BlobStore::reserve(uint64_t id, uint64_t size, Refusal &refused) {
  if (!fits(id, size, refused)) return nullptr;
  std::shared_ptr<Blob> blob;
  try {
    blob = std::make_shared<Blob>(size, tally_);
  } catch (const Error &e) {
    refused = Refusal{e.status(), e.what()};
    return nullptr;
  }
  reserved_ += size;
  return blob;
}

void BlobStore::commit(uint64_t id, std::shared_ptr<Blob> blob) {
  reserved_ -= blob->size();
  drop(id);
  stored_ += blob->size();
  blobs_[id] = std::move(blob);
}

void BlobStore::abandon(uint64_t size) {
  reserved_ -= size;
}

std::shared_ptr<Blob> BlobStore::find(uint64_t id) const {
  auto it = blobs_.find(id);
  return it == blobs_.end() ? nullptr : it->second;
}

bool BlobStore::drop(uint64_t id) {
  auto it = blobs_.find(id);
  if (it == blobs_.end()) return false;
  stored_ -= it->second->size();
  blobs_.erase(it);
  return true;
}

void BlobStore::clear() {
  blobs_.clear();
  stored_ = 0;
  reserved_ = 0;
}

}  // namespace gf::transport
