#include "scheduler/feasibility.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.hpp"

namespace gf {

std::vector<ResolvedRequest> Feasibility::resolve_requests(const Graph &graph) const {
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

void Feasibility::check(const RunState &run) const {
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

std::string Feasibility::why_infeasible(const RunState &run, TaskIndex t) const {
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

void Feasibility::resolve_bodies(RunState &run, const BodyResolvers &bodies) {
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

}  // namespace gf
