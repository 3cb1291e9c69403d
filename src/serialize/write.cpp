// Graph -> flatbuffers document (binary, or JSON printed by flatbuffers from the same schema).
#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/idl.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "serialize/graph_generated.h"
#include "serialize/schema.hpp"
#include "serialize/serialize.hpp"

namespace gf::serialize {
namespace fb = gpuflow::format;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

namespace {

// Literal bytes that read as text are written as text, so JSON documents stay readable.
bool is_text(const unsigned char *bytes, uint64_t size) {
  if (size > 65536) return false;
  for (uint64_t i = 0; i < size; ++i) {
    unsigned char c = bytes[i];
    if (!((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t' || c == '\r')) return false;
  }
  return true;
}

void build(FlatBufferBuilder &b, const Graph &g) {
  const size_t n_data = g.data_count(), n_tasks = g.task_count();
  std::vector<Offset<fb::Data>> data(n_data);
  for (DataIndex d = 0; d < n_data; ++d) {
    const DataDesc &desc = g.data(d);
    if (desc.origin == DataOrigin::kHostValue) {
      fail(GF_ERR_INVALID_ARGUMENT, g.data_label(d) +
                                        " is an opaque host value, which cannot be written to a "
                                        "graph document (only bytes can: use a host buffer)");
    }
    Offset<flatbuffers::String> name = desc.name.empty() ? 0 : b.CreateString(desc.name);
    Offset<flatbuffers::Vector<uint8_t>> bytes = 0;
    Offset<flatbuffers::String> text = 0;
    if (desc.origin == DataOrigin::kHostBuffer) {
      auto *p = static_cast<const unsigned char *>(desc.host_bytes);
      if (is_text(p, desc.size)) {
        text = b.CreateString(reinterpret_cast<const char *>(p), desc.size);
      } else {
        bytes = b.CreateVector(p, desc.size);
      }
    }
    fb::DataBuilder db(b);
    if (!name.IsNull()) db.add_name(name);
    if (desc.kind == DataKind::kValue) db.add_kind(fb::DataKind::Value);
    if (desc.origin != DataOrigin::kHostBuffer) db.add_size(desc.size);
    if (desc.flags & GF_DATA_KEEP) db.add_keep(true);
    if (!bytes.IsNull()) db.add_bytes(bytes);
    if (!text.IsNull()) db.add_text(text);
    data[d] = db.Finish();
  }

  // Ordering edges grouped by task, in the order they were added.
  const auto &edges = g.edges();
  std::vector<uint32_t> after_begin(n_tasks + 1, 0);
  for (auto [t, before] : edges) after_begin[t + 1]++;
  for (size_t t = 0; t < n_tasks; ++t) after_begin[t + 1] += after_begin[t];
  std::vector<uint32_t> after(edges.size());
  {
    std::vector<uint32_t> fill(after_begin.begin(), after_begin.end() - 1);
    for (auto [t, before] : edges) after[fill[t]++] = before;
  }

  // Many tasks share one request: write its resource list once and point at it from each.
  std::vector<Offset<flatbuffers::Vector<Offset<fb::Resource>>>> resources(g.requests().size());
  auto resources_of = [&](RequestId id) {
    if (id == kEmptyRequest) return Offset<flatbuffers::Vector<Offset<fb::Resource>>>(0);
    if (resources[id].IsNull()) {
      std::vector<Offset<fb::Resource>> list;
      for (const auto &[name, amount] : g.requests().get(id)) {
        list.push_back(fb::CreateResource(b, b.CreateSharedString(name), amount.to_double()));
      }
      resources[id] = b.CreateVector(list);
    }
    return resources[id];
  };

  std::vector<Offset<fb::Task>> tasks(n_tasks);
  std::vector<Offset<flatbuffers::String>> strings;
  for (TaskIndex t = 0; t < n_tasks; ++t) {
    const TaskDesc &task = g.task(t);
    const CommandSpec *cmd = g.command(task);
    if (task.kernel.empty() && !cmd) {
      fail(GF_ERR_INVALID_ARGUMENT,
           g.task_label(t) +
               " has a C callback body, which cannot be written to a graph document: give it a "
               "kernel name (gf_pool_register_kernel) or a command instead");
    }
    auto name = task.name.empty() ? 0 : b.CreateString(task.name);
    auto kernel = task.kernel.empty() ? 0 : b.CreateSharedString(task.kernel);
    Offset<fb::Command> command = 0;
    if (cmd) {
      auto strings_of = [&](const std::vector<std::string> &list) {
        strings.clear();
        for (const auto &s : list) strings.push_back(b.CreateString(s));
        return b.CreateVector(strings);
      };
      auto argv = strings_of(cmd->argv);
      auto env = cmd->env.empty() ? 0 : strings_of(cmd->env);
      auto cwd = cmd->working_dir.empty() ? 0 : b.CreateString(cmd->working_dir);
      auto log_dir = cmd->log_dir.empty() ? 0 : b.CreateString(cmd->log_dir);
      command = fb::CreateCommand(b, argv, env, cwd, cmd->timeout_s, log_dir);
    }
    auto res = resources_of(task.request);
    auto refs = [&](const uint32_t *p, size_t n) {
      return n == 0 ? Offset<flatbuffers::Vector<uint32_t>>(0) : b.CreateVector(p, n);
    };
    auto inputs = refs(g.inputs(task), task.input_count);
    auto outputs = refs(g.outputs(task), task.output_count);
    auto deps = refs(after.data() + after_begin[t], after_begin[t + 1] - after_begin[t]);
    auto cost_key =
        task.explicit_cost_key ? b.CreateSharedString(g.cost_keys()[task.cost_key].name) : 0;
    fb::TaskBuilder tb(b);
    if (!name.IsNull()) tb.add_name(name);
    if (!kernel.IsNull()) tb.add_kernel(kernel);
    if (!command.IsNull()) tb.add_command(command);
    if (!res.IsNull()) tb.add_resources(res);
    tb.add_priority(task.priority);
    tb.add_retries(task.retries);
    if (!inputs.IsNull()) tb.add_inputs(inputs);
    if (!outputs.IsNull()) tb.add_outputs(outputs);
    if (!deps.IsNull()) tb.add_after(deps);
    if (!cost_key.IsNull()) tb.add_cost_key(cost_key);
    tasks[t] = tb.Finish();
  }

  std::vector<Offset<fb::KeyValue>> metadata;
  for (const auto &[key, value] : g.metadata()) {
    metadata.push_back(fb::CreateKeyValue(b, b.CreateString(key), b.CreateString(value)));
  }
  auto data_vec = b.CreateVector(data);
  auto task_vec = b.CreateVector(tasks);
  auto meta_vec = metadata.empty() ? 0 : b.CreateVector(metadata);
  b.Finish(fb::CreateGraph(b, kFormatVersion, data_vec, task_vec, meta_vec), fb::GraphIdentifier());
}

}  // namespace

std::string to_binary(const Graph &graph) {
  FlatBufferBuilder b(1024 + graph.task_count() * 64 + graph.data_count() * 32);
  build(b, graph);
  return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
}

std::string to_json(const Graph &graph) {
  FlatBufferBuilder b(1024 + graph.task_count() * 64);
  build(b, graph);
  flatbuffers::Parser parser(json_options());
  load_schema(parser);
  std::string text;
  if (!flatbuffers::GenerateText(parser, b.GetBufferPointer(), &text)) {
    fail(GF_ERR_INTERNAL, "cannot print the graph as JSON");
  }
  return text;
}

}  // namespace gf::serialize
