#include "service/run_handler.hpp"

#include "core/request_bounds.hpp"
#include "core/utf8.hpp"
#include "wire/records.hpp"

namespace gf::service {

namespace fb = flatbuffers;

void RunHandler::on_graph_submit(Client &c, const wire::GraphSubmit &m) {
  const uint64_t request = m.request_id();
  if (!w_.plane.require_plane(c, request)) return;
  std::shared_ptr<transport::Blob> document = c.plane.blobs->take(m.document_blob());
  if (!document) {
    return c.send_error(request, GF_ERR_NOT_FOUND,
                        "no blob " + std::to_string(m.document_blob()) +
                            " to read the graph document from (put it first)");
  }
  // A remote client's directories are paths on its own host: its commands start in the
  // service's working directory instead, and log where the service's would.
  const bool here = c.peer.on_this_host();
  std::string cwd = here ? wire::str(m.working_directory()) : std::string();
  std::string log_dir = here ? wire::str(m.log_directory()) : std::string();
  for (const std::string *dir : {&cwd, &log_dir}) {
    if (!dir->empty() && ((*dir)[0] != '/' || dir->size() > bounds::kMaxPathBytes ||
                          utf8_error_at(*dir) != std::string::npos)) {
      return c.send_error(request, GF_ERR_INVALID_ARGUMENT,
                          std::string("the ") + (dir == &cwd ? "working" : "log") +
                              " directory of a graph must be an absolute UTF-8 path of at most "
                              "GF_MAX_PATH_BYTES (" +
                              std::to_string(bounds::kMaxPathBytes) + ")");
    }
  }
  w_.graphs.submit(c.id, c.name, request, m.run_id(), std::move(document),
                   {std::move(cwd), std::move(log_dir)}, w_.plane.tally());
}

void RunHandler::on_run_cancel(Client &c, const wire::RunCancel &m) {
  if (!w_.graphs.cancel(c.id, m.run_id())) {
    return c.send_error(m.request_id(), GF_ERR_NOT_FOUND,
                        "no run " + std::to_string(m.run_id()) + " of yours is running");
  }
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::CreateCancelled(b, m.request_id(), m.run_id())));
}

void RunHandler::send_progress() {
  std::map<std::pair<ClientId, uint64_t>, uint64_t> seen;
  w_.graphs.progress([&](ClientId client, uint64_t run_id, const RunStats &s) {
    Client *c = w_.clients.find(client);
    if (!c || c->closing) return;
    const uint64_t done = s.succeeded + s.failed + s.cancelled + s.attempts;
    seen[{client, run_id}] = done;
    auto last = progress_sent_.find({client, run_id});
    if (last != progress_sent_.end() && last->second == done) return;
    fb::FlatBufferBuilder b;
    c->send(wire::frame_of(
        b, wire::CreateRunProgress(b, run_id, s.succeeded, s.failed, s.cancelled, s.attempts)));
  });
  progress_sent_.swap(seen);  // runs that ended are forgotten
}

void RunHandler::set_wake(std::function<void()> wake) {
  std::lock_guard lock(news_mu_);
  wake_ = std::move(wake);
}

void RunHandler::post_news(RunNews n) {
  std::lock_guard lock(news_mu_);
  if (!news_open_) return;
  news_.push_back(std::move(n));
  if (wake_) wake_();
}

void RunHandler::close_news() {
  std::lock_guard lock(news_mu_);
  news_open_ = false;
  news_.clear();
}

void RunHandler::send_news() {
  std::deque<RunNews> batch;
  {
    std::lock_guard lock(news_mu_);
    batch.swap(news_);
  }
  for (RunNews &n : batch) {
    Client *c = w_.clients.find(n.client);
    if (!c || c->closing) continue;  // its blobs go with `n`
    fb::FlatBufferBuilder b;
    switch (n.kind) {
      case RunNews::Kind::kAccepted:
        c->send(wire::frame_of(b, wire::CreateRunAccepted(b, n.request_id, n.run_id, n.tasks)));
        break;
      case RunNews::Kind::kRefused:
        c->send_error(n.request_id, n.status, n.why);
        break;
      case RunNews::Kind::kFinished:
        finish_run(*c, n);
        break;
    }
  }
}

// The run's outputs and report become the client's blobs (all or none), and RunFinished
// names the report, which lists the outputs.
void RunHandler::finish_run(Client &c, RunNews &n) {
  std::vector<uint64_t> adopted;
  std::string refused;
  auto adopt = [&](uint64_t id, std::shared_ptr<transport::Blob> blob) {
    if (!refused.empty()) return;
    if (!c.plane.blobs) {
      refused = "the data plane to this client closed before the run ended";
    } else if (Refusal r = c.plane.blobs->adopt(id, std::move(blob))) {
      refused = "the run's results could not be kept for the client: " + r.why;
    } else {
      adopted.push_back(id);
    }
  };
  for (RunNews::Output &o : n.outputs) adopt(o.blob_id, std::move(o.bytes));
  const uint64_t report_size = n.report ? n.report->size() : 0;
  if (n.report) adopt(n.report_id, std::move(n.report));
  uint64_t report = n.report_id;
  if (!refused.empty()) {
    for (uint64_t id : adopted) c.plane.blobs->drop(id);
    n.state = GF_RUN_FAILED;
    n.why = refused;
    report = 0;
  } else if (report) {
    std::vector<uint64_t> &outputs = c.plane.run_blobs[report];
    for (const RunNews::Output &o : n.outputs) outputs.push_back(o.blob_id);
  }
  const RunStats &s = n.stats;
  fb::FlatBufferBuilder b;
  c.send(wire::frame_of(b, wire::CreateRunFinished(b, n.run_id, n.state, b.CreateString(n.why),
                                                   s.tasks, s.succeeded, s.failed, s.cancelled,
                                                   s.attempts, s.transfers, s.bytes_transferred,
                                                   s.elapsed_s, report, report ? report_size : 0)));
}

}  // namespace gf::service
