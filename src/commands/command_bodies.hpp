// External commands as task bodies: the executor, bound to each command task of a run when the
// graph is submitted (a CommandResolver, graph/task_body.hpp). It works from what any body is
// given, the public task API (gf_task_ctx_*), plus what the pool hands it at submit: the devices'
// UUIDs and the name of the run's own log directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "graph/command_spec.hpp"
#include "graph/task_body.hpp"

namespace gf {

// The run's own directory under the log directory, so that runs of one graph (one after
// another, or at once, in one pool, several pools or several processes) never share log files:
// run-<submit time, UTC>-<process id>-<pool number>.<run number in the pool>.
std::string command_log_subdir(std::chrono::system_clock::time_point submitted, uint64_t pool,
                               uint64_t run);

// The command bodies of one run.
class CommandBodies final : public CommandResolver {
 public:
  // device_uuids: by device ordinal, "" for emulated devices (a command is then shown the ordinal).
  explicit CommandBodies(std::vector<std::string> device_uuids)
      : device_uuids_(std::move(device_uuids)) {}

  // Names the run's log directory (command_log_subdir). Set before the run starts; called as each
  // command starts, since a run gets its number only when it starts, after its bodies are bound.
  void set_log_subdir(std::function<std::string()> log_subdir) {
    log_subdir_ = std::move(log_subdir);
  }

  TaskBody resolve(const Graph &graph, uint32_t task) override;

  // What a command body's user_data points at.
  struct Task {
    const CommandSpec *spec = nullptr;  // the graph's, which the run keeps
    std::string log_stem;               // its log files' name, unique within the run
    const CommandBodies *run = nullptr;
  };
  std::string log_subdir() const { return log_subdir_ ? log_subdir_() : std::string("run"); }
  // What the command is told its device is (CUDA_VISIBLE_DEVICES): the UUID, else the ordinal.
  std::string visible_device(int device) const;

 private:
  std::vector<std::string> device_uuids_;
  std::function<std::string()> log_subdir_;
  std::deque<Task> tasks_;  // stable addresses: bodies point at them
};

}  // namespace gf
