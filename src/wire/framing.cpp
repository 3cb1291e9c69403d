#include "wire/framing.hpp"

#include <cstring>

namespace gf::wire {

namespace {

uint32_t read_length(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

std::string FrameReader::feed(const char *bytes, size_t size) {
  if (start_ > 0 && start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  } else if (start_ > (64u << 10) && start_ * 2 > buffer_.size()) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(start_));
    start_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes, bytes + size);
  if (buffered() >= 4) {
    uint32_t length = read_length(buffer_.data() + start_);
    if (length == 0) return "a frame of length 0";
    if (length > kMaxFrame) {
      return "a frame of " + std::to_string(length) + " bytes (at most " +
             std::to_string(kMaxFrame) + ")";
    }
  }
  return {};
}

bool FrameReader::next(std::vector<uint8_t> &payload, std::string &error) {
  if (buffered() < 4) return false;
  const uint32_t length = read_length(buffer_.data() + start_);
  if (length == 0 || length > kMaxFrame) {
    error = "a frame of " + std::to_string(length) + " bytes";
    return false;
  }
  if (buffered() < 4 + static_cast<size_t>(length)) return false;
  const uint8_t *p = buffer_.data() + start_ + 4;
  // Copied out first: the Verifier wants the buffer aligned as flatbuffers lays it out.
  payload.assign(p, p + length);
  start_ += 4 + length;
  flatbuffers::Verifier verifier(payload.data(), payload.size(), 32, 100000);
  // The identifier sits after the root offset: reading it needs 8 bytes.
  if (payload.size() < sizeof(flatbuffers::uoffset_t) + flatbuffers::kFileIdentifierLength ||
      !MessageBufferHasIdentifier(payload.data())) {
    error = "a frame that is not a gpuflow control message (no GFW1 identifier)";
    return false;
  }
  if (!VerifyMessageBuffer(verifier)) {
    error = "a control message that fails flatbuffers verification";
    return false;
  }
  std::string problem = check_message(*message_of(payload));
  if (!problem.empty()) {
    error = problem;
    return false;
  }
  return true;
}

std::vector<uint8_t> frame(flatbuffers::FlatBufferBuilder &builder) {
  const uint32_t size = builder.GetSize();
  std::vector<uint8_t> out(4 + static_cast<size_t>(size));
  out[0] = static_cast<uint8_t>(size);
  out[1] = static_cast<uint8_t>(size >> 8);
  out[2] = static_cast<uint8_t>(size >> 16);
  out[3] = static_cast<uint8_t>(size >> 24);
  std::memcpy(out.data() + 4, builder.GetBufferPointer(), size);
  return out;
}

const char *body_name(Body body) {
  const char *name = EnumNameBody(body);
  return name && *name ? name : "an unknown message";
}

}  // namespace gf::wire

namespace gf::wire {

std::string check_message(const Message &message) {
  const Body type = message.body_type();
  if (type == Body::NONE || static_cast<uint8_t>(type) > static_cast<uint8_t>(Body::MAX)) {
    return "a control message of unknown type " + std::to_string(static_cast<int>(type));
  }
  if (!message.body()) return std::string("a ") + body_name(type) + " message without a body";
  return {};
}

}  // namespace gf::wire
