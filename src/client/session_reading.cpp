// The reading side of a Session: who reads the socket, and where each frame goes.
//
// The reader thread reads whenever nobody else does. A thread waiting for its own answer
// (await) reads the socket itself while no other thread does, so that the answer wakes the one
// thread that waits for it: handed through the reader, every round trip paid a second wake-up
// (issue 29). A caller keeps only its own answer; any other frame, and everything after it, is
// left for the reader thread, which delivers such frames first: notices and callbacks still run
// on the reader thread, in the order the service sent them.
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "client/deadlines.hpp"
#include "client/session.hpp"
#include "core/error.hpp"
#include "wire/records.hpp"
#include "wire/request_ids.hpp"

namespace gf::client {

namespace {

// The session whose reader runs on this thread, if any: its callbacks hold the right to read.
thread_local const Session *reading_session = nullptr;

}  // namespace

void Session::read_loop() {
  reading_session = this;
  Closing end;
  for (;;) {
    pollfd ready[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(ready, 2, -1) < 0 && errno != EINTR) {
      end = {Ended::kReadFailed, std::string("poll: ") + std::strerror(errno)};
      break;
    }
    if (ready[1].revents & POLLIN) {
      uint64_t count;
      if (::read(wake_fd_, &count, sizeof count) < 0) {
        // EAGAIN: another wake-up took it; the frames left are delivered below all the same
      }
    }
    std::lock_guard role(read_mu_);  // a caller reading for its answer finishes first
    if (pump(end)) {
      reader_done_ = true;
      break;
    }
  }
  close_with(std::move(end));
}

bool Session::pump(Closing &end) {
  std::vector<uint8_t> payload;
  while (!unread_.empty()) {
    payload = std::move(unread_.front());
    unread_.pop_front();
    if (deliver(payload, end)) return true;
  }
  std::string garbage = std::move(unread_garbage_);
  for (;;) {
    while (garbage.empty() && frames_.next(payload, garbage)) {
      if (deliver(payload, end)) return true;
    }
    if (!garbage.empty()) {
      end = {Ended::kGarbage, garbage};
      return true;
    }
    const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      end = closed_ ? Closing{Ended::kByThisProcess, {}} : Closing{Ended::kPeerClosed, last_word_};
      return true;
    }
    garbage = frames_.feed(buffer_.data(), static_cast<size_t>(n));
  }
}

void Session::read_for(uint64_t id, int64_t deadline_ms) {
  // A callback on the reader thread must not wait for an answer only that thread would read.
  if (reading_session == this) return;
  std::unique_lock role(read_mu_, std::try_to_lock);
  // Frames left for the reader go first: this answer would overtake them.
  if (!role.owns_lock() || reader_done_ || !unread_.empty() || !unread_garbage_.empty()) return;
  std::vector<uint8_t> payload;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      auto it = waiting_.find(id);
      if (closed_ || it == waiting_.end() || it->second.done) return;
    }
    std::string garbage;
    if (frames_.next(payload, garbage)) {
      const wire::Message *m = wire::message_of(payload);
      const bool own = m->body_type() != wire::Body::Goodbye &&
                       !notices_[static_cast<size_t>(m->body_type())] &&
                       wire::request_id_of(*m) == id;
      if (own) {
        answer(id, *m, payload);
      } else {
        unread_.push_back(std::move(payload));
      }
      return leave_for_reader();
    }
    if (!garbage.empty()) {
      unread_garbage_ = std::move(garbage);
      return leave_for_reader();
    }
    const int64_t left = deadline_ms < 0 ? -1 : std::max<int64_t>(0, deadline_ms - now_ms());
    pollfd ready{fd_, POLLIN, 0};
    const int polled = ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
    if (polled < 0 && errno == EINTR) continue;
    if (polled <= 0) return;  // the deadline (await says so), or poll failed (the reader's turn)
    const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) return;  // the connection's end: the reader sees it too, and says why
    unread_garbage_ = frames_.feed(buffer_.data(), static_cast<size_t>(n));
    if (!unread_garbage_.empty()) return leave_for_reader();
  }
}

void Session::leave_for_reader() {
  std::vector<uint8_t> payload;
  while (unread_garbage_.empty() && frames_.next(payload, unread_garbage_))
    unread_.push_back(std::move(payload));
  if (unread_.empty() && unread_garbage_.empty()) return;
  const uint64_t one = 1;
  if (::write(wake_fd_, &one, sizeof one) < 0) {
    // EAGAIN: the count is at its maximum, so the reader is woken anyway
  }
}

bool Session::deliver(const std::vector<uint8_t> &payload, Closing &end) {
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
    // id 0: either way the connection ends only when the socket does, and then this says why.
    last_word_ = wire::str(e->message());
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
  replied_.notify_all();
  if (watcher) watcher(wire::str(m.body_as_Error()->message()));
  if (callback) callback(&payload, {});
}

int Session::make_wake_fd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) fail(GF_ERR_SYSTEM, std::string("eventfd: ") + std::strerror(errno));
  return fd;
}

}  // namespace gf::client
