// Graph::freeze: the submit-time checks that need the whole graph (dangling inputs, duplicate
// names, cycles) and the analysis every run of the graph shares.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "core/error.hpp"
#include "graph/graph.hpp"

namespace gf {
namespace {

[[noreturn]] void report_dangling(const Graph &g, TaskIndex t, DataIndex d) {
  fail(GF_ERR_INVALID_GRAPH, g.task_label(t) + " reads " + g.data_label(d) +
                                 ", which no task produces and is not a host input");
}

struct Named {
  size_t hash;
  TaskIndex task;
};

// Sorting beats a hash set here: no allocation per name, which matters for million-task graphs
// read from documents. Reports the duplicate a scan in task order would meet first.
// O(n log n) whatever the names: equal hashes are ordered by the names themselves, so equal names
// end up adjacent and each run of them is looked at once (never pairwise).
// `named`: the named tasks in task order, with their names' hashes (freeze's first walk collects
// them). Sorting hashes first: names often share long prefixes ("chunk-000123"), and comparing
// those dominated submit time for million-task graphs. Names are compared only when hashes collide.
void check_unique_names(const Graph &g, std::vector<Named> &named) {
  std::sort(named.begin(), named.end(), [&](const Named &a, const Named &b) {
    if (a.hash != b.hash) return a.hash < b.hash;
    int order = g.task_name(g.task(a.task)).compare(g.task_name(g.task(b.task)));
    return order != 0 ? order < 0 : a.task < b.task;
  });
  // Each run of equal names is sorted by task: its first two entries are the pair a scan in task
  // order meets first within it. Among runs, report the one whose second task comes first.
  TaskIndex first = kNoIndex, second = kNoIndex;
  for (size_t i = 0; i + 1 < named.size();) {
    size_t j = i + 1;
    const std::string &name = g.task_name(g.task(named[i].task));
    while (j < named.size() && named[j].hash == named[i].hash &&
           g.task_name(g.task(named[j].task)) == name) {
      ++j;
    }
    if (j - i >= 2 && named[i + 1].task < second) {
      first = named[i].task;
      second = named[i + 1].task;
    }
    i = j;
  }
  if (second != kNoIndex) {
    fail(GF_ERR_INVALID_GRAPH, "duplicate task name '" + g.task_name(g.task(first)) + "' (tasks #" +
                                   std::to_string(first) + " and #" + std::to_string(second) + ")");
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

// Kahn's algorithm: whether every task can be ordered (the graph is acyclic). `pending` is left
// with each task's predecessors not ordered, what report_cycle starts from.
bool orders_every_task(const GraphAnalysis &a, std::vector<uint32_t> &pending) {
  const size_t n = a.predecessor_count.size();
  pending = a.predecessor_count;
  std::vector<TaskIndex> stack;
  for (TaskIndex t = 0; t < n; ++t) {
    if (pending[t] == 0) stack.push_back(t);
  }
  size_t ordered = 0;
  while (!stack.empty()) {
    TaskIndex t = stack.back();
    stack.pop_back();
    ++ordered;
    for (uint32_t e = a.successor_begin[t]; e < a.successor_begin[t + 1]; ++e) {
      if (--pending[a.successors[e]] == 0) stack.push_back(a.successors[e]);
    }
  }
  return ordered == n;
}

// Rank: a depth-first post-order that walks from each sink through its predecessors, in task
// order. Running ready tasks by rank completes one branch (and frees its data) before the next
// branch starts, which bounds live memory the way dask.order does. Sets a.order and a.roots (in
// rank order). Kept out of line: inlined into freeze, its walk ran 1.3x slower (GCC 12, measured on
// a 200,000-task chain; the same instructions, its loop's values no longer all in registers).
[[gnu::noinline]] void rank(GraphAnalysis &a, const std::vector<uint32_t> &pred_begin,
                            const std::vector<TaskIndex> &preds) {
  const size_t n = a.predecessor_count.size();
  if (a.successors.empty()) {  // no edges (a wide graph): every task its own branch, in order
    a.order.resize(n);
    std::iota(a.order.begin(), a.order.end(), 0u);
    a.roots = a.order;
    return;
  }
  // A task's order is kNoIndex until the walk enters it, kEntered while it is on the walk's
  // stack (add_task keeps task counts below both).
  constexpr uint32_t kEntered = kNoIndex - 1;
  a.order.assign(n, kNoIndex);
  uint32_t next_rank = 0;
  std::vector<std::pair<TaskIndex, uint32_t>> dfs;  // (task, next predecessor to visit)
  for (TaskIndex sink = 0; sink < n; ++sink) {
    if (a.successor_begin[sink + 1] != a.successor_begin[sink]) continue;
    dfs.emplace_back(sink, pred_begin[sink]);
    a.order[sink] = kEntered;
    while (!dfs.empty()) {
      auto &[t, next] = dfs.back();
      if (next < pred_begin[t + 1]) {
        TaskIndex p = preds[next++];
        if (a.order[p] == kNoIndex) {
          a.order[p] = kEntered;
          dfs.emplace_back(p, pred_begin[p]);
        }
      } else {
        a.order[t] = next_rank++;
        // Ranks are handed out in increasing order: the roots come out in rank order.
        if (a.predecessor_count[t] == 0) a.roots.push_back(t);
        dfs.pop_back();
      }
    }
  }
}

}  // namespace

const GraphAnalysis &Graph::freeze() {
  // Two threads may submit a graph for the first time at once: one freezes, the other waits.
  std::lock_guard<std::mutex> lock(freeze_mu_);
  if (analysis_) return *analysis_;

  const size_t n = lists_.tasks.size();
  auto a = std::make_unique<GraphAnalysis>();
  // A walk of the tasks would read every task's description and its inputs' producers, a cache
  // miss each: the successor and predecessor lists are built from a list of the data edges,
  // which add_task keeps while the graph is built in order.
  a->predecessor_count.assign(n, 0);
  a->successor_begin.assign(n + 1, 0);
  auto count = [&](TaskIndex from, TaskIndex to) {
    a->successor_begin[from + 1]++;
    a->predecessor_count[to]++;
  };
  std::vector<Named> named;
  std::hash<std::string_view> hasher;
  // Data edges (producer, consumer) in task order: add_task's list when it has them all, else
  // one walk of the tasks, which also finds inputs nobody produces (the first in task order is
  // reported). Names are collected either way; their duplicates are reported only when no input
  // dangles.
  EdgeList data_edges;
  const bool listed = edges_listed_ == n;
  // Borrowed from add_task's list, and given back if freezing fails (the graph stays as built).
  struct GiveBack {
    EdgeList &owner, &borrowed;
    bool keep = false;
    ~GiveBack() {
      if (!keep) owner.swap(borrowed);
    }
  } give_back{data_edges_, data_edges, !listed};
  if (listed) {
    data_edges.swap(data_edges_);
    if (named_tasks_ > 0) {
      named.reserve(named_tasks_);
      for (TaskIndex t = 0; t < n; ++t) {
        if (lists_.tasks[t].named()) named.push_back({hasher(task_name(lists_.tasks[t])), t});
      }
    }
  } else {
    data_edges.reserve(lists_.input_refs.size());
    for (TaskIndex t = 0; t < n; ++t) {
      const TaskDesc &task = lists_.tasks[t];
      if (task.named()) named.push_back({hasher(task_name(task)), t});
      const DataIndex *in = lists_.input_refs.data() + task.inputs_begin;
      for (uint32_t i = 0; i < task.input_count; ++i) {
        const DataDesc &data = lists_.data[in[i]];
        if (data.producer != kNoIndex) {
          data_edges.emplace_back(data.producer, t);
        } else if (data.origin == DataOrigin::kProduced) {
          report_dangling(*this, t, in[i]);
        }
      }
    }
  }
  auto for_each_edge = [&](auto &&visit) {  // visit(from, to): data edges, then `after` edges
    for (auto [from, to] : data_edges) visit(from, to);
    for (auto [t, before] : lists_.edges) visit(before, t);
  };
  for_each_edge(count);
  check_unique_names(*this, named);
  for (size_t t = 0; t < n; ++t) a->successor_begin[t + 1] += a->successor_begin[t];
  a->successors.resize(a->successor_begin[n]);
  std::vector<uint32_t> fill(a->successor_begin.begin(), a->successor_begin.end() - 1);
  for_each_edge([&](TaskIndex from, TaskIndex to) { a->successors[fill[from]++] = to; });

  // Acyclic for certain when every edge runs from an earlier task to a later one (add_task's data
  // and `after` edges always do); otherwise Kahn's algorithm proves it.
  std::vector<uint32_t> pending;
  const bool acyclic = (listed && !backward_edge_) || orders_every_task(*a, pending);
  // Predecessors in the order the walk meets them (ranks depend on it); their counts are known.
  std::vector<uint32_t> pred_begin(n + 1, 0);
  for (size_t t = 0; t < n; ++t) pred_begin[t + 1] = pred_begin[t] + a->predecessor_count[t];
  std::vector<TaskIndex> preds(pred_begin[n]);
  std::vector<uint32_t> pfill(pred_begin.begin(), pred_begin.end() - 1);
  for_each_edge([&](TaskIndex from, TaskIndex to) { preds[pfill[to]++] = from; });
  if (!acyclic) {
    std::vector<std::vector<TaskIndex>> by_task(n);
    for (TaskIndex t = 0; t < n; ++t) {
      by_task[t].assign(preds.begin() + pred_begin[t], preds.begin() + pred_begin[t + 1]);
    }
    report_cycle(*this, pending, by_task);
  }

  rank(*a, pred_begin, preds);
  analysis_ = std::move(a);
  give_back.keep = true;  // frozen: the list is not needed again
  return *analysis_;
}

}  // namespace gf
