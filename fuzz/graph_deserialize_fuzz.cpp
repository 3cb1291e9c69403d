// Fuzzes gf_graph_deserialize with arbitrary bytes (binary and, for text starting with '{',
// JSON). Whatever it accepts must survive a round trip exactly: serialize, deserialize again,
// serialize again, and get the same bytes.
#include <gpuflow.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

bool serialize(gf_graph *graph, gf_bytes &out) {
  return gf_graph_serialize(&out, graph, GF_GRAPH_FORMAT_BINARY) == GF_OK;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gf_graph *graph = nullptr;
  if (gf_graph_deserialize(&graph, data, size, GF_GRAPH_FORMAT_AUTO, 0) != GF_OK) return 0;
  gf_bytes first{nullptr, 0}, second{nullptr, 0};
  gf_graph *again = nullptr;
  // A graph that was accepted has kernel or command bodies only: it must be writable.
  if (!serialize(graph, first)) std::abort();
  if (gf_graph_deserialize(&again, first.data, first.size, GF_GRAPH_FORMAT_BINARY, 0) != GF_OK) {
    std::abort();
  }
  if (!serialize(again, second) || second.size != first.size ||
      std::memcmp(first.data, second.data, first.size) != 0) {
    std::abort();
  }
  gf_bytes_free(&first);
  gf_bytes_free(&second);
  gf_graph_destroy(again);
  gf_graph_destroy(graph);
  return 0;
}
