// C shims: graphs: building them, their metadata and documents, checking and submitting them
// to a pool.
#include <cstddef>

#include "capi/bytes.hpp"
#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"
#include "serialize/serialize.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

// A task as the graph takes it: the caller's gf_task_desc of any published layout, widened into
// `copy`, and its gf_command_desc, when it has one of an older published layout, widened into
// `command` (a size that was never published is left for the graph to reject, naming the task).
// Both of today's layouts, as most callers pass them, are read in place.
const gf_task_desc &read_task_desc(const gf_task_desc *desc, gf_task_desc &copy,
                                   gf_command_desc &command) {
  if (desc && desc->struct_size == sizeof(gf_task_desc) &&
      (!desc->command || desc->command->struct_size == sizeof(gf_command_desc))) {
    return *desc;
  }
  gf_task_desc &d = copy = read_struct(desc, "gf_task_desc");
  if (d.command && d.command->struct_size != sizeof(gf_command_desc)) {
    for (uint32_t size : Layout<gf_command_desc>::kSizes) {
      if (d.command->struct_size == size) {
        command = read_struct(d.command, "gf_command_desc");
        d.command = &command;
      }
    }
  }
  return d;
}

// Refuses an index past the end of one of the graph's lists (`count` `things`), naming both.
void require_index(uint64_t index, uint64_t count, const char *what, const char *things) {
  if (index >= count) {
    fail(GF_ERR_INVALID_ARGUMENT, std::string(what) + " index " + std::to_string(index) +
                                      " is out of range; the graph has " + std::to_string(count) +
                                      " " + things);
  }
}

// The graph as runs hold it: a run keeps its graph alive beyond gf_graph_destroy.
std::shared_ptr<Graph> shared_graph(gf_graph *graph) {
  std::shared_ptr<Graph> g = graphs().find_shared(handle_bits(graph));
  if (!g) fail(GF_ERR_INVALID_HANDLE, "gf_graph is not a live handle (NULL or destroyed)");
  return g;
}

}  // namespace

extern "C" {

GF_API void gf_buffer_desc_init(gf_buffer_desc *desc, uint32_t struct_size) {
  gf_buffer_desc init = GF_BUFFER_DESC_INIT;
  init_bounded(desc, init, struct_size);
}

GF_API void gf_task_desc_init(gf_task_desc *desc, uint32_t struct_size) {
  gf_task_desc init = GF_TASK_DESC_INIT;
  init_bounded(desc, init, struct_size);
}

GF_API void gf_command_desc_init(gf_command_desc *desc, uint32_t struct_size) {
  gf_command_desc init = GF_COMMAND_DESC_INIT;
  init_bounded(desc, init, struct_size);
}

GF_API gf_status gf_graph_create(gf_graph **out) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    *out = handle_from_bits<gf_graph>(graphs().insert(std::make_shared<Graph>()));
    return GF_OK;
  });
}

GF_API void gf_graph_destroy(gf_graph *graph) {
  guard_void([&] { graphs().remove(handle_bits(graph)); });
}

GF_API gf_status gf_graph_add_buffer(gf_data *out, gf_graph *graph, const gf_buffer_desc *desc) {
  return guard([&] {
    require_out(out, "out");
    gf_buffer_desc d = read_struct(desc, "gf_buffer_desc");
    *out = graph_of(graph).add_buffer(d.name, d.size, d.flags);
    return GF_OK;
  });
}

GF_API gf_status gf_graph_add_value(gf_data *out, gf_graph *graph, const char *name,
                                    uint64_t size_estimate, uint32_t flags) {
  return guard([&] {
    require_out(out, "out");
    *out = graph_of(graph).add_value(name, size_estimate, flags);
    return GF_OK;
  });
}

GF_API gf_status gf_graph_add_host_buffer(gf_data *out, gf_graph *graph, const char *name,
                                          const void *bytes, uint64_t size, uint32_t flags) {
  return guard([&] {
    require_out(out, "out");
    *out = graph_of(graph).add_host_buffer(name, bytes, size, flags);
    return GF_OK;
  });
}

GF_API gf_status gf_graph_add_host_value(gf_data *out, gf_graph *graph, const char *name,
                                         void *value, gf_destroy_fn destroy,
                                         uint64_t size_estimate) {
  return guard([&] {
    require_out(out, "out");
    *out = graph_of(graph).add_host_value(name, value, destroy, size_estimate);
    return GF_OK;
  });
}

GF_API gf_status gf_graph_add_task(gf_task *out, gf_graph *graph, const gf_task_desc *desc) {
  return guard([&] {
    require_out(out, "out");
    gf_task_desc copy;
    gf_command_desc command;
    *out = graph_of(graph).add_task(read_task_desc(desc, copy, command));
    return GF_OK;
  });
}

GF_API gf_status gf_graph_add_dependency(gf_graph *graph, gf_task task, gf_task before) {
  return guard([&] {
    graph_of(graph).add_dependency(task, before);
    return GF_OK;
  });
}

GF_API gf_status gf_graph_task_count(uint64_t *out, const gf_graph *graph) {
  return guard([&] {
    require_out(out, "out");
    *out = graph_of(graph).task_count();
    return GF_OK;
  });
}

GF_API gf_status gf_graph_task_at(gf_task *out, const gf_graph *graph, uint64_t index) {
  return guard([&] {
    require_out(out, "out");
    const Graph &g = graph_of(graph);
    require_index(index, g.task_count(), "task", "tasks");
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
    require_index(index, g.data_count(), "data", "data objects");
    *out = g.data_ref(static_cast<DataIndex>(index));
    return GF_OK;
  });
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
    require_index(index, metadata.size(), "metadata", "entries");
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
    give_bytes(out, bytes);
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
    core.prepare(shared_graph(graph));  // the run is never started, and dropped here
    return GF_OK;
  });
}

GF_API void gf_submit_options_init(gf_submit_options *options, uint32_t struct_size) {
  gf_submit_options init = GF_SUBMIT_OPTIONS_INIT;
  init_bounded(options, init, struct_size);
}

GF_API gf_status gf_graph_submit(gf_run **out, gf_pool *pool, gf_graph *graph,
                                 const gf_submit_options *options) {
  return guard([&] {
    require_out(out, "out");
    *out = nullptr;
    gf_submit_options defaults = GF_SUBMIT_OPTIONS_INIT;
    gf_submit_options o = options ? read_struct(options, "gf_submit_options") : defaults;
    PoolCore &core = pool_of(pool);
    std::shared_ptr<Run> run = core.make_run(shared_graph(graph), o.where);
    // The handle exists before the run starts: its completion callback may fire at once.
    const uint64_t bits = runs().insert(run);
    run->attach(handle_from_bits<gf_run>(bits), o);
    try {
      core.start(run);
    } catch (...) {
      runs().remove(bits);
      throw;
    }
    *out = handle_from_bits<gf_run>(bits);
    return GF_OK;
  });
}

}  // extern "C"
