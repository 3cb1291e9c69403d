#include "transport/client_plane.hpp"

#include "core/error.hpp"
#include "transport/request.hpp"
#include "transport/ucx_api.hpp"

namespace gf::transport {

struct ClientPlane::Op {
  void *request = nullptr;  // progress thread only
  bool receive = false;
  size_t size = 0;
  bool done = false;  // under mu_
  std::string error;  // under mu_
};

ClientPlane::ClientPlane(std::unique_ptr<ProgressThread> thread, std::string peer)
    : peer_(std::move(peer)), thread_(std::move(thread)) {}

std::unique_ptr<ClientPlane> ClientPlane::create(const std::string &name, std::string peer) {
  auto thread = std::make_unique<ProgressThread>(Worker::create(name));
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

void ClientPlane::start(const std::shared_ptr<Op> &op, bool receive, uint64_t tag, void *data,
                        size_t size) {
  op->receive = receive;
  op->size = size;
  auto body = [this, op, receive, tag, data, size] {
    {
      std::lock_guard lock(mu_);
      if (!failed_.empty()) {
        op->done = true;
        op->error = failed_;
        changed_.notify_all();
        return;
      }
    }
    Done done = [this, op](ucs_status_t status, size_t length) {
      op->request = nullptr;
      in_flight_.erase(op);
      thread_->ended();
      std::lock_guard lock(mu_);
      op->done = true;
      if (status != UCS_OK) {
        op->error = !failed_.empty() ? failed_
                                     : "the UCX data plane to " + peer_ + ": " +
                                           (op->receive ? "a receive" : "a send") +
                                           " failed: " + ucx().ucs_status_string(status);
      } else if (op->receive && length != op->size) {
        op->error = peer_ + " sent " + std::to_string(length) + " bytes where " +
                    std::to_string(op->size) + " were announced";
      }
      changed_.notify_all();
    };
    thread_->started();
    in_flight_.insert(op);
    op->request = receive ? tag_recv(thread_->worker().get(), data, size, tag, done)
                          : tag_send(ep_->get(), data, size, tag, done);
  };
  if (!thread_->post(std::move(body))) {
    std::lock_guard lock(mu_);
    op->done = true;
    op->error = "the data plane to " + peer_ + " is closed";
  }
}

void ClientPlane::wait(const OpHandle &op) {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return op->done; });
  if (!op->error.empty()) gf::fail(GF_ERR_SYSTEM, op->error);
}

bool ClientPlane::finished(const OpHandle &op) {
  std::lock_guard lock(mu_);
  return op->done;
}

ClientPlane::OpHandle ClientPlane::start_send(uint64_t tag, const void *data, size_t size) {
  if (!ep_) gf::fail(GF_ERR_INVALID_ARGUMENT, "the data plane to " + peer_ + " is not connected");
  auto op = std::make_shared<Op>();
  start(op, false, tag, const_cast<void *>(data), size);
  return op;
}

ClientPlane::OpHandle ClientPlane::start_recv(uint64_t tag, void *data, size_t size) {
  auto op = std::make_shared<Op>();
  start(op, true, tag, data, size);
  return op;
}

void ClientPlane::send(uint64_t tag, const void *data, size_t size) {
  wait(start_send(tag, data, size));
}

void ClientPlane::recv(uint64_t tag, void *data, size_t size) {
  wait(start_recv(tag, data, size));
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
