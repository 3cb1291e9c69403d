// Connection's calls for graphs that run in the service (declared in client/connection.hpp):
// submit a document blob as a run, cancel it. RunFinished comes unasked and is handed to the
// run's `finished` by the reader thread (client/connection.cpp).
#include "client/connection.hpp"
#include "client/message_support.hpp"
#include "core/error.hpp"
#include "wire/framing.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

// Reading a large document and preparing its run takes the service a while (a million tasks:
// about a second); this only guards against a service that stopped answering without closing.
constexpr int64_t kAcceptMs = 120000;

}  // namespace

uint64_t Connection::submit_graph(uint64_t run_id, uint64_t document_blob,
                                  const std::string &working_directory,
                                  const std::string &log_directory, RunDone finished,
                                  RunProgressed progressed) {
  {
    std::lock_guard lock(mu_);
    if (closed_) fail(GF_ERR_SYSTEM, gone());
    if (!runs_.emplace(run_id, RunWatch{std::move(finished), std::move(progressed), false})
             .second) {
      fail(GF_ERR_INVALID_ARGUMENT, "run " + std::to_string(run_id) + " is already running");
    }
  }
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  auto frame = wire::frame_of(
      b, wire::CreateGraphSubmit(b, id, run_id, document_blob, b.CreateString(working_directory),
                                 b.CreateString(log_directory)));
  std::vector<uint8_t> payload;
  try {
    payload = call(id, frame, deadline_in(kAcceptMs));
  } catch (const Error &e) {
    {
      std::lock_guard lock(mu_);
      runs_.erase(run_id);
    }
    if (e.status() == GF_TIMEOUT) cancel_run(run_id);  // it may still be read and run there
    throw;
  }
  const wire::Message *m = wire::message_of(payload);
  if (const auto *accepted = m->body_as_RunAccepted()) return accepted->tasks();
  std::lock_guard lock(mu_);
  runs_.erase(run_id);
  if (const auto *e = m->body_as_Error())
    fail(static_cast<gf_status>(e->status()), str(e->message()));
  fail(GF_ERR_SYSTEM,
       endpoint_ + " answered a graph submission with " + wire::body_name(m->body_type()));
}

void Connection::cancel_run(uint64_t run_id) {
  // The answer (Cancelled, or an Error for a run that already ended) changes nothing here.
  send_unanswered([run_id](fb::FlatBufferBuilder &b, uint64_t id) {
    return wire::frame_of(b, wire::CreateRunCancel(b, id, run_id));
  });
}

}  // namespace gf::client
