// The one convention for a task's error text, kept wherever a run stores one (the scheduler, split
// runs): a command task's error names the task first ("task 'x': command 'sh' exited with code
// 3"), whoever wrote it, as its log lines and shell users expect; any other task's error is its
// body's own words (or the runtime's) and never starts with the task's name, which callers show
// beside it. So a caller printing a task's name with its error knows from the task's kind alone
// whether to, and reads no text to decide.
#pragma once

#include <string>

#include "graph/graph.hpp"

namespace gf {

// The error text to store for task t of `graph`, from what went wrong.
inline std::string task_error_text(const Graph &graph, TaskIndex t, std::string what) {
  if (!graph.command(graph.task(t))) return what;
  return graph.task_label(t) + ": " + what;
}

// What went wrong, from a stored error text of task t: the text less the name a command task's
// error starts with.
inline std::string task_error_words(const Graph &graph, TaskIndex t, const std::string &stored) {
  if (!graph.command(graph.task(t))) return stored;
  const size_t named = graph.task_label(t).size() + 2;
  return stored.size() >= named ? stored.substr(named) : stored;
}

}  // namespace gf
