// Graph documents as the graph commands read them: a file (or standard input) that must hold a
// document, and the names the C ABI has no accessor for, read from the graph's JSON form.
#pragma once

#include <gpuflow.h>

#include <string>
#include <vector>

namespace gpuflow_cli {

// Reads and deserializes the document at `path` ('-': standard input). On failure says why
// (naming the file) and returns null.
gf_graph *load_graph(const std::string &path);

// What the graph calls its tasks and data.
struct GraphNames {
  struct Task {
    std::string label;     // "task 'name'", or "task #i" when unnamed (as the library says)
    bool command = false;  // an external command (its errors name it: graph/task_error.hpp)
  };
  struct Data {
    std::string name;      // "data #i" when unnamed
    bool literal = false;  // an input given in the document itself
  };
  std::vector<Task> tasks;
  std::vector<Data> data;
};
GraphNames names_of(gf_graph *graph);

}  // namespace gpuflow_cli
