// The lists of the graph destroyed last, kept for the next graph built in the process: their
// pages are resident, so building a graph of about the same size again faults none in and copies
// nothing as its lists grow (a 100,000-task graph's lists are fresh mappings otherwise, zeroed by
// the kernel page by page). Two sets are kept, within kKeptBytes each: a graph is often built
// while the one before it is still being let go on another thread (a run dropped by a worker
// thread), so it finds the set of the graph before that one. A graph takes the larger kept set.
#pragma once

#include <mutex>

#include "graph/graph.hpp"

namespace gf {

class SpareGraphLists {
 public:
  static constexpr size_t kKeptBytes = size_t{128} << 20;
  static SpareGraphLists &instance();
  // Takes a destroyed graph's lists (their elements are destroyed now), unless they are too big.
  void give_back(Graph::Lists &lists);
  // Empty lists with the kept capacity, if any.
  void take(Graph::Lists &lists);
  size_t kept_bytes();  // for tests

 private:
  std::mutex mu_;
  Graph::Lists kept_[2];
};

}  // namespace gf
