// C shims: graphs as documents, metadata, and checking a graph against a pool.
#include <cstdlib>
#include <cstring>

#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "serialize/serialize.hpp"

using namespace gf;
using namespace gf::capi;

extern "C" {

GF_API void gf_bytes_free(gf_bytes *bytes) {
  if (!bytes) return;
  std::free(bytes->data);
  bytes->data = nullptr;
  bytes->size = 0;
}

GF_API gf_status gf_graph_set_metadata(gf_graph *graph, const char *key, const char *value) {
  return guard([&] {
    graph_of(graph).set_metadata(key, value);
    return GF_OK;
  });
}

GF_API gf_status gf_graph_metadata_count(uint32_t *out, const gf_graph *graph) {
  return guard([&] {
    require_out(out, "out");
    *out = static_cast<uint32_t>(graph_of(graph).metadata().size());
    return GF_OK;
  });
}

GF_API gf_status gf_graph_metadata_get(const char **out_key, const char **out_value,
                                       const gf_graph *graph, uint32_t index) {
  return guard([&] {
    require_out(out_key, "out_key");
    require_out(out_value, "out_value");
    const auto &metadata = graph_of(graph).metadata();
    if (index >= metadata.size()) {
      fail(GF_ERR_INVALID_ARGUMENT, "metadata index " + std::to_string(index) +
                                        " is out of range; the graph has " +
                                        std::to_string(metadata.size()) + " entries");
    }
    *out_key = metadata[index].first.c_str();
    *out_value = metadata[index].second.c_str();
    return GF_OK;
  });
}

GF_API gf_status gf_graph_serialize(gf_bytes *out, const gf_graph *graph, gf_graph_format format) {
  return guard([&] {
    require_out(out, "out");
    out->data = nullptr;
    out->size = 0;
    const Graph &g = graph_of(graph);
    std::string bytes;
    if (format == GF_GRAPH_FORMAT_BINARY) {
      bytes = serialize::to_binary(g);
    } else if (format == GF_GRAPH_FORMAT_JSON) {
      bytes = serialize::to_json(g);
    } else {
      fail(GF_ERR_INVALID_ARGUMENT, "format must be GF_GRAPH_FORMAT_BINARY or _JSON");
    }
    void *data = std::malloc(bytes.size() + 1);
    if (!data) throw std::bad_alloc();
    std::memcpy(data, bytes.data(), bytes.size());
    static_cast<char *>(data)[bytes.size()] = '\0';
    out->data = data;
    out->size = bytes.size();
    return GF_OK;
  });
}

GF_API gf_status gf_graph_deserialize(gf_graph **out, const void *bytes, uint64_t size,
                                      gf_graph_format format, uint32_t flags) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    auto graph = serialize::from_bytes(bytes, size, format, flags);
    *out = handle_from_bits<gf_graph>(graphs().insert(std::move(graph)));
    return GF_OK;
  });
}

GF_API gf_status gf_graph_check(gf_graph *graph, gf_pool *pool) {
  return guard([&] {
    PoolCore &core = pool_of(pool);
    std::shared_ptr<Graph> g = graphs().find_shared(handle_bits(graph));
    if (!g) fail(GF_ERR_INVALID_HANDLE, "gf_graph is not a live handle (NULL or destroyed)");
    core.prepare(std::move(g));  // the run is never started, and dropped here
    return GF_OK;
  });
}

}  // extern "C"

extern "C" {

GF_API gf_status gf_graph_task_at(gf_task *out, const gf_graph *graph, uint64_t index) {
  return guard([&] {
    require_out(out, "out");
    const Graph &g = graph_of(graph);
    if (index >= g.task_count()) {
      fail(GF_ERR_INVALID_ARGUMENT, "task index " + std::to_string(index) +
                                        " is out of range; the graph has " +
                                        std::to_string(g.task_count()) + " tasks");
    }
    *out = g.task_ref(static_cast<TaskIndex>(index));
    return GF_OK;
  });
}

GF_API gf_status gf_graph_data_count(uint64_t *out, const gf_graph *graph) {
  return guard([&] {
    require_out(out, "out");
    *out = graph_of(graph).data_count();
    return GF_OK;
  });
}

GF_API gf_status gf_graph_data_at(gf_data *out, const gf_graph *graph, uint64_t index) {
  return guard([&] {
    require_out(out, "out");
    const Graph &g = graph_of(graph);
    if (index >= g.data_count()) {
      fail(GF_ERR_INVALID_ARGUMENT, "data index " + std::to_string(index) +
                                        " is out of range; the graph has " +
                                        std::to_string(g.data_count()) + " data objects");
    }
    *out = g.data_ref(static_cast<DataIndex>(index));
    return GF_OK;
  });
}

}  // extern "C"
