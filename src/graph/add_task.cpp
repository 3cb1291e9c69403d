// Adding a task: every check first, then room for everything the task is appended to, then the
// appends, which cannot fail: a refused task leaves the graph as it was. Plain tasks (C callbacks,
// no name, no resources) skip every check that cannot apply to them, as graph building through
// the C ABI is on the path of every one-shot graph.
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/resource_names.hpp"
#include "graph/cost_key.hpp"
#include "graph/graph.hpp"
#include "graph/kernel_name.hpp"
#include "graph/text_checks.hpp"

namespace gf {

// "task 'name'" or "task #N", built only when a message needs it.
struct TaskLabel {
  const std::string &name;
  TaskIndex index;
  std::string operator()() const {
    return name.empty() ? "task #" + std::to_string(index) : "task '" + name + "'";
  }
};

namespace {

[[gnu::always_inline]] inline void check_body(const gf_task_desc &desc, const TaskLabel &label) {
  const bool callbacks = desc.cpu_fn || desc.gpu_fn;
  const bool kernel = desc.kernel != nullptr;
  const bool command = desc.command != nullptr;
  if (!callbacks && !kernel && !command) {
    fail(GF_ERR_INVALID_ARGUMENT,
         label() + " has no body: set cpu_fn and/or gpu_fn, a kernel name, or a command");
  }
  if (int{callbacks} + int{kernel} + int{command} > 1) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " gives more than one kind of body (C callbacks, " +
                                      "kernel name, command): give exactly one");
  }
  if (!callbacks && (desc.user_data || desc.user_data_destroy)) {
    fail(GF_ERR_INVALID_ARGUMENT,
         label() + " sets user_data, which only C callback bodies receive");
  }
  if (kernel && !valid_kernel_name(desc.kernel)) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " names kernel '" + std::string(desc.kernel) +
                                      "': a kernel name is 1 to 255 characters from " +
                                      "[A-Za-z0-9_.:/-]");
  }
  if (desc.cost_key && !valid_cost_key(desc.cost_key)) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " has cost_key '" + std::string(desc.cost_key) +
                                      "': a cost key is 1 to " + std::to_string(kMaxCostKey) +
                                      " bytes of UTF-8 without control characters");
  }
  if ((desc.input_count && !desc.inputs) || (desc.output_count && !desc.outputs) ||
      (desc.after_count && !desc.after) || (desc.resource_count && !desc.resources)) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " has a count without its array (NULL pointer)");
  }
}

std::unique_ptr<CommandSpec> read_command(const gf_command_desc &command, const TaskLabel &label) {
  auto spec = std::make_unique<CommandSpec>(make_command_spec(command, label()));
  auto each = [&](const std::vector<std::string> &list, const char *field) {
    for (size_t i = 0; i < list.size(); ++i) {
      require_utf8(list[i],
                   [&] { return label() + ": command " + field + "[" + std::to_string(i) + "]"; });
    }
  };
  each(spec->argv, "argv");
  each(spec->env, "env");
  require_utf8(spec->working_dir, [&] { return label() + ": command working_dir"; });
  require_utf8(spec->log_dir, [&] { return label() + ": command log_dir"; });
  return spec;
}

// The task's resources, checked, without zero amounts (the caller has some).
NamedRequest read_request(const gf_task_desc &desc, const TaskLabel &label) {
  NamedRequest request;
  for (uint32_t i = 0; i < desc.resource_count; ++i) {
    const gf_resource &r = desc.resources[i];
    if (!r.name || !*r.name) {
      fail(GF_ERR_INVALID_ARGUMENT, label() + ": resource #" + std::to_string(i) + " has no name");
    }
    require_utf8(r.name, [&] { return label() + ": resource #" + std::to_string(i) + " name"; });
    if (!FixedPoint::representable(r.amount)) {
      fail(GF_ERR_INVALID_ARGUMENT, label() + ": resource '" + r.name + "' amount " +
                                        std::to_string(r.amount) +
                                        " must be finite, non-negative and at most 1e14");
    }
    if (FixedPoint::rounds_to_zero(r.amount)) {
      fail(GF_ERR_INVALID_ARGUMENT, label() + ": resource '" + r.name + "' amount " +
                                        std::to_string(r.amount) +
                                        " is positive but below the resolution of amounts " +
                                        "(1/10000): it would round to zero");
    }
    FixedPoint amount = FixedPoint::from_double(r.amount);
    if (amount.is_zero()) continue;
    request.emplace_back(r.name, amount);
  }
  // Sorted, a repeated name is adjacent to itself: O(n log n) for any resource count. Zero
  // amounts count too: a name given twice is a mistake whatever the amounts.
  std::vector<std::string_view> names(desc.resource_count);
  for (uint32_t i = 0; i < desc.resource_count; ++i) names[i] = desc.resources[i].name;
  std::sort(names.begin(), names.end());
  auto same = std::adjacent_find(names.begin(), names.end());
  if (same != names.end()) {
    fail(GF_ERR_INVALID_ARGUMENT,
         label() + " names resource '" + std::string(*same) + "' twice; give each resource once");
  }
  return request;
}

// Capacity for `extra` more elements, growing geometrically: the appends that follow cannot fail.
template <class Vector>
[[gnu::always_inline]] inline void make_room(Vector &list, size_t extra) {
  if (extra == 0 || list.capacity() - list.size() >= extra) return;
  list.reserve(std::max(list.size() + extra, 2 * list.capacity()));
}

// Whether a task has no inputs and a CPU function as its only body.
bool cpu_root(const TaskDesc &task) {
  return task.input_count == 0 && task.body.cpu_fn && !task.body.gpu_fn && !task.names_kernel() &&
         task.command == UINT32_MAX;
}

// Whether a task has only C callbacks and what they read and write: no name, cost key, kernel,
// command or resources, and every list it counts is given.
bool plain_callback_task(const gf_task_desc &desc) {
  return (!desc.name || !*desc.name) && !desc.kernel && !desc.command && !desc.cost_key &&
         desc.resource_count == 0 && (desc.cpu_fn || desc.gpu_fn) &&
         (!desc.input_count || desc.inputs) && (!desc.output_count || desc.outputs) &&
         (!desc.after_count || desc.after);
}

}  // namespace

gf_task Graph::add_task(const gf_task_desc &desc) {
  require_mutable();
  if (lists_.tasks.size() >= UINT32_MAX - 1) fail(GF_ERR_INVALID_ARGUMENT, "too many tasks");
  return plain_callback_task(desc) ? add_plain_task(desc) : add_described_task(desc);
}

gf_task Graph::add_plain_task(const gf_task_desc &desc) {
  const auto t = static_cast<TaskIndex>(lists_.tasks.size());
  if (desc.input_count || desc.output_count || desc.after_count) {
    static const std::string unnamed;
    const TaskLabel label{unnamed, t};
    check_list_sizes(desc, label);
    decode_references(desc, label);
  }
  TaskDesc task;
  task.body = TaskBody{desc.cpu_fn, desc.gpu_fn, desc.user_data};
  const gf_task_fn fn = desc.cpu_fn ? desc.cpu_fn : desc.gpu_fn;
  // Consecutive tasks mostly share their key: the previous task's is checked first.
  const bool same_key = !lists_.tasks.empty() && cost_keys_[lists_.tasks.back().cost_key].fn == fn;
  task.cost_key = same_key ? lists_.tasks.back().cost_key : intern_cost_key({}, fn);
  task.user_data_destroy = desc.user_data_destroy;
  task.priority = desc.priority;
  task.retries = desc.retries;
  append_task(task, desc, nullptr);
  return task_ref(t);
}

gf_task Graph::add_described_task(const gf_task_desc &desc) {
  const auto t = static_cast<TaskIndex>(lists_.tasks.size());
  std::string name;
  if (desc.name && *desc.name) {
    name = desc.name;
    require_utf8(name, [&] { return "task #" + std::to_string(t) + " name"; });
  }
  const TaskLabel label{name, t};
  check_body(desc, label);
  std::unique_ptr<CommandSpec> spec = desc.command ? read_command(*desc.command, label) : nullptr;
  check_list_sizes(desc, label);
  // Tasks of a graph mostly repeat the request of the task added before: one that gives the same
  // list as it did (names and amounts, in order, and no command) is known by its request at once.
  const bool same_request = desc.resource_count && !spec && last_request_.same_as(desc);
  NamedRequest request =
      desc.resource_count && !same_request ? read_request(desc, label) : NamedRequest{};
  decode_references(desc, label);

  // What the task is known by: its body, request and cost key (given, else derived:
  // gf_task_desc.cost_key). Entries interned for a task refused later are left unused.
  TaskDesc task;
  if (spec) {
    // A command that asks for a GPU runs on GPU workers only, any other on CPU workers only, so
    // the device it is given is always one it holds.
    task.command_on_gpu = std::any_of(request.begin(), request.end(), [](const auto &entry) {
      return entry.first == resource_names::kGpu || entry.first == resource_names::kGpuMemory;
    });
    task.command = static_cast<uint32_t>(commands_.size());
  } else if (!desc.kernel) {
    task.body = TaskBody{desc.cpu_fn, desc.gpu_fn, desc.user_data};
  }
  std::string_view key = desc.cost_key ? std::string_view(desc.cost_key) : cost_key_prefix(name);
  if (key.empty() && desc.kernel) key = desc.kernel;
  if (key.empty() && spec) key = spec->argv[0];
  task.cost_key = intern_cost_key(key, desc.cpu_fn ? desc.cpu_fn : desc.gpu_fn);
  task.explicit_cost_key = desc.cost_key != nullptr;
  task.user_data_destroy = desc.user_data_destroy;
  if (same_request) {
    task.request = last_request_.id;
  } else {
    task.request = request.empty() ? kEmptyRequest : requests_.intern(std::move(request));
    if (desc.resource_count) last_request_.remember(desc, task.request);
  }
  task.priority = desc.priority;
  task.retries = desc.retries;
  if (!name.empty()) task.name_text = add_text(std::move(name));
  if (desc.kernel) task.kernel_text = add_text(desc.kernel);
  append_task(task, desc, std::move(spec));
  return task_ref(t);
}

void Graph::check_list_sizes(const gf_task_desc &desc, const TaskLabel &label) const {
  // Tasks index the graph's input and output lists with 32 bits.
  if (uint64_t{desc.input_count} + lists_.input_refs.size() > UINT32_MAX ||
      uint64_t{desc.output_count} + lists_.output_refs.size() > UINT32_MAX) {
    fail(GF_ERR_INVALID_ARGUMENT,
         label() + " would take the graph past 2^32 - 1 inputs or outputs in all");
  }
}

void Graph::append_task(TaskDesc &task, const gf_task_desc &desc,
                        std::unique_ptr<CommandSpec> spec) {
  const auto t = static_cast<TaskIndex>(lists_.tasks.size());
  const std::span<const DataIndex> inputs(scratch_inputs_.data(), desc.input_count);
  const std::span<const DataIndex> outputs(scratch_outputs_.data(), desc.output_count);
  const std::span<const TaskIndex> after(scratch_after_.data(), desc.after_count);
  task.inputs_begin = static_cast<uint32_t>(lists_.input_refs.size());
  task.input_count = desc.input_count;
  task.outputs_begin = static_cast<uint32_t>(lists_.output_refs.size());
  task.output_count = desc.output_count;

  // Room for every append below (each may throw, before anything else changes).
  const bool bodies_known = bodies_listed_ == t;
  if (bodies_known && bodies_by_request_.size() <= task.request) {
    bodies_by_request_.resize(task.request + 1, 0);
  }
  // The data edges freeze would otherwise find by walking the tasks (data_edges_): listed while
  // every task read only data whose producer it already knew.
  bool edges_known = edges_listed_ == t;
  for (DataIndex d : inputs) {
    if (lists_.data[d].producer == kNoIndex && lists_.data[d].origin == DataOrigin::kProduced) {
      edges_known = false;  // its producer comes later, or never: freeze walks the tasks
    }
  }
  if (edges_known) make_room(data_edges_, inputs.size());
  if (spec) make_room(commands_, 1);
  make_room(lists_.input_refs, inputs.size());
  make_room(lists_.output_refs, outputs.size());
  make_room(lists_.edges, after.size());
  make_room(alike_previous_, 1);
  make_room(repeats_previous_, 1);
  make_room(lists_.tasks, 1);

  // The appends, which cannot fail now.
  for (DataIndex d : inputs) {
    DataDesc &data = lists_.data[d];
    if (edges_known && data.producer != kNoIndex) data_edges_.emplace_back(data.producer, t);
    lists_.input_refs.push_back(d);
    data.consumer_slots++;
  }
  for (DataIndex d : outputs) {
    lists_.output_refs.push_back(d);
    lists_.data[d].producer = t;
  }
  for (TaskIndex b : after) lists_.edges.emplace_back(t, b);
  if (spec) commands_.push_back(std::move(spec));
  if (task.names_kernel()) named_kernels_++;
  if (task.named()) named_tasks_++;
  if (edges_known) {
    edges_listed_ = t + 1;
  } else if (!data_edges_.empty()) {
    data_edges_.clear();
    data_edges_.shrink_to_fit();
  }
  if (bodies_known) {
    const bool cpu = desc.cpu_fn != nullptr, gpu = desc.gpu_fn != nullptr;
    bodies_by_request_[task.request] |= cpu && gpu ? kBothBodies
                                        : cpu      ? kCpuBodyOnly
                                        : gpu      ? kGpuBodyOnly
                                                   : 0;  // kernels and commands: resolved at submit
    bodies_listed_ = t + 1;
  }
  push_task(task);
}

void Graph::decode_references(const gf_task_desc &desc, const TaskLabel &label) {
  // Decode every reference before changing anything, so a failure leaves the graph untouched.
  auto bad_reference = [&](const char *kind, uint32_t i) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " " + kind + " #" + std::to_string(i) +
                                      " is not of this graph (null, or from another graph)");
  };
  // The scratch lists only grow: add_task reads as many entries as the task has.
  auto &inputs = scratch_inputs_;
  auto &outputs = scratch_outputs_;
  auto &after = scratch_after_;
  if (inputs.size() < desc.input_count) inputs.resize(desc.input_count);
  if (outputs.size() < desc.output_count) outputs.resize(desc.output_count);
  if (after.size() < desc.after_count) after.resize(desc.after_count);
  if (desc.input_count || desc.output_count) {
    // Each data object this task lists is stamped with the task's epoch, so "listed twice" is
    // one comparison per entry, whatever the counts (no pairwise search).
    const uint64_t epoch = ++mark_epoch_;
    if (data_mark_.size() < lists_.data.size()) data_mark_.resize(lists_.data.size(), 0);
    for (uint32_t i = 0; i < desc.input_count; ++i) {
      inputs[i] = find_data(desc.inputs[i]);
      if (inputs[i] == kNoIndex) bad_reference("input", i);
      data_mark_[inputs[i]] = epoch;
    }
    for (uint32_t i = 0; i < desc.output_count; ++i) {
      DataIndex d = find_data(desc.outputs[i]);
      if (d == kNoIndex) bad_reference("output", i);
      const DataDesc &data = lists_.data[d];
      if (data.origin != DataOrigin::kProduced) {
        fail(GF_ERR_INVALID_ARGUMENT,
             label() + " lists host input " + data_label(d) + " as output");
      }
      if (data.producer != kNoIndex) {
        fail(GF_ERR_INVALID_GRAPH, label() + " and " + task_label(data.producer) +
                                       " both produce " + data_label(d) +
                                       "; a data object has exactly one producer");
      }
      if (data_mark_[d] == epoch) {
        fail(GF_ERR_INVALID_GRAPH, label() + " lists " + data_label(d) + " twice among its data");
      }
      data_mark_[d] = epoch;
      outputs[i] = d;
    }
    // Declared outputs are charged to gpu_memory together when the task starts on a device.
    uint64_t output_bytes = 0;
    for (uint32_t i = 0; i < desc.output_count; ++i) {
      const DataIndex d = outputs[i];
      if (lists_.data[d].kind != DataKind::kBuffer) continue;
      output_bytes +=
          lists_.data[d].size;  // each at most kMaxBytes: no wrap before the check below
      if (!FixedPoint::bytes_representable(output_bytes)) {
        fail(GF_ERR_INVALID_ARGUMENT,
             label() + ": its output buffers declare more than " +
                 std::to_string(FixedPoint::kMaxBytes) +
                 " bytes in all (GF_MAX_DATA_SIZE), more than any worker could hold");
      }
    }
  }
  for (uint32_t i = 0; i < desc.after_count; ++i) {
    after[i] = find_task(desc.after[i]);
    if (after[i] == kNoIndex) bad_reference("after", i);
  }
}

void Graph::push_task(const TaskDesc &task) {
  const TaskDesc *previous = lists_.tasks.empty() ? nullptr : &lists_.tasks.back();
  const bool repeats = previous && cpu_root(*previous) && cpu_root(task) &&
                       previous->cost_key == task.cost_key && previous->priority == task.priority &&
                       previous->request == task.request;
  const bool alike = repeats && task.request == kEmptyRequest;
  alike_previous_.push_back(alike);
  try {
    repeats_previous_.push_back(repeats);
    try {
      lists_.tasks.push_back(task);
    } catch (...) {
      repeats_previous_.pop_back();
      throw;
    }
  } catch (...) {
    alike_previous_.pop_back();
    throw;
  }
  has_alike_tasks_ |= alike;
}

bool Graph::LastRequest::same_as(const gf_task_desc &desc) const {
  if (given.size() != desc.resource_count) return false;
  for (uint32_t i = 0; i < desc.resource_count; ++i) {
    const gf_resource &r = desc.resources[i];
    // (Amounts compared as given: a NaN never matches, and is refused by read_request.)
    if (!r.name || given[i].first != r.name || !(given[i].second == r.amount)) return false;
  }
  return true;
}

void Graph::LastRequest::remember(const gf_task_desc &desc, RequestId request) {
  std::vector<std::pair<std::string, double>> list;  // built aside: a throw leaves the last one
  list.reserve(desc.resource_count);
  for (uint32_t i = 0; i < desc.resource_count; ++i) {
    list.emplace_back(desc.resources[i].name, desc.resources[i].amount);
  }
  given.swap(list);
  id = request;
}

uint32_t Graph::add_text(std::string text) {
  texts_.push_back(std::move(text));
  return static_cast<uint32_t>(texts_.size() - 1);
}

}  // namespace gf
