#include "client/connection.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "client/message_support.hpp"
#include "client/tcp_connect.hpp"
#include "core/error.hpp"
#include "core/request_bounds.hpp"
#include "core/utf8.hpp"
#include "wire/framing.hpp"

namespace gf::client {

namespace fb = flatbuffers;

std::string socket_path_of(const std::string &endpoint) {
  static const std::string kUnix = "unix://";
  std::string path = endpoint.rfind(kUnix, 0) == 0 ? endpoint.substr(kUnix.size()) : endpoint;
  if (path.empty() || path[0] != '/') {
    fail(GF_ERR_INVALID_ARGUMENT, "endpoint '" + endpoint +
                                      "' is not a unix socket: use unix:///path/to.sock or an "
                                      "absolute path");
  }
  if (std::string why =
          bounds::bytes_over("the socket path of endpoint '" + endpoint + "'", path.size(),
                             "GF_MAX_SOCKET_PATH_BYTES", bounds::kMaxSocketPathBytes);
      !why.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, why);
  }
  return path;
}

std::string default_socket_path() {
  const char *runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && *runtime == '/') return std::string(runtime) + "/gpuflow.sock";
  return "/tmp/gpuflow-" + std::to_string(getuid()) + "/gpuflow.sock";
}

std::string resolve_endpoint(const char *configured) {
  std::string endpoint = configured ? configured : "";
  if (endpoint.empty()) {
    const char *env = std::getenv("GPUFLOW_POOL");
    endpoint = env ? env : "";
  }
  if (endpoint == "embedded") return {};
  return endpoint;
}

Connection::Connection(std::string endpoint, int fd) : endpoint_(std::move(endpoint)), fd_(fd) {}

std::shared_ptr<Connection> Connection::open(const std::string &endpoint, const std::string &name,
                                             double weight, int timeout_ms, uint64_t on_behalf_of,
                                             const std::string &token_file) {
  if (is_remote_endpoint(endpoint)) {
    const std::string token = read_token(endpoint, token_file);
    std::string device;
    const int fd = connect_tcp(endpoint, timeout_ms, device);
    std::shared_ptr<Connection> c(new Connection(endpoint, fd));
    c->net_device_ = device;
    c->handshake(name, weight, timeout_ms, on_behalf_of, token);
    c->reader_ = std::thread([raw = c.get()] { raw->read_loop(); });
    return c;
  }
  const std::string path = socket_path_of(endpoint);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(GF_ERR_SYSTEM, std::string("socket(): ") + std::strerror(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0) {
    int e = errno;
    ::close(fd);
    fail(GF_ERR_SYSTEM,
         "no gpuflow service at " + endpoint + ": " + std::strerror(e) +
             (e == ENOENT || e == ECONNREFUSED ? " (start one with `gpuflow serve`)" : ""));
  }
  std::shared_ptr<Connection> c(new Connection(endpoint, fd));
  c->handshake(name, weight, timeout_ms, on_behalf_of, "");
  c->reader_ = std::thread([raw = c.get()] { raw->read_loop(); });
  return c;
}

Connection::~Connection() {
  closed_ = true;
  ::shutdown(fd_, SHUT_RDWR);  // wakes the reader
  if (reader_.get_id() == std::this_thread::get_id()) {
    reader_.detach();  // the last owner let go in a callback the reader ran: it ends on its own
  } else if (reader_.joinable()) {
    reader_.join();
  }
  ::close(fd_);
}

void Connection::handshake(const std::string &name, double weight, int timeout_ms,
                           uint64_t on_behalf_of, const std::string &token) {
  fb::FlatBufferBuilder b;
  const bool remote = !token.empty();
  // Names are display text the service would cut and repair anyway: sent fitted, so what it
  // shows is what this side meant (a whole character at the end, not a replacement).
  // A service that turns the connection away writes why and closes, perhaps before the Hello
  // is written: then the reason is still there to read below.
  std::string send_failed;
  try {
    send(wire::frame_of(
        b, wire::CreateHello(
               b, wire::kProtocolVersion, b.CreateString(utf8_fitted(name, wire::kMaxHelloName)),
               weight, remote ? b.CreateString(token) : 0, on_behalf_of,
               remote ? b.CreateString(utf8_fitted(user_name(), wire::kMaxHelloUser)) : 0,
               remote ? static_cast<uint32_t>(::getpid()) : 0)));
  } catch (const Error &e) {
    send_failed = e.what();
  }
  wire::FrameReader reader;
  std::vector<uint8_t> payload;
  std::string error;
  const int64_t deadline = now_ms() + timeout_ms;
  char buffer[64 << 10];
  while (!reader.next(payload, error)) {
    if (!error.empty()) fail(GF_ERR_SYSTEM, endpoint_ + " sent " + error);
    pollfd p{fd_, POLLIN, 0};
    int64_t left = deadline - now_ms();
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
      fail(GF_ERR_SYSTEM, "the gpuflow service at " + endpoint_ + " did not answer within " +
                              std::to_string(timeout_ms) + " ms");
    }
    ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail(GF_ERR_SYSTEM, send_failed.empty()
                              ? "the gpuflow service at " + endpoint_ + " closed the connection"
                              : send_failed);
    }
    error = reader.feed(buffer, static_cast<size_t>(n));
    if (!error.empty()) fail(GF_ERR_SYSTEM, endpoint_ + " sent " + error);
  }
  const wire::Message *m = wire::message_of(payload);
  if (const auto *e = m->body_as_Error()) {
    fail(static_cast<gf_status>(e->status()),
         "the gpuflow service at " + endpoint_ + " refused the connection: " + str(e->message()));
  }
  const auto *w = m->body_as_Welcome();
  if (!w)
    fail(GF_ERR_SYSTEM, endpoint_ + " answered Hello with " + wire::body_name(m->body_type()));
  if (w->protocol() != wire::kProtocolVersion) {
    fail(GF_ERR_VERSION_MISMATCH, "the gpuflow service at " + endpoint_ + " speaks protocol " +
                                      std::to_string(w->protocol()) + ", this library " +
                                      std::to_string(wire::kProtocolVersion));
  }
  welcome_.client_id = w->client_id();
  welcome_.service_pid = w->service_pid();
  welcome_.cpus = w->cpus();
  welcome_.backend = str(w->backend());
  welcome_.emulated_bandwidth = w->emulated_bandwidth();
  welcome_.data_plane = w->data_plane();
  welcome_.binds_process_groups = w->binds_process_groups();
  if (w->kernels()) {
    for (const fb::String *k : *w->kernels()) welcome_.kernels.push_back(k->str());
  }
  welcome_.devices = wire::decode(w->devices());
}

void Connection::send(const std::vector<uint8_t> &frame) {
  // The service closes a connection that sends a frame over its limit: such a request fails
  // here alone, with nothing sent.
  if (std::string why = oversized(frame); !why.empty()) fail(GF_ERR_INVALID_ARGUMENT, why);
  std::lock_guard lock(write_mu_);
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close_with(std::string("writing to it failed: ") + std::strerror(errno));
      fail_gone();
    }
    sent += static_cast<size_t>(n);
  }
}

std::string Connection::oversized(const std::vector<uint8_t> &frame) const {
  if (frame.size() <= 4 + static_cast<size_t>(wire::kMaxFrame)) return {};
  const auto *m = wire::GetMessage(frame.data() + 4);
  return std::string("a ") + wire::body_name(m->body_type()) + " message of " +
         std::to_string(frame.size() - 4) + " bytes is more than the service at " + endpoint_ +
         " takes in one frame (" + std::to_string(wire::kMaxFrame) + "); nothing was sent";
}

void Connection::fail_gone() const {
  std::lock_guard lock(mu_);
  fail(GF_ERR_SYSTEM, gone());
}

std::vector<uint8_t> Connection::call(uint64_t id, const std::vector<uint8_t> &frame,
                                      int64_t deadline_ms) {
  {
    std::lock_guard lock(mu_);
    if (closed_) fail(GF_ERR_SYSTEM, gone());
    waiting_[id];
  }
  try {
    send(frame);
  } catch (...) {
    std::lock_guard lock(mu_);
    waiting_.erase(id);
    throw;
  }
  return await(id, deadline_ms);
}

std::vector<uint8_t> Connection::await(uint64_t id, int64_t deadline_ms) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return waiting_[id].done || closed_; };
  if (deadline_ms < 0) {
    replied_.wait(lock, ready);
  } else if (!replied_.wait_until(
                 lock,
                 std::chrono::steady_clock::time_point(std::chrono::milliseconds(deadline_ms)),
                 ready)) {
    waiting_.erase(id);
    abandoned_.insert(id);
    fail(GF_TIMEOUT, "the gpuflow service at " + endpoint_ + " did not answer in time");
  }
  Reply reply = std::move(waiting_[id]);
  waiting_.erase(id);
  if (!reply.done) {
    fail(GF_ERR_SYSTEM, gone());
  }
  return std::move(reply.payload);
}

Grant Connection::acquire(const LeaseAsk &ask, int64_t timeout_ms) {
  const uint64_t id = next_id_++;
  // The service answers at its deadline; ours only guards against a service that stopped
  // answering without closing (stopped, stuck).
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms + 10000;
  std::vector<uint8_t> payload = call(id, lease_request_frame(id, ask, timeout_ms), deadline);
  Grant grant;
  gf_status status = GF_OK;
  std::string why;
  if (!grant_of(payload, grant, status, why)) fail(status, why);
  return grant;
}

bool Connection::grant_of(const std::vector<uint8_t> &payload, Grant &grant, gf_status &status,
                          std::string &why) const {
  const wire::Message *m = wire::message_of(payload);
  if (const auto *g = m->body_as_LeaseGranted()) {
    grant = wire::decode(*g);
    return true;
  }
  if (const auto *r = m->body_as_LeaseRefused()) {
    status = static_cast<gf_status>(r->status());
    why = str(r->reason());
  } else if (const auto *e = m->body_as_Error()) {
    status = static_cast<gf_status>(e->status());
    why = str(e->message());
  } else {
    status = GF_ERR_SYSTEM;
    why = endpoint_ + " answered a lease request with " + wire::body_name(m->body_type());
  }
  return false;
}

std::vector<uint8_t> Connection::lease_request_frame(uint64_t id, const LeaseAsk &ask,
                                                     int64_t timeout_ms) {
  fb::FlatBufferBuilder b;
  auto request = wire::encode(b, id, ask, timeout_ms);
  return wire::frame_of(b, request);
}

void Connection::acquire_async(const LeaseAsk &ask, GrantDone done) {
  const uint64_t id = next_id_++;
  std::string why_gone;
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      why_gone = gone();
    } else {
      waiting_[id].callback = [this, done](const std::vector<uint8_t> *payload,
                                           const std::string &reason) {
        if (!payload) return done(nullptr, GF_ERR_SYSTEM, reason);
        Grant grant;
        gf_status status = GF_OK;
        std::string why;
        if (grant_of(*payload, grant, status, why)) return done(&grant, GF_OK, {});
        done(nullptr, status, why);
      };
    }
  }
  if (!why_gone.empty())
    return done(nullptr, GF_ERR_SYSTEM, why_gone);  // unlocked: `done` may call in
  try {
    send(lease_request_frame(id, ask, -1));
  } catch (const Error &e) {
    if (e.status() == GF_ERR_INVALID_ARGUMENT) {  // nothing was sent: the connection is fine
      {
        std::lock_guard lock(mu_);
        if (waiting_.erase(id) == 0) return;
      }
      return done(nullptr, e.status(), e.what());
    }
    std::function<void(const std::vector<uint8_t> *, const std::string &)> callback;
    {
      std::lock_guard lock(mu_);
      auto it = waiting_.find(id);
      if (it == waiting_.end()) return;  // the reader already failed it
      callback = std::move(it->second.callback);
      waiting_.erase(it);
    }
    callback(nullptr, e.what());
  }
}

void Connection::release(uint64_t lease_id) {
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload =
      call(id, wire::frame_of(b, wire::CreateLeaseRelease(b, id, lease_id)), now_ms() + 10000);
  const wire::Message *m = wire::message_of(payload);
  if (const auto *e = m->body_as_Error())
    fail(static_cast<gf_status>(e->status()), str(e->message()));
  std::lock_guard lock(mu_);
  revoked_.erase(lease_id);
}

void Connection::bind_process_group(uint64_t lease_id, int32_t process_group) {
  if (!welcome_.binds_process_groups) {
    // An older service would read the message as garbage and close the connection.
    fail(GF_ERR_STATE, "the gpuflow service at " + endpoint_ +
                           " is older than this client: it binds no process group to a lease");
  }
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload =
      call(id, wire::frame_of(b, wire::CreateLeaseBind(b, id, lease_id, process_group)),
           now_ms() + 10000);
  const wire::Message *m = wire::message_of(payload);
  if (const auto *e = m->body_as_Error())
    fail(static_cast<gf_status>(e->status()), str(e->message()));
  if (!m->body_as_LeaseBound()) {
    fail(GF_ERR_SYSTEM,
         endpoint_ + " answered a LeaseBind with " + wire::body_name(m->body_type()));
  }
}

std::vector<uint8_t> Connection::status() {
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload =
      call(id, wire::frame_of(b, wire::CreateStatusRequest(b, id)), now_ms() + 10000);
  const wire::Message *m = wire::message_of(payload);
  if (const auto *e = m->body_as_Error())
    fail(static_cast<gf_status>(e->status()), str(e->message()));
  if (!m->body_as_StatusReply()) {
    fail(GF_ERR_SYSTEM,
         endpoint_ + " answered a status request with " + wire::body_name(m->body_type()));
  }
  return payload;
}

bool Connection::revoked(uint64_t lease_id) const {
  std::lock_guard lock(mu_);
  return closed_ || revoked_.count(lease_id) > 0;
}

void Connection::on_revoke(std::function<void(uint64_t)> callback) {
  std::lock_guard lock(mu_);
  on_revoke_ = std::move(callback);
}

void Connection::close_with(const std::string &reason) {
  std::function<void(uint64_t)> callback;
  std::vector<std::function<void(const std::vector<uint8_t> *, const std::string &)>> pending;
  std::shared_ptr<transport::ClientPlane> plane;
  {
    std::lock_guard lock(mu_);
    if (closed_.exchange(true)) return;
    close_reason_ = reason;
    callback = on_revoke_;
    plane = plane_;
    watchers_.clear();
    // A run not accepted yet is no run: its submit fails instead (it sees the connection close).
    for (auto &[run, watch] : runs_) {
      if (watch.accepted) pending.push_back(std::move(watch.done));
    }
    runs_.clear();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.callback) {
        pending.push_back(std::move(it->second.callback));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  replied_.notify_all();
  const std::string why = "the gpuflow service at " + endpoint_ + " is gone: " + reason;
  if (plane) plane->fail(why);  // transfers in flight end now, naming the service
  for (auto &p : pending) p(nullptr, why);
  if (callback) callback(0);
}

namespace {

// The request id an answer carries, or 0 for messages nobody waits for.
uint64_t answer_id(const wire::Message &m) {
  switch (m.body_type()) {
    case wire::Body::LeaseGranted:
      return m.body_as_LeaseGranted()->request_id();
    case wire::Body::LeaseRefused:
      return m.body_as_LeaseRefused()->request_id();
    case wire::Body::Released:
      return m.body_as_Released()->request_id();
    case wire::Body::Cancelled:
      return m.body_as_Cancelled()->request_id();
    case wire::Body::StatusReply:
      return m.body_as_StatusReply()->request_id();
    case wire::Body::Error:
      return m.body_as_Error()->request_id();
    case wire::Body::DataPlaneWelcome:
      return m.body_as_DataPlaneWelcome()->request_id();
    case wire::Body::BlobPutReady:
      return m.body_as_BlobPutReady()->request_id();
    case wire::Body::BlobStored:
      return m.body_as_BlobStored()->request_id();
    case wire::Body::BlobRefused:
      return m.body_as_BlobRefused()->request_id();
    case wire::Body::BlobSending:
      return m.body_as_BlobSending()->request_id();
    case wire::Body::BlobDropped:
      return m.body_as_BlobDropped()->request_id();
    case wire::Body::RunAccepted:
      return m.body_as_RunAccepted()->request_id();
    case wire::Body::LeaseBound:
      return m.body_as_LeaseBound()->request_id();
    default:
      return 0;
  }
}

}  // namespace

void Connection::read_loop() {
  wire::FrameReader reader;
  std::vector<char> buffer(64 << 10);
  std::string reason;
  std::string last_word;  // the last Error without a request id
  while (reason.empty()) {
    ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      reason = closed_             ? "the connection was closed by this process"
               : last_word.empty() ? "the service closed the connection"
                                   : "the service closed the connection, saying: " + last_word;
      break;
    }
    reason = reader.feed(buffer.data(), static_cast<size_t>(n));
    std::vector<uint8_t> payload;
    while (reason.empty() && reader.next(payload, reason)) {
      const wire::Message *m = wire::message_of(payload);
      if (const auto *bye = m->body_as_Goodbye()) {
        reason = "the service is stopping: " + str(bye->reason());
        break;
      }
      if (const auto *revoke = m->body_as_LeaseRevoke()) {
        std::function<void(uint64_t)> callback;
        {
          std::lock_guard lock(mu_);
          revoked_.insert(revoke->lease_id());
          callback = on_revoke_;
        }
        if (callback) callback(revoke->lease_id());
        continue;
      }
      if (const auto *accepted = m->body_as_RunAccepted()) {
        std::lock_guard lock(mu_);  // before the submitter wakes, below
        if (auto it = runs_.find(accepted->run_id()); it != runs_.end()) it->second.accepted = true;
      }
      if (const auto *progress = m->body_as_RunProgress()) {
        RunProgressed progressed;
        {
          std::lock_guard lock(mu_);
          auto it = runs_.find(progress->run_id());
          if (it != runs_.end()) progressed = it->second.progressed;
        }
        if (progressed) progressed(payload);
        continue;
      }
      if (const auto *finished = m->body_as_RunFinished()) {
        RunDone done;
        {
          std::lock_guard lock(mu_);
          auto it = runs_.find(finished->run_id());
          if (it != runs_.end()) {
            done = std::move(it->second.done);
            runs_.erase(it);
          }
        }
        if (done) {
          done(&payload, {});
        } else if (finished->report_blob()) {
          forget_blob(finished->report_blob());  // nobody waits for it (the submit gave up)
        }
        continue;
      }
      const uint64_t id = answer_id(*m);
      if (id == 0) {
        // Why the service is about to close the connection, or the refusal of a request sent
        // with id 0 (a late lease's release): either way the connection ends only when the
        // socket does, and then this says why.
        if (const auto *e = m->body_as_Error()) last_word = str(e->message());
        continue;
      }
      uint64_t late_lease = 0;
      std::function<void(const std::vector<uint8_t> *, const std::string &)> callback;
      std::function<void(const std::string &)> watcher;
      {
        std::lock_guard lock(mu_);
        auto it = waiting_.find(id);
        auto watched = watchers_.find(id);
        if (watched != watchers_.end() && m->body_type() == wire::Body::Error &&
            (it == waiting_.end() || it->second.done)) {
          watcher = std::move(watched->second);
          watchers_.erase(watched);
        } else if (it != waiting_.end() && it->second.callback) {
          callback = std::move(it->second.callback);
          waiting_.erase(it);
        } else if (it != waiting_.end()) {
          it->second.done = true;
          it->second.payload = payload;
        } else if (abandoned_.erase(id) && m->body_type() == wire::Body::LeaseGranted) {
          late_lease = m->body_as_LeaseGranted()->lease_id();
        }
      }
      replied_.notify_all();
      if (watcher) watcher(str(m->body_as_Error()->message()));
      if (callback) callback(&payload, {});
      if (late_lease) {  // nobody waits for it any more: straight back
        fb::FlatBufferBuilder b;
        try {
          send(wire::frame_of(b, wire::CreateLeaseRelease(b, 0, late_lease)));
        } catch (const Error &) {
        }
      }
    }
  }
  if (!reason.empty() && reason.find("service") == std::string::npos &&
      reason.find("closed") == std::string::npos) {
    reason = "it sent " + reason;
  }
  close_with(reason);
}

}  // namespace gf::client
