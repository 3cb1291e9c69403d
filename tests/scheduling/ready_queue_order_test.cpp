// The ready queue's fast path (a sorted run beside a heap) must pop exactly the order a plain
// priority order gives, however entries arrive: in order, reversed, interleaved with pops,
// re-pushed after being passed over, or dropped by run.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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
  return QueuedTask{priority, i, run_sequence, run, {}, i};
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
                   {},
                   next++};
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

// Spans (ReadyQueue::push_following): a run's alike roots share one entry. Popped one by one or
// several at a time, beside single entries of other runs and priorities pushed in any order,
// they must come out in exactly the order their tasks would as single entries.
TEST(ReadyQueueOrder, SpansPopInTheOrderTheirTasksWouldAlone) {
  std::mt19937 rng(2029);
  for (int trial = 0; trial < 200; ++trial) {
    ReadyQueue q;
    std::vector<QueuedTask> reference;  // every task as a single entry, in a plain heap
    auto record = [&](const QueuedTask &one) {
      reference.push_back(one);
      std::push_heap(reference.begin(), reference.end(), runs_later);
    };
    // Ranks unique per run (sequence), as a graph's are; tasks numbered apart per run.
    std::vector<uint32_t> next_rank(4, 0);
    const int steps = 60 + static_cast<int>(below(rng, 200));
    for (int step = 0; step < steps; ++step) {
      const uint32_t seq = below(rng, 4);
      const auto priority = static_cast<int32_t>(below(rng, 5) == 0 ? 1 : 0);
      const uint32_t length = 1 + below(rng, 40);
      QueuedTask first{priority, next_rank[seq], seq, nullptr, {}, seq * 100000 + next_rank[seq]};
      next_rank[seq] += length + below(rng, 2);  // a gap sometimes: the next span stands alone
      if (below(rng, 3) == 0) {
        // The whole span at once, as a steal or start() queues one.
        QueuedTask span = first;
        span.span = length;
        if (below(rng, 2)) {
          q.push(span);
        } else {
          q.push_following(span);
        }
        for (uint32_t k = 0; k < length; ++k) {
          QueuedTask one = first;
          one.rank += k;
          one.task += k;
          record(one);
        }
        continue;
      }
      for (uint32_t k = 0; k < length; ++k) {
        QueuedTask one = first;
        one.rank += k;
        one.task += k;
        if (below(rng, 2)) {
          q.push_following(one);
        } else if (k == 0) {
          q.push(one);
        } else {
          q.push_following(one);
        }
        record(one);
      }
      ASSERT_EQ(q.size(), reference.size());
      // Some pops between the pushes, one task or a piece of a span at a time.
      for (uint32_t pops = below(rng, 3); pops > 0 && !q.empty(); --pops) {
        const uint32_t most = below(rng, 2) ? 1 : 1 + below(rng, 10);
        const QueuedTask got = q.pop_span(most);
        ASSERT_GE(got.span, 1u);
        ASSERT_LE(got.span, most);
        for (uint32_t k = 0; k < got.span; ++k) {
          std::pop_heap(reference.begin(), reference.end(), runs_later);
          const QueuedTask want = reference.back();
          reference.pop_back();
          ASSERT_EQ(got.task + k, want.task) << "trial " << trial << " step " << step;
          ASSERT_EQ(got.rank + k, want.rank);
        }
        ASSERT_EQ(q.size(), reference.size());
      }
    }
    while (!q.empty()) {
      const QueuedTask got = q.pop();
      std::pop_heap(reference.begin(), reference.end(), runs_later);
      ASSERT_EQ(got.task, reference.back().task) << "trial " << trial;
      ASSERT_EQ(got.span, 1u);
      reference.pop_back();
    }
    EXPECT_TRUE(reference.empty());
  }
}

// Only the next task of the span pushed last joins it (alone or as the first of a span): same
// run, priority and queueing time, the next task and rank.
TEST(ReadyQueueOrder, OnlyTheSpansNextTaskJoinsIt) {
  auto *run = reinterpret_cast<RunState *>(0x10);
  ReadyQueue q;
  q.push_following(QueuedTask{0, 10, 1, run, {}, 10});
  q.push_following(QueuedTask{0, 11, 1, run, {}, 11});  // joins
  EXPECT_EQ(q.top().span, 2u);
  QueuedTask two{0, 12, 1, run, {}, 12};
  two.span = 2;
  q.push_following(two);  // joins as a span: 10..13
  EXPECT_EQ(q.top().span, 4u);
  q.push_following(QueuedTask{0, 15, 1, run, {}, 15});  // a gap
  q.push_following(QueuedTask{1, 16, 1, run, {}, 16});  // another priority (runs first)
  q.push_following(QueuedTask{0, 17, 2, run, {}, 17});  // another run
  q.push_following(QueuedTask{0, 18, 1, run, Clock::time_point{} + std::chrono::seconds(1), 18});
  EXPECT_EQ(q.size(), 8u);
  std::vector<TaskIndex> order;
  std::vector<uint32_t> spans;
  while (!q.empty()) {
    const QueuedTask e = q.pop_span(10);
    spans.push_back(e.span);
    for (uint32_t k = 0; k < e.span; ++k) order.push_back(e.task + k);
  }
  EXPECT_EQ(order, (std::vector<TaskIndex>{16, 10, 11, 12, 13, 15, 18, 17}));
  EXPECT_EQ(spans, (std::vector<uint32_t>{1, 4, 1, 1, 1}));
}

// Cancelling a run drops each task of its spans, once, and keeps the rest in order.
TEST(ReadyQueueOrder, RemoveRunDropsEachTaskOfItsSpans) {
  auto *a = reinterpret_cast<RunState *>(0x10);
  auto *b = reinterpret_cast<RunState *>(0x20);
  ReadyQueue q;
  for (uint32_t i = 0; i < 50; ++i) q.push_following(QueuedTask{0, i, 1, a, {}, i});
  for (uint32_t i = 0; i < 30; ++i) q.push_following(QueuedTask{0, i, 2, b, {}, 1000 + i});
  q.pop_span(5);  // a's 0..4
  std::vector<TaskIndex> removed;
  q.remove_run(a, [&](TaskIndex t) { removed.push_back(t); });
  std::vector<TaskIndex> want;
  for (TaskIndex t = 5; t < 50; ++t) want.push_back(t);
  EXPECT_EQ(removed, want);
  EXPECT_EQ(q.size(), 30u);
  std::vector<TaskIndex> rest = drain(q);
  ASSERT_EQ(rest.size(), 30u);
  for (size_t k = 0; k < rest.size(); ++k) EXPECT_EQ(rest[k], 1000 + k);
}

}  // namespace
}  // namespace gf
