// Graphs as documents: a Graph to and from the FlatBuffers schema in graph.fbs, binary or JSON.
// Reading treats the bytes as untrusted: the FlatBuffers Verifier with the true length first,
// then gpuflow's own checks, each failure naming what is wrong and where.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "graph/graph.hpp"

namespace gf::serialize {

// The newest format version this gpuflow reads. Writers emit the oldest version that holds the
// document: 2 only when it uses `base64`.
inline constexpr uint32_t kFormatVersion = 2;
// JSON documents write binary literals longer than this as `base64`, shorter ones as `bytes`.
inline constexpr uint64_t kMaxInlineBytes = 64;

// Bounds on what a document may hold (beyond what the Verifier already bounds by its length).
inline constexpr size_t kMaxTasks = size_t{1} << 28;
inline constexpr size_t kMaxData = size_t{1} << 28;
inline constexpr size_t kMaxRefsPerTask = 65536;  // inputs, outputs, after: each
inline constexpr size_t kMaxResourcesPerTask = 64;
inline constexpr size_t kMaxArgs = 4096;  // argv and env entries, each
inline constexpr size_t kMaxArgLength = 128 * 1024;
inline constexpr size_t kMaxNameLength = 4096;  // task, data, resource names; paths
inline constexpr size_t kMaxMetadata = 4096;
inline constexpr size_t kMaxMetadataValue = 1 << 20;
// Declared sizes of data: what the ABI accepts (GF_MAX_DATA_SIZE), so gpu_memory never overflows.
inline constexpr uint64_t kMaxDataSize = FixedPoint::kMaxBytes;
// What reading a document may allocate (docs/limits.md): its graph, counted with every shared
// part once per use, is at most kMaxExpansionFactor times the document's size plus
// kExpansionAllowance. Checked before anything is allocated.
inline constexpr uint64_t kMaxExpansionFactor = 32;
inline constexpr uint64_t kExpansionAllowance = uint64_t{16} << 20;
inline constexpr uint64_t max_expansion(uint64_t document_size) {
  return kMaxExpansionFactor * document_size + kExpansionAllowance;
}

// Throws gf::Error (GF_ERR_INVALID_ARGUMENT) naming the first task or data that cannot be
// written: a C callback body, an opaque host value.
std::string to_binary(const Graph &graph);
std::string to_json(const Graph &graph);

// Reads a document. format: GF_GRAPH_FORMAT_*. flags: GF_DESERIALIZE_*. Throws gf::Error
// (GF_ERR_INVALID_GRAPH, GF_ERR_VERSION_MISMATCH) saying what is wrong and where.
std::shared_ptr<Graph> from_bytes(const void *bytes, uint64_t size, int format, uint32_t flags);

}  // namespace gf::serialize
