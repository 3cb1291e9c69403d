// One gpuflow-relay child of the service (tools/relay): started for a remote client's data plane,
// told the two worker addresses on its standard input, answering with its own two on standard
// output, and watched until it ends. libuv runs it (uv_spawn), on the service's loop thread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gf::service {

class RelayProcess {
 public:
  struct Addresses {
    std::vector<uint8_t> toward_service;  // its shared-memory worker: the service connects here
    std::vector<uint8_t> toward_client;   // its TCP worker: the remote client connects here
  };
  using OnReady = std::function<void(Addresses)>;
  // It ended on its own (crashed, or a side failed): what it said last, or how it ended.
  using OnEnd = std::function<void(const std::string &why)>;

  // Starts `program` with `args` and writes `input` to its standard input. Throws gf::Error
  // (GF_ERR_SYSTEM) when it cannot be started.
  static std::unique_ptr<RelayProcess> start(uv_loop_t *loop, const std::string &program,
                                             const std::vector<std::string> &args,
                                             const std::string &input, OnReady on_ready,
                                             OnEnd on_end);
  // Closes its standard input and kills it (SIGKILL); no callback runs after.
  ~RelayProcess();
  RelayProcess(const RelayProcess &) = delete;
  RelayProcess &operator=(const RelayProcess &) = delete;

  int pid() const;

  struct State;

 private:
  explicit RelayProcess(State *state) : state_(state) {}
  State *state_;  // frees itself once libuv has closed every handle
};

}  // namespace gf::service
