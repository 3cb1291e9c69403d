#include "service/graph_runs.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <tuple>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "kernels/kernel_registry.hpp"
#include "pool/pool_core.hpp"
#include "serialize/serialize.hpp"
#include "transport/blob_host.hpp"
#include "wire/framing.hpp"

namespace gf::service {

struct GraphRuns::Session {
  ClientId client = 0;
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::function<void()>> jobs;
  bool ending = false;
  std::atomic<bool> done{false};
  std::map<uint64_t, std::shared_ptr<LocalRun>> runs;  // running, by the client's run id
  std::shared_ptr<PoolCore> pool;                      // the session thread's own
  uint64_t next_blob = 1;  // the client's blobs this session makes: | kServiceBlobBit
  std::thread thread;

  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu);
      jobs.push_back(std::move(job));
    }
    wake.notify_one();
  }

  void end() {
    {
      std::lock_guard lock(mu);
      ending = true;
    }
    wake.notify_one();
  }

  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu);
        wake.wait(lock, [&] { return !jobs.empty() || ending; });
        if (ending) break;  // the client left: what it queued is of no use to anyone
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      job();
    }
    std::map<uint64_t, std::shared_ptr<LocalRun>> left;
    {
      std::lock_guard lock(mu);
      left.swap(runs);
    }
    for (auto &[id, run] : left) run->cancel();
    // Waits for running bodies and hands the leases back through the service's loop.
    if (pool) pool->shutdown();
    for (auto &[id, run] : left) run->release([] {});
    left.clear();
    pool.reset();
    std::lock_guard lock(mu);
    jobs.clear();
    done = true;
  }
};

namespace {

constexpr size_t kMaxSummary = 64 << 10;
constexpr size_t kMaxTaskMessage = 4 << 10;
constexpr size_t kMaxReportMessages = 256 << 20;

// What each task did, as a RunReport blob for the client to read on its first per-task query.
std::shared_ptr<transport::Blob> report_of(LocalRun &run, const RunNews &news,
                                           const std::shared_ptr<transport::BlobTally> &tally) {
  const size_t n = run.graph().task_count();
  std::vector<uint8_t> states(n);
  std::vector<uint32_t> attempts(n), workers(n);
  flatbuffers::FlatBufferBuilder b(n * 10 + 1024);
  std::vector<flatbuffers::Offset<wire::TaskFailure>> failures;
  size_t message_bytes = 0;
  for (TaskIndex t = 0; t < n; ++t) {
    const TaskRecord s = run.task(t);
    states[t] = static_cast<uint8_t>(s.state);
    attempts[t] = s.attempts;
    workers[t] = s.attempts ? s.worker : UINT32_MAX;
    if (s.error && *s.error) {
      // Each message bounded, and all of them: a million cancelled tasks say the same thing.
      const size_t length = std::min(std::strlen(s.error), kMaxTaskMessage);
      if (message_bytes + length > kMaxReportMessages) continue;
      message_bytes += length;
      failures.push_back(wire::CreateTaskFailure(b, t, b.CreateString(s.error, length)));
    }
  }
  std::vector<flatbuffers::Offset<wire::RunOutput>> outputs;
  outputs.reserve(news.outputs.size());
  for (const RunNews::Output &o : news.outputs) {
    outputs.push_back(wire::CreateRunOutput(b, o.data, o.blob_id, o.bytes->size()));
  }
  b.Finish(wire::CreateRunReport(b, b.CreateVector(states), b.CreateVector(attempts),
                                 b.CreateVector(workers), b.CreateVector(failures),
                                 b.CreateVector(outputs)));
  auto blob = std::make_shared<transport::Blob>(b.GetSize(), tally);
  std::memcpy(blob->data(), b.GetBufferPointer(), b.GetSize());
  return blob;
}

// The ended run as news for its client: its state, statistics, kept outputs and report. The run
// is released here.
RunNews finished(ClientId client, uint64_t run_id, LocalRun &run, PoolCore &pool,
                 const std::shared_ptr<transport::BlobTally> &tally, uint64_t &next_blob,
                 uint64_t cap) {
  RunNews news;
  news.kind = RunNews::Kind::kFinished;
  news.client = client;
  news.run_id = run_id;
  news.state = run.state();
  if (news.state == GF_RUN_FAILED) {
    // Bounded: a body's message can be any length, and a control frame holds at most 4 MiB (the
    // report has every task's message in full).
    news.why = run.failure_summary().substr(0, kMaxSummary);
  }
  if (news.state == GF_RUN_CANCELLED) news.why = "the run was cancelled";
  news.stats = run.snapshot();
  try {
    std::vector<std::pair<DataIndex, uint64_t>> kept;
    uint64_t total = 0;
    for (const auto &[d, size] : pool.scheduler().readable_buffers(run.run_state())) {
      if (run.graph().data(d).origin != DataOrigin::kProduced) continue;  // the client has those
      kept.emplace_back(d, size);
      total += size;
    }
    // Checked before reading them: a run must not fill the service's memory with results its
    // client may not hold anyway.
    if (total > cap) {
      fail(GF_ERR_OUT_OF_MEMORY, "its kept outputs (" + std::to_string(total) +
                                     " bytes) pass this client's blob cap of " +
                                     std::to_string(cap) + " bytes");
    }
    for (const auto &[d, size] : kept) {
      auto blob = std::make_shared<transport::Blob>(size, tally);
      run.read_buffer(d, blob->data(), size);
      news.outputs.push_back({d, transport::kServiceBlobBit | next_blob++, std::move(blob)});
    }
    news.report = report_of(run, news, tally);
    news.report_id = transport::kServiceBlobBit | next_blob++;
  } catch (const Error &e) {
    news.state = GF_RUN_FAILED;
    news.why = std::string("the service could not gather the run's results: ") + e.what();
    news.outputs.clear();
    news.report.reset();
  }
  run.release([] {});
  return news;
}

}  // namespace

GraphRuns::GraphRuns(Options options, std::function<void(RunNews)> deliver)
    : options_(std::move(options)), deliver_(std::move(deliver)) {
  KernelRegistry probe;
  for (const std::string &plugin : options_.plugins) probe.load_plugin(plugin);
  for (size_t i = 0; i < probe.size(); ++i) kernels_.push_back(probe.name(i));
}

GraphRuns::~GraphRuns() {
  stop();
}

std::shared_ptr<GraphRuns::Session> GraphRuns::session_of(ClientId client) {
  std::lock_guard lock(mu_);
  if (stopped_) return nullptr;
  std::shared_ptr<Session> &s = sessions_[client];
  if (!s) {
    s = std::make_shared<Session>();
    s->client = client;
    s->thread = std::thread([raw = s.get()] { raw->loop(); });
  }
  return s;
}

void GraphRuns::submit(ClientId client, const std::string &client_name, uint64_t request_id,
                       uint64_t run_id, std::shared_ptr<transport::Blob> document,
                       Directories directories, std::shared_ptr<transport::BlobTally> tally) {
  std::shared_ptr<Session> s = session_of(client);
  if (!s) return;  // stopping: the client is told goodbye
  Session *session = s.get();
  s->post([this, session, client, client_name, request_id, run_id, document = std::move(document),
           directories = std::move(directories), tally = std::move(tally)]() mutable {
    RunNews news;
    news.client = client;
    news.request_id = request_id;
    news.run_id = run_id;
    bool registered = false;
    try {
      {
        std::lock_guard lock(session->mu);
        if (session->runs.count(run_id)) {
          fail(GF_ERR_INVALID_ARGUMENT, "run " + std::to_string(run_id) + " is already running");
        }
      }
      std::shared_ptr<Graph> graph =
          serialize::from_bytes(document->data(), document->size(), GF_GRAPH_FORMAT_BINARY, 0);
      document.reset();
      if (!directories.working.empty()) {
        graph->place_commands(directories.working, directories.log);
      }
      if (!session->pool) {
        auto connection = client::Connection::open(
            options_.endpoint, client_name.empty() ? "graph" : client_name + " (graph)", 1.0, 5000,
            client);
        auto pool = PoolCore::create_connected(options_.pool, std::move(connection));
        for (const std::string &plugin : options_.plugins) pool->kernels().load_plugin(plugin);
        session->pool = std::move(pool);
      }
      std::shared_ptr<LocalRun> run = session->pool->prepare(graph);
      run->run_state().completion.set_callback([this, session, client, run_id, tally] {
        session->post([this, session, client, run_id, tally] {
          std::shared_ptr<LocalRun> ended;
          {
            std::lock_guard lock(session->mu);
            auto it = session->runs.find(run_id);
            if (it == session->runs.end()) return;
            ended = std::move(it->second);
            session->runs.erase(it);
          }
          deliver_(finished(client, run_id, *ended, *session->pool, tally, session->next_blob,
                            options_.blob_cap));
        });
      });
      {
        std::lock_guard lock(session->mu);
        session->runs[run_id] = run;
        registered = true;
      }
      // Accepted is delivered before the run can be reported finished: that report is a job
      // queued behind this one.
      run->start();
      news.tasks = graph->task_count();
      news.kind = RunNews::Kind::kAccepted;
    } catch (const Error &e) {
      if (registered) {
        std::lock_guard lock(session->mu);
        session->runs.erase(run_id);
      }
      news.kind = RunNews::Kind::kRefused;
      news.status = e.status();
      news.why = e.what();
    } catch (const std::exception &e) {  // out of memory or threads: the service goes on
      if (registered) {
        std::lock_guard lock(session->mu);
        session->runs.erase(run_id);
      }
      news.kind = RunNews::Kind::kRefused;
      news.status = GF_ERR_SYSTEM;
      news.why = std::string("the service could not run the graph: ") + e.what();
    }
    deliver_(std::move(news));
  });
}

bool GraphRuns::cancel(ClientId client, uint64_t run_id) {
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(client);
    if (it == sessions_.end()) return false;
    s = it->second;
  }
  std::shared_ptr<LocalRun> run;
  {
    std::lock_guard lock(s->mu);
    auto it = s->runs.find(run_id);
    if (it == s->runs.end()) return false;
    run = it->second;
  }
  // Cancelling walks the run's tasks under its scheduler's lock: the session does it, never the
  // service's loop.
  s->post([run] { run->cancel(); });
  return true;
}

void GraphRuns::progress(const std::function<void(ClientId, uint64_t, const RunStats &)> &report) {
  std::vector<std::tuple<ClientId, uint64_t, std::shared_ptr<LocalRun>>> running;
  {
    std::lock_guard lock(mu_);
    for (const auto &[client, s] : sessions_) {
      std::lock_guard session_lock(s->mu);
      for (const auto &[run_id, run] : s->runs) running.emplace_back(client, run_id, run);
    }
  }
  for (const auto &[client, run_id, run] : running) report(client, run_id, run->snapshot());
}

void GraphRuns::client_gone(ClientId client) {
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(client);
    if (it == sessions_.end()) return;
    it->second->end();
    retired_.push_back(std::move(it->second));
    sessions_.erase(it);
  }
  reap(false);
}

void GraphRuns::reap(bool all) {
  std::vector<std::shared_ptr<Session>> ending;
  {
    std::lock_guard lock(mu_);
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (all || (*it)->done) {
        ending.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto &s : ending) {
    if (s->thread.joinable()) s->thread.join();
  }
}

void GraphRuns::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto &[client, s] : sessions_) {
      s->end();
      retired_.push_back(std::move(s));
    }
    sessions_.clear();
  }
  reap(true);
}

}  // namespace gf::service
