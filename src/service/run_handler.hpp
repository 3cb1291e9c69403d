// Graphs that run in the service, as the loop sees them (graph_runs.hpp runs them): GraphSubmit
// and RunCancel from clients, and what the runs' sessions tell the loop (accepted, refused,
// progress, finished) to their clients. Sessions run on threads of their own: their news is
// queued here and sent from the loop.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "service/client.hpp"
#include "service/graph_runs.hpp"
#include "service/plane_handler.hpp"
#include "wire/framing.hpp"

namespace gf::service {

class RunHandler {
 public:
  struct Collaborators {
    GraphRuns &graphs;
    PlaneHandler &plane;  // documents and results are the client's blobs
    const ClientTable &clients;
  };
  explicit RunHandler(Collaborators with) : w_(std::move(with)) {}

  void on_graph_submit(Client &c, const wire::GraphSubmit &m);
  void on_run_cancel(Client &c, const wire::RunCancel &m);

  // From session threads: queued; `wake` (once set) has the loop call send_news().
  void post_news(RunNews n);
  void set_wake(std::function<void()> wake);
  void send_news();
  // No news is taken once the loop is stopping.
  void close_news();
  // Each running graph's counts to its client, when they changed since last time.
  void send_progress();
  void client_gone(Client &c) { w_.graphs.client_gone(c.id); }

 private:
  void finish_run(Client &c, RunNews &n);

  Collaborators w_;
  std::mutex news_mu_;
  std::deque<RunNews> news_;                                         // under news_mu_
  bool news_open_ = true;                                            // under news_mu_
  std::function<void()> wake_;                                       // under news_mu_
  std::map<std::pair<ClientId, uint64_t>, uint64_t> progress_sent_;  // (client, run) -> counts
};

}  // namespace gf::service
