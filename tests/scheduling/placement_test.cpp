#include "scheduler/placement.hpp"

#include <gtest/gtest.h>

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

}  // namespace gf
