// Device memory under pressure: a task whose inputs cannot fit on any device fails at once,
// naming itself, instead of moving data for ever; inputs that fit together are brought in while
// other data makes room; and a task that must wait for a running one never pushes out the inputs
// of a task that fits beside it (no thrashing); and every copy and spill is in the pool's event
// stream, for traces. Emulated devices, so it runs without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>

#include "test_support.hpp"

namespace {
using namespace gft;

constexpr uint64_t MiB = 1ull << 20;

gf_pool_config one_device(uint64_t capacity, uint32_t threads) {
  gf_pool_config c = host_config(1, 1, capacity, 4e9, threads);
  c.spill_threshold = 0.8;
  return c;
}

TaskSpec gpu_producer(const std::string &name, gf_data out, uint64_t size, uint64_t seed) {
  TaskSpec t;
  t.name = name;
  t.outputs = {out};
  t.gpu = [size, seed](gf_task_ctx *ctx) { return write_pattern(ctx, 0, size, seed) ? 0 : 1; };
  return t;
}

// A GPU task that checks its inputs' patterns (seeds 0, 1, ...) and writes an 8-byte verdict.
TaskSpec gpu_checker(const std::string &name, std::vector<gf_data> inputs, gf_data verdict) {
  TaskSpec t;
  t.name = name;
  t.inputs = std::move(inputs);
  t.outputs = {verdict};
  t.gpu = [n = t.inputs.size()](gf_task_ctx *ctx) {
    int64_t ok = 1;
    for (uint32_t i = 0; i < n; ++i) {
      const void *p = nullptr;
      uint64_t size = 0;
      if (gf_task_ctx_input(&p, &size, ctx, i) != GF_OK) return 1;
      if (!check_pattern(static_cast<const unsigned char *>(p), size, i)) ok = 0;
    }
    void *out = nullptr;
    if (gf_task_ctx_output(&out, ctx, 0, 8) != GF_OK) return 1;
    std::memcpy(out, &ok, 8);
    return 0;
  };
  return t;
}

// Five 14 MiB blocks made on the device (priority 10), then "check" reading the first three
// (42 MiB) into an 8-byte kept verdict: on a 64 MiB device some blocks must go to host and come
// back. `keep_last_two`: blocks 3 and 4 are kept outputs (GF_DATA_KEEP).
struct FiveBlocks {
  std::vector<gf_data> blocks;
  gf_data verdict{0};
  gf_task checker{0};
};

FiveBlocks add_five_blocks_and_checker(gf_graph *g, bool keep_last_two) {
  FiveBlocks out;
  std::vector<gf_task> makers;
  for (int i = 0; i < 5; ++i) {
    out.blocks.push_back(must_add_buffer(g, ("block" + std::to_string(i)).c_str(), 14 * MiB,
                                         keep_last_two && i >= 3 ? GF_DATA_KEEP : 0));
    TaskSpec p = gpu_producer("make" + std::to_string(i), out.blocks.back(), 14 * MiB,
                              static_cast<uint64_t>(i));
    p.priority = 10;
    makers.push_back(must_add_task(g, p));
  }
  out.verdict = must_add_buffer(g, "verdict", 8, GF_DATA_KEEP);
  TaskSpec check = gpu_checker("check", {out.blocks[0], out.blocks[1], out.blocks[2]}, out.verdict);
  check.after = makers;
  out.checker = must_add_task(g, check);
  return out;
}

}  // namespace

TEST(Spill, InputsThatCannotFitTogetherFailNamingTheTask) {
  // Three 30 MiB inputs for one GPU-only task on a 64 MiB device: it can never run there.
  Pool pool = make_pool(one_device(64 * MiB, 2));
  Graph g = make_graph();
  std::vector<gf_data> blocks;
  for (int i = 0; i < 3; ++i) {
    blocks.push_back(must_add_buffer(g.get(), ("block" + std::to_string(i)).c_str(), 30 * MiB));
    must_add_task(g.get(), gpu_producer("make" + std::to_string(i), blocks.back(), 30 * MiB,
                                        static_cast<uint64_t>(i)));
  }
  gf_data verdict = must_add_buffer(g.get(), "verdict", 8, GF_DATA_KEEP);
  gf_task all = must_add_task(g.get(), gpu_checker("check_all_three", blocks, verdict));
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  std::string m = GF_EXPECT_STATUS(GF_ERR_TASK_FAILED, gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(task_state(run.get(), all), GF_TASK_FAILED);
  std::string e = task_error(run.get(), all);
  EXPECT_NE(e.find("out of memory"), std::string::npos) << e;
  EXPECT_NE(e.find("check_all_three"), std::string::npos) << e;
  EXPECT_LE(run_stats(run.get()).transfers, 3u) << "data was moved back and forth meanwhile";
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Spill, InputsThatFitTogetherAreBroughtInWhileOtherDataMakesRoom) {
  // Five 14 MiB blocks are made on a 64 MiB device (some must go to host); a task reading three
  // of them (42 MiB) then runs there, its inputs brought back while the others make room.
  Pool pool = make_pool(one_device(64 * MiB, 2));
  Graph g = make_graph();
  const auto [blocks, verdict, checker] = add_five_blocks_and_checker(g.get(), true);
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_EQ(task_state(run.get(), checker), GF_TASK_SUCCEEDED);
  std::vector<unsigned char> bytes = fetch(run.get(), verdict);
  ASSERT_EQ(bytes.size(), 8u);
  int64_t ok = 0;
  std::memcpy(&ok, bytes.data(), 8);
  EXPECT_EQ(ok, 1) << "an input came back from host memory altered";
  EXPECT_LE(run_stats(run.get()).transfers, 10u) << "inputs were moved back and forth";
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Spill, TaskThatMustWaitNeverEvictsTheInputsOfOneThatFits) {
  // `long` holds 40 MiB of a 64 MiB device until released. `big` (first in line) needs 40 MiB
  // too and cannot start before `long` ends, whatever is spilled. `small` needs only its 8 MiB
  // input and fits beside `long` on the device's second thread: it must run now, and its input
  // must not be pushed out and copied back over and over for `big`'s sake.
  Pool pool = make_pool(one_device(64 * MiB, 2));
  Graph g = make_graph();
  std::vector<unsigned char> input(8 * MiB);
  for (size_t i = 0; i < input.size(); ++i) input[i] = pattern_byte(0, i);
  gf_data host_input{0};
  GF_ASSERT_OK(gf_graph_add_host_buffer(&host_input, g.get(), "input", input.data(), input.size(),
                                        GF_HOST_BUFFER_BORROW));
  auto long_started = std::make_shared<std::atomic<bool>>(false);
  auto release_long = std::make_shared<std::atomic<bool>>(false);
  TaskSpec hold;
  hold.name = "long";
  hold.priority = 100;
  hold.resources = {{"gpu_memory", 40.0 * MiB}};
  hold.gpu = [long_started, release_long](gf_task_ctx *) {
    long_started->store(true);
    wait_until([&] { return release_long->load(); }, 20000ms);
    return 0;
  };
  gf_task long_task = must_add_task(g.get(), hold);
  TaskSpec big;
  big.name = "big";
  big.priority = 50;
  big.resources = {{"gpu_memory", 40.0 * MiB}};
  big.gpu = [](gf_task_ctx *) { return 0; };
  must_add_task(g.get(), big);
  gf_data verdict = must_add_buffer(g.get(), "verdict", 8, GF_DATA_KEEP);
  gf_task small = must_add_task(g.get(), gpu_checker("small", {host_input}, verdict));
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(wait_until([&] { return long_started->load(); }));
  bool small_ran_beside_long =
      wait_until([&] { return task_state(run.get(), small) == GF_TASK_SUCCEEDED; }, 10000ms);
  EXPECT_EQ(task_state(run.get(), long_task), GF_TASK_RUNNING);
  release_long->store(true);
  EXPECT_TRUE(small_ran_beside_long) << "a task that fits waited behind one that does not";
  GF_EXPECT_OK(gf_run_wait(run.get(), kWaitMs));
  EXPECT_LE(run_stats(run.get()).transfers, 2u) << "the 8 MiB input was copied over and over";
  run.reset();
  expect_ledger_idle(pool.get());
}

TEST(Spill, QueuedTasksLeaveTheFirstInLineTheRoomItMade) {
  // Twelve 8 MiB blocks on a 64 MiB device (1.5x), then twelve checkers, each after every
  // producer, each reading one block. Making room for the first checker in line drops the
  // copies other queued checkers hold (their data is also on the host); were those fetched
  // straight back into that room, the two would push each other out for as long as the timing
  // allowed: thousands of copies of the same blocks in some runs, a handful in others. So five
  // runs, each within a few copies per block.
  constexpr int kBlocks = 12;
  Pool pool = make_pool(one_device(64 * MiB, 1));
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("run " + std::to_string(round + 1));
    Graph g = make_graph();
    std::vector<gf_task> makers;
    std::vector<gf_data> blocks, verdicts;
    for (int i = 0; i < kBlocks; ++i) {
      blocks.push_back(must_add_buffer(g.get(), ("block" + std::to_string(i)).c_str(), 8 * MiB, 0));
      TaskSpec p = gpu_producer("make" + std::to_string(i), blocks.back(), 8 * MiB, 0);
      p.priority = 10;
      makers.push_back(must_add_task(g.get(), p));
    }
    for (int i = 0; i < kBlocks; ++i) {
      verdicts.push_back(
          must_add_buffer(g.get(), ("verdict" + std::to_string(i)).c_str(), 8, GF_DATA_KEEP));
      TaskSpec check = gpu_checker("check" + std::to_string(i), {blocks[i]}, verdicts.back());
      check.after = makers;
      must_add_task(g.get(), check);
    }
    RunPtr run(submit(pool.get(), g.get()));
    ASSERT_NE(run, nullptr);
    GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
    for (gf_data v : verdicts) {
      std::vector<unsigned char> bytes = fetch(run.get(), v);
      int64_t ok = 0;
      ASSERT_EQ(bytes.size(), 8u);
      std::memcpy(&ok, bytes.data(), 8);
      EXPECT_EQ(ok, 1) << "a block came back changed";
    }
    // Each block may go to the host once and come back once, with a little slack.
    EXPECT_LE(run_stats(run.get()).transfers, 3u * kBlocks) << "blocks were moved over and over";
  }
  expect_ledger_idle(pool.get());
}

TEST(Spill, EveryCopyAndSpillIsInTheEventStream) {
  // The scenario above: blocks spilled to host and brought back for the checker. Each move is
  // one event naming the data, its size, where it went and where from, and taking time >= 0.
  Pool pool = make_pool(one_device(64 * MiB, 2));
  uint32_t gpu_worker = GF_NO_WORKER, workers = 0;
  GF_ASSERT_OK(gf_pool_worker_count(&workers, pool.get()));
  for (uint32_t w = 0; w < workers; ++w) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    GF_ASSERT_OK(gf_pool_worker_info(&info, pool.get(), w));
    if (info.kind == GF_WORKER_GPU) gpu_worker = w;
  }
  struct Move {
    gf_event_kind kind;
    uint64_t data, bytes;
    uint32_t worker, source;
    double time_s, duration_s;
    bool ok;
  };
  struct Seen {
    std::mutex mu;
    std::vector<Move> moves;
  } seen;
  GF_ASSERT_OK(gf_pool_set_event_callback(
      pool.get(),
      [](const gf_event *e, void *p) {
        if (e->kind != GF_EVENT_TRANSFER_FINISHED && e->kind != GF_EVENT_SPILL_FINISHED) return;
        auto &s = *static_cast<Seen *>(p);
        std::lock_guard lock(s.mu);
        s.moves.push_back(Move{e->kind, e->data.id, e->bytes, e->worker, e->source_worker,
                               e->time_s, e->duration_s, e->ok != 0});
      },
      &seen));
  Graph g = make_graph();
  const std::vector<gf_data> blocks = add_five_blocks_and_checker(g.get(), false).blocks;
  RunPtr run(submit(pool.get(), g.get()));
  ASSERT_NE(run, nullptr);
  GF_ASSERT_OK(gf_run_wait(run.get(), kWaitMs));
  const gf_run_stats stats = run_stats(run.get());
  GF_ASSERT_OK(gf_pool_set_event_callback(pool.get(), nullptr, nullptr));

  std::lock_guard lock(seen.mu);
  uint64_t spills = 0, copies_in = 0;
  for (const Move &m : seen.moves) {
    EXPECT_TRUE(m.ok);
    EXPECT_GT(m.duration_s, 0.0) << "a move of 14 MiB took no time";
    EXPECT_GE(m.time_s, m.duration_s);
    if (m.kind == GF_EVENT_SPILL_FINISHED) {
      ++spills;
      EXPECT_EQ(m.worker, gpu_worker) << "a spill is reported on the device it leaves";
      EXPECT_EQ(m.bytes, 14 * MiB);
      EXPECT_TRUE(std::any_of(blocks.begin(), blocks.end(), [&](gf_data b) {
        return b.id == m.data;
      })) << "a spill names data that is not one of the blocks";
    } else {
      ++copies_in;
      EXPECT_EQ(m.worker, gpu_worker) << "the only copies are inputs coming back to the device";
      EXPECT_EQ(m.source, GF_NO_WORKER) << "a copy onto the device came from host memory";
      EXPECT_EQ(m.bytes, 14 * MiB);
    }
  }
  EXPECT_GE(spills, 2u) << "five 14 MiB blocks on a 64 MiB device with an 80 % threshold";
  EXPECT_GE(copies_in, 1u) << "spilled inputs of the checker came back";
  EXPECT_EQ(copies_in, stats.transfers) << "every transfer the run counts is reported once";
}
