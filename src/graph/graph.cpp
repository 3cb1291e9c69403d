#include "graph/graph.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/resource_names.hpp"
#include "graph/cost_key.hpp"
#include "graph/kernel_name.hpp"
#include "graph/spare_lists.hpp"
#include "graph/text_checks.hpp"

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

}  // namespace

Graph::Graph() : serial_(next_graph_serial.fetch_add(1) & kSerialMask) {
  SpareGraphLists::instance().take(lists_);
}

Graph::~Graph() {
  for (auto &task : lists_.tasks) {
    if (task.user_data_destroy) task.user_data_destroy(task.body.user_data);
  }
  for (auto &data : lists_.data) {
    if (data.origin == DataOrigin::kHostValue && data.host_value_destroy) {
      data.host_value_destroy(data.host_value);
    }
  }
  SpareGraphLists::instance().give_back(lists_);
}

void Graph::Lists::clear() {
  tasks.clear();
  data.clear();
  input_refs.clear();
  output_refs.clear();
  edges.clear();
}

void Graph::Lists::swap(Lists &other) noexcept {
  tasks.swap(other.tasks);
  data.swap(other.data);
  input_refs.swap(other.input_refs);
  output_refs.swap(other.output_refs);
  edges.swap(other.edges);
}

size_t Graph::Lists::capacity_bytes() const {
  return tasks.capacity() * sizeof(TaskDesc) + data.capacity() * sizeof(DataDesc) +
         (input_refs.capacity() + output_refs.capacity()) * sizeof(DataIndex) +
         edges.capacity() * sizeof(edges[0]);
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
  const std::string &name = task_name(lists_.tasks[t]);
  const TaskIndex number = part_of_ ? part_of_->tasks[t] : t;  // as the caller numbers it
  return name.empty() ? "task #" + std::to_string(number) : "task '" + name + "'";
}

std::string Graph::data_label(DataIndex d) const {
  const auto &name = lists_.data[d].name;
  const DataIndex number = part_of_ ? part_of_->data[d] : d;
  return name.empty() ? "data #" + std::to_string(number) : "data '" + name + "'";
}

TaskIndex Graph::find_task(gf_task task) const {
  uint64_t index = (task.id & 0xffffffffu);
  if ((task.id & kDataBit) || ((task.id >> 32) & kSerialMask) != serial_ || index == 0 ||
      index > lists_.tasks.size()) {
    return kNoIndex;
  }
  return static_cast<TaskIndex>(index - 1);
}

DataIndex Graph::find_data(gf_data data) const {
  uint64_t index = (data.id & 0xffffffffu);
  if (!(data.id & kDataBit) || ((data.id >> 32) & kSerialMask) != serial_ || index == 0 ||
      index > lists_.data.size()) {
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
  if (lists_.data.size() >= UINT32_MAX - 1) fail(GF_ERR_INVALID_ARGUMENT, "too many data objects");
  if (flags & ~uint32_t{GF_DATA_KEEP}) {
    fail(GF_ERR_INVALID_ARGUMENT, "unknown flags for data '" + optional_name(name) + "'");
  }
  DataDesc desc;
  desc.name = optional_name(name);
  require_utf8(desc.name, [&] { return "data #" + std::to_string(lists_.data.size()) + " name"; });
  desc.kind = kind;
  desc.origin = origin;
  desc.size = size;
  desc.flags = flags;
  lists_.data.push_back(std::move(desc));
  return static_cast<DataIndex>(lists_.data.size() - 1);
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
  lists_.data[d].host_bytes = stored;
  lists_.data[d].literal = form;
  return data_ref(d);
}

gf_data Graph::add_host_value(const char *name, void *value, gf_destroy_fn destroy, uint64_t size) {
  check_size(size, "size_estimate", name);
  DataIndex d = new_data(name, DataKind::kValue, DataOrigin::kHostValue, size, 0);
  lists_.data[d].host_value = value;
  lists_.data[d].host_value_destroy = destroy;
  return data_ref(d);
}

uint32_t Graph::intern_cost_key(std::string_view name, gf_task_fn fn) {
  // Consecutive tasks mostly share their key: check the previous task's first.
  if (!lists_.tasks.empty()) {
    const uint32_t previous = lists_.tasks.back().cost_key;
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
  lists_.tasks.reserve(tasks);
  lists_.data.reserve(data);
  lists_.input_refs.reserve(inputs);
  lists_.output_refs.reserve(outputs);
  lists_.edges.reserve(edges);
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
  lists_.edges.emplace_back(t, b);
  if (b > t) backward_edge_ = true;
}

}  // namespace gf
