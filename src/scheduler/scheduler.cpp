// Submission, feasibility and placement of ready tasks.
#include "scheduler/scheduler.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.hpp"
#include "core/resource_names.hpp"
#include "scheduler/placement.hpp"
#include "scheduler/run_setup.hpp"

namespace gf {

Scheduler::Scheduler(DeviceBackend &backend, ResourceRegistry registry,
                     std::vector<std::unique_ptr<WorkerState>> workers, ResourceId gpu_memory,
                     double spill_threshold)
    : backend_(backend),
      registry_(std::move(registry)),
      workers_(std::move(workers)),
      gpu_memory_(gpu_memory),
      notifier_(workers_.size()),
      memory_(backend, workers_, notifier_, spill_threshold, *this) {
  uint32_t cpu_threads = 0;
  for (auto &w : workers_) {
    if (w->kind == GF_WORKER_CPU) cpu_threads += w->threads;
    if (w->space != kHostSpace) w->memory.bind(&w->ledger, gpu_memory_);
  }
  // A pause for every two CPU threads that may be trying at once: 2 threads try again after
  // every pause (measured best there), 16 space their tries by up to 8 (docs/benchmarks.md).
  lock_pauses_ = static_cast<int>(std::clamp<uint32_t>(cpu_threads / 2, 1, kMostLockPauses));
  batch_budget_s_ = batch_budget_for(cpu_threads);
}

double Scheduler::batch_budget_for(uint32_t cpu_threads) {
  // Each taking of the mutex costs its taker the lines the last holder wrote, the more so the
  // more threads take turns: on 16 cores, 1 us tree tasks in batches of 20 us held it 232 ns per
  // task, in batches of 64 tasks 186 ns, half as often (docs/benchmarks.md). Up to 4 threads keep
  // the budget measured best on 2; every 4 more add as much again, up to 4 times.
  constexpr double kBatchBudget = 20e-6;
  return kBatchBudget * std::clamp<uint32_t>(cpu_threads / 4, 1, 4);
}

Scheduler::~Scheduler() = default;

std::vector<ResolvedRequest> Scheduler::resolve_requests(const Graph &graph) {
  const RequestTable &table = graph.requests();
  std::vector<ResolvedRequest> resolved(table.size());
  for (RequestId id = 0; id < table.size(); ++id) {
    ResolvedRequest &r = resolved[id];
    bool known = true;
    for (const auto &[name, amount] : table.get(id)) {
      ResourceId rid = registry_.find(name);
      if (rid == UINT32_MAX) {
        known = false;
        break;
      }
      r.request.emplace_back(rid, amount);
      if (rid == gpu_memory_) r.gpu_memory = amount;
    }
    std::sort(r.request.begin(), r.request.end());
    if (!known) continue;  // no worker is eligible
    // Capacities never change after the pool is built, so this needs no lock.
    for (auto &w : workers_) {
      if (!w->ledger.could_fit(r.request)) continue;
      (w->kind == GF_WORKER_CPU ? r.cpu_workers : r.gpu_workers).push_back(w->index);
    }
  }
  return resolved;
}

void Scheduler::check_feasible(const RunState &run) {
  const Graph &graph = run.graph();
  // What kinds of body each request's tasks have, when the graph kept that and every body is a
  // C callback: the tasks are walked (a cache miss each, on large graphs) only to name the first
  // one that cannot run.
  const std::vector<uint8_t> *bodies = graph.bodies_by_request();
  if (bodies && run.resolved_bodies.empty()) {
    bool feasible = true;
    for (RequestId id = 0; id < bodies->size() && feasible; ++id) {
      const uint8_t kinds = (*bodies)[id];
      const ResolvedRequest &r = run.requests[id];
      if ((kinds & Graph::kCpuBodyOnly) && r.cpu_workers.empty()) feasible = false;
      if ((kinds & Graph::kGpuBodyOnly) && r.gpu_workers.empty()) feasible = false;
      if ((kinds & Graph::kBothBodies) && r.cpu_workers.empty() && r.gpu_workers.empty()) {
        feasible = false;
      }
    }
    if (feasible) return;
  }
  for (TaskIndex t = 0; t < graph.task_count(); ++t) {
    const TaskDesc &task = graph.task(t);
    const TaskBody &body = run.body(t);
    const ResolvedRequest &r = run.requests[task.request];
    if ((body.cpu_fn && !r.cpu_workers.empty()) || (body.gpu_fn && !r.gpu_workers.empty())) {
      continue;
    }
    fail(GF_ERR_INFEASIBLE, graph.task_label(t) + " " + why_infeasible(run, t));
  }
}

std::string Scheduler::why_infeasible(const RunState &run, TaskIndex t) const {
  const Graph &graph = run.graph();
  const TaskBody &body = run.body(t);
  auto amount_text = [](FixedPoint amount) {
    char text[32];
    std::snprintf(text, sizeof text, "%.10g", amount.to_double());
    return std::string(text);
  };
  auto runs_it = [&](const WorkerState &w) {
    return w.kind == GF_WORKER_CPU ? body.cpu_fn != nullptr : body.gpu_fn != nullptr;
  };
  std::string wanted, problems;
  auto problem = [&](const std::string &text) {
    problems += (problems.empty() ? "" : "; ") + text;
  };
  for (const auto &[name, amount] : graph.requests().get(graph.task(t).request)) {
    wanted += (wanted.empty() ? "" : ", ") + name + "=" + amount_text(amount);
    ResourceId id = registry_.find(name);
    if (id == UINT32_MAX) {
      std::string hint;
      for (ResourceId other = 0; other < registry_.size(); ++other) {
        const std::string &known = registry_.name(other);
        if (known.size() == name.size() &&
            std::equal(known.begin(), known.end(), name.begin(), [](char a, char b) {
              return std::tolower(static_cast<unsigned char>(a)) ==
                     std::tolower(static_cast<unsigned char>(b));
            })) {
          hint = " (did you mean '" + known + "'?)";
        }
      }
      problem("no worker of this pool has a resource named '" + name + "'" + hint);
      continue;
    }
    FixedPoint most;
    bool offered = false;
    for (const auto &w : workers_) {
      if (!runs_it(*w)) continue;
      for (const auto &line : w->ledger.lines()) {
        if (line.resource != id) continue;
        offered = true;
        most = std::max(most, line.capacity);
      }
    }
    if (!offered) {
      problem("no worker that could run it has '" + name + "'");
    } else if (most < amount) {
      problem("the most any worker that could run it has of '" + name + "' is " +
              amount_text(most));
    }
  }
  bool any_worker = false;
  for (const auto &w : workers_) any_worker = any_worker || runs_it(*w);
  if (!any_worker) {
    problems = std::string("it has only a ") + (body.cpu_fn ? "CPU" : "GPU") +
               " body, and this pool has no " + (body.cpu_fn ? "CPU" : "GPU") + " workers";
  } else if (problems.empty()) {
    problems = "no single worker that could run it has all of it at once";
  }
  return "asks for {" + wanted + "}: " + problems;
}

void Scheduler::resolve_bodies(RunState &run, const BodyResolvers &bodies) {
  const Graph &graph = run.graph();
  run.resolved_bodies.resize(graph.task_count());
  run.command_bodies = bodies.commands;  // what resolved command bodies point into
  for (TaskIndex t = 0; t < graph.task_count(); ++t) {
    const TaskDesc &task = graph.task(t);
    if (task.names_kernel()) {
      const std::string &kernel = graph.kernel_name(task);
      if (!bodies.kernels || !bodies.kernels->resolve(kernel, run.resolved_bodies[t])) {
        fail(GF_ERR_NOT_FOUND, graph.task_label(t) + " names kernel '" + kernel +
                                   "', which no plugin or caller registered with this pool");
      }
    } else if (graph.command(task)) {
      if (!bodies.commands) {
        fail(GF_ERR_INTERNAL, graph.task_label(t) + " is a command, and nothing binds commands");
      }
      run.resolved_bodies[t] = bodies.commands->resolve(graph, t);
    } else {
      run.resolved_bodies[t] = task.body;
    }
  }
}

std::shared_ptr<RunState> Scheduler::prepare(std::shared_ptr<Graph> graph,
                                             const BodyResolvers &bodies) {
  auto run = std::make_shared<RunState>(graph);
  run->spare_arrays = spare_arrays_;  // the arrays of the run that finished last, if they suit
  spare_arrays_->take(run->tasks, graph->task_count(), run->data, graph->data_count());
  DataSetup data_setup(*run);  // a large graph's on a helper thread, while this one freezes it
  const GraphAnalysis &analysis = graph->freeze();
  run->requests = resolve_requests(*graph);
  run->cost_ids = estimates_.map_cost_keys(*graph);
  run->tiny_costs = std::make_unique<std::atomic<bool>[]>(run->cost_ids.size());
  if (graph->has_named_kernels() || graph->has_commands()) resolve_bodies(*run, bodies);
  check_feasible(*run);
  set_up_tasks(*run, analysis);
  // Read only for joins, after their counts (join_counts); written before read, each slot by its
  // producer's thread: nothing to set up.
  if (run->join_counts) {
    run->made_buffers = std::make_unique_for_overwrite<RunState::MadeBuffer[]>(graph->data_count());
  }
  data_setup.finish();
  run->tasks_left = graph->task_count();
  return run;
}

void Scheduler::start(const std::shared_ptr<RunState> &run) {
  const Graph *graph = &run->graph();
  const GraphAnalysis &analysis = graph->analysis();
  Deferred deferred;
  Lock lock(mu_);
  if (stopping_) fail(GF_ERR_SHUT_DOWN, "the pool is shutting down; the graph was not submitted");
  // Roots queued in one slice share one clock reading (queue waits: add_observer). The stamp
  // is cleared under the mutex on every way out, a throw included; declared after `lock`, the
  // guard runs first, and only while the lock is held (enqueue_ready reads the stamp under it).
  struct StampGuard {
    Clock::time_point &stamp;
    const Lock &held;
    ~StampGuard() {
      if (held.owns_lock()) stamp = {};
    }
  } stamp_guard{enqueue_stamp_, lock};
  const bool observe = observers_.load(std::memory_order_relaxed) != 0;
  if (observe) enqueue_stamp_ = Clock::now();
  run->sequence = next_run_sequence_++;
  estimates_.publish_tiny(*run);  // what earlier runs learnt
  runs_.emplace(run.get(), run);
  maybe_finish_run(*run, deferred);
  // Roots are placed in slices, releasing the mutex between them, so that workers start on a
  // huge graph while the rest of it is still being placed.
  constexpr size_t kSlice = 4096;
  const auto &roots = analysis.roots;
  // Consecutive roots (in graph order) go to the same worker in groups, as Dask co-assigns
  // root tasks: siblings of a reduction then meet where their inputs already are.
  size_t threads = 0;
  for (auto &w : workers_) threads += w->threads;
  const size_t group = std::max<size_t>(1, roots.size() / std::max<size_t>(1, threads));
  uint32_t group_worker = kNoIndex;
  size_t in_group = 0;
  // A root that needs only a CPU slot, like the last one placed in its group (no inputs, the same
  // cost key), goes where that one went at its estimate: weighing every worker again for each of
  // a wide graph's roots was a third of the time the mutex was held (bench/lock_profile.c).
  // Placement weighs the workers afresh for each group and after each slice.
  auto plain_root = [&](TaskIndex t) {
    return graph->task(t).input_count == 0 && run->needs_only_cpu(t);
  };
  bool follow = false;  // the last root placed was plain: the next plain one may follow it
  uint32_t follow_key = 0;
  TaskIndex last_placed = kNoIndex;  // the root placed last (followed or made ready)
  int32_t last_priority = 0;         // its priority
  double follow_estimate_s = 0;
  // Roots that followed, queued since the last wake: one wake for them all (wake_after_queueing).
  TaskIndex followed_last = kNoIndex;
  uint32_t followed = 0;
  auto wake_for_followed = [&] {
    if (followed) wake_after_queueing(*workers_[group_worker], *run, followed_last, followed);
    followed = 0;
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    const TaskIndex root = roots[i];
    if (run->tasks[root].state == GF_TASK_WAITING) {
      // The root right after the last one placed, and alike it, follows it without a look at its
      // description (Graph::alike_previous); others are looked at.
      const bool alike_last =
          last_placed != kNoIndex && root == last_placed + 1 && graph->alike_previous(root);
      if (follow && in_group < group &&
          (alike_last || (graph->task(root).cost_key == follow_key && plain_root(root)))) {
        const int32_t priority = alike_last ? last_priority : graph->task(root).priority;
        // With it, the alike roots right after it in task number and rank (a wide graph's),
        // up to the group's or the slice's end, follow as one span.
        const size_t most = std::min({roots.size() - i, group - in_group, kSlice - i % kSlice});
        const uint32_t count =
            queue_plain_roots(*run, i, static_cast<uint32_t>(most), *workers_[group_worker],
                              follow_estimate_s, priority);
        last_priority = priority;
        followed_last = last_placed = root + count - 1;
        followed += count;
        in_group += count;
        i += count - 1;
      } else {
        wake_for_followed();
        const TaskBody &body = run->body(root);
        const gf_worker_kind kind = body.cpu_fn ? GF_WORKER_CPU : GF_WORKER_GPU;
        const double estimate_s = estimate(*run, root, kind);
        const double tolerance = static_cast<double>(group) * estimate_s;
        const uint32_t preferred = in_group < group ? group_worker : kNoIndex;
        const uint32_t chosen = make_ready(*run, root, preferred, deferred, tolerance);
        last_placed = root;
        last_priority = graph->task(root).priority;
        in_group = chosen == group_worker ? in_group + 1 : 1;
        group_worker = chosen;
        follow = chosen != kNoIndex && plain_root(root);
        follow_key = graph->task(root).cost_key;
        follow_estimate_s = estimate_s;
      }
    }
    if ((i + 1) % kSlice == 0 && i + 1 < roots.size()) {
      wake_for_followed();
      enqueue_stamp_ = {};
      lock.unlock();
      lock.lock();
      if (observe) enqueue_stamp_ = Clock::now();
      follow = false;  // what the workers did meanwhile is weighed again
    }
  }
  wake_for_followed();
  enqueue_stamp_ = {};
  lock.unlock();
  deferred.flush(backend_);
}

uint32_t Scheduler::make_ready(RunState &run, TaskIndex t, uint32_t preferred_worker,
                               Deferred &deferred, double tolerance_s) {
  const TaskDesc &task = run.graph().task(t);
  const ResolvedRequest &r = run.requests[task.request];
  std::vector<PlacementOption> &options = placement_options_;
  options.clear();
  const TaskBody &body = run.body(t);
  // On a device, the inputs, declared outputs and gpu_memory must fit together, or the task
  // could only wait there for ever (moving data in and out). Only device workers need the sum,
  // so CPU-only placements (the hot path of most graphs) never compute it.
  const uint64_t device_bytes =
      body.gpu_fn && !r.gpu_workers.empty() ? memory_.task_device_bytes(run, t) : 0;
  bool too_big_somewhere = false;
  // Whether every input has a copy in host memory (mostly so for CPU tasks): then nothing moves
  // for a CPU worker, and place() need not look at the inputs again.
  bool in_host = false;
  auto consider = [&](const std::vector<uint32_t> &eligible, gf_task_fn fn, gf_worker_kind kind) {
    if (!fn) return;
    double compute = estimate(run, t, kind);
    if (kind == GF_WORKER_CPU) {  // all in host memory: the inputs' transfer is the same for each
      in_host = memory_.inputs_in(run, t, kHostSpace);
      const double transfer = in_host ? 0.0 : memory_.transfer_seconds(run, t, kHostSpace);
      add_interchangeable(
          options, eligible,
          [this](uint32_t w) { return workers_[w]->backlog_s / workers_[w]->threads; },
          preferred_worker, transfer, compute);
      return;
    }
    for (uint32_t w : eligible) {
      const WorkerState &worker = *workers_[w];
      if (worker.space != kHostSpace && !worker.memory.could_fit(r.request, device_bytes)) {
        too_big_somewhere = true;
        continue;
      }
      double transfer = task.input_count ? memory_.transfer_seconds(run, t, worker.space) : 0.0;
      options.push_back({w, worker.backlog_s / worker.threads, transfer, compute});
    }
  };
  consider(r.cpu_workers, body.cpu_fn, GF_WORKER_CPU);
  consider(r.gpu_workers, body.gpu_fn, GF_WORKER_GPU);
  if (options.empty() && too_big_somewhere) {
    fail_task(run, t,
              "out of memory: " + run.graph().task_label(t) + " needs " +
                  std::to_string(device_bytes) + " bytes of inputs and outputs plus " +
                  std::to_string(static_cast<uint64_t>(r.gpu_memory.to_double())) +
                  " bytes of gpu_memory on one device at once, more than any device of this "
                  "pool holds",
              deferred);
    return kNoIndex;
  }
  const PlacementOption &chosen = options[choose_placement(options, preferred_worker, tolerance_s)];
  place(run, t, chosen.worker, chosen.compute_s, deferred, in_host);
  return chosen.worker;
}

void Scheduler::place(RunState &run, TaskIndex t, uint32_t w, double estimate_s, Deferred &deferred,
                      bool inputs_in_host) {
  WorkerState &worker = *workers_[w];
  TaskRun &tr = run.tasks[t];
  queued_on(worker, tr, estimate_s);
  if (worker.space != kHostSpace) Memory::hold_inputs(worker, run, t, +1);
  if (worker.space == kHostSpace && inputs_in_host) {
    tr.missing_inputs = 0;
    tr.memory_blocked = false;
  } else if (run.graph().task(t).input_count) {
    memory_.fetch_inputs(worker, run, t, deferred);
  }
  if (tr.missing_inputs == 0) {
    enqueue_ready(worker, run, t);
  } else {
    worker.fetching.push_back(TaskRef{&run, t});
  }
  if (!worker.granted && demand_listener_) demand_listener_();
}

uint32_t Scheduler::queue_plain_roots(RunState &run, size_t i, uint32_t most, WorkerState &worker,
                                      double estimate_s, int32_t priority) {
  const Graph &graph = run.graph();
  const GraphAnalysis &a = graph.analysis();
  const TaskIndex first = a.roots[i];
  // Without edges every task is a root, ranked in task order (Graph::freeze): only the tasks'
  // states and alikeness are read, in one pass with their queueing (a wide graph's start()).
  const bool in_task_order = a.successors.empty();
  queued_on(worker, run.tasks[first], estimate_s);
  uint32_t count = 1;
  for (; count < most; ++count) {
    const TaskIndex next = first + count;
    if (!in_task_order && (a.roots[i + count] != next || a.order[next] != a.order[first] + count)) {
      break;
    }
    TaskRun &tr = run.tasks[next];
    if (tr.state != GF_TASK_WAITING || !graph.alike_previous(next)) break;
    queued_on(worker, tr, estimate_s);
  }
  // Alike the root they follow (no inputs, a CPU slot only, its cost key and estimate), which
  // start() queued on this worker just before them: they may all share its span. start()
  // stamps only when observed.
  QueuedTask entry = queue_entry(run, first, enqueue_stamp_, priority);
  entry.span = count;
  worker.ready.push_following(entry);
  return count;
}

void Scheduler::wake_after_queueing(WorkerState &worker, RunState &run, TaskIndex last,
                                    uint32_t queued) {
  // As many signals as a wake_for per task would have sent: those stop once every idle thread
  // that may help has a wake on its way, and so does this loop.
  for (uint32_t i = 0; i < queued; ++i) {
    const uint64_t unwoken = notifier_.unwoken_total();
    wake_for(worker, run, last);
    if (notifier_.unwoken_total() == unwoken) break;
  }
  if (!worker.granted && demand_listener_) demand_listener_();
}

void Scheduler::enqueue_ready(WorkerState &worker, RunState &run, TaskIndex t) {
  const Clock::time_point ready_at = observers_.load(std::memory_order_relaxed) == 0
                                         ? Clock::time_point{}
                                     : enqueue_stamp_ != Clock::time_point{} ? enqueue_stamp_
                                                                             : Clock::now();
  worker.ready.push(queue_entry(run, t, ready_at));
  wake_for(worker, run, t);
}

void Scheduler::unqueue(WorkerState &worker, RunState &run, TaskIndex t) {
  Memory::hold_inputs(worker, run, t, -1);
}

void Scheduler::wake_for(WorkerState &worker, RunState &run, TaskIndex t) {
  wake_one(worker);
  if (worker.index == notifier_.completing_worker && worker.ready.size() <= 1) return;
  // More queued there than it has idle threads (none count while it lacks its grant): wake an
  // idle worker that may run the task, so it can steal it.
  const uint32_t idle_here = worker.granted ? notifier_.idle(worker.index) : 0;
  if (notifier_.idle_total() <= idle_here || worker.ready.size() <= idle_here) return;
  // Every idle thread of the other workers has a wake on its way already (they are still waking
  // while a wide graph's roots are placed): the search below would find no one, and reading each
  // worker's counters was 4 % of a wide graph's run.
  if (notifier_.unwoken_total() == notifier_.unwoken(worker.index)) {
    return;
  }
  const TaskDesc &task = run.graph().task(t);
  const ResolvedRequest &r = run.requests[task.request];
  auto wake_idle_of = [&](const std::vector<uint32_t> &eligible, gf_task_fn fn) {
    if (!fn) return false;
    for (uint32_t w : eligible) {
      WorkerState &other = *workers_[w];
      if (w != worker.index && notifier_.unwoken(w) > 0) {
        wake_one(other);
        return true;
      }
    }
    return false;
  };
  const TaskBody &body = run.body(t);
  if (!wake_idle_of(r.cpu_workers, body.cpu_fn)) wake_idle_of(r.gpu_workers, body.gpu_fn);
}

void Scheduler::shutdown() {
  Deferred deferred;
  {
    Lock lock(mu_);
    stopping_ = true;
    std::vector<RunState *> runs;
    for (auto &[raw, run] : runs_) runs.push_back(raw);
    for (RunState *run : runs) cancel_locked(*run, "the pool was shut down", deferred);
    for (auto &w : workers_) notifier_.wake_all(w->index);
  }
  deferred.flush(backend_);
}

}  // namespace gf
