// hello.cpp — hello.c in C++, with gpuflow.hpp: submit one function and read its result.
//
// The gpuflow equivalent of Dask's
//     future = client.submit(lambda: 10 + 1); print(future.result())
// One task, a lambda, writes 10 + 1 into an 8-byte buffer; the caller fetches it and prints "11".
// Exits non-zero (printing the gpuflow::Error, status and message) if any call fails or the value
// is wrong.
#include <gpuflow.hpp>

#include <cstdint>
#include <cstdio>

int main() {
  try {
    gpuflow::Pool pool{gpuflow::PoolConfig()};  // default pool: every core, plus emulated devices
    gpuflow::Graph graph;

    // The result: an 8-byte buffer. No task consumes it, so it is kept for Run::fetch.
    const gpuflow::Data result = graph.add_buffer(gpuflow::Buffer("result").size(sizeof(int64_t)));
    const int64_t ten = 10;  // captured: stored once in the graph, destroyed after the last run
    graph.task("ten_plus_one")
        .cpu([ten](gpuflow::TaskContext &ctx) { ctx.output_as<int64_t>(0, 1)[0] = ten + 1; })
        .outputs({result})
        .add();

    gpuflow::Run run = graph.submit(pool);
    run.wait();

    const auto value = run.fetch_one<int64_t>(result);
    std::printf("%lld\n", static_cast<long long>(value));
    if (value != 11) {
      std::fprintf(stderr, "hello: expected 11, got %lld\n", static_cast<long long>(value));
      return 1;
    }
    return 0;
  } catch (const gpuflow::Error &e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}
