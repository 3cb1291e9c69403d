// Graph -> flatbuffers document (binary, or JSON printed by flatbuffers from the same schema).
#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/idl.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "serialize/base64.hpp"
#include "serialize/graph_generated.h"
#include "serialize/schema.hpp"
#include "serialize/serialize.hpp"

namespace gf::serialize {
namespace fb = gpuflow::format;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

namespace {

// Bytes given through the ABI (which does not say whether they are text) are written as text when
// they read as text: UTF-8 without control characters other than tab and line breaks. JSON
// documents then stay readable. Literals read from a document keep the form they had there.
bool is_text(const unsigned char *bytes, uint64_t size) {
  for (uint64_t i = 0; i < size; ++i) {
    unsigned char c = bytes[i];
    if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f) return false;
  }
  return utf8_error_at(std::string_view(reinterpret_cast<const char *>(bytes), size)) ==
         std::string_view::npos;
}

// A FlatBuffers buffer is at most 2 GiB, and the builder does not check (it would write a corrupt
// document): refuse a graph whose document would not fit, before building it. An upper bound on
// the document's size, so it never lets through one that does not fit.
void check_fits(const Graph &g, bool json) {
  auto string = [](uint64_t n) { return n + 8; };  // length, NUL, padding
  auto list = [](uint64_t n, uint64_t each) { return n * each + 8; };
  uint64_t total = 1024, largest = 0;
  DataIndex largest_at = kNoIndex;
  for (DataIndex d = 0; d < g.data_count(); ++d) {
    const DataDesc &desc = g.data(d);
    uint64_t literal = 0;
    if (desc.origin == DataOrigin::kHostBuffer) {
      literal = json ? string((desc.size + 2) / 3 * 4) : list(desc.size, 1);
    }
    if (literal > largest) largest = literal, largest_at = d;
    total += 48 + string(desc.name.size()) + literal;
  }
  for (TaskIndex t = 0; t < g.task_count(); ++t) {
    const TaskDesc &task = g.task(t);
    total += 64 + string(g.task_name(task).size()) + string(g.kernel_name(task).size()) +
             list(task.input_count, 4) + list(task.output_count, 4) + list(0, 4) +
             list(g.requests().get(task.request).size(), 4);
    if (const CommandSpec *c = g.command(task)) {
      total += 48 + list(c->argv.size() + c->env.size(), 4) + string(c->working_dir.size()) +
               string(c->log_dir.size());
      for (const auto &a : c->argv) total += string(a.size());
      for (const auto &e : c->env) total += string(e.size());
    }
  }
  total += list(g.edges().size(), 4);
  for (RequestId r = 0; r < g.requests().size(); ++r) {
    for (const auto &[name, amount] : g.requests().get(r)) total += 32 + string(name.size());
  }
  for (const auto &[key, value] : g.metadata()) {
    total += 16 + string(key.size()) + string(value.size());
  }
  if (total >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    std::string why = largest_at == kNoIndex
                          ? std::string()
                          : "; its largest literal, " + g.data_label(largest_at) +
                                ", alone takes " + std::to_string(largest) + " bytes";
    fail(GF_ERR_INVALID_ARGUMENT,
         std::string("the graph does not fit in one ") + (json ? "JSON" : "binary") +
             " graph document: it would take up to " + std::to_string(total) +
             " bytes, and a document holds at most 2 GiB (FlatBuffers)" + why);
  }
}

// json: the document will be printed as JSON, where binary literals over kMaxInlineBytes are
// written as base64 (one number per byte would take up to four times as much text).
void build(FlatBufferBuilder &b, const Graph &g, bool json) {
  check_fits(g, json);
  bool uses_base64 = false;
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
    Offset<flatbuffers::String> text = 0, base64 = 0;
    if (desc.origin == DataOrigin::kHostBuffer) {
      auto *p = static_cast<const unsigned char *>(desc.host_bytes);
      const bool as_text = desc.literal == LiteralForm::kText ||
                           (desc.literal == LiteralForm::kUnknown && is_text(p, desc.size));
      if (as_text) {
        text = b.CreateString(reinterpret_cast<const char *>(p), desc.size);
      } else if (json && desc.size > kMaxInlineBytes) {
        base64 = b.CreateString(base64_encode(p, desc.size));
        uses_base64 = true;
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
    if (!base64.IsNull()) db.add_base64(base64);
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
    if (!task.names_kernel() && !cmd) {
      fail(GF_ERR_INVALID_ARGUMENT,
           g.task_label(t) +
               " has a C callback body, which cannot be written to a graph document: give it a "
               "kernel name (gf_pool_register_kernel) or a command instead");
    }
    auto name = task.named() ? b.CreateString(g.task_name(task)) : 0;
    auto kernel = task.names_kernel() ? b.CreateSharedString(g.kernel_name(task)) : 0;
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
  const uint32_t version = uses_base64 ? 2 : 1;
  b.Finish(fb::CreateGraph(b, version, data_vec, task_vec, meta_vec), fb::GraphIdentifier());
}

}  // namespace

std::string to_binary(const Graph &graph) {
  FlatBufferBuilder b(1024 + graph.task_count() * 64 + graph.data_count() * 32);
  build(b, graph, false);
  return std::string(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
}

std::string to_json(const Graph &graph) {
  FlatBufferBuilder b(1024 + graph.task_count() * 64);
  build(b, graph, true);
  flatbuffers::Parser parser(json_options());
  load_schema(parser);
  std::string text;
  if (!flatbuffers::GenerateText(parser, b.GetBufferPointer(), &text)) {
    // Every string a graph holds was checked to be UTF-8 when it was added or read, and that is
    // all flatbuffers' printer can refuse: reaching this is a gpuflow bug.
    fail(GF_ERR_INTERNAL, "cannot print the graph as JSON (a string that is not UTF-8 got in)");
  }
  return text;
}

}  // namespace gf::serialize
