// A task graph as the caller describes it: tasks, data objects, resource requests and edges.
// Mutable while it is built; frozen (immutable, analysed) by its first successful submit, after
// which runs share it read-only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/fixed_point.hpp"
#include "core/large_array.hpp"
#include "gpuflow.h"
#include "graph/command_spec.hpp"
#include "graph/resource_request.hpp"
#include "graph/task_body.hpp"

namespace gf {

using TaskIndex = uint32_t;
using DataIndex = uint32_t;
inline constexpr uint32_t kNoIndex = UINT32_MAX;

enum class DataKind : uint8_t { kBuffer, kValue };
enum class DataOrigin : uint8_t { kProduced, kHostBuffer, kHostValue };
// How a host buffer's bytes were given: as text or as bytes (a document says which), or through
// the ABI, which does not (the writer then picks text for bytes that read as text).
enum class LiteralForm : uint8_t { kUnknown, kBytes, kText };

struct DataDesc {
  std::string name;
  DataKind kind = DataKind::kBuffer;
  DataOrigin origin = DataOrigin::kProduced;
  LiteralForm literal = LiteralForm::kUnknown;  // kHostBuffer
  uint32_t flags = 0;
  uint64_t size = 0;  // declared bytes (0: set by the producer), or a value's size estimate
  TaskIndex producer = kNoIndex;
  uint32_t consumer_slots = 0;       // how many task input slots read it
  const void *host_bytes = nullptr;  // kHostBuffer
  void *host_value = nullptr;        // kHostValue
  gf_destroy_fn host_value_destroy = nullptr;
};

struct TaskDesc {
  // Read for every task as it is placed, dispatched and completed: together at the front, so
  // that walking a large graph's tasks reads two cache lines of each, not three or four.
  TaskBody body;  // empty when `kernel` or `command` names the body
  RequestId request = kEmptyRequest;
  int32_t priority = 0;
  uint32_t inputs_begin = 0;  // into Graph::input_refs
  uint32_t input_count = 0;
  uint32_t outputs_begin = 0;  // into Graph::output_refs
  uint32_t output_count = 0;
  uint32_t cost_key = 0;  // into Graph::cost_keys
  uint32_t retries = 0;
  uint32_t command = UINT32_MAX;   // into Graph::commands when the body is an external command
  bool command_on_gpu = false;     // a command asking for a GPU runs on GPU workers, else on CPUs
  bool explicit_cost_key = false;  // given by the caller (written to documents), not derived
  // Read when a task is named in a message, written out, resolved at submit or destroyed. Its
  // name and kernel live in the graph's texts (Graph::task_name, Graph::kernel_name), so that a
  // description is plain bytes, cheap to append and to move as the list grows.
  uint32_t name_text = kNoIndex;
  uint32_t kernel_text = kNoIndex;  // resolved against the pool's kernels at submit
  gf_destroy_fn user_data_destroy = nullptr;
  bool named() const { return name_text != kNoIndex; }
  bool names_kernel() const { return kernel_text != kNoIndex; }
};

// What a task's duration estimate is learnt under (gf_task_desc.cost_key): a name, or for an
// unnamed task with C callbacks and no key, its body function.
struct CostKey {
  std::string name;         // empty for a body-function key
  gf_task_fn fn = nullptr;  // the body function, when name is empty
};

// What submit derives once from a valid graph: the dependency structure in compressed form and
// the order in which ready tasks should run.
struct GraphAnalysis {
  std::vector<uint32_t> successor_begin;  // tasks + 1 offsets into successors
  std::vector<TaskIndex> successors;      // one entry per edge (duplicates kept, consistently)
  std::vector<uint32_t> predecessor_count;
  std::vector<uint32_t> order;   // rank per task: depth-first, finishes branches before new ones
  std::vector<TaskIndex> roots;  // tasks without predecessors, in rank order
};

struct TaskLabel;

class Graph {
 public:
  // What a graph appends to for each task and data object.
  struct Lists {
    std::vector<TaskDesc, LargeArrayAllocator<TaskDesc>> tasks;
    std::vector<DataDesc, LargeArrayAllocator<DataDesc>> data;
    std::vector<DataIndex> input_refs, output_refs;
    std::vector<std::pair<TaskIndex, TaskIndex>> edges;
    void clear();
    void swap(Lists &other) noexcept;
    size_t capacity_bytes() const;
  };

  Graph();
  ~Graph();
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  gf_data add_buffer(const char *name, uint64_t size, uint32_t flags);
  gf_data add_value(const char *name, uint64_t size_estimate, uint32_t flags);
  gf_data add_host_buffer(const char *name, const void *bytes, uint64_t size, uint32_t flags,
                          LiteralForm form = LiteralForm::kUnknown);
  gf_data add_host_value(const char *name, void *value, gf_destroy_fn destroy, uint64_t size);
  gf_task add_task(const gf_task_desc &desc);
  void add_dependency(gf_task task, gf_task before);
  // Capacity for what a reader knows is coming (deserialization): avoids regrowing big graphs.
  void reserve(size_t tasks, size_t data, size_t inputs, size_t outputs, size_t edges);

  // Some of this graph's tasks as a graph of their own, for running a graph in parts
  // (pool/split_run.hpp). The tasks keep their bodies (C callbacks shared: the part never
  // destroys their user_data), requests, priorities, retries, cost keys and the edges among them.
  // Data they read that no task of the part produces becomes a host input: the original's host
  // inputs as they are, other data with the bytes `moved(d)` gives (borrowed: they must outlive
  // the part). Data the part produces is kept where `keep(d)` says so.
  struct Part {
    std::shared_ptr<Graph> graph;
    std::vector<TaskIndex> tasks;  // the part's task i is this graph's tasks[i]
    std::vector<DataIndex> data;   // the part's data j is this graph's data[j]
  };
  Part part(const std::vector<TaskIndex> &tasks,
            const std::function<std::pair<const void *, uint64_t>(DataIndex)> &moved,
            const std::function<bool(DataIndex)> &keep) const;

  // Validates and analyses the graph (once); throws gf::Error naming the culprit.
  const GraphAnalysis &freeze();
  bool frozen() const { return analysis_ != nullptr; }
  bool has_named_kernels() const { return named_kernels_ > 0; }
  // Which kinds of C callback body the tasks of each request have, as bits (kCpuBodyOnly,
  // kGpuBodyOnly, kBothBodies) by RequestId; empty unless add_task recorded every task (a part
  // of another graph does not). Lets submit check that every task can run somewhere without
  // walking every task.
  static constexpr uint8_t kCpuBodyOnly = 1, kGpuBodyOnly = 2, kBothBodies = 4;
  const std::vector<uint8_t> *bodies_by_request() const {
    return bodies_listed_ == lists_.tasks.size() ? &bodies_by_request_ : nullptr;
  }
  bool has_commands() const { return !commands_.empty(); }
  // Commands start in `dir`, or relative to it, and log to `log_dir` (when not empty) unless they
  // name their own log directory (relative to `dir`): a graph the service runs for a client
  // starts them where the client would. `dir` is absolute. Before any run of the graph is
  // prepared (a frozen graph may still be changed here: commands are no part of its analysis).
  void place_commands(const std::string &dir, const std::string &log_dir);

  // A command task's description (serialization, and binding it to the executor at submit).
  const CommandSpec *command(const TaskDesc &t) const {
    return t.command == UINT32_MAX ? nullptr : commands_[t.command].get();
  }
  const std::vector<std::pair<TaskIndex, TaskIndex>> &edges() const { return lists_.edges; }
  using Metadata = std::vector<std::pair<std::string, std::string>>;
  const Metadata &metadata() const { return metadata_; }
  void set_metadata(const char *key, const char *value);
  // The graph's distinct cost keys, indexed by TaskDesc::cost_key.
  const std::vector<CostKey> &cost_keys() const { return cost_keys_; }

  uint64_t serial() const { return serial_; }
  size_t task_count() const { return lists_.tasks.size(); }
  size_t data_count() const { return lists_.data.size(); }
  const TaskDesc &task(TaskIndex t) const { return lists_.tasks[t]; }
  // A task's name ("" when unnamed) and the kernel it names ("" when none).
  const std::string &task_name(const TaskDesc &t) const { return text(t.name_text); }
  const std::string &kernel_name(const TaskDesc &t) const { return text(t.kernel_text); }
  // Whether task t and the task added just before it are alike and plain: no inputs, no resource
  // request, a CPU function as their only body, the same cost key and priority. Recorded as
  // tasks are added, so that queueing a wide graph's roots (Scheduler::start) need not read each
  // one's description.
  bool alike_previous(TaskIndex t) const { return alike_previous_[t]; }
  // alike_previous, requests allowed: both tasks have no inputs and a CPU function as their only
  // body, and the same cost key, priority and request (empty or not). Queueing such roots
  // together lets the first's charge of the request cover the rest in a batch.
  bool repeats_previous(TaskIndex t) const { return repeats_previous_[t]; }
  // Whether any task is alike the one before it: the scheduler's folds of alike tasks look no
  // further in a graph without any (one of GPU or mixed bodies, of inputs everywhere).
  bool has_alike_tasks() const { return has_alike_tasks_; }
  const DataDesc &data(DataIndex d) const { return lists_.data[d]; }
  const DataIndex *inputs(const TaskDesc &t) const {
    return lists_.input_refs.data() + t.inputs_begin;
  }
  const DataIndex *outputs(const TaskDesc &t) const {
    return lists_.output_refs.data() + t.outputs_begin;
  }
  const RequestTable &requests() const { return requests_; }
  const GraphAnalysis &analysis() const { return *analysis_; }

  // Human-readable names for messages: the given name, else "task #N" / "data #N".
  std::string task_label(TaskIndex t) const;
  std::string data_label(DataIndex d) const;

  // Decoding of public references; throw GF_ERR_INVALID_ARGUMENT naming `what` when the
  // reference is null, of another graph, or out of range.
  TaskIndex task_index(gf_task task, const char *what) const;
  DataIndex data_index(gf_data data, const char *what) const;
  // kNoIndex when the reference is not one of this graph's.
  TaskIndex find_task(gf_task task) const;
  DataIndex find_data(gf_data data) const;
  gf_task task_ref(TaskIndex t) const;
  gf_data data_ref(DataIndex d) const;

 private:
  void require_mutable() const;
  DataIndex new_data(const char *name, DataKind kind, DataOrigin origin, uint64_t size,
                     uint32_t flags);
  uint32_t intern_cost_key(std::string_view name, gf_task_fn fn);
  // Appends a task's description, noting whether it is alike the one before (alike_previous).
  void push_task(const TaskDesc &task);
  // add_task's parts (graph/add_task.cpp): a task with C callbacks alone, any other, their
  // checks, and appending a task described (the last step of both, which cannot fail halfway).
  gf_task add_plain_task(const gf_task_desc &desc);
  gf_task add_described_task(const gf_task_desc &desc);
  void check_list_sizes(const gf_task_desc &desc, const TaskLabel &label) const;
  // Reads the task's inputs, outputs and `after` tasks into the scratch lists below, checked.
  void decode_references(const gf_task_desc &desc, const TaskLabel &label);
  void append_task(TaskDesc &task, const gf_task_desc &desc, std::unique_ptr<CommandSpec> spec);

  const std::string &text(uint32_t index) const {
    static const std::string none;
    return index == kNoIndex ? none : texts_[index];
  }
  uint32_t add_text(std::string text);

  uint64_t serial_;
  std::vector<std::string> texts_;  // tasks' names and kernels (TaskDesc::name_text, kernel_text)
  // The lists every graph grows by the task and data object (graph/spare_lists.hpp), moved
  // together. Large graphs' descriptions are on huge pages (core/large_array.hpp): freeze and
  // the scheduler read them scattered.
  Lists lists_;                         // edges: (task, before)
  std::vector<bool> alike_previous_;    // by task
  std::vector<bool> repeats_previous_;  // by task
  bool has_alike_tasks_ = false;        // whether any of those bits is set
  // What freeze would otherwise find by walking every task's description, a cache miss each,
  // while add_task has the same facts at hand: the data edges (producer, consumer) in task
  // order, while every task added so far read only data whose producer it already knew
  // (edges_listed_ == lists_.tasks.size()); the number of named tasks; and whether an edge
  // points from a later task to an earlier one, the only way a cycle can form. Freeze falls back to
  // its walk when the list is not complete (parts, consumers added before their producers) and
  // drops the list once it is used.
  using EdgeList =  // its own memory when large: given back whole once freeze is done with it
      std::vector<std::pair<TaskIndex, TaskIndex>,
                  LargeArrayAllocator<std::pair<TaskIndex, TaskIndex>>>;
  EdgeList data_edges_;
  size_t edges_listed_ = 0;
  std::vector<uint8_t> bodies_by_request_;
  size_t bodies_listed_ = 0;
  size_t named_tasks_ = 0;
  bool backward_edge_ = false;
  std::vector<std::unique_ptr<unsigned char[]>> owned_host_bytes_;
  RequestTable requests_;
  size_t named_kernels_ = 0;
  std::vector<std::unique_ptr<CommandSpec>> commands_;
  Metadata metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;  // key -> position in metadata_
  std::vector<CostKey> cost_keys_;
  std::unordered_map<std::string, uint32_t> cost_key_index_;
  std::unordered_map<gf_task_fn, uint32_t> cost_fn_index_;
  std::mutex freeze_mu_;  // freeze() is taken once, whichever submit gets there first
  std::unique_ptr<GraphAnalysis> analysis_;
  // A part of another graph (part()): its tasks and data are labelled by their numbers there, so
  // messages name what the caller built.
  struct PartOf {
    std::vector<TaskIndex> tasks;
    std::vector<DataIndex> data;
  };
  std::unique_ptr<PartOf> part_of_;
  // Scratch space for add_task, kept to avoid allocations per task.
  std::vector<DataIndex> scratch_inputs_, scratch_outputs_;
  std::vector<TaskIndex> scratch_after_;
  // The resources the last task that gave some listed, as given, and the request they made.
  struct LastRequest {
    std::vector<std::pair<std::string, double>> given;
    RequestId id = kEmptyRequest;
    bool same_as(const gf_task_desc &desc) const;
    void remember(const gf_task_desc &desc, RequestId request);
  };
  LastRequest last_request_;
  // add_task's duplicate check: data_mark_[d] == mark_epoch_ when the task being added lists d.
  std::vector<uint64_t> data_mark_;
  uint64_t mark_epoch_ = 0;
};

}  // namespace gf
