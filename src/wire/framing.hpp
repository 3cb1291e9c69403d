// Frames on a service connection: a 4-byte little-endian length, then one verified flatbuffer
// Message. Both ends cut the byte stream into frames with FrameReader and build messages with
// the helpers here; nothing reads a field of a frame the Verifier has not passed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/request_bounds.hpp"
#include "wire/wire_generated.h"

namespace gf::wire {

constexpr uint32_t kProtocolVersion = 1;
// Far above any real message, far below harm. Both ends read frames up to this size, and the
// service never sends a larger one (its one reply that grows with the node's state, status, is
// bounded by construction: service/status_reply.hpp).
constexpr uint32_t kMaxFrame = 4u << 20;
// A request within gpuflow.h's bounds always fits one frame, so the service can refuse it alone
// (a frame over kMaxFrame ends the connection). 1 KiB covers a message's other fields.
static_assert(bounds::kMaxLeaseNameBytes + 4 * bounds::kMaxLeaseDevices + 1024 < kMaxFrame,
              "a LeaseRequest within GF_MAX_LEASE_NAME_BYTES and GF_MAX_LEASE_DEVICES");
static_assert(2 * bounds::kMaxPathBytes + 1024 < kMaxFrame,
              "a GraphSubmit whose directories are within GF_MAX_PATH_BYTES");

// The most of a Hello's name and (remote clients) user name the service keeps, in bytes of
// UTF-8. Both are display text: the service repairs and cuts what it gets rather than refuse a
// client over them, and clients send them already fitted (client/process_name.hpp).
constexpr size_t kMaxHelloName = 256;
constexpr size_t kMaxHelloUser = 64;

// Accumulates bytes from a stream and hands out whole frames.
class FrameReader {
 public:
  // Appends received bytes. Returns an empty string, or why the stream is bad (a frame over
  // kMaxFrame, or of length 0): the connection must then be closed.
  std::string feed(const char *bytes, size_t size);
  // The next whole frame's payload, verified as a Message; false when none is complete yet.
  // A frame that fails verification sets `error` and returns false: close the connection.
  bool next(std::vector<uint8_t> &payload, std::string &error);
  size_t buffered() const { return buffer_.size() - start_; }

 private:
  std::vector<uint8_t> buffer_;
  size_t start_ = 0;
};

// A verified payload's message (only call on what FrameReader::next returned).
inline const Message *message_of(const std::vector<uint8_t> &payload) {
  return GetMessage(payload.data());
}

// Length prefix + finished builder contents, ready to write.
std::vector<uint8_t> frame(flatbuffers::FlatBufferBuilder &builder);

// One message body built as a whole frame.
template <typename T>
std::vector<uint8_t> frame_of(flatbuffers::FlatBufferBuilder &builder,
                              flatbuffers::Offset<T> body) {
  builder.Finish(CreateMessage(builder, BodyTraits<T>::enum_value, body.Union()),
                 MessageIdentifier());
  return frame(builder);
}

// Whether a verified payload is well formed beyond the Verifier: known body type, strings that
// are UTF-8. Returns an empty string or what is wrong.
std::string check_message(const Message &message);

const char *body_name(Body body);

}  // namespace gf::wire
