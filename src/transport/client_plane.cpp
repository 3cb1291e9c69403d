#include "transport/client_plane.hpp"

#include <chrono>

#include "core/error.hpp"
#include "transport/request.hpp"
#include "transport/ucx_api.hpp"

namespace gf::transport {

struct ClientPlane::Op {
  void *request = nullptr;  // progress thread only
  bool receive = false;
  size_t size = 0;
  bool begun = false;  // under mu_
  bool done = false;   // under mu_
  gf_status status = GF_ERR_SYSTEM;
  std::string error;  // under mu_
  std::function<void()> on_done;
};

ClientPlane::ClientPlane(std::unique_ptr<ProgressThread> thread, std::string peer)
    : peer_(std::move(peer)), thread_(std::move(thread)) {}

std::unique_ptr<ClientPlane> ClientPlane::create(const std::string &name, std::string peer,
                                                 const std::string &net_device) {
  auto thread = std::make_unique<ProgressThread>(
      net_device.empty() ? Worker::create(name) : Worker::create_networked(name, net_device));
  std::unique_ptr<ClientPlane> plane(new ClientPlane(std::move(thread), std::move(peer)));
  plane->address_ = plane->thread_->worker().address();
  ClientPlane *raw = plane.get();
  plane->thread_->on_stop([raw] { raw->fail_on_thread("the data plane was closed"); });
  return plane;
}

ClientPlane::~ClientPlane() {
  fail("the data plane was closed by this process");
  // Joined before any member goes: the thread's last functions still use ep_ and thread_.
  thread_->stop();
}

void ClientPlane::connect(const std::vector<uint8_t> &service_address) {
  thread_->run([&] {
    ep_ = std::make_unique<Endpoint>(thread_->worker(), service_address, peer_,
                                     [this](const std::string &why) { fail_on_thread(why); });
  });
}

ClientPlane::OpHandle ClientPlane::prepare(std::function<void()> on_done) {
  auto op = std::make_shared<Op>();
  op->on_done = std::move(on_done);
  return op;
}

void ClientPlane::end(const OpHandle &op, gf_status status, const std::string &error) {
  {
    std::lock_guard lock(mu_);
    if (op->done) return;
    op->done = true;
    op->status = status;
    op->error = error;
  }
  changed_.notify_all();
  if (op->on_done) op->on_done();
}

void ClientPlane::abandon(const OpHandle &op, gf_status status, const std::string &why) {
  {
    std::lock_guard lock(mu_);
    if (op->begun) return;
    op->begun = true;
  }
  end(op, status, why);
}

void ClientPlane::begin(const OpHandle &op, bool receive, uint64_t tag, void *data, size_t size) {
  {
    std::lock_guard lock(mu_);
    if (op->begun) return;
    op->begun = true;
  }
  changed_.notify_all();
  op->receive = receive;
  op->size = size;
  if (!receive && !ep_) {
    return end(op, GF_ERR_INVALID_ARGUMENT, "the data plane to " + peer_ + " is not connected");
  }
  auto body = [this, op, receive, tag, data, size] {
    std::string failed;
    {
      std::lock_guard lock(mu_);
      failed = failed_;
    }
    if (!failed.empty()) return end(op, GF_ERR_SYSTEM, failed);
    Done done = [this, op](ucs_status_t status, size_t length) {
      op->request = nullptr;
      in_flight_.erase(op);
      thread_->ended();
      std::string error;
      if (status != UCS_OK) {
        std::lock_guard lock(mu_);
        error = !failed_.empty() ? failed_
                                 : "the UCX data plane to " + peer_ + ": " +
                                       (op->receive ? "a receive" : "a send") +
                                       " failed: " + ucx().ucs_status_string(status);
      } else if (op->receive && length != op->size) {
        error = peer_ + " sent " + std::to_string(length) + " bytes where " +
                std::to_string(op->size) + " were announced";
      }
      end(op, GF_ERR_SYSTEM, error);
    };
    thread_->started();
    in_flight_.insert(op);
    op->request = receive ? tag_recv(thread_->worker().get(), data, size, tag, done)
                          : tag_send(ep_->get(), data, size, tag, done);
  };
  if (!thread_->post(std::move(body))) {
    end(op, GF_ERR_SYSTEM, "the data plane to " + peer_ + " is closed");
  }
}

bool ClientPlane::wait_begun(const OpHandle &op, int64_t deadline_ms) {
  std::unique_lock lock(mu_);
  return changed_.wait_until(
      lock, std::chrono::steady_clock::time_point(std::chrono::milliseconds(deadline_ms)),
      [&] { return op->begun || op->done; });
}

void ClientPlane::wait(const OpHandle &op) {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return op->done; });
  if (!op->error.empty()) gf::fail(op->status, op->error);
}

bool ClientPlane::finished(const OpHandle &op) {
  std::lock_guard lock(mu_);
  return op->done;
}

ClientPlane::OpHandle ClientPlane::start_send(uint64_t tag, const void *data, size_t size) {
  if (!ep_) gf::fail(GF_ERR_INVALID_ARGUMENT, "the data plane to " + peer_ + " is not connected");
  OpHandle op = prepare();
  begin(op, false, tag, const_cast<void *>(data), size);
  return op;
}

void ClientPlane::fail(const std::string &why) {
  {
    std::lock_guard lock(mu_);
    if (!failed_.empty()) return;
    failed_ = why;
  }
  // Cancelling and closing are the worker's business: done on its thread. If it has stopped,
  // its on_stop hook did the same.
  thread_->post([this, why] { fail_on_thread(why); });
}

std::string ClientPlane::failure() {
  std::lock_guard lock(mu_);
  return failed_;
}

void ClientPlane::fail_on_thread(const std::string &why) {
  {
    std::lock_guard lock(mu_);
    if (failed_.empty()) failed_ = why;
  }
  // Receives are cancelled; sends end when the forced close fails them. Their completions run
  // from progress, where `done` reports failed_.
  // A snapshot: a cancelled receive may complete (and leave in_flight_) inside the call.
  std::vector<std::shared_ptr<Op>> ops(in_flight_.begin(), in_flight_.end());
  for (const auto &op : ops) {
    if (op->receive && op->request) cancel(thread_->worker().get(), op->request);
  }
  if (ep_) ep_->close();
  // What the service sent for receives that ended early would stay in the worker for good.
  discard_unexpected(thread_->worker().get(), 0, 0, 1024);
}

std::string ClientPlane::transports() {
  std::string out;
  thread_->run([&] { out = ep_ ? ep_->transports() : std::string(); });
  return out;
}

}  // namespace gf::transport
