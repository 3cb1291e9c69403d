#include "wire/request_ids.hpp"

#include <array>
#include <cstring>

namespace gf::wire {

namespace {

constexpr size_t kBodies = static_cast<size_t>(Body::MAX) + 1;

// For each body type, the vtable offset of its request_id field, 0 when it has none.
using Offsets = std::array<flatbuffers::voffset_t, kBodies>;

Offsets request_id_offsets() {
  Offsets offsets{};
  const flatbuffers::TypeTable *bodies = BodyTypeTable();
  for (size_t i = 0; i < bodies->num_elems; ++i) {
    const flatbuffers::TypeCode &code = bodies->type_codes[i];
    if (code.sequence_ref < 0) continue;  // NONE
    const int64_t value = bodies->values ? bodies->values[i] : static_cast<int64_t>(i);
    if (value < 0 || static_cast<size_t>(value) >= kBodies) continue;
    const flatbuffers::TypeTable *table = bodies->type_refs[code.sequence_ref]();
    for (size_t f = 0; f < table->num_elems; ++f) {
      const flatbuffers::TypeCode &field = table->type_codes[f];
      if (std::strcmp(table->names[f], "request_id") == 0 &&
          field.base_type == flatbuffers::ET_ULONG && !field.is_repeating) {
        // Fields are listed in id order, as minireflect.h reads them.
        offsets[static_cast<size_t>(value)] =
            flatbuffers::FieldIndexToOffset(static_cast<flatbuffers::voffset_t>(f));
      }
    }
  }
  return offsets;
}

const Offsets &offsets() {
  static const Offsets table = request_id_offsets();
  return table;
}

}  // namespace

bool has_request_id(Body body) {
  const auto index = static_cast<size_t>(body);
  return index < kBodies && offsets()[index] != 0;
}

uint64_t request_id_of(const Message &message) {
  const auto index = static_cast<size_t>(message.body_type());
  if (index >= kBodies || offsets()[index] == 0 || !message.body()) return 0;
  const auto *body = static_cast<const flatbuffers::Table *>(message.body());
  return body->GetField<uint64_t>(offsets()[index], 0);
}

}  // namespace gf::wire
