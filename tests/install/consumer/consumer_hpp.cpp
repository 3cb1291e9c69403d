// The installed C++ header, gpuflow.hpp (and its pieces under gpuflow/), as a user compiles it:
// one lambda task on a host pool, its result fetched.
#include <gpuflow.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

int main() {
  try {
    gpuflow::Pool pool(gpuflow::PoolConfig::host(1, 1));
    gpuflow::Graph graph;
    const gpuflow::Data out = graph.add_buffer(gpuflow::Buffer("out").size(sizeof(int64_t)));
    const int64_t base = 41;
    graph.task("answer")
        .cpu([base](gpuflow::TaskContext &ctx) { ctx.output_as<int64_t>(0, 1)[0] = base + 1; })
        .outputs({out})
        .add();
    gpuflow::Run run = graph.submit(pool);
    run.wait();
    if (run.fetch_one<int64_t>(out) != 42) return 1;
    std::printf("consumer_hpp: gpuflow %s, 42\n", std::string(gpuflow::version()).c_str());
    return 0;
  } catch (const gpuflow::Error &e) {
    std::fprintf(stderr, "consumer_hpp: %s\n", e.what());
    return 1;
  }
}
