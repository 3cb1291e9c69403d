#include "scheduler/placement.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace gf {

TEST(Placement, EarliestFinishWinsWithoutLocality) {
  std::vector<PlacementOption> options{{0, 3.0, 0, 1}, {1, 1.0, 0, 1}, {2, 2.0, 0, 1}};
  EXPECT_EQ(options[choose_placement(options, UINT32_MAX)].worker, 1u);
}

TEST(Placement, DataStaysWhereItIsUnlessClearlyWorse) {
  // Worker 1 holds the input (nothing to move); worker 0 is idle but must move 0.5 s of data.
  std::vector<PlacementOption> options{{0, 0.0, 0.5, 0.1}, {1, 0.3, 0.0, 0.1}};
  EXPECT_EQ(options[choose_placement(options, UINT32_MAX)].worker, 1u);
  // Once the local worker is more than twice as late as the best, the task moves.
  options[1].backlog_s = 1.5;
  EXPECT_EQ(options[choose_placement(options, UINT32_MAX)].worker, 0u);
}

TEST(Placement, PreferredWorkerWinsTiesAndToleratedDelays) {
  std::vector<PlacementOption> options{{0, 1.0, 0, 1}, {1, 1.0, 0, 1}};
  EXPECT_EQ(options[choose_placement(options, 1)].worker, 1u);
  options[1].backlog_s = 5.0;  // 6 s vs 2 s: more than twice as late
  EXPECT_EQ(options[choose_placement(options, 1)].worker, 0u);
  EXPECT_EQ(options[choose_placement(options, 1, 10.0)].worker, 1u);  // within tolerance
}

TEST(Placement, SplitInputsFollowThePreferredWorker) {
  // Each worker holds one of two inputs: equal transfers, the producer that just finished wins.
  std::vector<PlacementOption> options{{0, 0.1, 1e-5, 1e-6}, {1, 0.1, 1e-5, 1e-6}};
  EXPECT_EQ(options[choose_placement(options, 1)].worker, 1u);
  EXPECT_EQ(options[choose_placement(options, 0)].worker, 0u);
}

TEST(Placement, InterchangeableWorkersChooseAsTheWholeListWould) {
  // Random pools: CPU workers (one space, one kind) listed whole or reduced, before device
  // workers with their own transfers; random preferred worker, ties and tolerance. The reduced
  // list must choose the same worker every time, and never hold more than three CPU workers.
  std::mt19937 engine(29);
  auto random = [&engine] { return static_cast<uint32_t>(engine()); };
  for (int trial = 0; trial < 20000; ++trial) {
    const uint32_t cpus = 1 + random() % 16, gpus = random() % 4;
    std::vector<double> backlog(cpus + gpus);
    // Few distinct values, so that ties are common.
    for (double &b : backlog) b = static_cast<double>(random() % 5) * 0.5;
    std::vector<uint32_t> cpu_workers(cpus);
    for (uint32_t w = 0; w < cpus; ++w) cpu_workers[w] = w;
    const double cpu_transfer = static_cast<double>(random() % 3) * 0.25, cpu_compute = 0.5;
    const uint32_t preferred = random() % (cpus + gpus + 1);  // cpus + gpus: none of them
    const double tolerance = random() % 2 ? 0.0 : 1.0;
    std::vector<PlacementOption> whole, reduced;
    for (uint32_t w : cpu_workers) whole.push_back({w, backlog[w], cpu_transfer, cpu_compute});
    add_interchangeable(
        reduced, cpu_workers, [&](uint32_t w) { return backlog[w]; }, preferred, cpu_transfer,
        cpu_compute);
    ASSERT_LE(reduced.size(), 3u);
    for (uint32_t g = cpus; g < cpus + gpus; ++g) {
      const PlacementOption device{g, backlog[g], static_cast<double>(random() % 3) * 0.25, 0.25};
      whole.push_back(device);
      reduced.push_back(device);
    }
    const uint32_t expected = whole[choose_placement(whole, preferred, tolerance)].worker;
    ASSERT_EQ(reduced[choose_placement(reduced, preferred, tolerance)].worker, expected)
        << "trial " << trial << ": " << cpus << " CPU workers, preferred " << preferred;
  }
}

}  // namespace gf
