// A client's connection: a libuv stream (a unix socket or TCP: unix_connection.hpp and
// tcp_connection.hpp, one file per handle kind), cut into verified frames, written to within a
// bound, and closed once. The peer's identity is settled by the kind: a unix socket's at accept,
// a remote one's at its Hello. What a message means is not decided here: every frame goes to the
// service's dispatch (ConnectionSet::Hooks), and a departure to its departure hook.
#pragma once

#include <uv.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/refusal.hpp"
#include "service/client.hpp"
#include "service/deadlines.hpp"
#include "wire/framing.hpp"

namespace gf::service {

class ConnectionSet;

class Connection : public Client {
 public:
  void send(std::vector<uint8_t> frame) override;
  void drop(const std::string &reason, bool flush = true) override;

  // Settles who the peer is from its Hello (the kind's rule). A refusal ends the connection as a
  // protocol violation; a peer refused otherwise (a wrong token) is dropped here, and returns
  // with `closing` set.
  virtual Refusal settle_identity(const wire::Hello &hello, const ClientTable &clients) = 0;

  // For the kinds' accept: a connection let in gets its id and Hello deadline and is read; one
  // that is not is told why (an Error frame before its first read) and closed, unseen by anyone.
  void admit();
  void refuse_and_close(const std::string &why);
  // Closes a connection no one saw (accept failed).
  void discard();

 protected:
  explicit Connection(ConnectionSet &set) : set_(set) {}
  virtual uv_stream_t *stream() = 0;
  uv_handle_t *handle() { return reinterpret_cast<uv_handle_t *>(stream()); }
  // Bytes a peer may have sent before its Hello is read (the frame bound aside).
  virtual size_t max_before_hello() const = 0;
  // A kind that wraps the stream (TLS) sees what the socket gave first, and hands the frame
  // reader the bytes within (on_read); each frame to send goes through transmit, and the last
  // words before the stream shuts go through finish.
  virtual void on_bytes(ssize_t n, const char *bytes) { on_read(n, bytes); }
  virtual void transmit(std::vector<uint8_t> bytes) { write_raw(std::move(bytes)); }
  virtual void finish() {}
  void on_read(ssize_t n, const char *bytes);
  // Bytes onto the socket as they are, queued behind what waits.
  void write_raw(std::vector<uint8_t> bytes);

  ConnectionSet &set_;

 private:
  friend class ConnectionSet;
  static void close(uv_handle_t *handle);  // once; the Connection goes when libuv is done
  wire::FrameReader reader_;
};

// The connections of one service: those let in (the ClientTable handlers see) and those
// closing, which stay until libuv is done with their handles.
class ConnectionSet {
 public:
  struct Hooks {
    // A message of a connection, to the service's dispatch. A refusal is a protocol violation:
    // the connection is closed, saying so.
    std::function<Refusal(Connection &, const wire::Message &)> message;
    // A connection goes: what it held goes back. Returns what to add to its log line.
    std::function<std::string(Client &, const std::string &reason)> departed;
  };
  ConnectionSet(uv_loop_t *on, ClientTable &table, Deadlines &times, Log lines, Clock clock)
      : loop(on), clients(table), deadlines(times), log(std::move(lines)), now(std::move(clock)) {
    deadlines.on_due(Deadline::kHello, [this](ClientId id, uint64_t) { hello_missed(id); });
  }
  ConnectionSet(const ConnectionSet &) = delete;
  ConnectionSet &operator=(const ConnectionSet &) = delete;
  void set_hooks(Hooks h) { hooks = std::move(h); }

  // From any thread, once the service is to stop: no connection's request is handled after it
  // (nor read), so the stop does not wait for a backlog of them first; drop_all follows on the
  // loop's next turn.
  void stop_reading() { stop_asked_.store(true); }
  // Says goodbye to every connection and drops it (the service is stopping).
  void drop_all(const std::string &why);
  // Closes what is still open of dropped connections (with `force`), or counts it.
  size_t close_dropped(bool force);

  uv_loop_t *const loop;
  ClientTable &clients;
  Deadlines &deadlines;
  const Log log;
  const Clock now;
  Hooks hooks;
  // The kinds' bounds on connections, each logged once while it holds: users with too many unix
  // connections, and remote connections waiting for their Hello.
  std::set<uint32_t> warned_users;
  bool warned_ungreeted = false;

 private:
  friend class Connection;
  // Its Hello did not come in time (kHelloTimeout_s): dropped.
  void hello_missed(ClientId id);
  std::set<Connection *> dropped_;
  std::atomic<bool> stop_asked_{false};
};

}  // namespace gf::service
