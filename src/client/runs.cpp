#include "client/runs.hpp"

#include "client/deadlines.hpp"
#include "core/error.hpp"
#include "wire/records.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

// Reading a large document and preparing its run takes the service a while (a million tasks:
// about a second); this only guards against a service that stopped answering without closing.
constexpr int64_t kAcceptMs = 120000;

}  // namespace

RunClient::RunClient(Session &session, BlobClient &blobs) : session_(session), blobs_(blobs) {
  session_.on(wire::Body::RunAccepted, [this](const std::vector<uint8_t> &payload) {
    accepted(*wire::message_of(payload)->body_as_RunAccepted());
  });
  session_.on(wire::Body::RunProgress,
              [this](const std::vector<uint8_t> &payload) { progressed(payload); });
  session_.on(wire::Body::RunFinished,
              [this](const std::vector<uint8_t> &payload) { finished(payload); });
  session_.on_close([this](const std::string &why) { closed(why); });
}

uint64_t RunClient::submit_graph(uint64_t run_id, uint64_t document_blob,
                                 const std::string &working_directory,
                                 const std::string &log_directory, RunDone finished,
                                 RunProgressed progressed) {
  {
    std::lock_guard lock(mu_);
    // Checked under mu_: a close after this sees the run in runs_.
    if (!session_.alive()) session_.fail_gone();
    if (!runs_.emplace(run_id, RunWatch{std::move(finished), std::move(progressed), false})
             .second) {
      fail(GF_ERR_INVALID_ARGUMENT, "run " + std::to_string(run_id) + " is already running");
    }
  }
  const uint64_t id = session_.next_id();
  fb::FlatBufferBuilder b;
  auto frame = wire::frame_of(
      b, wire::CreateGraphSubmit(b, id, run_id, document_blob, b.CreateString(working_directory),
                                 b.CreateString(log_directory)));
  std::vector<uint8_t> payload;
  try {
    payload = session_.call(id, frame, deadline_in(kAcceptMs));
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
  {
    std::lock_guard lock(mu_);
    runs_.erase(run_id);
  }
  if (Refusal refused = wire::refusal_of(*m)) fail(refused.status, refused.why);
  fail(GF_ERR_SYSTEM, session_.endpoint() + " answered a graph submission with " +
                          wire::body_name(m->body_type()));
}

void RunClient::cancel_run(uint64_t run_id) {
  // The answer (Cancelled, or an Error for a run that already ended) changes nothing here.
  session_.send_unanswered([run_id](fb::FlatBufferBuilder &b, uint64_t id) {
    return wire::frame_of(b, wire::CreateRunCancel(b, id, run_id));
  });
}

void RunClient::accepted(const wire::RunAccepted &accepted) {
  std::lock_guard lock(mu_);  // before the submitter wakes (the session routes the answer next)
  if (auto it = runs_.find(accepted.run_id()); it != runs_.end()) it->second.accepted = true;
}

void RunClient::progressed(const std::vector<uint8_t> &payload) {
  RunProgressed progressed;
  {
    std::lock_guard lock(mu_);
    auto it = runs_.find(wire::message_of(payload)->body_as_RunProgress()->run_id());
    if (it != runs_.end()) progressed = it->second.progressed;
  }
  if (progressed) progressed(payload);
}

void RunClient::finished(const std::vector<uint8_t> &payload) {
  const wire::RunFinished *f = wire::message_of(payload)->body_as_RunFinished();
  RunDone done;
  {
    std::lock_guard lock(mu_);
    auto it = runs_.find(f->run_id());
    if (it != runs_.end()) {
      done = std::move(it->second.done);
      runs_.erase(it);
    }
  }
  if (done) {
    done(&payload, {});
  } else if (f->report_blob()) {
    blobs_.forget_blob(f->report_blob());  // nobody waits for it (the submit gave up)
  }
}

void RunClient::closed(const std::string &why) {
  std::vector<RunDone> ended;
  {
    std::lock_guard lock(mu_);
    // A run not accepted yet is no run: its submit fails instead (it sees the connection close).
    for (auto &[run, watch] : runs_) {
      if (watch.accepted) ended.push_back(std::move(watch.done));
    }
    runs_.clear();
  }
  for (auto &done : ended) done(nullptr, why);
}

}  // namespace gf::client
