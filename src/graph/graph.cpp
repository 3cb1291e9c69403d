#include "graph/graph.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/resource_names.hpp"
#include "core/utf8.hpp"
#include "graph/cost_key.hpp"
#include "graph/kernel_name.hpp"

namespace gf {
namespace {

// References carry their graph's serial in the upper bits, so a reference used with another graph
// is recognised. Bit 63 tells data from tasks.
constexpr uint64_t kDataBit = uint64_t{1} << 63;
constexpr uint64_t kSerialMask = (uint64_t{1} << 31) - 1;
std::atomic<uint64_t> next_graph_serial{1};

uint64_t encode(uint64_t serial, uint32_t index, bool is_data) {
  return (is_data ? kDataBit : 0) | ((serial & kSerialMask) << 32) | (uint64_t{index} + 1);
}

std::string optional_name(const char *name) {
  return name ? std::string(name) : std::string();
}

// Sizes must convert to gpu_memory (FixedPoint::from_bytes) without overflow.
void check_size(uint64_t size, const char *field, const char *name) {
  if (FixedPoint::bytes_representable(size)) return;
  fail(GF_ERR_INVALID_ARGUMENT, std::string(field) + " of data '" + optional_name(name) + "' is " +
                                    std::to_string(size) + " bytes; at most " +
                                    std::to_string(FixedPoint::kMaxBytes) +
                                    " (GF_MAX_DATA_SIZE) are allowed");
}

// Every string a graph keeps is UTF-8 (so the graph can be written as JSON): `what` names the
// owner and field, e.g. "task #3 name".
template <class What>
void require_utf8(std::string_view text, What &&what) {
  size_t at = utf8_error_at(text);
  if (at != std::string_view::npos) {
    fail(GF_ERR_INVALID_ARGUMENT, what() + " " + utf8_complaint(text, at));
  }
}

}  // namespace

Graph::Graph() : serial_(next_graph_serial.fetch_add(1) & kSerialMask) {}

Graph::~Graph() {
  for (auto &task : tasks_) {
    if (task.user_data_destroy) task.user_data_destroy(task.body.user_data);
  }
  for (auto &data : data_) {
    if (data.origin == DataOrigin::kHostValue && data.host_value_destroy) {
      data.host_value_destroy(data.host_value);
    }
  }
}

void Graph::place_commands(const std::string &dir, const std::string &log_dir) {
  auto under_dir = [&](std::string &path) {
    if (path.empty() || path[0] != '/') path = path.empty() ? dir : dir + "/" + path;
  };
  for (auto &spec : commands_) {
    under_dir(spec->working_dir);
    if (spec->log_dir.empty() && !log_dir.empty()) {
      spec->log_dir = log_dir;
    } else if (!spec->log_dir.empty()) {
      under_dir(spec->log_dir);
    }
  }
}

void Graph::require_mutable() const {
  if (frozen()) {
    fail(GF_ERR_STATE, "the graph was submitted and is frozen; build a new graph to add to it");
  }
}

std::string Graph::task_label(TaskIndex t) const {
  const auto &name = tasks_[t].name;
  const TaskIndex number = part_of_ ? part_of_->tasks[t] : t;  // as the caller numbers it
  return name.empty() ? "task #" + std::to_string(number) : "task '" + name + "'";
}

std::string Graph::data_label(DataIndex d) const {
  const auto &name = data_[d].name;
  const DataIndex number = part_of_ ? part_of_->data[d] : d;
  return name.empty() ? "data #" + std::to_string(number) : "data '" + name + "'";
}

TaskIndex Graph::find_task(gf_task task) const {
  uint64_t index = (task.id & 0xffffffffu);
  if ((task.id & kDataBit) || ((task.id >> 32) & kSerialMask) != serial_ || index == 0 ||
      index > tasks_.size()) {
    return kNoIndex;
  }
  return static_cast<TaskIndex>(index - 1);
}

DataIndex Graph::find_data(gf_data data) const {
  uint64_t index = (data.id & 0xffffffffu);
  if (!(data.id & kDataBit) || ((data.id >> 32) & kSerialMask) != serial_ || index == 0 ||
      index > data_.size()) {
    return kNoIndex;
  }
  return static_cast<DataIndex>(index - 1);
}

TaskIndex Graph::task_index(gf_task task, const char *what) const {
  TaskIndex t = find_task(task);
  if (t == kNoIndex) {
    fail(GF_ERR_INVALID_ARGUMENT,
         std::string(what) + " is not a task of this graph (null, or from another graph)");
  }
  return t;
}

DataIndex Graph::data_index(gf_data data, const char *what) const {
  DataIndex d = find_data(data);
  if (d == kNoIndex) {
    fail(GF_ERR_INVALID_ARGUMENT,
         std::string(what) + " is not a data object of this graph (null, or from another graph)");
  }
  return d;
}

gf_task Graph::task_ref(TaskIndex t) const {
  return gf_task{encode(serial_, t, false)};
}
gf_data Graph::data_ref(DataIndex d) const {
  return gf_data{encode(serial_, d, true)};
}

DataIndex Graph::new_data(const char *name, DataKind kind, DataOrigin origin, uint64_t size,
                          uint32_t flags) {
  require_mutable();
  if (data_.size() >= UINT32_MAX - 1) fail(GF_ERR_INVALID_ARGUMENT, "too many data objects");
  if (flags & ~uint32_t{GF_DATA_KEEP}) {
    fail(GF_ERR_INVALID_ARGUMENT, "unknown flags for data '" + optional_name(name) + "'");
  }
  DataDesc desc;
  desc.name = optional_name(name);
  require_utf8(desc.name, [&] { return "data #" + std::to_string(data_.size()) + " name"; });
  desc.kind = kind;
  desc.origin = origin;
  desc.size = size;
  desc.flags = flags;
  data_.push_back(std::move(desc));
  return static_cast<DataIndex>(data_.size() - 1);
}

gf_data Graph::add_buffer(const char *name, uint64_t size, uint32_t flags) {
  check_size(size, "gf_buffer_desc.size", name);
  return data_ref(new_data(name, DataKind::kBuffer, DataOrigin::kProduced, size, flags));
}

gf_data Graph::add_value(const char *name, uint64_t size_estimate, uint32_t flags) {
  check_size(size_estimate, "size_estimate", name);
  return data_ref(new_data(name, DataKind::kValue, DataOrigin::kProduced, size_estimate, flags));
}

gf_data Graph::add_host_buffer(const char *name, const void *bytes, uint64_t size, uint32_t flags,
                               LiteralForm form) {
  require_mutable();
  if (flags & ~uint32_t{GF_HOST_BUFFER_BORROW}) {
    fail(GF_ERR_INVALID_ARGUMENT, "unknown flags for host buffer '" + optional_name(name) + "'");
  }
  if (!bytes && size > 0) fail(GF_ERR_INVALID_ARGUMENT, "host buffer bytes is NULL");
  check_size(size, "size", name);
  const void *stored = bytes;
  if (!(flags & GF_HOST_BUFFER_BORROW) && size > 0) {
    auto copy = std::make_unique<unsigned char[]>(size);
    std::memcpy(copy.get(), bytes, size);
    stored = copy.get();
    owned_host_bytes_.push_back(std::move(copy));
  }
  DataIndex d = new_data(name, DataKind::kBuffer, DataOrigin::kHostBuffer, size, 0);
  data_[d].host_bytes = stored;
  data_[d].literal = form;
  return data_ref(d);
}

gf_data Graph::add_host_value(const char *name, void *value, gf_destroy_fn destroy, uint64_t size) {
  check_size(size, "size_estimate", name);
  DataIndex d = new_data(name, DataKind::kValue, DataOrigin::kHostValue, size, 0);
  data_[d].host_value = value;
  data_[d].host_value_destroy = destroy;
  return data_ref(d);
}

gf_task Graph::add_task(const gf_task_desc &desc) {
  require_mutable();
  if (tasks_.size() >= UINT32_MAX - 1) fail(GF_ERR_INVALID_ARGUMENT, "too many tasks");
  const auto t = static_cast<TaskIndex>(tasks_.size());
  TaskDesc task;
  task.name = optional_name(desc.name);
  require_utf8(task.name, [&] { return "task #" + std::to_string(t) + " name"; });
  auto label = [&] {
    return task.name.empty() ? "task #" + std::to_string(t) : "task '" + task.name + "'";
  };
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
  std::unique_ptr<CommandSpec> spec;
  if (command) {
    spec = std::make_unique<CommandSpec>(make_command_spec(*desc.command, label()));
    auto each = [&](const std::vector<std::string> &list, const char *field) {
      for (size_t i = 0; i < list.size(); ++i) {
        require_utf8(list[i], [&] {
          return label() + ": command " + field + "[" + std::to_string(i) + "]";
        });
      }
    };
    each(spec->argv, "argv");
    each(spec->env, "env");
    require_utf8(spec->working_dir, [&] { return label() + ": command working_dir"; });
    require_utf8(spec->log_dir, [&] { return label() + ": command log_dir"; });
  }
  if ((desc.input_count && !desc.inputs) || (desc.output_count && !desc.outputs) ||
      (desc.after_count && !desc.after) || (desc.resource_count && !desc.resources)) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " has a count without its array (NULL pointer)");
  }
  // Tasks index the graph's input and output lists with 32 bits.
  if (uint64_t{desc.input_count} + input_refs_.size() > UINT32_MAX ||
      uint64_t{desc.output_count} + output_refs_.size() > UINT32_MAX) {
    fail(GF_ERR_INVALID_ARGUMENT,
         label() + " would take the graph past 2^32 - 1 inputs or outputs in all");
  }

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
  std::vector<std::string_view> resource_names(desc.resource_count);
  for (uint32_t i = 0; i < desc.resource_count; ++i) resource_names[i] = desc.resources[i].name;
  std::sort(resource_names.begin(), resource_names.end());
  auto same = std::adjacent_find(resource_names.begin(), resource_names.end());
  if (same != resource_names.end()) {
    fail(GF_ERR_INVALID_ARGUMENT,
         label() + " names resource '" + std::string(*same) + "' twice; give each resource once");
  }

  // Decode every reference before changing anything, so a failure leaves the graph untouched.
  auto bad_reference = [&](const char *kind, uint32_t i) {
    fail(GF_ERR_INVALID_ARGUMENT, label() + " " + kind + " #" + std::to_string(i) +
                                      " is not of this graph (null, or from another graph)");
  };
  auto &inputs = scratch_inputs_;
  auto &outputs = scratch_outputs_;
  auto &after = scratch_after_;
  inputs.resize(desc.input_count);
  outputs.resize(desc.output_count);
  after.resize(desc.after_count);
  // Each data object this task lists is stamped with the task's epoch, so "listed twice" is one
  // comparison per entry, whatever the counts (no pairwise search).
  const uint64_t epoch = ++mark_epoch_;
  if (data_mark_.size() < data_.size()) data_mark_.resize(data_.size(), 0);
  for (uint32_t i = 0; i < desc.input_count; ++i) {
    inputs[i] = find_data(desc.inputs[i]);
    if (inputs[i] == kNoIndex) bad_reference("input", i);
    data_mark_[inputs[i]] = epoch;
  }
  for (uint32_t i = 0; i < desc.output_count; ++i) {
    DataIndex d = find_data(desc.outputs[i]);
    if (d == kNoIndex) bad_reference("output", i);
    const DataDesc &data = data_[d];
    if (data.origin != DataOrigin::kProduced) {
      fail(GF_ERR_INVALID_ARGUMENT, label() + " lists host input " + data_label(d) + " as output");
    }
    if (data.producer != kNoIndex) {
      fail(GF_ERR_INVALID_GRAPH, label() + " and " + task_label(data.producer) + " both produce " +
                                     data_label(d) + "; a data object has exactly one producer");
    }
    if (data_mark_[d] == epoch) {
      fail(GF_ERR_INVALID_GRAPH, label() + " lists " + data_label(d) + " twice among its data");
    }
    data_mark_[d] = epoch;
    outputs[i] = d;
  }
  // Declared outputs are charged to gpu_memory together when the task starts on a device.
  uint64_t output_bytes = 0;
  for (DataIndex d : outputs) {
    if (data_[d].kind != DataKind::kBuffer) continue;
    output_bytes += data_[d].size;  // each at most kMaxBytes: no wrap before the check below
    if (!FixedPoint::bytes_representable(output_bytes)) {
      fail(GF_ERR_INVALID_ARGUMENT,
           label() + ": its output buffers declare more than " +
               std::to_string(FixedPoint::kMaxBytes) +
               " bytes in all (GF_MAX_DATA_SIZE), more than any worker could hold");
    }
  }
  for (uint32_t i = 0; i < desc.after_count; ++i) {
    after[i] = find_task(desc.after[i]);
    if (after[i] == kNoIndex) bad_reference("after", i);
  }

  if (spec) {
    // A command that asks for a GPU runs on GPU workers only, any other on CPU workers only, so
    // the device it is given is always one it holds.
    bool wants_gpu = std::any_of(request.begin(), request.end(), [](const auto &entry) {
      return entry.first == resource_names::kGpu || entry.first == resource_names::kGpuMemory;
    });
    task.command_on_gpu = wants_gpu;
    task.command = static_cast<uint32_t>(commands_.size());
    commands_.push_back(std::move(spec));
  } else if (kernel) {
    task.kernel = desc.kernel;
    named_kernels_++;
  } else {
    task.body = TaskBody{desc.cpu_fn, desc.gpu_fn, desc.user_data};
  }
  // The cost key: given, else derived (gf_task_desc.cost_key).
  std::string_view key =
      desc.cost_key ? std::string_view(desc.cost_key) : cost_key_prefix(task.name);
  if (key.empty() && kernel) key = task.kernel;
  if (key.empty() && task.command != UINT32_MAX) key = commands_[task.command]->argv[0];
  task.cost_key = intern_cost_key(key, desc.cpu_fn ? desc.cpu_fn : desc.gpu_fn);
  task.explicit_cost_key = desc.cost_key != nullptr;
  task.user_data_destroy = desc.user_data_destroy;
  task.request = requests_.intern(std::move(request));
  task.priority = desc.priority;
  task.retries = desc.retries;
  task.inputs_begin = static_cast<uint32_t>(input_refs_.size());
  task.input_count = desc.input_count;
  task.outputs_begin = static_cast<uint32_t>(output_refs_.size());
  task.output_count = desc.output_count;
  const bool named = !task.name.empty();
  const bool bodies_known = bodies_listed_ == t;
  if (bodies_known && bodies_by_request_.size() <= task.request) {
    bodies_by_request_.resize(task.request + 1, 0);  // may throw: nothing is changed yet
  }
  bool edges_known = edges_listed_ == t;
  const size_t edges_before = data_edges_.size();
  try {
    for (DataIndex d : inputs) {
      const DataDesc &data = data_[d];
      if (data.producer != kNoIndex) {
        if (edges_known) data_edges_.emplace_back(data.producer, t);
      } else if (data.origin == DataOrigin::kProduced) {
        edges_known = false;  // its producer comes later, or never: freeze walks the tasks
      }
    }
  } catch (...) {  // out of memory listing them: the graph is left as it was
    data_edges_.resize(edges_before);
    throw;
  }
  for (DataIndex d : inputs) {
    input_refs_.push_back(d);
    data_[d].consumer_slots++;
  }
  for (DataIndex d : outputs) {
    output_refs_.push_back(d);
    data_[d].producer = t;
  }
  for (TaskIndex b : after) edges_.emplace_back(t, b);
  const RequestId task_request = task.request;
  push_task(std::move(task));
  if (edges_known) {
    edges_listed_ = tasks_.size();
  } else {
    data_edges_.clear();
    data_edges_.shrink_to_fit();
  }
  if (named) named_tasks_++;
  if (bodies_known) {
    const bool cpu = desc.cpu_fn != nullptr, gpu = desc.gpu_fn != nullptr;
    bodies_by_request_[task_request] |= cpu && gpu ? kBothBodies
                                        : cpu      ? kCpuBodyOnly
                                        : gpu      ? kGpuBodyOnly
                                                   : 0;  // kernels and commands: resolved at submit
    bodies_listed_ = tasks_.size();
  }
  return task_ref(t);
}

void Graph::push_task(TaskDesc &&task) {
  auto plain = [](const TaskDesc &d) {
    return d.input_count == 0 && d.request == kEmptyRequest && d.body.cpu_fn && !d.body.gpu_fn &&
           d.kernel.empty() && d.command == UINT32_MAX;
  };
  const bool alike = !tasks_.empty() && plain(tasks_.back()) && plain(task) &&
                     tasks_.back().cost_key == task.cost_key &&
                     tasks_.back().priority == task.priority;
  alike_previous_.push_back(alike);
  try {
    tasks_.push_back(std::move(task));
  } catch (...) {
    alike_previous_.pop_back();
    throw;
  }
  has_alike_tasks_ |= alike;
}

uint32_t Graph::intern_cost_key(std::string_view name, gf_task_fn fn) {
  // Consecutive tasks mostly share their key: check the previous task's first.
  if (!tasks_.empty()) {
    const uint32_t previous = tasks_.back().cost_key;
    const CostKey &last = cost_keys_[previous];
    if (name.empty() ? last.name.empty() && last.fn == fn : last.name == name) return previous;
  }
  const auto next = static_cast<uint32_t>(cost_keys_.size());
  uint32_t index;
  if (name.empty()) {
    index = cost_fn_index_.emplace(fn, next).first->second;
  } else {
    index = cost_key_index_.emplace(std::string(name), next).first->second;
  }
  if (index == next) cost_keys_.push_back(CostKey{std::string(name), name.empty() ? fn : nullptr});
  return index;
}

void Graph::reserve(size_t tasks, size_t data, size_t inputs, size_t outputs, size_t edges) {
  tasks_.reserve(tasks);
  data_.reserve(data);
  input_refs_.reserve(inputs);
  output_refs_.reserve(outputs);
  edges_.reserve(edges);
}

void Graph::set_metadata(const char *key, const char *value) {
  if (!key || !*key) fail(GF_ERR_INVALID_ARGUMENT, "metadata key is NULL or empty");
  require_utf8(key, [] { return std::string("metadata key"); });
  std::string v = optional_name(value);
  require_utf8(v, [&] { return "metadata value of key '" + std::string(key) + "'"; });
  auto [at, added] = metadata_index_.try_emplace(key, metadata_.size());
  if (!added) {
    metadata_[at->second].second = std::move(v);
    return;
  }
  try {
    metadata_.emplace_back(key, std::move(v));
  } catch (...) {
    metadata_index_.erase(at);
    throw;
  }
}

void Graph::add_dependency(gf_task task, gf_task before) {
  require_mutable();
  TaskIndex t = task_index(task, "task");
  TaskIndex b = task_index(before, "before");
  if (t == b) fail(GF_ERR_INVALID_GRAPH, task_label(t) + " cannot run after itself (cycle)");
  edges_.emplace_back(t, b);
  if (b > t) backward_edge_ = true;
}

}  // namespace gf
