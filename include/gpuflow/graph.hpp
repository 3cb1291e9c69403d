// gpuflow/graph.hpp — part of gpuflow.hpp (include that): Graph, the TaskBuilder that adds its
// tasks, and the Run a submit returns.
#ifndef GPUFLOW_GRAPH_HPP
#define GPUFLOW_GRAPH_HPP

#include "body.hpp"
#include "describe.hpp"
#include "pool.hpp"

namespace gpuflow {

class Run;
class TaskBuilder;

// ---------------------------------------------------------------------------------------------
// Graph: tasks and data objects, built on one thread, then submitted any number of times.
// Externally synchronized while it is built (as gf_graph_* are); submit and check may run on any
// thread once nothing modifies it. Destroying it leaves its runs running: they keep what they
// need, task bodies included.

class Graph {
 public:
  Graph() {
    gf_graph *raw = nullptr;
    detail::check(gf_graph_create(&raw));
    raw_.reset(raw);
  }
  static Graph adopt(gf_graph *raw) noexcept { return Graph(raw); }
  // Reads a graph document (binary or JSON); frozen unless flags has GF_DESERIALIZE_MUTABLE.
  static Graph deserialize(std::string_view bytes, gf_graph_format format = GF_GRAPH_FORMAT_AUTO,
                           uint32_t flags = 0) {
    gf_graph *raw = nullptr;
    detail::check(gf_graph_deserialize(&raw, bytes.data(), bytes.size(), format, flags));
    return Graph(raw);
  }
  gf_graph *get() const noexcept { return raw_.get(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  Data add_buffer(Buffer buffer) {
    Data d{0};
    detail::check(gf_graph_add_buffer(&d, get(), &buffer.desc()));
    return d;
  }
  // An opaque value slot a task fills with TaskContext::set_value.
  Data add_value(const std::string &name, uint64_t size_estimate = 0, uint32_t flags = 0) {
    Data d{0};
    detail::check(gf_graph_add_value(&d, get(), detail::c_str_or_null(name), size_estimate, flags));
    return d;
  }
  // A host input, copied now; with GF_HOST_BUFFER_BORROW the bytes must outlive every run.
  Data add_host_buffer(const std::string &name, std::span<const std::byte> bytes,
                       uint32_t flags = 0) {
    Data d{0};
    detail::check(gf_graph_add_host_buffer(&d, get(), detail::c_str_or_null(name), bytes.data(),
                                           bytes.size(), flags));
    return d;
  }
  template <class T>
  Data add_host_buffer(const std::string &name, std::span<const T> values, uint32_t flags = 0) {
    static_assert(std::is_trivially_copyable_v<T>, "host buffers hold plain data");
    return add_host_buffer(name, std::as_bytes(values), flags);
  }
  // An opaque host value; the graph owns it on success and calls destroy(value) at the end.
  Data add_host_value(const std::string &name, void *value, gf_destroy_fn destroy,
                      uint64_t size_estimate = 0) {
    Data d{0};
    detail::check(gf_graph_add_host_value(&d, get(), detail::c_str_or_null(name), value, destroy,
                                          size_estimate));
    return d;
  }

  // Starts describing a task of this graph; TaskBuilder::add() adds it. The builder refers to
  // this graph: finish it before moving or destroying the graph.
  TaskBuilder task(std::string name = {});

  void add_dependency(Task task, Task before) {
    detail::check(gf_graph_add_dependency(get(), task, before));
  }
  uint64_t task_count() const { return count(gf_graph_task_count); }
  uint64_t data_count() const { return count(gf_graph_data_count); }
  Task task_at(uint64_t index) const {
    Task t{0};
    detail::check(gf_graph_task_at(&t, get(), index));
    return t;
  }
  Data data_at(uint64_t index) const {
    Data d{0};
    detail::check(gf_graph_data_at(&d, get(), index));
    return d;
  }
  void set_metadata(const std::string &key, const std::string &value) {
    detail::check(gf_graph_set_metadata(get(), key.c_str(), value.c_str()));
  }
  std::vector<std::pair<std::string, std::string>> metadata() const {
    uint32_t n = 0;
    detail::check(gf_graph_metadata_count(&n, get()));
    std::vector<std::pair<std::string, std::string>> out;
    for (uint32_t i = 0; i < n; ++i) {
      const char *k = nullptr, *v = nullptr;
      detail::check(gf_graph_metadata_get(&k, &v, get(), i));
      out.emplace_back(detail::copy_or_empty(k), detail::copy_or_empty(v));
    }
    return out;
  }
  // The graph as a document (bytes of FlatBuffers, or JSON text). Only kernel and command
  // bodies can be written: a task with a C++ body is refused, naming it.
  std::string serialize(gf_graph_format format = GF_GRAPH_FORMAT_JSON) const {
    gf_bytes bytes{nullptr, 0};
    detail::check(gf_graph_serialize(&bytes, get(), format));
    return detail::take_bytes(bytes);
  }
  // Checks the graph against the pool as submit does, and freezes it, without running it.
  void check(Pool &pool) { detail::check(gf_graph_check(get(), pool.get())); }
  Run submit(Pool &pool, const SubmitOptions &options = {});

 private:
  friend class TaskBuilder;
  explicit Graph(gf_graph *raw) noexcept : raw_(raw) {}
  uint64_t count(gf_status (*fn)(uint64_t *, const gf_graph *)) const {
    uint64_t n = 0;
    detail::check(fn(&n, get()));
    return n;
  }
  detail::BodyArena *arena() {
    if (!arena_) arena_.reset(new detail::BodyArena);
    return arena_.get();
  }
  // Declared first so that it is released last, after gf_graph_destroy dropped our reference.
  std::unique_ptr<detail::BodyArena, detail::ArenaRelease> arena_;
  std::unique_ptr<gf_graph, detail::GraphDestroy> raw_;
};

// A task being described (gf_task_desc), bound to its graph. Exactly one kind of body: C++
// callables for CPU and/or GPU workers, C callbacks, a kernel name, or a command. Used on the
// graph's thread; add() may be called once.
class TaskBuilder {
 public:
  TaskBuilder(const TaskBuilder &) = delete;
  TaskBuilder &operator=(const TaskBuilder &) = delete;
  TaskBuilder(TaskBuilder &&) noexcept = default;
  TaskBuilder &operator=(TaskBuilder &&) noexcept = default;

  // The body for CPU workers: any callable `void(gpuflow::TaskContext&)`, called through a const
  // reference, possibly on several threads at once (runs of one graph overlap).
  template <class F>
  TaskBuilder &cpu(F &&body) {
    cpu_ = detail::make_body(graph_->arena(), std::forward<F>(body));
    return *this;
  }
  // The body for GPU workers (device pointers; TaskContext::env().stream on CUDA).
  template <class F>
  TaskBuilder &gpu(F &&body) {
    gpu_ = detail::make_body(graph_->arena(), std::forward<F>(body));
    return *this;
  }
  // C callbacks and their user data, as gf_task_desc takes them; destroy owns user_data once
  // add() succeeds.
  TaskBuilder &c_bodies(gf_task_fn cpu_fn, gf_task_fn gpu_fn, void *user_data,
                        gf_destroy_fn destroy = nullptr) {
    c_.cpu_fn = cpu_fn, c_.gpu_fn = gpu_fn, c_.user_data = user_data;
    c_.user_data_destroy = destroy;
    return *this;
  }
  TaskBuilder &kernel(std::string name) { return kernel_ = std::move(name), *this; }
  TaskBuilder &command(Command command) { return command_ = std::move(command), *this; }

  TaskBuilder &resource(std::string name, double amount) {
    return resources_.push_back({std::move(name), amount}), *this;
  }
  TaskBuilder &resources(std::initializer_list<Resource> list) {
    return resources_.insert(resources_.end(), list), *this;
  }
  TaskBuilder &inputs(std::initializer_list<Data> list) {
    return inputs_.insert(inputs_.end(), list), *this;
  }
  TaskBuilder &inputs(std::span<const Data> list) {
    return inputs_.insert(inputs_.end(), list.begin(), list.end()), *this;
  }
  TaskBuilder &outputs(std::initializer_list<Data> list) {
    return outputs_.insert(outputs_.end(), list), *this;
  }
  TaskBuilder &outputs(std::span<const Data> list) {
    return outputs_.insert(outputs_.end(), list.begin(), list.end()), *this;
  }
  TaskBuilder &after(std::initializer_list<Task> list) {
    return after_.insert(after_.end(), list), *this;
  }
  TaskBuilder &priority(int32_t v) { return c_.priority = v, *this; }
  TaskBuilder &retries(uint32_t v) { return c_.retries = v, *this; }
  TaskBuilder &cost_key(std::string key) { return cost_key_ = std::move(key), *this; }

  // The descriptor as gf_graph_add_task will see it, body fields aside (add() fills those).
  const gf_task_desc &desc() {
    c_.name = detail::c_str_or_null(name_);
    c_resources_.clear();
    for (const Resource &r : resources_) c_resources_.push_back({r.name.c_str(), r.amount});
    c_.resources = c_resources_.empty() ? nullptr : c_resources_.data();
    c_.resource_count = static_cast<uint32_t>(c_resources_.size());
    c_.inputs = inputs_.empty() ? nullptr : inputs_.data();
    c_.input_count = static_cast<uint32_t>(inputs_.size());
    c_.outputs = outputs_.empty() ? nullptr : outputs_.data();
    c_.output_count = static_cast<uint32_t>(outputs_.size());
    c_.after = after_.empty() ? nullptr : after_.data();
    c_.after_count = static_cast<uint32_t>(after_.size());
    c_.kernel = detail::c_str_or_null(kernel_);
    c_.command = command_ ? &command_->desc() : nullptr;
    c_.cost_key = detail::c_str_or_null(cost_key_);
    return c_;
  }

  // Adds the task. On success its bodies belong to the graph (and its runs); on failure they are
  // destroyed with the builder and nothing was added.
  Task add() {
    if (added_) throw Error(GF_ERR_STATE, "this TaskBuilder has already added its task");
    const bool cpp_bodies =
        cpu_.kind != detail::Body::Kind::kNone || gpu_.kind != detail::Body::Kind::kNone;
    if (cpp_bodies && (c_.cpu_fn || c_.gpu_fn)) {
      throw Error(GF_ERR_INVALID_ARGUMENT,
                  "task '" + name_ + "' has both C++ bodies and C callbacks");
    }
    gf_task_desc d = desc();
    // Two bodies that both need the user_data share it through a pair, stored in the arena.
    detail::BodyBinding binding(
        cpu_, gpu_, cpu_.needs_user_data() && gpu_.needs_user_data() ? graph_->arena() : nullptr);
    if (cpp_bodies) {
      d.cpu_fn = binding.cpu_fn;
      d.gpu_fn = binding.gpu_fn;
      d.user_data = binding.user_data;
      d.user_data_destroy = binding.destroy;
    }
    Task t{0};
    detail::check(gf_graph_add_task(&t, graph_->get(), &d));
    binding.commit();
    added_ = true;
    return t;
  }

 private:
  friend class Graph;
  TaskBuilder(Graph &graph, std::string name) : graph_(&graph), name_(std::move(name)) {
    gf_task_desc_init(&c_, sizeof c_);
  }
  Graph *graph_;
  std::string name_, kernel_, cost_key_;
  std::optional<Command> command_;
  std::vector<Resource> resources_;
  std::vector<gf_resource> c_resources_;
  std::vector<Data> inputs_, outputs_;
  std::vector<Task> after_;
  gf_task_desc c_;
  detail::Body cpu_, gpu_;
  bool added_ = false;
};

inline TaskBuilder Graph::task(std::string name) {
  return TaskBuilder(*this, std::move(name));
}

// ---------------------------------------------------------------------------------------------
// Run: one execution of a graph on a pool, a future. Thread-safe, except destruction and
// assignment. Destroying a run that is still running cancels it.

class Run {
 public:
  Run() noexcept = default;  // empty
  static Run adopt(gf_run *raw) noexcept {
    Run run;
    run.raw_.reset(raw);
    return run;
  }
  gf_run *get() const noexcept { return raw_.get(); }
  gf_run *release_handle() noexcept { return raw_.release(); }
  explicit operator bool() const noexcept { return raw_ != nullptr; }

  // Waits until the run finishes; throws GF_ERR_TASK_FAILED (naming the first failed task and
  // its error) or GF_ERR_CANCELLED.
  void wait() const { detail::check(gf_run_wait(get(), -1)); }
  // Waits at most `timeout`: false when still running; throws as wait() does.
  bool wait_for(std::chrono::milliseconds timeout) const {
    return detail::check_timeout(gf_run_wait(get(), detail::to_ms(timeout)));
  }
  // gf_run_wait without exceptions: GF_OK, GF_TIMEOUT or the error (message: gf_last_error()).
  gf_status status(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const noexcept {
    return gf_run_wait(get(), detail::to_ms(timeout));
  }
  gf_run_state state() const {
    gf_run_state s = GF_RUN_RUNNING;
    detail::check(gf_run_state_get(&s, get()));
    return s;
  }
  void cancel() const { detail::check(gf_run_cancel(get())); }
  // Readable once the run finished; owned by the run.
  int fd() const {
    int fd = -1;
    detail::check(gf_run_fd(&fd, get()));
    return fd;
  }
  gf_run_where where() const {
    gf_run_where w = GF_RUN_ANYWHERE;
    detail::check(gf_run_where_get(&w, get()));
    return w;
  }
  gf_run_stats stats() const {
    gf_run_stats s = GF_RUN_STATS_INIT;
    detail::check(gf_run_stats_get(&s, get()));
    return s;
  }

  gf_task_state task_state(Task task) const {
    gf_task_state s = GF_TASK_WAITING;
    detail::check(gf_run_task_state(&s, get(), task));
    return s;
  }
  std::string task_error(Task task) const {
    const char *s = nullptr;
    detail::check(gf_run_task_error(&s, get(), task));
    return detail::copy_or_empty(s);
  }
  uint32_t task_attempts(Task task) const {
    uint32_t n = 0;
    detail::check(gf_run_task_attempts(&n, get(), task));
    return n;
  }
  uint32_t task_worker(Task task) const {
    uint32_t w = 0;
    detail::check(gf_run_task_worker(&w, get(), task));
    return w;
  }

  // The size of a kept buffer (or host input) once produced.
  uint64_t size_of(Data data) const {
    uint64_t size = 0;
    detail::check(gf_run_fetch(&size, get(), data, nullptr, 0));
    return size;
  }
  // Copies the buffer into dst (at least its size); returns the size.
  uint64_t fetch(Data data, std::span<std::byte> dst) const {
    uint64_t size = 0;
    detail::check(gf_run_fetch(&size, get(), data, dst.data(), dst.size()));
    return size;
  }
  // The buffer as elements of T; throws GF_ERR_INVALID_ARGUMENT when its size is no multiple.
  template <class T = std::byte>
  std::vector<T> fetch(Data data) const {
    static_assert(std::is_trivially_copyable_v<T>, "buffers are read as plain data");
    const uint64_t size = size_of(data);
    if (size % sizeof(T) != 0) {
      throw Error(GF_ERR_INVALID_ARGUMENT, "buffer of " + std::to_string(size) +
                                               " bytes is no array of " +
                                               std::to_string(sizeof(T)) + "-byte elements");
    }
    std::vector<T> out(static_cast<size_t>(size / sizeof(T)));
    fetch(data, std::as_writable_bytes(std::span<T>(out)));
    return out;
  }
  // A buffer holding exactly one T.
  template <class T>
  T fetch_one(Data data) const {
    static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>);
    T value{};
    const uint64_t size = fetch(data, std::as_writable_bytes(std::span<T, 1>(&value, 1)));
    if (size != sizeof(T)) {
      throw Error(GF_ERR_INVALID_ARGUMENT, "buffer of " + std::to_string(size) +
                                               " bytes is not one " + std::to_string(sizeof(T)) +
                                               "-byte value");
    }
    return value;
  }
  // An opaque value, borrowed until the run is destroyed.
  void *value(Data data) const {
    void *v = nullptr;
    detail::check(gf_run_value(&v, get(), data));
    return v;
  }

 private:
  std::unique_ptr<gf_run, detail::RunDestroy> raw_;
};

inline Run Graph::submit(Pool &pool, const SubmitOptions &options) {
  gf_submit_options o = GF_SUBMIT_OPTIONS_INIT;
  o.where = options.where;
  o.on_complete = options.on_complete;
  o.user_data = options.user_data;
  gf_run *raw = nullptr;
  detail::check(gf_graph_submit(&raw, pool.get(), get(), &o));
  return Run::adopt(raw);
}

}  // namespace gpuflow

#endif  // GPUFLOW_GRAPH_HPP
