#include "graph_document.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/regular_file.hpp"
#include "exit_codes.hpp"

namespace gpuflow_cli {

namespace {

// A FlatBuffers buffer is at most 2 GiB, and so is a document (docs/graph-format.md).
constexpr size_t kMaxDocumentBytes = (size_t{1} << 31) - 1;

// The document at `path` ("-": standard input), or false having said why. A FIFO, a directory or
// a device is refused for what it is rather than waited on or read as an empty document; one
// piped in on purpose comes as "-".
bool read_document(const std::string &path, std::string &out) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    out = ss.str();
    return true;
  }
  gf::core::FileText file =
      gf::core::read_regular_file(path, kMaxDocumentBytes, "the graph document");
  if (!file) {
    std::fprintf(stderr, "gpuflow: %s\n", file.error.c_str());
    return false;
  }
  out = std::move(file.contents);
  return true;
}

// Catches what the library would call "shorter than a FlatBuffers header": an empty file, or text
// (JSON) whose top level is not an object. A binary document holds NUL bytes; text does not.
std::string not_a_document(const std::string &bytes) {
  size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return bytes.empty() ? "the file is empty" : "it holds only blanks";
  if (bytes.find('\0') != std::string::npos || bytes[first] == '{') return "";
  char c = bytes[first];
  const char *what = c == '['                             ? "an array"
                     : c == '"'                           ? "a string"
                     : c == '-' || (c >= '0' && c <= '9') ? "a number"
                     : c == 't' || c == 'f'               ? "a boolean"
                     : c == 'n'                           ? "null"
                                                          : nullptr;
  if (!what) return "it is text, but not JSON";
  return std::string("its JSON top level is ") + what + ", not an object";
}

}  // namespace

gf_graph *load_graph(const std::string &path) {
  std::string bytes;
  if (!read_document(path, bytes)) return nullptr;
  if (std::string why = not_a_document(bytes); !why.empty()) {
    std::fprintf(stderr, "gpuflow: %s is not a gpuflow graph document: %s\n", path.c_str(),
                 why.c_str());
    return nullptr;
  }
  gf_graph *graph = nullptr;
  if (gf_graph_deserialize(&graph, bytes.data(), bytes.size(), GF_GRAPH_FORMAT_AUTO, 0) != GF_OK) {
    library_error(path);
    return nullptr;
  }
  return graph;
}

GraphNames names_of(gf_graph *graph) {
  gf_bytes text{nullptr, 0};
  nlohmann::json doc;
  if (gf_graph_serialize(&text, graph, GF_GRAPH_FORMAT_JSON) == GF_OK) {
    const char *begin = static_cast<const char *>(text.data);
    doc = nlohmann::json::parse(begin, begin + text.size, nullptr, /*allow_exceptions=*/false);
  }
  gf_bytes_free(&text);
  const nlohmann::json none = nlohmann::json::object();
  // Entry i of the document's list `key`, or an empty object.
  auto entry = [&](const char *key, uint64_t i) -> const nlohmann::json & {
    if (!doc.is_object()) return none;
    auto list = doc.find(key);
    if (list == doc.end() || !list->is_array() || i >= list->size()) return none;
    const nlohmann::json &e = (*list)[i];
    return e.is_object() ? e : none;
  };
  auto name_of = [](const nlohmann::json &e) {
    auto name = e.find("name");
    return name != e.end() && name->is_string() ? name->get<std::string>() : std::string();
  };
  GraphNames names;
  uint64_t tasks = 0, data = 0;
  gf_graph_task_count(&tasks, graph);
  gf_graph_data_count(&data, graph);
  for (uint64_t i = 0; i < tasks; ++i) {
    const nlohmann::json &t = entry("tasks", i);
    const std::string name = name_of(t);
    names.tasks.push_back({name.empty() ? "task #" + std::to_string(i) : "task '" + name + "'",
                           t.contains("command")});
  }
  for (uint64_t i = 0; i < data; ++i) {
    const nlohmann::json &d = entry("data", i);
    const std::string name = name_of(d);
    names.data.push_back({name.empty() ? "data #" + std::to_string(i) : name,
                          d.contains("text") || d.contains("bytes") || d.contains("base64")});
  }
  return names;
}

}  // namespace gpuflow_cli
