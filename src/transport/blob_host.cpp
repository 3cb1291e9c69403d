#include "transport/blob_host.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "transport/request.hpp"
#include "transport/ucx_api.hpp"

namespace gf::transport {

LoopPlane::LoopPlane(uv_loop_t *loop, const std::string &name)
    : worker_(Worker::create(name)), progress_(std::make_unique<UvProgress>(loop, *worker_)) {}

LoopPlane::~LoopPlane() {
  worker_->settle();
  progress_.reset();
  worker_.reset();
}

struct BlobHost::State {
  std::string who;
  BlobStore store;
  struct Put {
    void *request = nullptr;
    uint64_t blob = 0;
    std::shared_ptr<Blob> buffer;
    double deadline = 0, allowed_s = 0;
    Reply done;
  };
  std::map<uint64_t, Put> puts;     // by tag
  std::map<uint64_t, void *> gets;  // by tag: sends in flight
  uint64_t sending_bytes = 0;       // their sizes: each holds its blob, dropped or not
  struct Drain {
    void *request = nullptr;
    uint64_t serial = 0;  // which drain of this tag a completion ends (a tag may come again)
  };
  std::map<uint64_t, Drain> drains;  // by tag: refused puts' bytes, received into nothing
  uint64_t drain_serial = 0;
  bool closed = false;
  std::string closed_why;  // what closed it, for later requests
  State(std::string w, uint64_t cap, std::shared_ptr<BlobTally> tally)
      : who(std::move(w)), store(cap, std::move(tally)) {}
};

BlobHost::BlobHost(LoopPlane &plane, uint64_t client_id, std::string who,
                   const std::vector<uint8_t> &client_address, uint64_t cap, double put_timeout_s,
                   Endpoint::OnError on_error)
    : plane_(plane),
      client_id_(client_id),
      put_timeout_s_(put_timeout_s),
      state_(std::make_shared<State>(who, cap, plane.tally())) {
  ep_ = std::make_unique<Endpoint>(plane.worker(), client_address, std::move(who),
                                   std::move(on_error));
}

BlobHost::~BlobHost() {
  close("");
}

uint64_t BlobHost::bytes() const {
  return state_->store.bytes();
}

Refusal BlobHost::check(uint64_t tag) const {
  if (state_->closed || !ep_) {
    return {GF_ERR_SYSTEM, "the data plane to this client is closed" +
                               (state_->closed_why.empty() ? "" : ": " + state_->closed_why)};
  }
  if ((tag >> 32) != client_id_) {
    return {GF_ERR_INVALID_ARGUMENT, "tag " + std::to_string(tag) +
                                         " is not in this client's tag space (" +
                                         std::to_string(client_id_) + " << 32)"};
  }
  if (state_->puts.count(tag) || state_->gets.count(tag) || state_->drains.count(tag)) {
    return {GF_ERR_INVALID_ARGUMENT,
            "tag " + std::to_string(tag) + " is already in use by a transfer in flight"};
  }
  return {};
}

Refusal BlobHost::put(uint64_t blob, uint64_t size, uint64_t tag, double now, Reply done) {
  if (Refusal refused = check(tag)) return refused;
  // Each pending put holds a receive and a buffer until its bytes come or it expires: even
  // empty ones must not pile up without bound.
  if (state_->puts.size() >= kMaxPutsInFlight) {
    return {GF_ERR_INVALID_ARGUMENT, "too many puts in flight (" +
                                         std::to_string(kMaxPutsInFlight) +
                                         "): wait for some to be stored"};
  }
  if (blob & kServiceBlobBit) {
    return {GF_ERR_INVALID_ARGUMENT,
            "blob " + std::to_string(blob) + " has the top bit set: such ids are the service's"};
  }
  Refusal refused;
  std::shared_ptr<Blob> buffer = state_->store.reserve(blob, size, refused);
  if (!buffer) return refused;
  State::Put &p = state_->puts[tag];  // only until tag_recv: its completion may erase it
  p.blob = blob;
  p.buffer = buffer;
  p.allowed_s = put_timeout_s_ + static_cast<double>(size) / kSlowestBytesPerSecond;
  p.deadline = now + p.allowed_s;
  p.done = std::move(done);
  UvProgress &progress = plane_.progress();
  progress.started();
  // The completion holds the buffer: a receive already matched keeps writing into it after a
  // cancel or an expiry, until UCX says it is done.
  void *request = tag_recv(
      plane_.worker().get(), buffer->data(), size, tag,
      [state = state_, tag, buffer, &progress](ucs_status_t status, size_t length) {
        progress.ended();
        auto it = state->puts.find(tag);
        if (it == state->puts.end()) return;  // expired or closed: already answered
        State::Put put = std::move(it->second);
        state->puts.erase(it);
        std::string error;
        if (status != UCS_OK) {
          error = std::string("receiving blob ") + std::to_string(put.blob) + " from " +
                  state->who + " failed: " + ucx().ucs_status_string(status);
        } else if (length != put.buffer->size()) {
          error = "blob " + std::to_string(put.blob) + ": " + std::to_string(length) +
                  " bytes came where " + std::to_string(put.buffer->size()) + " were announced";
        }
        if (!error.empty() || state->closed) {
          state->store.abandon(put.buffer->size());
        } else {
          state->store.commit(put.blob, put.buffer);
        }
        if (!state->closed) put.done(error);
      });
  auto it = state_->puts.find(tag);
  if (it != state_->puts.end()) it->second.request = request;
  return {};
}

bool BlobHost::drain(uint64_t tag) {
  if (check(tag) || state_->drains.size() >= kMaxPutsInFlight) return false;
  const uint64_t serial = ++state_->drain_serial;
  state_->drains[tag] = {nullptr, serial};
  UvProgress &progress = plane_.progress();
  progress.started();
  void *request = tag_recv(plane_.worker().get(), nullptr, 0, tag,
                           [state = state_, tag, serial, &progress](ucs_status_t, size_t) {
                             progress.ended();
                             auto it = state->drains.find(tag);
                             if (it != state->drains.end() && it->second.serial == serial)
                               state->drains.erase(it);
                           });
  auto it = state_->drains.find(tag);
  if (it != state_->drains.end()) it->second.request = request;
  return true;
}

Refusal BlobHost::get(uint64_t blob, uint64_t tag, uint64_t &size, Reply done) {
  if (Refusal refused = check(tag)) return refused;
  std::shared_ptr<Blob> found = state_->store.find(blob);
  if (!found) return {GF_ERR_NOT_FOUND, "no blob " + std::to_string(blob)};
  // A send holds its blob until the client takes it, even once the blob is dropped or
  // replaced: what is on its way to a client stays within its cap as well.
  if (!state_->gets.empty() && state_->sending_bytes + found->size() > state_->store.cap()) {
    return {GF_ERR_STATE, "blob " + std::to_string(blob) + ": " +
                              std::to_string(state_->sending_bytes) +
                              " bytes are already on their way to this client (the cap is " +
                              std::to_string(state_->store.cap()) + "): take them first"};
  }
  size = found->size();
  UvProgress &progress = plane_.progress();
  progress.started();
  state_->gets[tag] = nullptr;
  state_->sending_bytes += size;
  // The send holds the blob: a drop or a replacing put during the send leaves its bytes alone.
  void *request = tag_send(
      ep_->get(), found->data(), found->size(), tag,
      [state = state_, tag, found, blob, &progress, done = std::move(done)](ucs_status_t status,
                                                                            size_t) {
        progress.ended();
        state->gets.erase(tag);
        state->sending_bytes -= found->size();
        // Answered even after close: a client still connected (its data plane closed
        // on a UCX error) must hear that its get will not come.
        done(status == UCS_OK ? std::string()
                              : "sending blob " + std::to_string(blob) + " to " + state->who +
                                    " failed: " + ucx().ucs_status_string(status));
      });
  if (state_->gets.count(tag)) state_->gets[tag] = request;
  return {};
}

bool BlobHost::drop(uint64_t blob) {
  return state_->store.drop(blob);
}

std::shared_ptr<Blob> BlobHost::take(uint64_t blob) {
  std::shared_ptr<Blob> found = state_->store.find(blob);
  if (found) state_->store.drop(blob);
  return found;
}

Refusal BlobHost::adopt(uint64_t blob, std::shared_ptr<Blob> bytes) {
  Refusal refused;
  state_->store.adopt(blob, std::move(bytes), refused);
  return refused;
}

void BlobHost::expire(double now) {
  std::vector<uint64_t> late;
  for (const auto &[tag, p] : state_->puts)
    if (p.deadline <= now) late.push_back(tag);
  for (uint64_t tag : late) {
    // An answer may close this host (its client dropped for not reading): then close() has
    // answered the rest.
    if (state_->closed) return;
    auto it = state_->puts.find(tag);
    if (it == state_->puts.end()) continue;
    State::Put put = std::move(it->second);
    state_->puts.erase(it);
    // Cancelled now; its completion finds no entry and does nothing more.
    if (put.request) cancel(plane_.worker().get(), put.request);
    state_->store.abandon(put.buffer->size());
    char allowed[32];
    std::snprintf(allowed, sizeof allowed, "%.3g", put.allowed_s);
    put.done("no bytes with tag " + std::to_string(tag) + " came for blob " +
             std::to_string(put.blob) + " within " + allowed + " s");
  }
}

bool BlobHost::closed() const {
  return state_->closed;
}

void BlobHost::close(const std::string &why) {
  if (state_->closed) return;
  state_->closed = true;
  state_->closed_why = why;
  std::vector<void *> receives;
  std::vector<Reply> answers;
  for (auto &[tag, p] : state_->puts) {
    if (p.request) receives.push_back(p.request);
    answers.push_back(std::move(p.done));
  }
  state_->puts.clear();  // their completions, cancelled, find nothing to answer
  for (auto &[tag, d] : state_->drains)
    if (d.request) receives.push_back(d.request);
  state_->drains.clear();
  for (void *r : receives) cancel(plane_.worker().get(), r);
  for (Reply &answer : answers) answer(why.empty() ? "the data plane was closed" : why);
  // Sends in flight end with an error when the forced close takes the endpoint down.
  if (ep_) ep_->close();
  // Bytes it sent that no put announced would sit in the worker's unexpected queue for good.
  discard_unexpected(plane_.worker().get(), tag_space_of(client_id_), ~uint64_t{0} << 32, SIZE_MAX);
  state_->store.clear();
  plane_.progress().kick();
}

}  // namespace gf::transport
