#include "client/session.hpp"

#include <errno.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "client/endpoint.hpp"
#include "client/tcp_connect.hpp"
#include "client/tls_stream.hpp"
#include "core/error.hpp"
#include "wire/records.hpp"
#include "wire/request_ids.hpp"

namespace gf::client {

namespace fb = flatbuffers;

std::string Closing::words() const {
  switch (cause) {
    case Ended::kByThisProcess:
      return "the connection was closed by this process";
    case Ended::kPeerClosed:
      return detail.empty() ? "the service closed the connection"
                            : "the service closed the connection, saying: " + detail;
    case Ended::kGoodbye:
      return "the service is stopping: " + detail;
    case Ended::kWriteFailed:
      return "writing to it failed: " + detail;
    case Ended::kGarbage:
      return "it sent " + detail;
  }
  return detail;
}

Session::Session(std::string endpoint, std::unique_ptr<ByteStream> stream, std::string net_device)
    : endpoint_(std::move(endpoint)),
      stream_(std::move(stream)),
      net_device_(std::move(net_device)) {}

std::unique_ptr<Session> Session::open(const std::string &endpoint, const std::string &name,
                                       double weight, int timeout_ms, uint64_t on_behalf_of,
                                       const std::string &token_file) {
  Greeting hello{name, weight, on_behalf_of, false, {}};
  std::string device;
  std::unique_ptr<ByteStream> stream;
  if (is_remote_endpoint(endpoint)) {
    hello.remote = true;
    const tls::ClientFiles files = client_tls_files();
    const bool secure = !is_insecure_endpoint(endpoint);
    // A client certificate says who this is: the token is then only shown when given.
    hello.token = read_token(endpoint, token_file, secure && !files.certificate.empty());
    const int fd = connect_tcp(endpoint, timeout_ms, device);
    stream = secure ? tls_connect(fd, endpoint, host_of(endpoint), files, timeout_ms)
                    : std::make_unique<ByteStream>(fd);
  } else {
    stream = std::make_unique<ByteStream>(connect_unix(endpoint));
  }
  std::unique_ptr<Session> s(new Session(endpoint, std::move(stream), device));
  s->welcome_ = shake_hands(
      *s->stream_, endpoint, hello, timeout_ms,
      [raw = s.get()](const std::vector<uint8_t> &f) { raw->send(f); }, s->frames_);
  return s;
}

Session::~Session() {
  stop();
}

void Session::on(wire::Body body, Notice notice) {
  notices_.at(static_cast<size_t>(body)) = std::move(notice);
}

void Session::on_close(std::function<void(const std::string &)> closed) {
  closed_listeners_.push_back(std::move(closed));
}

void Session::start() {
  reader_ = std::thread([this] { read_loop(); });
}

void Session::stop() {
  closed_ = true;
  stream_->shut();  // wakes the reader
  if (reader_.get_id() == std::this_thread::get_id()) {
    reader_.detach();  // the last owner let go in a callback the reader ran: it ends on its own
  } else if (reader_.joinable()) {
    reader_.join();
  }
}

Closing Session::closing() const {
  std::lock_guard lock(mu_);
  return closing_;
}

std::string Session::gone_locked() const {
  return "the gpuflow service at " + endpoint_ + " is gone: " + closing_.words();
}

std::string Session::gone() const {
  std::lock_guard lock(mu_);
  return gone_locked();
}

void Session::fail_gone() const {
  fail(GF_ERR_SYSTEM, gone());
}

void Session::send(const std::vector<uint8_t> &frame) {
  // The service closes a connection that sends a frame over its limit: such a request fails
  // here alone, with nothing sent.
  if (std::string why = oversized(frame); !why.empty()) fail(GF_ERR_INVALID_ARGUMENT, why);
  std::lock_guard lock(write_mu_);
  if (std::string why = stream_->write_all(frame.data(), frame.size()); !why.empty()) {
    close_with({Ended::kWriteFailed, why});
    fail_gone();
  }
}

std::string Session::oversized(const std::vector<uint8_t> &frame) const {
  if (frame.size() <= 4 + static_cast<size_t>(wire::kMaxFrame)) return {};
  const auto *m = wire::GetMessage(frame.data() + 4);
  return std::string("a ") + wire::body_name(m->body_type()) + " message of " +
         std::to_string(frame.size() - 4) + " bytes is more than the service at " + endpoint_ +
         " takes in one frame (" + std::to_string(wire::kMaxFrame) + "); nothing was sent";
}

std::vector<uint8_t> Session::call(uint64_t id, const std::vector<uint8_t> &frame,
                                   int64_t deadline_ms, Answered late) {
  expect(id);
  try {
    send(frame);
  } catch (...) {
    std::lock_guard lock(mu_);
    waiting_.erase(id);
    throw;
  }
  return await(id, deadline_ms, std::move(late));
}

std::vector<uint8_t> Session::ask(uint64_t id, const std::vector<uint8_t> &frame,
                                  int64_t deadline_ms, wire::Body expected, const char *what) {
  std::vector<uint8_t> payload = call(id, frame, deadline_ms);
  const wire::Message *m = wire::message_of(payload);
  if (Refusal refused = wire::refusal_of(*m)) fail(refused.status, refused.why);
  if (expected != wire::Body::NONE && m->body_type() != expected) {
    fail(GF_ERR_SYSTEM,
         endpoint_ + " answered " + what + " with " + wire::body_name(m->body_type()));
  }
  return payload;
}

void Session::expect(uint64_t id) {
  std::lock_guard lock(mu_);
  if (closed_) fail(GF_ERR_SYSTEM, gone_locked());
  waiting_[id];
}

std::vector<uint8_t> Session::await(uint64_t id, int64_t deadline_ms, Answered late) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return waiting_[id].done || closed_; };
  if (!ready()) {
    // Most answers (a lease that is free, a status) come within tens of microseconds. Waiting
    // for them awake a little while spares the reader thread waking this one: on an idle machine
    // a sleeping thread takes longer to wake than the round trip itself (measured on a 2-vCPU VM:
    // a lease's acquire 57 us asleep, 28 us awake, against 9.5 us for a bare round trip).
    const uint64_t seen = replies_.load(std::memory_order_acquire);
    lock.unlock();
    const auto awake_until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    while (replies_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < awake_until) {
      sched_yield();  // the reader thread may need this CPU to deliver the answer
    }
    lock.lock();
  }
  if (deadline_ms < 0) {
    replied_.wait(lock, ready);
  } else if (!replied_.wait_until(
                 lock,
                 std::chrono::steady_clock::time_point(std::chrono::milliseconds(deadline_ms)),
                 ready)) {
    if (late) {
      waiting_[id].callback = std::move(late);
    } else {
      waiting_.erase(id);
    }
    fail(GF_TIMEOUT, "the gpuflow service at " + endpoint_ + " did not answer in time");
  }
  Reply reply = std::move(waiting_[id]);
  waiting_.erase(id);
  if (!reply.done) fail(GF_ERR_SYSTEM, gone_locked());
  return std::move(reply.payload);
}

bool Session::expect(uint64_t id, Answered answered, std::string &why_gone) {
  std::lock_guard lock(mu_);
  if (closed_) {
    why_gone = gone_locked();
    return false;
  }
  waiting_[id].callback = std::move(answered);
  return true;
}

Session::Answered Session::take(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = waiting_.find(id);
  if (it == waiting_.end() || !it->second.callback) return {};
  Answered answered = std::move(it->second.callback);
  waiting_.erase(it);
  return answered;
}

void Session::send_answered(uint64_t id, const std::vector<uint8_t> &frame) {
  try {
    send(frame);
  } catch (...) {
    take(id);  // nobody will call it
    throw;
  }
}

void Session::send_unanswered(const FrameBuilder &frame) {
  const uint64_t id = next_id_++;
  std::string why_gone;
  // Gone: the service ended what this would have asked with the connection.
  if (!expect(
          id, [](const std::vector<uint8_t> *, const std::string &) {}, why_gone))
    return;
  fb::FlatBufferBuilder b;
  try {
    send_answered(id, frame(b, id));
  } catch (const Error &) {
  }
}

void Session::watch_errors(uint64_t id, std::function<void(const std::string &)> watcher) {
  std::lock_guard lock(mu_);
  watchers_[id] = std::move(watcher);
}

void Session::unwatch(uint64_t id) {
  std::lock_guard lock(mu_);
  watchers_.erase(id);
}

void Session::close_with(Closing end) {
  std::vector<Answered> pending;
  {
    std::lock_guard lock(mu_);
    if (closed_.exchange(true)) return;
    closing_ = std::move(end);
    watchers_.clear();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.callback) {
        pending.push_back(std::move(it->second.callback));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  replies_.fetch_add(1, std::memory_order_release);
  replied_.notify_all();
  const std::string why = gone();
  for (auto &closed : closed_listeners_) closed(why);
  for (auto &p : pending) p(nullptr, why);
}

void Session::read_loop() {
  std::vector<char> buffer(64 << 10);
  std::string last_word;  // the last Error without a request id
  Closing end;
  for (;;) {
    std::string garbage;
    std::vector<uint8_t> payload;
    bool ended = false;
    while (!ended && frames_.next(payload, garbage)) ended = deliver(payload, last_word, end);
    if (ended) break;
    if (garbage.empty()) {
      std::string why;
      const ssize_t n = stream_->read_some(buffer.data(), buffer.size(), -1, why);
      if (n <= 0) {
        end = closed_ ? Closing{Ended::kByThisProcess, {}}
                      : Closing{Ended::kPeerClosed, last_word.empty() ? why : last_word};
        break;
      }
      garbage = frames_.feed(buffer.data(), static_cast<size_t>(n));
    }
    if (!garbage.empty()) {
      end = {Ended::kGarbage, garbage};
      break;
    }
  }
  close_with(std::move(end));
}

bool Session::deliver(const std::vector<uint8_t> &payload, std::string &last_word, Closing &end) {
  const wire::Message *m = wire::message_of(payload);
  if (const auto *bye = m->body_as_Goodbye()) {
    end = {Ended::kGoodbye, wire::str(bye->reason())};
    return true;
  }
  if (const Notice &notice = notices_[static_cast<size_t>(m->body_type())]) notice(payload);
  const uint64_t id = wire::request_id_of(*m);
  if (id != 0) {
    answer(id, *m, payload);
  } else if (const auto *e = m->body_as_Error()) {
    // Why the service is about to close the connection, or the refusal of a request sent with
    // id 0 (a late lease's release): either way the connection ends only when the socket does,
    // and then this says why.
    last_word = wire::str(e->message());
  }
  return false;
}

void Session::answer(uint64_t id, const wire::Message &m, const std::vector<uint8_t> &payload) {
  Answered callback;
  std::function<void(const std::string &)> watcher;
  {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(id);
    auto watched = watchers_.find(id);
    if (watched != watchers_.end() && m.body_type() == wire::Body::Error &&
        (it == waiting_.end() || it->second.done)) {
      watcher = std::move(watched->second);
      watchers_.erase(watched);
    } else if (it != waiting_.end() && it->second.callback) {
      callback = std::move(it->second.callback);
      waiting_.erase(it);
    } else if (it != waiting_.end()) {
      it->second.done = true;
      it->second.payload = payload;
    }
  }
  replies_.fetch_add(1, std::memory_order_release);
  replied_.notify_all();
  if (watcher) watcher(wire::str(m.body_as_Error()->message()));
  if (callback) callback(&payload, {});
}

}  // namespace gf::client
