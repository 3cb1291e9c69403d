// Flatbuffers document -> Graph. Untrusted bytes: the Verifier with the true length first, then
// gpuflow's own checks (indices, sizes, names, counts), each error saying what and where.
#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/idl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/bytes_text.hpp"
#include "core/error.hpp"
#include "core/utf8.hpp"
#include "serialize/base64.hpp"
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

const flatbuffers::Table *table_of(const void *t) {
  return static_cast<const flatbuffers::Table *>(t);
}

// The FlatBuffers Verifier for this schema, except that each shared table or vector is verified
// once, however many entries point at it. (The generated Verify walks a shared command's argv,
// or a shared resource list, once per task that names it: quadratic in the document's size.)
class DocVerifier {
 public:
  DocVerifier(const uint8_t *buf, size_t size) : v_(buf, size, 64, max_tables(size)) {}

  bool root(const uint8_t *buf) {
    const flatbuffers::uoffset_t o = v_.VerifyOffset(0);
    return o != 0 && graph(reinterpret_cast<const fb::Graph *>(buf + o));
  }

  bool graph(const fb::Graph *g) {
    const auto *t = table_of(g);
    return t->VerifyTableStart(v_) &&
           t->VerifyField<uint32_t>(v_, fb::Graph::VT_FORMAT_VERSION, 4) &&
           t->VerifyOffset(v_, fb::Graph::VT_DATA) && v_.VerifyVector(g->data()) &&
           v_.VerifyVectorOfTables(g->data()) && t->VerifyOffset(v_, fb::Graph::VT_TASKS) &&
           v_.VerifyVector(g->tasks()) && tasks(g->tasks()) &&
           t->VerifyOffset(v_, fb::Graph::VT_METADATA) && v_.VerifyVector(g->metadata()) &&
           v_.VerifyVectorOfTables(g->metadata()) && v_.EndTable();
  }

  // Data and KeyValue tables hold no lists of tables or strings: the generated Verify is O(1).
  bool data(const fb::Data *d) { return d->Verify(v_); }
  bool metadata(const fb::KeyValue *kv) { return kv->Verify(v_); }

  bool task(const fb::Task *task) {
    if (!tasks_.insert(task).second) return true;
    const auto *t = table_of(task);
    return t->VerifyTableStart(v_) && t->VerifyOffset(v_, fb::Task::VT_NAME) &&
           v_.VerifyString(task->name()) && t->VerifyOffset(v_, fb::Task::VT_KERNEL) &&
           v_.VerifyString(task->kernel()) && t->VerifyOffset(v_, fb::Task::VT_COMMAND) &&
           command(task->command()) && t->VerifyOffset(v_, fb::Task::VT_RESOURCES) &&
           v_.VerifyVector(task->resources()) && resources(task->resources()) &&
           t->VerifyField<int32_t>(v_, fb::Task::VT_PRIORITY, 4) &&
           t->VerifyField<uint32_t>(v_, fb::Task::VT_RETRIES, 4) &&
           t->VerifyOffset(v_, fb::Task::VT_INPUTS) && v_.VerifyVector(task->inputs()) &&
           t->VerifyOffset(v_, fb::Task::VT_OUTPUTS) && v_.VerifyVector(task->outputs()) &&
           t->VerifyOffset(v_, fb::Task::VT_AFTER) && v_.VerifyVector(task->after()) &&
           v_.EndTable();
  }

 private:
  using Strings = flatbuffers::Vector<Offset<flatbuffers::String>>;
  using Resources = flatbuffers::Vector<Offset<fb::Resource>>;

  bool tasks(const flatbuffers::Vector<Offset<fb::Task>> *v) {
    if (!v) return true;
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      if (!task(v->Get(i))) return false;
    }
    return true;
  }

  bool command(const fb::Command *c) {
    if (!c || !commands_.insert(c).second) return true;
    const auto *t = table_of(c);
    return t->VerifyTableStart(v_) && t->VerifyOffsetRequired(v_, fb::Command::VT_ARGV) &&
           v_.VerifyVector(c->argv()) && strings(c->argv()) &&
           t->VerifyOffset(v_, fb::Command::VT_ENV) && v_.VerifyVector(c->env()) &&
           strings(c->env()) && t->VerifyOffset(v_, fb::Command::VT_WORKING_DIR) &&
           v_.VerifyString(c->working_dir()) &&
           t->VerifyField<double>(v_, fb::Command::VT_TIMEOUT_S, 8) &&
           t->VerifyOffset(v_, fb::Command::VT_LOG_DIR) && v_.VerifyString(c->log_dir()) &&
           v_.EndTable();
  }

  bool strings(const Strings *v) {
    return !v || !string_lists_.insert(v).second || v_.VerifyVectorOfStrings(v);
  }

  bool resources(const Resources *v) {
    return !v || !resource_lists_.insert(v).second || v_.VerifyVectorOfTables(v);
  }

  flatbuffers::Verifier v_;
  std::unordered_set<const void *> tasks_, commands_, string_lists_, resource_lists_;
};

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
  DocVerifier deep(buf, size);
  auto each = [&](auto *vec, const char *what, auto &&verify) -> std::string {
    if (!vec) return "";
    for (flatbuffers::uoffset_t i = 0; i < vec->size(); ++i) {
      if (!verify(vec->Get(i))) {
        return std::string(what) + " #" + std::to_string(i) + " is out of bounds or corrupt";
      }
    }
    return "";
  };
  for (auto &found : {each(graph->data(), "data", [&](const fb::Data *d) { return deep.data(d); }),
                      each(graph->tasks(), "task", [&](const fb::Task *t) { return deep.task(t); }),
                      each(graph->metadata(), "metadata entry",
                           [&](const fb::KeyValue *kv) { return deep.metadata(kv); })}) {
    if (!found.empty()) return found;
  }
  return "nesting too deep or too many tables";
}

// A string field: present or not, no embedded NUL, bounded.
// Messages are built only on failure: `where` is a callable returning the place's description.
template <class Where>
std::string_view text_of(const flatbuffers::String *s, size_t max, Where &&where) {
  if (!s) return {};
  // The Verifier checks alignment relative to the document's start; a document that does not
  // start on a 4-byte boundary can still place a string off one. Refuse it before reading it.
  if (reinterpret_cast<uintptr_t>(s) % alignof(flatbuffers::uoffset_t) != 0) {
    bad(where() + " is not aligned on 4 bytes (a corrupt document)");
  }
  std::string_view v(s->c_str(), s->size());
  if (v.size() > max) {
    bad(where() + " is " + std::to_string(v.size()) + " bytes long; at most " +
        std::to_string(max) + " are allowed");
  }
  if (v.find('\0') != std::string_view::npos) bad(where() + " contains a NUL character");
  size_t at = utf8_error_at(v);
  if (at != std::string_view::npos) bad(where() + " " + utf8_complaint(v, at));
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

// Heap bytes a std::string of `n` characters takes beyond its own object (libstdc++ keeps up to
// 15 characters inline).
uint64_t heap_of(uint64_t n) {
  return n > 15 ? n + 1 : 0;
}

std::string mib(uint64_t bytes) {
  return bytes_text(static_cast<double>(bytes));
}

// What reading `doc` will allocate, counted before anything is: FlatBuffers lets many entries
// point at one table, list, string or literal, so a small document can describe a huge graph.
// Each use of a shared part counts. Linear in the number of entries (shared commands are
// measured once).
struct Expansion {
  struct Part {
    const char *what;
    uint64_t bytes = 0;
  };
  Part structures{"tasks and data objects themselves"};
  Part names{"names and kernel names"};
  Part lists{"tasks' input, output, after and resource lists"};
  Part commands{"commands' argv, env and paths"};
  Part literals{"literal inputs (bytes and text)"};
  Part metadata{"metadata"};

  uint64_t total() const {
    return structures.bytes + names.bytes + lists.bytes + commands.bytes + literals.bytes +
           metadata.bytes;
  }
  const Part &largest() const {
    const Part *best = &structures;
    for (const Part *p : {&names, &lists, &commands, &literals, &metadata}) {
      if (p->bytes > best->bytes) best = p;
    }
    return *best;
  }
};

uint64_t size_of(const flatbuffers::String *s) {
  return s ? s->size() : 0;
}
template <class T>
uint64_t size_of(const flatbuffers::Vector<T> *v) {
  return v ? v->size() : 0;
}

Expansion measure(const fb::Graph &doc, size_t n_data, size_t n_tasks) {
  Expansion e;
  for (flatbuffers::uoffset_t d = 0; d < n_data; ++d) {
    const fb::Data &data = *doc.data()->Get(d);
    e.structures.bytes += sizeof(DataDesc) + 16;  // plus the reader's reference and analysis
    e.names.bytes += heap_of(size_of(data.name()));
    e.literals.bytes +=
        size_of(data.bytes()) + size_of(data.text()) + size_of(data.base64()) / 4 * 3;
  }
  std::unordered_map<const fb::Command *, uint64_t> command_bytes;
  for (flatbuffers::uoffset_t t = 0; t < n_tasks; ++t) {
    const fb::Task &task = *doc.tasks()->Get(t);
    e.structures.bytes += sizeof(TaskDesc) + 64;  // plus the analysis freeze makes
    e.names.bytes += heap_of(size_of(task.name())) + heap_of(size_of(task.kernel()));
    // An input is kept once and is an edge of the analysis twice; an `after` entry is kept,
    // staged while reading, and an edge twice.
    e.lists.bytes += 12 * size_of(task.inputs()) + 4 * size_of(task.outputs()) +
                     32 * size_of(task.after()) +
                     sizeof(std::pair<std::string, uint64_t>) * size_of(task.resources());
    if (const fb::Command *c = task.command()) {
      auto [at, added] = command_bytes.try_emplace(c, 0);
      if (added) {
        uint64_t bytes = sizeof(CommandSpec) + heap_of(size_of(c->working_dir())) +
                         heap_of(size_of(c->log_dir()));
        for (const auto *list : {c->argv(), c->env()}) {
          if (!list) continue;
          for (flatbuffers::uoffset_t i = 0; i < list->size(); ++i) {
            bytes += sizeof(std::string) + heap_of(list->Get(i)->size());
          }
        }
        at->second = bytes;
      }
      e.commands.bytes += at->second;
    }
  }
  if (doc.metadata()) {
    for (flatbuffers::uoffset_t i = 0; i < doc.metadata()->size(); ++i) {
      const fb::KeyValue &kv = *doc.metadata()->Get(i);
      e.metadata.bytes +=
          2 * sizeof(std::string) + 2 * (size_of(kv.key()) + 1) + size_of(kv.value()) + 1;
    }
  }
  return e;
}

std::shared_ptr<Graph> read_graph(const fb::Graph &doc, uint32_t flags, uint64_t document_size) {
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
  const Expansion expansion = measure(doc, n_data, n_tasks);
  const uint64_t allowed = max_expansion(document_size);
  if (expansion.total() > allowed) {
    const Expansion::Part &part = expansion.largest();
    bad("reading this " + std::to_string(document_size) + "-byte document would allocate about " +
        mib(expansion.total()) + " (" + part.what + ": " + mib(part.bytes) + "), more than the " +
        mib(allowed) + " allowed (" + std::to_string(kMaxExpansionFactor) +
        " x the document's size + " + mib(kExpansionAllowance) +
        "); entries that point at one shared list, string or literal count once per use");
  }
  auto graph = std::make_shared<Graph>();
  Graph &g = *graph;
  {
    // Bounded by the expansion check above.
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
  std::string decoded;  // a base64 literal's bytes, until the graph has copied them

  for (flatbuffers::uoffset_t d = 0; d < n_data; ++d) {
    const fb::Data &data = *doc.data()->Get(d);
    std::string name(text_of(data.name(), kMaxNameLength,
                             [&] { return "data #" + std::to_string(d) + " name"; }));
    auto where = [&] { return "data #" + std::to_string(d) + named(name); };
    if (data.kind() != fb::DataKind::Buffer && data.kind() != fb::DataKind::Value) {
      bad(where() + " has unknown kind " + std::to_string(static_cast<int>(data.kind())));
    }
    const int forms =
        int{data.bytes() != nullptr} + int{data.text() != nullptr} + int{data.base64() != nullptr};
    if (forms > 1) bad(where() + " gives more than one of bytes, text and base64; give one");
    if (forms == 1) {
      if (data.kind() != fb::DataKind::Buffer) bad(where() + " is a value but has literal bytes");
      if (data.keep()) bad(where() + " is a literal input; keep applies to produced data only");
      const uint8_t *p = nullptr;
      uint64_t n = 0;
      LiteralForm form = LiteralForm::kBytes;
      if (data.bytes()) {
        p = data.bytes()->data();
        n = data.bytes()->size();
      } else if (data.text()) {
        std::string_view text(data.text()->c_str(), data.text()->size());
        size_t at = utf8_error_at(text);
        if (at != std::string_view::npos) {
          bad(where() + " text " + utf8_complaint(text, at) + "; give binary content as bytes");
        }
        p = reinterpret_cast<const uint8_t *>(text.data());
        n = text.size();
        form = LiteralForm::kText;
      } else {
        std::string_view text(data.base64()->c_str(), data.base64()->size());
        size_t at = base64_decode(text, decoded);
        if (at != std::string_view::npos) {
          bad(where() + " base64 is not valid base64 (RFC 4648 with '=' padding) at character " +
              std::to_string(at) + " of " + std::to_string(text.size()));
        }
        p = reinterpret_cast<const uint8_t *>(decoded.data());
        n = decoded.size();
      }
      if (data.size() != 0 && data.size() != n) {
        bad(where() + " declares size " + std::to_string(data.size()) + " but its literal has " +
            std::to_string(n) + " bytes");
      }
      refs[d] = g.add_host_buffer(name.c_str(), p, n, 0, form);
      if (!decoded.empty()) std::string().swap(decoded);
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

// document_size: what the caller handed in (the JSON text, for JSON), which bounds what reading
// may allocate.
std::shared_ptr<Graph> from_binary(const uint8_t *buf, uint64_t size, uint32_t flags,
                                   uint64_t document_size) {
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
  DocVerifier verifier(buf, n);
  if (!verifier.root(buf)) {
    bad("the " + std::to_string(size) +
        "-byte buffer fails FlatBuffers verification: " + locate_corruption(buf, n));
  }
  return read_graph(*fb::GetGraph(buf), flags, std::max(document_size, size));
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
  if (format == GF_GRAPH_FORMAT_BINARY) return from_binary(p, size, flags, size);
  if (format != GF_GRAPH_FORMAT_JSON) {
    fail(GF_ERR_INVALID_ARGUMENT, "unknown gf_graph_format " + std::to_string(format));
  }
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) bad("JSON text larger than 2 GiB");
  std::string text(reinterpret_cast<const char *>(p), static_cast<size_t>(size));
  flatbuffers::Parser parser(json_options());
  load_schema(parser);
  if (!parser.ParseJson(text.c_str())) bad("JSON: " + parser.error_);
  return from_binary(parser.builder_.GetBufferPointer(), parser.builder_.GetSize(), flags, size);
}

}  // namespace gf::serialize
