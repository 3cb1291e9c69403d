// Graphs that run in the service (docs/transport.md, "Graphs in the service"), on a connection:
// submit a document blob as a run, cancel it, and hear how it goes (RunProgress) and how it
// ended (RunFinished), which the service sends unasked. Its own state is the runs it watches.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "client/blobs.hpp"
#include "client/session.hpp"

namespace gf::client {

class RunClient {
 public:
  // Registers with `session` (before Session::start()). `blobs` takes back the report of a run
  // nobody waits for any more.
  RunClient(Session &session, BlobClient &blobs);

  // `finished` runs once, on the reader thread: with the verified RunFinished message, or with
  // null and why when the connection closed first. It must be quick.
  using RunDone = std::function<void(const std::vector<uint8_t> *payload, const std::string &why)>;
  // Called on the reader thread with each verified RunProgress message while the run runs.
  using RunProgressed = std::function<void(const std::vector<uint8_t> &payload)>;
  // Submits the graph document in blob `document_blob` as run `run_id` (commands start in
  // `working_directory` or relative to it, and log to `log_directory` unless they say where).
  // Returns the run's task count once the service accepted it; throws its refusal (then
  // `finished` never runs).
  uint64_t submit_graph(uint64_t run_id, uint64_t document_blob,
                        const std::string &working_directory, const std::string &log_directory,
                        RunDone finished, RunProgressed progressed = {});
  // Asks the service to cancel the run; its RunFinished follows. Never throws: a gone service
  // has ended the run already.
  void cancel_run(uint64_t run_id);
  uint64_t next_run_id() { return next_run_++; }

 private:
  struct RunWatch {
    RunDone done;
    RunProgressed progressed;
    bool accepted = false;  // RunAccepted came: only then does a closing connection end it
  };
  void accepted(const wire::RunAccepted &accepted);
  void progressed(const std::vector<uint8_t> &payload);
  void finished(const std::vector<uint8_t> &payload);
  void closed(const std::string &why);

  Session &session_;
  BlobClient &blobs_;
  std::mutex mu_;
  std::map<uint64_t, RunWatch> runs_;  // runs in the service, by run id; under mu_
  std::atomic<uint64_t> next_run_{1};
};

}  // namespace gf::client
