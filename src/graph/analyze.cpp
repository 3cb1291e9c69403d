// Graph::freeze: the submit-time checks that need the whole graph (dangling inputs, duplicate
// names, cycles) and the analysis every run of the graph shares.
#include <algorithm>
#include <unordered_map>

#include "core/error.hpp"
#include "graph/graph.hpp"

namespace gf {
namespace {

void check_inputs_have_sources(const Graph &g) {
  for (TaskIndex t = 0; t < g.task_count(); ++t) {
    const TaskDesc &task = g.task(t);
    const DataIndex *in = g.inputs(task);
    for (uint32_t i = 0; i < task.input_count; ++i) {
      const DataDesc &data = g.data(in[i]);
      if (data.origin == DataOrigin::kProduced && data.producer == kNoIndex) {
        fail(GF_ERR_INVALID_GRAPH, g.task_label(t) + " reads " + g.data_label(in[i]) +
                                       ", which no task produces and is not a host input");
      }
    }
  }
}

// Sorting beats a hash set here: no allocation per name, which matters for million-task graphs
// read from documents. Reports the duplicate a scan in task order would meet first.
void check_unique_names(const Graph &g) {
  std::vector<std::pair<std::string_view, TaskIndex>> named;
  named.reserve(g.task_count());
  for (TaskIndex t = 0; t < g.task_count(); ++t) {
    const std::string &name = g.task(t).name;
    if (!name.empty()) named.emplace_back(name, t);
  }
  std::sort(named.begin(), named.end());
  size_t worst = 0;  // index in `named` of the earliest second occurrence, 0 if none
  for (size_t i = 1; i < named.size(); ++i) {
    bool second =
        named[i].first == named[i - 1].first && (i < 2 || named[i - 2].first != named[i].first);
    if (second && (worst == 0 || named[i].second < named[worst].second)) worst = i;
  }
  if (worst != 0) {
    fail(GF_ERR_INVALID_GRAPH, "duplicate task name '" + std::string(named[worst].first) +
                                   "' (tasks #" + std::to_string(named[worst - 1].second) +
                                   " and #" + std::to_string(named[worst].second) + ")");
  }
}

// Names the tasks of one cycle among those Kahn's algorithm could not order.
[[noreturn]] void report_cycle(const Graph &g, const std::vector<uint32_t> &pending,
                               const std::vector<std::vector<TaskIndex>> &preds) {
  TaskIndex start = 0;
  while (pending[start] == 0) ++start;
  // Walk backwards through unfinished predecessors until a task repeats: that closes a cycle.
  std::vector<uint32_t> seen_at(g.task_count(), kNoIndex);
  std::vector<TaskIndex> path;
  TaskIndex t = start;
  while (seen_at[t] == kNoIndex) {
    seen_at[t] = static_cast<uint32_t>(path.size());
    path.push_back(t);
    auto next =
        std::find_if(preds[t].begin(), preds[t].end(), [&](TaskIndex p) { return pending[p] > 0; });
    t = *next;  // a task left pending always has a pending predecessor
  }
  // path[k] = t depends on path[k+1], ..., and the last depends on t: in running order the cycle
  // is t -> last -> ... -> path[k+1] -> t.
  std::string cycle = g.task_label(t);
  for (size_t i = path.size(); --i > seen_at[t];) cycle += " -> " + g.task_label(path[i]);
  cycle += " -> " + g.task_label(t);
  fail(GF_ERR_INVALID_GRAPH, "cycle: " + cycle);
}

}  // namespace

const GraphAnalysis &Graph::freeze() {
  if (analysis_) return *analysis_;
  check_inputs_have_sources(*this);
  check_unique_names(*this);

  const size_t n = tasks_.size();
  auto a = std::make_unique<GraphAnalysis>();
  a->predecessor_count.assign(n, 0);
  std::vector<uint32_t> out_degree(n, 0);
  auto for_each_edge = [&](auto &&visit) {  // visit(from, to)
    for (TaskIndex t = 0; t < n; ++t) {
      const TaskDesc &task = tasks_[t];
      for (uint32_t i = 0; i < task.input_count; ++i) {
        TaskIndex p = data_[input_refs_[task.inputs_begin + i]].producer;
        if (p != kNoIndex) visit(p, t);
      }
    }
    for (auto [t, before] : edges_) visit(before, t);
  };
  for_each_edge([&](TaskIndex from, TaskIndex to) {
    out_degree[from]++;
    a->predecessor_count[to]++;
  });
  a->successor_begin.assign(n + 1, 0);
  for (size_t t = 0; t < n; ++t) a->successor_begin[t + 1] = a->successor_begin[t] + out_degree[t];
  a->successors.resize(a->successor_begin[n]);
  std::vector<uint32_t> fill(a->successor_begin.begin(), a->successor_begin.end() - 1);
  for_each_edge([&](TaskIndex from, TaskIndex to) { a->successors[fill[from]++] = to; });

  // Kahn's algorithm proves the graph acyclic.
  std::vector<uint32_t> pending = a->predecessor_count;
  std::vector<TaskIndex> stack;
  for (TaskIndex t = 0; t < n; ++t) {
    if (pending[t] == 0) stack.push_back(t);
  }
  size_t ordered = 0;
  while (!stack.empty()) {
    TaskIndex t = stack.back();
    stack.pop_back();
    ++ordered;
    for (uint32_t e = a->successor_begin[t]; e < a->successor_begin[t + 1]; ++e) {
      if (--pending[a->successors[e]] == 0) stack.push_back(a->successors[e]);
    }
  }
  if (ordered != n) {
    std::vector<std::vector<TaskIndex>> preds(n);
    for_each_edge([&](TaskIndex from, TaskIndex to) { preds[to].push_back(from); });
    report_cycle(*this, pending, preds);
  }

  // Rank: a depth-first post-order that walks from each sink through its predecessors, in task
  // order. Running ready tasks by rank completes one branch (and frees its data) before the next
  // branch starts, which bounds live memory the way dask.order does.
  std::vector<uint32_t> pred_begin(n + 1, 0);
  for_each_edge([&](TaskIndex, TaskIndex to) { pred_begin[to + 1]++; });
  for (size_t t = 0; t < n; ++t) pred_begin[t + 1] += pred_begin[t];
  std::vector<TaskIndex> preds(pred_begin[n]);
  std::vector<uint32_t> pfill(pred_begin.begin(), pred_begin.end() - 1);
  for_each_edge([&](TaskIndex from, TaskIndex to) { preds[pfill[to]++] = from; });

  a->order.assign(n, kNoIndex);
  uint32_t next_rank = 0;
  std::vector<std::pair<TaskIndex, uint32_t>> dfs;  // (task, next predecessor to visit)
  std::vector<bool> entered(n, false);
  for (TaskIndex sink = 0; sink < n; ++sink) {
    if (out_degree[sink] != 0) continue;
    dfs.emplace_back(sink, pred_begin[sink]);
    entered[sink] = true;
    while (!dfs.empty()) {
      auto &[t, next] = dfs.back();
      if (next < pred_begin[t + 1]) {
        TaskIndex p = preds[next++];
        if (!entered[p]) {
          entered[p] = true;
          dfs.emplace_back(p, pred_begin[p]);
        }
      } else {
        a->order[t] = next_rank++;
        dfs.pop_back();
      }
    }
  }
  for (TaskIndex t = 0; t < n; ++t) {
    if (a->predecessor_count[t] == 0) a->roots.push_back(t);
  }
  std::sort(a->roots.begin(), a->roots.end(),
            [&](TaskIndex x, TaskIndex y) { return a->order[x] < a->order[y]; });
  analysis_ = std::move(a);
  return *analysis_;
}

}  // namespace gf
