// C shims: building graphs.
#include <cstddef>
#include <cstring>

#include "capi/guard.hpp"
#include "capi/objects.hpp"
#include "capi/structs.hpp"

using namespace gf;
using namespace gf::capi;

namespace {

// A task as the graph takes it: the caller's gf_task_desc of any published layout, and its
// gf_command_desc, when it has one of an older published layout, widened into `command` (a size
// that was never published is left for the graph to reject, naming the task).
gf_task_desc read_task_desc(const gf_task_desc *desc, gf_command_desc &command) {
  gf_task_desc d = read_struct(desc, "gf_task_desc");
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
    gf_command_desc command = GF_COMMAND_DESC_INIT;
    *out = graph_of(graph).add_task(read_task_desc(desc, command));
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

}  // extern "C"
