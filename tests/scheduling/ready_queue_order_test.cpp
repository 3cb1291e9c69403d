// The ready queue's fast path (a sorted run beside a heap) must pop exactly the order a plain
// priority order gives, however entries arrive: in order, reversed, interleaved with pops,
// re-pushed after being passed over, or dropped by run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "scheduler/ready_queue.hpp"

namespace gf {
namespace {

// A uniform-enough draw in [0, n) of the width the call sites want.
uint32_t below(std::mt19937 &rng, uint32_t n) {
  return static_cast<uint32_t>(rng() % n);
}

// Unique keys, so the expected order is total.
QueuedTask entry(uint32_t i, int32_t priority, uint64_t run_sequence, RunState *run = nullptr) {
  return QueuedTask{priority, i, run_sequence, run, i, {}};
}

// Pops everything, checking each entry runs no later than the next.
std::vector<TaskIndex> drain(ReadyQueue &q) {
  std::vector<QueuedTask> popped;
  while (!q.empty()) popped.push_back(q.pop());
  for (size_t k = 1; k < popped.size(); ++k) {
    EXPECT_FALSE(runs_later(popped[k - 1], popped[k])) << "at " << k;
  }
  std::vector<TaskIndex> tasks;
  for (const QueuedTask &e : popped) tasks.push_back(e.task);
  return tasks;
}

TEST(ReadyQueueOrder, InOrderReversedAndShuffledArrivalsPopTheSame) {
  std::vector<QueuedTask> entries;
  for (uint32_t i = 0; i < 500; ++i)
    entries.push_back(entry(i, static_cast<int32_t>(i % 3), i % 5));
  std::vector<QueuedTask> sorted = entries;
  std::sort(sorted.begin(), sorted.end(),
            [](const QueuedTask &a, const QueuedTask &b) { return runs_later(b, a); });
  std::vector<TaskIndex> expected;
  for (const QueuedTask &e : sorted) expected.push_back(e.task);

  std::mt19937 rng(29);
  for (int arrangement = 0; arrangement < 4; ++arrangement) {
    std::vector<QueuedTask> order = sorted;
    if (arrangement == 1) std::reverse(order.begin(), order.end());
    if (arrangement >= 2) std::shuffle(order.begin(), order.end(), rng);
    ReadyQueue q;
    for (const QueuedTask &e : order) q.push(e);
    EXPECT_EQ(q.size(), order.size());
    EXPECT_EQ(drain(q), expected) << "arrangement " << arrangement;
  }
}

TEST(ReadyQueueOrder, PushesBetweenPopsMatchAReferenceHeap) {
  std::mt19937 rng(7);
  ReadyQueue q;
  std::vector<QueuedTask> reference;  // a plain heap, as the queue was before its fast path
  uint32_t next = 0;
  for (int step = 0; step < 20000; ++step) {
    const bool push = reference.empty() || below(rng, 3) != 0;
    if (push) {
      // Mostly ascending ranks, as a run's tasks arrive, with stragglers and priorities.
      const uint32_t rank = below(rng, 4) == 0 ? below(rng, next + 1) : next;
      QueuedTask e{static_cast<int32_t>(below(rng, 8) == 0 ? below(rng, 3) : 0),
                   rank,
                   1 + below(rng, 2),
                   nullptr,
                   next++,
                   {}};
      q.push(e);
      reference.push_back(e);
      std::push_heap(reference.begin(), reference.end(), runs_later);
    } else {
      ASSERT_FALSE(q.empty());
      const QueuedTask got = q.pop();
      std::pop_heap(reference.begin(), reference.end(), runs_later);
      const QueuedTask want = reference.back();
      reference.pop_back();
      // Equal keys may come in either order; the key must match.
      EXPECT_FALSE(runs_later(got, want) || runs_later(want, got)) << "step " << step;
    }
    ASSERT_EQ(q.size(), reference.size());
  }
}

TEST(ReadyQueueOrder, RemoveRunKeepsTheRestInOrderOnBothPaths) {
  auto *a = reinterpret_cast<RunState *>(0x10);
  auto *b = reinterpret_cast<RunState *>(0x20);
  ReadyQueue q;
  // Ascending ranks take the sorted path; the descending second half goes to the heap.
  for (uint32_t i = 0; i < 100; ++i) q.push(entry(i, 0, 1, i % 2 ? a : b));
  for (uint32_t i = 200; i > 100; --i) q.push(entry(i, 0, 1, i % 2 ? a : b));
  for (int k = 0; k < 10; ++k) q.pop();  // 0..9 gone
  std::vector<TaskIndex> removed;
  q.remove_run(a, [&](TaskIndex t) { removed.push_back(t); });
  EXPECT_EQ(removed.size(), 45u + 50u);
  for (TaskIndex t : removed) EXPECT_EQ(t % 2, 1u);
  std::vector<TaskIndex> rest = drain(q);
  ASSERT_EQ(rest.size(), 45u + 50u);
  for (size_t k = 0; k < rest.size(); ++k) EXPECT_EQ(rest[k] % 2, 0u);
  EXPECT_TRUE(std::is_sorted(rest.begin(), rest.end()));
}

TEST(ReadyQueueOrder, ALongQueueDrainsAndRefills) {
  ReadyQueue q;
  for (int round = 0; round < 3; ++round) {
    for (uint32_t i = 0; i < 10000; ++i) q.push(entry(i, 0, 1));
    for (uint32_t i = 0; i < 10000; ++i) ASSERT_EQ(q.pop().task, i);
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(q.size(), 0u);
  }
}

}  // namespace
}  // namespace gf
