// The lists of the graph destroyed last, kept for the next graph built in the process: their
// pages are resident, so building a graph of about the same size again faults none in and copies
// nothing as its lists grow (a 100,000-task graph's lists are fresh mappings otherwise, zeroed by
// the kernel page by page). At most one set is kept, within kKeptBytes; a graph takes whatever is
// kept, so the most memory the process holds at once is what it held while that graph lived.
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
  Graph::Lists kept_;
};

}  // namespace gf
