#include "dashboard/http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "core/error.hpp"

namespace gf::dashboard {

void Broadcast::publish(std::string message) {
  {
    std::lock_guard lock(mu_);
    message_ = std::move(message);
    sequence_++;
  }
  cv_.notify_all();
}

bool Broadcast::next(uint64_t &seen, std::string &out, int timeout_ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return closed_ || sequence_ > seen; });
  if (closed_ || sequence_ <= seen) return false;
  seen = sequence_;
  out = message_;
  return true;
}

void Broadcast::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool Broadcast::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

namespace {

// Marks the first call of a request (headers read): the response comes on the second.
char g_request_seen;

struct Stream {
  std::shared_ptr<Broadcast> events;
  std::atomic<unsigned> *streams;
  uint64_t seen = 0;
  std::string pending;
  size_t offset = 0;
  ~Stream() { streams->fetch_sub(1, std::memory_order_relaxed); }
};

ssize_t read_stream(void *cls, uint64_t, char *buf, size_t max) {
  auto *s = static_cast<Stream *>(cls);
  if (s->offset == s->pending.size()) {
    std::string message;
    s->offset = 0;
    if (s->events->next(s->seen, message, 1000)) {
      s->pending = "data: " + message + "\n\n";
    } else if (s->events->closed()) {
      return MHD_CONTENT_READER_END_OF_STREAM;
    } else {
      s->pending = ": idle\n\n";  // keeps proxies and dead-peer detection going
    }
  }
  const size_t n = std::min(max, s->pending.size() - s->offset);
  std::memcpy(buf, s->pending.data() + s->offset, n);
  s->offset += n;
  return static_cast<ssize_t>(n);
}

void free_stream(void *cls) {
  delete static_cast<Stream *>(cls);
}

}  // namespace

struct HttpServer::Impl {
  Router router;
  std::string stream_path;
  std::shared_ptr<Broadcast> events;
  std::atomic<unsigned> streams{0};
  MHD_Daemon *daemon = nullptr;

  MHD_Result queue(MHD_Connection *c, const HttpResponse &r) {
    MHD_Response *response = MHD_create_response_from_buffer(
        r.body.size(), const_cast<char *>(r.body.data()), MHD_RESPMEM_MUST_COPY);
    if (!response) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", r.content_type.c_str());
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_Result ret = MHD_queue_response(c, r.status, response);
    MHD_destroy_response(response);
    return ret;
  }

  MHD_Result handle(MHD_Connection *c, const char *url, const char *method,
                    size_t *upload_data_size, void **con_cls) {
    const std::string m = method ? method : "";
    if (m != "GET" && m != "HEAD") {
      // Answered at once, body unread; the connection closes after the reply.
      return queue(c, HttpResponse{405, "text/plain; charset=utf-8", "only GET is served\n"});
    }
    if (*con_cls == nullptr) {
      *con_cls = &g_request_seen;
      return MHD_YES;
    }
    if (*upload_data_size != 0) {
      *upload_data_size = 0;  // a GET with a body: ignore it
      return MHD_YES;
    }
    const std::string path = url ? url : "";
    if (path == stream_path) {
      if (streams.fetch_add(1, std::memory_order_relaxed) >= kMaxStreams) {
        streams.fetch_sub(1, std::memory_order_relaxed);
        return queue(c, HttpResponse{503, "text/plain; charset=utf-8",
                                     "too many live views of this dashboard\n"});
      }
      auto *s = new Stream{events, &streams, 0, {}, 0};
      MHD_Response *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                 read_stream, s, free_stream);
      if (!response) {
        delete s;
        return MHD_NO;
      }
      MHD_add_response_header(response, "Content-Type", "text/event-stream");
      MHD_add_response_header(response, "Cache-Control", "no-cache");
      MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, response);
      MHD_destroy_response(response);
      return ret;
    }
    HttpResponse r;
    try {
      r = router(m, path);
    } catch (const std::exception &e) {
      r = HttpResponse{500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
    }
    return queue(c, r);
  }
};

HttpServer::HttpServer(const Address &address, Router router, std::string stream_path,
                       std::shared_ptr<Broadcast> events)
    : impl_(std::make_unique<Impl>()) {
  impl_->router = std::move(router);
  impl_->stream_path = std::move(stream_path);
  impl_->events = std::move(events);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(address.port);
  inet_pton(AF_INET, address.host.c_str(), &sa.sin_addr);
  MHD_AccessHandlerCallback handler = [](void *cls, MHD_Connection *c, const char *url,
                                         const char *method, const char *, const char *,
                                         size_t *upload_data_size, void **con_cls) -> MHD_Result {
    return static_cast<Impl *>(cls)->handle(c, url, method, upload_data_size, con_cls);
  };
  // A small kernel send buffer per connection: a client that stops reading blocks its
  // connection after at most this much (then the idle timeout closes it), and 256 connections
  // hold at most 256 x 64 KiB in the kernel.
  MHD_NotifyConnectionCallback on_connection = [](void *, MHD_Connection *c, void **,
                                                  MHD_ConnectionNotificationCode code) {
    if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
    const MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info) return;
    int size = static_cast<int>(kSendBuffer);
    setsockopt(info->connect_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  };
  impl_->daemon = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, address.port,
      nullptr, nullptr, handler, impl_.get(),  //
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr *>(&sa), MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned>(kMaxConnections), MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemory,
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(kIdleTimeoutS),
      MHD_OPTION_THREAD_STACK_SIZE, static_cast<size_t>(256 * 1024), MHD_OPTION_NOTIFY_CONNECTION,
      on_connection, nullptr, MHD_OPTION_END);
  if (!impl_->daemon) {
    fail(GF_ERR_SYSTEM, "the dashboard cannot listen on " + address.host + ":" +
                            std::to_string(address.port) + " (in use, or not this host's)");
  }
  const MHD_DaemonInfo *info = MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_BIND_PORT);
  port_ = info ? info->port : address.port;
  url_ = "http://" + address.host + ":" + std::to_string(port_) + "/";
}

unsigned HttpServer::live_streams() const {
  return impl_->streams.load(std::memory_order_relaxed);
}

unsigned HttpServer::connections() const {
  if (!impl_->daemon) return 0;
  const MHD_DaemonInfo *info =
      MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info ? info->num_connections : 0;
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::stop() {
  if (!impl_ || !impl_->daemon) return;
  impl_->events->close();
  MHD_stop_daemon(impl_->daemon);
  impl_->daemon = nullptr;
}

}  // namespace gf::dashboard
