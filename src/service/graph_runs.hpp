// Graphs that clients run inside the service (docs/transport.md, "Graphs in the service"). Each
// client that submits one gets a session: a thread of its own and, from its first graph on, a pool
// on the node's devices whose lease agent leases through the service's own socket in that client's
// name (Hello.on_behalf_of), so fair share, caps and status see the real client. Documents are
// read, runs prepared and outputs gathered on the session's thread, never on the service's loop;
// what the loop must send comes back through `deliver`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pool/pool_options.hpp"
#include "runtime/run.hpp"
#include "service/lease_book.hpp"
#include "transport/blob_store.hpp"

namespace gf::service {

// What a session hands the loop: a run accepted or refused, or a run that ended.
struct RunNews {
  enum class Kind { kAccepted, kRefused, kFinished };
  Kind kind = Kind::kAccepted;
  ClientId client = 0;
  uint64_t request_id = 0;  // kAccepted, kRefused: the GraphSubmit's
  uint64_t run_id = 0;
  uint64_t tasks = 0;        // kAccepted
  gf_status status = GF_OK;  // kRefused
  std::string why;           // kRefused; kFinished: the failure summary
  gf_run_state state = GF_RUN_FAILED;
  RunStats stats{};
  struct Output {
    uint32_t data = 0;
    uint64_t blob_id = 0;  // the client's blob it becomes (kServiceBlobBit set)
    std::shared_ptr<transport::Blob> bytes;
  };
  std::vector<Output> outputs;
  std::shared_ptr<transport::Blob> report;  // a RunReport (wire.fbs), listing the outputs
  uint64_t report_id = 0;
};

class GraphRuns {
 public:
  struct Options {
    std::string endpoint;  // the service's own: the sessions' pools lease through it
    PoolOptions pool;
    std::vector<std::string> plugins;
    uint64_t blob_cap =
        0;  // a client's: a run whose kept outputs pass it fails before reading them
  };
  // Loads every plugin once to check it and learn its kernels. Throws gf::Error naming the
  // plugin that cannot be loaded. `deliver` is called from session threads.
  GraphRuns(Options options, std::function<void(RunNews)> deliver);
  ~GraphRuns();  // stop()

  const std::vector<std::string> &kernels() const { return kernels_; }
  // Where a client's commands start and log (absolute paths; empty: the service's own).
  struct Directories {
    std::string working, log;
  };
  // Queues a graph document (binary) of `client` to be read and run. Never blocks.
  void submit(ClientId client, const std::string &client_name, uint64_t request_id, uint64_t run_id,
              std::shared_ptr<transport::Blob> document, Directories directories,
              std::shared_ptr<transport::BlobTally> tally);
  // Cancels a run of this client; false when it has none running by that id.
  bool cancel(ClientId client, uint64_t run_id);
  // How far each running run has got: `report(client, run_id, snapshot)` for each. Cheap (the
  // scheduler's counters, no walk over tasks): the loop calls it on its tick.
  void progress(const std::function<void(ClientId, uint64_t, const RunStats &)> &report);
  // The client left: its runs are cancelled and its pool goes, on the session's thread.
  void client_gone(ClientId client);
  // Ends every session and waits for them (their pools hand their leases back first, so the
  // service's loop must still be running). Idempotent.
  void stop();

 private:
  struct Session;
  std::shared_ptr<Session> session_of(ClientId client);
  void reap(bool all);  // joins retired sessions (all: waiting for them)

  Options options_;
  std::function<void(RunNews)> deliver_;
  std::vector<std::string> kernels_;
  std::mutex mu_;
  std::map<ClientId, std::shared_ptr<Session>> sessions_;
  std::vector<std::shared_ptr<Session>> retired_;
  bool stopped_ = false;
};

}  // namespace gf::service
