// Flatbuffers document -> Graph. Untrusted bytes: the Verifier with the true length first, then
// gpuflow's own checks (indices, sizes, names, counts), each error saying what and where.
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
using flatbuffers::Offset;

namespace {

// ---- Reading ---------------------------------------------------------------------------------

[[noreturn]] void bad(const std::string &message) {
  fail(GF_ERR_INVALID_GRAPH, "graph document: " + message);
}

std::string printable(const uint8_t *p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    char c = static_cast<char>(p[i]);
    if (p[i] >= 0x20 && p[i] < 0x7f) {
      s += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", p[i]);
      s += hex;
    }
  }
  return s;
}

// Every table takes at least 4 bytes, so this bounds nothing a valid buffer could hold.
flatbuffers::uoffset_t max_tables(size_t size) {
  return static_cast<flatbuffers::uoffset_t>(std::min<size_t>(size / 4 + 16, UINT32_MAX));
}

// Where a buffer that failed verification is broken: the root, or the first bad element.
std::string locate_corruption(const uint8_t *buf, size_t size) {
  auto root_offset = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(buf);
  if (root_offset >= size) {
    return "its root offset points past the end of the " + std::to_string(size) +
           "-byte buffer (truncated?)";
  }
  auto *graph = flatbuffers::GetRoot<fb::Graph>(buf);
  auto *table = flatbuffers::GetRoot<flatbuffers::Table>(buf);
  flatbuffers::Verifier shallow(buf, size, 64, max_tables(size));
  if (!table->VerifyTableStart(shallow) ||
      !table->VerifyField<uint32_t>(shallow, fb::Graph::VT_FORMAT_VERSION, 4) ||
      !table->VerifyOffset(shallow, fb::Graph::VT_DATA) || !shallow.VerifyVector(graph->data()) ||
      !table->VerifyOffset(shallow, fb::Graph::VT_TASKS) || !shallow.VerifyVector(graph->tasks()) ||
      !table->VerifyOffset(shallow, fb::Graph::VT_METADATA) ||
      !shallow.VerifyVector(graph->metadata())) {
    return "the root table or one of its vectors is out of bounds (truncated?)";
  }
  auto each = [&](auto *vec, const char *what) -> std::string {
    if (!vec) return "";
    for (flatbuffers::uoffset_t i = 0; i < vec->size(); ++i) {
      flatbuffers::Verifier ev(buf, size, 64, max_tables(size));
      if (!vec->Get(i)->Verify(ev)) {
        return std::string(what) + " #" + std::to_string(i) + " is out of bounds or corrupt";
      }
    }
    return "";
  };
  for (auto &found : {each(graph->data(), "data"), each(graph->tasks(), "task"),
                      each(graph->metadata(), "metadata entry")}) {
    if (!found.empty()) return found;
  }
  return "nesting too deep or too many tables";
}

// A string field: present or not, no embedded NUL, bounded.
// Messages are built only on failure: `where` is a callable returning the place's description.
template <class Where>
std::string_view text_of(const flatbuffers::String *s, size_t max, Where &&where) {
  if (!s) return {};
  std::string_view v(s->c_str(), s->size());
  if (v.size() > max) {
    bad(where() + " is " + std::to_string(v.size()) + " bytes long; at most " +
        std::to_string(max) + " are allowed");
  }
  if (v.find('\0') != std::string_view::npos) bad(where() + " contains a NUL character");
  return v;
}

std::string named(std::string_view name) {
  return name.empty() ? std::string() : " '" + std::string(name) + "'";
}

template <class Vec, class What>
size_t count_of(const Vec *v, size_t max, What &&what) {
  size_t n = v ? v->size() : 0;
  if (n > max) {
    bad(what() + " has " + std::to_string(n) + " entries; at most " + std::to_string(max) +
        " are allowed");
  }
  return n;
}

std::shared_ptr<Graph> read_graph(const fb::Graph &doc, uint32_t flags) {
  uint32_t version = doc.format_version();
  if (version > kFormatVersion) {
    fail(GF_ERR_VERSION_MISMATCH, "graph document: format version " + std::to_string(version) +
                                      " is newer than this gpuflow reads (" +
                                      std::to_string(kFormatVersion) + ")");
  }
  const size_t n_data =
      count_of(doc.data(), kMaxData, [] { return std::string("the graph's data list"); });
  const size_t n_tasks =
      count_of(doc.tasks(), kMaxTasks, [] { return std::string("the graph's task list"); });
  auto graph = std::make_shared<Graph>();
  Graph &g = *graph;
  {
    // Counts are bounded by the verified buffer's length, so this reserves at most a few times
    // what the document itself occupies.
    size_t inputs = 0, outputs = 0, edges = 0;
    for (flatbuffers::uoffset_t t = 0; t < n_tasks; ++t) {
      const fb::Task &task = *doc.tasks()->Get(t);
      inputs += task.inputs() ? task.inputs()->size() : 0;
      outputs += task.outputs() ? task.outputs()->size() : 0;
      edges += task.after() ? task.after()->size() : 0;
    }
    g.reserve(n_tasks, n_data, inputs, outputs, edges);
  }
  std::vector<gf_data> refs(n_data);

  for (flatbuffers::uoffset_t d = 0; d < n_data; ++d) {
    const fb::Data &data = *doc.data()->Get(d);
    std::string name(text_of(data.name(), kMaxNameLength,
                             [&] { return "data #" + std::to_string(d) + " name"; }));
    auto where = [&] { return "data #" + std::to_string(d) + named(name); };
    if (data.kind() != fb::DataKind::Buffer && data.kind() != fb::DataKind::Value) {
      bad(where() + " has unknown kind " + std::to_string(static_cast<int>(data.kind())));
    }
    const bool literal = data.bytes() || data.text();
    if (data.bytes() && data.text()) bad(where() + " gives both bytes and text; give one");
    if (literal) {
      if (data.kind() != fb::DataKind::Buffer) bad(where() + " is a value but has literal bytes");
      if (data.keep()) bad(where() + " is a literal input; keep applies to produced data only");
      const uint8_t *p = data.bytes() ? data.bytes()->data()
                                      : reinterpret_cast<const uint8_t *>(data.text()->c_str());
      uint64_t n = data.bytes() ? data.bytes()->size() : data.text()->size();
      if (data.size() != 0 && data.size() != n) {
        bad(where() + " declares size " + std::to_string(data.size()) + " but its literal has " +
            std::to_string(n) + " bytes");
      }
      refs[d] = g.add_host_buffer(name.c_str(), p, n, 0);
    } else {
      if (data.size() > kMaxDataSize) {
        bad(where() + " declares size " + std::to_string(data.size()) + " bytes; at most " +
            std::to_string(kMaxDataSize) + " are allowed");
      }
      uint32_t f = data.keep() ? GF_DATA_KEEP : 0;
      refs[d] = data.kind() == fb::DataKind::Value ? g.add_value(name.c_str(), data.size(), f)
                                                   : g.add_buffer(name.c_str(), data.size(), f);
    }
  }

  std::vector<gf_data> inputs, outputs;
  std::vector<gf_resource> resources;
  std::vector<std::string> resource_names;
  std::vector<const char *> argv, env;
  CommandSpec spec;
  std::vector<std::pair<uint32_t, uint32_t>> afters;  // (task, before)
  for (flatbuffers::uoffset_t t = 0; t < n_tasks; ++t) {
    const fb::Task &task = *doc.tasks()->Get(t);
    std::string name(text_of(task.name(), kMaxNameLength,
                             [&] { return "task #" + std::to_string(t) + " name"; }));
    auto where = [&] { return "task #" + std::to_string(t) + named(name); };
    gf_task_desc desc = GF_TASK_DESC_INIT;
    desc.name = task.name() ? name.c_str() : nullptr;
    desc.priority = task.priority();
    desc.retries = task.retries();
    std::string cost_key(
        text_of(task.cost_key(), kMaxNameLength, [&] { return where() + " cost_key"; }));
    desc.cost_key = task.cost_key() ? cost_key.c_str() : nullptr;

    auto data_refs = [&](const flatbuffers::Vector<uint32_t> *v, std::vector<gf_data> &out,
                         const char *what) {
      size_t n = count_of(v, kMaxRefsPerTask, [&] { return where() + " " + what + " list"; });
      out.resize(n);
      for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
        uint32_t d = v->Get(i);
        if (d >= n_data) {
          bad(where() + ": " + what + " #" + std::to_string(i) + " refers to data #" +
              std::to_string(d) + "; the graph has " + std::to_string(n_data) + " data objects");
        }
        out[i] = refs[d];
      }
    };
    data_refs(task.inputs(), inputs, "input");
    data_refs(task.outputs(), outputs, "output");
    desc.inputs = inputs.data();
    desc.input_count = static_cast<uint32_t>(inputs.size());
    desc.outputs = outputs.data();
    desc.output_count = static_cast<uint32_t>(outputs.size());

    size_t n_after =
        count_of(task.after(), kMaxRefsPerTask, [&] { return where() + " after list"; });
    for (flatbuffers::uoffset_t i = 0; i < n_after; ++i) {
      uint32_t before = task.after()->Get(i);
      if (before >= n_tasks) {
        bad(where() + ": after #" + std::to_string(i) + " refers to task #" +
            std::to_string(before) + "; the graph has " + std::to_string(n_tasks) + " tasks");
      }
      afters.emplace_back(t, before);
    }

    size_t n_res = count_of(task.resources(), kMaxResourcesPerTask,
                            [&] { return where() + " resource list"; });
    resources.resize(n_res);
    resource_names.resize(n_res);
    for (flatbuffers::uoffset_t i = 0; i < n_res; ++i) {
      const fb::Resource &r = *task.resources()->Get(i);
      resource_names[i] = text_of(r.name(), kMaxNameLength, [&] {
        return where() + " resource #" + std::to_string(i) + " name";
      });
      resources[i] = gf_resource{resource_names[i].c_str(), r.amount()};
    }
    desc.resources = resources.data();
    desc.resource_count = static_cast<uint32_t>(n_res);

    std::string kernel;
    gf_command_desc command = GF_COMMAND_DESC_INIT;
    if (task.kernel() && task.command()) bad(where() + " gives both a kernel and a command");
    if (task.kernel()) {
      kernel = text_of(task.kernel(), kMaxNameLength, [&] { return where() + " kernel"; });
      desc.kernel = kernel.c_str();
    } else if (const fb::Command *c = task.command()) {
      auto list = [&](const flatbuffers::Vector<Offset<flatbuffers::String>> *v,
                      std::vector<std::string> &strings, std::vector<const char *> &ptrs,
                      const char *what) {
        size_t n = count_of(v, kMaxArgs, [&] { return where() + " command " + what; });
        strings.resize(n);
        ptrs.resize(n);
        for (flatbuffers::uoffset_t i = 0; i < n; ++i) {
          strings[i] = text_of(v->Get(i), kMaxArgLength, [&] {
            return where() + " command " + what + "[" + std::to_string(i) + "]";
          });
          ptrs[i] = strings[i].c_str();
        }
      };
      list(c->argv(), spec.argv, argv, "argv");
      list(c->env(), spec.env, env, "env");
      spec.working_dir =
          text_of(c->working_dir(), kMaxNameLength, [&] { return where() + " working_dir"; });
      spec.log_dir = text_of(c->log_dir(), kMaxNameLength, [&] { return where() + " log_dir"; });
      command.argv = argv.data();
      command.argc = static_cast<uint32_t>(argv.size());
      command.env = env.data();
      command.env_count = static_cast<uint32_t>(env.size());
      command.working_dir = c->working_dir() ? spec.working_dir.c_str() : nullptr;
      command.log_dir = c->log_dir() ? spec.log_dir.c_str() : nullptr;
      command.timeout_s = c->timeout_s();
      desc.command = &command;
    } else {
      bad(where() + " has no body: give a kernel name or a command");
    }
    try {
      g.add_task(desc);
    } catch (const Error &e) {
      bad(e.what());
    }
  }
  for (auto [t, before] : afters) {
    try {
      g.add_dependency(g.task_ref(t), g.task_ref(before));
    } catch (const Error &e) {
      bad(e.what());
    }
  }

  size_t n_meta = count_of(doc.metadata(), kMaxMetadata,
                           [] { return std::string("the graph's metadata list"); });
  std::unordered_set<std::string_view> keys;
  for (flatbuffers::uoffset_t i = 0; i < n_meta; ++i) {
    const fb::KeyValue &kv = *doc.metadata()->Get(i);
    auto where = [&] { return "metadata entry #" + std::to_string(i); };
    std::string_view key = text_of(kv.key(), kMaxNameLength, [&] { return where() + " key"; });
    if (key.empty()) bad(where() + " has an empty key");
    if (!keys.insert(key).second) bad(where() + " repeats key '" + std::string(key) + "'");
    std::string value(text_of(kv.value(), kMaxMetadataValue, [&] { return where() + " value"; }));
    g.set_metadata(std::string(key).c_str(), value.c_str());
  }

  if (!(flags & GF_DESERIALIZE_MUTABLE)) {
    try {
      g.freeze();
    } catch (const Error &e) {
      bad(e.what());
    }
  }
  return graph;
}

std::shared_ptr<Graph> from_binary(const uint8_t *buf, uint64_t size, uint32_t flags) {
  if (size < 8) {
    bad("truncated: " + std::to_string(size) +
        " bytes is shorter than a FlatBuffers header (8 bytes)");
  }
  if (!flatbuffers::BufferHasIdentifier(buf, fb::GraphIdentifier())) {
    bad("wrong file identifier '" + printable(buf + 4, 4) + "' at byte 4; a gpuflow graph has '" +
        fb::GraphIdentifier() + "'");
  }
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    bad(std::to_string(size) + " bytes is larger than a FlatBuffers buffer can be (2 GiB)");
  }
  // Reads assume aligned scalars: copy a misaligned buffer (the caller's bytes may be anywhere).
  std::unique_ptr<uint64_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(buf) % alignof(uint64_t) != 0) {
    aligned = std::make_unique<uint64_t[]>(size / 8 + 1);
    std::memcpy(aligned.get(), buf, size);
    buf = reinterpret_cast<const uint8_t *>(aligned.get());
  }
  const auto n = static_cast<size_t>(size);
  flatbuffers::Verifier verifier(buf, n, 64, max_tables(n));
  if (!fb::VerifyGraphBuffer(verifier)) {
    bad("the " + std::to_string(size) +
        "-byte buffer fails FlatBuffers verification: " + locate_corruption(buf, n));
  }
  return read_graph(*fb::GetGraph(buf), flags);
}

}  // namespace

std::shared_ptr<Graph> from_bytes(const void *bytes, uint64_t size, int format, uint32_t flags) {
  if (!bytes && size > 0) fail(GF_ERR_INVALID_ARGUMENT, "bytes is NULL");
  if (flags & ~uint32_t{GF_DESERIALIZE_MUTABLE}) {
    fail(GF_ERR_INVALID_ARGUMENT, "unknown gf_graph_deserialize flags");
  }
  const auto *p = static_cast<const uint8_t *>(bytes);
  if (format == GF_GRAPH_FORMAT_AUTO) {
    uint64_t i = 0;
    while (i < size && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r')) ++i;
    bool binary = size >= 8 && flatbuffers::BufferHasIdentifier(p, fb::GraphIdentifier());
    if (binary) {
      format = GF_GRAPH_FORMAT_BINARY;
    } else if (i < size && p[i] == '{') {
      format = GF_GRAPH_FORMAT_JSON;
    } else if (size > 0 && size < 8) {
      format = GF_GRAPH_FORMAT_BINARY;  // too short to tell: say it is truncated
    } else {
      bad("neither a binary gpuflow graph (file identifier '" + std::string(fb::GraphIdentifier()) +
          "' at byte 4) nor JSON (text starting with '{')");
    }
  }
  if (format == GF_GRAPH_FORMAT_BINARY) return from_binary(p, size, flags);
  if (format != GF_GRAPH_FORMAT_JSON) {
    fail(GF_ERR_INVALID_ARGUMENT, "unknown gf_graph_format " + std::to_string(format));
  }
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) bad("JSON text larger than 2 GiB");
  std::string text(reinterpret_cast<const char *>(p), static_cast<size_t>(size));
  flatbuffers::Parser parser(json_options());
  load_schema(parser);
  if (!parser.ParseJson(text.c_str())) bad("JSON: " + parser.error_);
  return from_binary(parser.builder_.GetBufferPointer(), parser.builder_.GetSize(), flags);
}

}  // namespace gf::serialize
