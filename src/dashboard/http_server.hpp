// A small HTTP/1.1 server for the dashboard, on GNU libmicrohttpd (Debian's libmicrohttpd-dev):
// one thread per connection, with hard bounds on everything a client controls: connections
// (kMaxConnections; more are closed at accept), bytes of request line and headers per
// connection (kConnectionMemory; past it the request is answered 431/414 and closed), seconds a
// connection may sit idle or unread (kIdleTimeoutS), bytes the kernel buffers for a client that
// does not read (kSendBuffer), and live streams (kMaxStreams). Nothing here
// knows about pools: the dashboard hands it a router for plain responses and a source of stream
// messages (server-sent events).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/host_port.hpp"

namespace gf::dashboard {

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using core::Address;
using core::parse_address;

// The latest message of a stream, numbered; waiting for the next one is bounded.
class Broadcast {
 public:
  void publish(std::string message);
  // Waits up to timeout_ms for a message newer than `seen`; on one, copies it, sets `seen` and
  // returns true. False on timeout or once closed.
  bool next(uint64_t &seen, std::string &out, int timeout_ms);
  void close();
  bool closed() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t sequence_ = 0;
  std::string message_;
  bool closed_ = false;
};

class HttpServer {
 public:
  static constexpr unsigned kMaxConnections = 256;
  static constexpr unsigned kMaxStreams = 32;
  static constexpr size_t kConnectionMemory = 32 * 1024;
  static constexpr unsigned kIdleTimeoutS = 10;
  static constexpr size_t kSendBuffer = 64 * 1024;  // SO_SNDBUF of each connection

  using Router = std::function<HttpResponse(const std::string &method, const std::string &path)>;

  // Binds and starts serving; throws gf::Error (GF_ERR_SYSTEM naming the address) when it cannot.
  // `stream_path` is served as text/event-stream from `events`.
  HttpServer(const Address &address, Router router, std::string stream_path,
             std::shared_ptr<Broadcast> events);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer &) = delete;
  HttpServer &operator=(const HttpServer &) = delete;

  // Closes the streams and the listener, waits for connection threads. Idempotent.
  void stop();
  uint16_t port() const { return port_; }
  const std::string &url() const { return url_; }  // "http://HOST:PORT/"
  unsigned live_streams() const;
  unsigned connections() const;  // open now, streams included

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::string url_;
};

}  // namespace gf::dashboard
