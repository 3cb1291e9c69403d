// The core of a connection to the node's gpuflow service: the socket, the Hello/Welcome
// handshake, request ids, the threads waiting for answers, and the reader thread that takes
// every frame the service sends, verifies it and hands it on. When the service goes away (closed
// socket, Goodbye, garbage) every waiting call fails at once with an error naming the endpoint.
// The protocols on top (client/leases, client/blobs, client/runs) keep their own state; the
// session only routes: notices to whoever registered for their body type, answers by the
// request id the schema says they carry (wire/request_ids.hpp).
//
// Plain blocking POSIX sockets rather than a libuv loop: callers block on their own threads
// (gf_lease_acquire, status), and one reader thread is all the asynchrony a client needs.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/byte_stream.hpp"
#include "client/handshake.hpp"
#include "wire/framing.hpp"

namespace gf::client {

// Why a connection ended. Its words in errors depend on it; nothing searches them.
enum class Ended {
  kByThisProcess,  // let go here
  kPeerClosed,     // the service closed the socket (perhaps after an Error saying why)
  kGoodbye,        // the service said it is stopping
  kWriteFailed,    // writing to the socket failed
  kGarbage,        // the service sent what is no valid frame or message
};

struct Closing {
  Ended cause = Ended::kByThisProcess;
  std::string detail;  // the service's last word, the write's error, what was wrong, …
  // "the service is stopping: …", "it sent a frame of 0 bytes", …
  std::string words() const;
};

class Session {
 public:
  // An answer, or null and why when the connection closed first.
  using Answered = std::function<void(const std::vector<uint8_t> *payload, const std::string &why)>;
  // A verified message of a body type someone registered for.
  using Notice = std::function<void(const std::vector<uint8_t> &payload)>;
  using FrameBuilder =
      std::function<std::vector<uint8_t>(flatbuffers::FlatBufferBuilder &, uint64_t id)>;

  // Connects and shakes hands within `timeout_ms` (client/connection.hpp says what the arguments
  // mean). The reader starts with start(), once the protocols on top have registered.
  static std::unique_ptr<Session> open(const std::string &endpoint, const std::string &name,
                                       double weight, int timeout_ms, uint64_t on_behalf_of,
                                       const std::string &token_file);
  ~Session();  // stop()
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  const std::string &endpoint() const { return endpoint_; }
  // A service on another host (tcp://): its devices are not this host's.
  bool remote() const { return !net_device_.empty(); }
  // Remote services: the local network device the connection goes through.
  const std::string &net_device() const { return net_device_; }
  const Welcome &welcome() const { return welcome_; }
  bool alive() const { return !closed_.load(); }
  // Why it ended (meaningful once !alive()).
  Closing closing() const;

  // Before start(): `notice` sees each message of `body` on the reader thread, before an answer
  // among them goes to its call. Must be quick.
  void on(wire::Body body, Notice notice);
  // Before start(): called once, with "the gpuflow service at … is gone: …", on the thread that
  // saw the connection end (the reader, or a writer whose write failed), in the order registered
  // and before the calls still waiting are failed.
  void on_close(std::function<void(const std::string &why)> closed);
  void start();
  // Ends the connection and waits for the reader (unless called on it). Idempotent.
  void stop();

  uint64_t next_id() { return next_id_++; }
  // Writes a whole frame. Throws GF_ERR_INVALID_ARGUMENT, sending nothing and leaving the
  // connection as it was, for a frame over the service's limit (wire::kMaxFrame); GF_ERR_SYSTEM
  // once writing fails (the connection is then closed).
  void send(const std::vector<uint8_t> &frame);
  // Sends a request and waits for the answer with its id (deadline_ms < 0: no deadline).
  // `late`: what a deadline passed hands the answer to, should it still come.
  std::vector<uint8_t> call(uint64_t id, const std::vector<uint8_t> &frame, int64_t deadline_ms,
                            Answered late = {});
  // call(), then the answer's refusal thrown with the service's status, or GF_ERR_SYSTEM for an
  // answer other than `expected` (Body::NONE: any); `what` names the request in that error.
  std::vector<uint8_t> ask(uint64_t id, const std::vector<uint8_t> &frame, int64_t deadline_ms,
                           wire::Body expected, const char *what);
  // A call in two steps: expect() before the request goes (throws when gone), then await().
  void expect(uint64_t id);
  std::vector<uint8_t> await(uint64_t id, int64_t deadline_ms, Answered late = {});
  // Hands the answer to `id` to `answered` instead (on the reader thread); false, with why,
  // when the connection is gone.
  bool expect(uint64_t id, Answered answered, std::string &why_gone);
  // Takes back what expect() left for `id`, if no answer has taken it yet.
  Answered take(uint64_t id);
  // Sends a request whose answer goes to what expect() left; takes that back if sending fails
  // (then throws).
  void send_answered(uint64_t id, const std::vector<uint8_t> &frame);
  // Sends a request (built by `frame` for its id) whose answer nobody waits for; never throws.
  void send_unanswered(const FrameBuilder &frame);
  // An Error for `id` once its first answer has gone (a get whose send failed later) goes here.
  void watch_errors(uint64_t id, std::function<void(const std::string &why)> watcher);
  void unwatch(uint64_t id);

  // "the gpuflow service at … is gone: …"
  std::string gone() const;
  [[noreturn]] void fail_gone() const;

 private:
  struct Reply {
    bool done = false;
    std::vector<uint8_t> payload;  // a verified Message
    Answered callback;             // set: called with the answer instead of waking a thread
  };
  Session(std::string endpoint, std::unique_ptr<ByteStream> stream, std::string net_device);
  std::string oversized(const std::vector<uint8_t> &frame) const;
  void read_loop();
  // One verified frame: handed on; the connection's end when it says so (Goodbye).
  bool deliver(const std::vector<uint8_t> &payload, std::string &last_word, Closing &end);
  void answer(uint64_t id, const wire::Message &m, const std::vector<uint8_t> &payload);
  void close_with(Closing end);
  std::string gone_locked() const;

  const std::string endpoint_;
  const std::unique_ptr<ByteStream> stream_;  // the socket, or TLS over it
  const std::string net_device_;
  Welcome welcome_;
  // The incoming byte stream, cut into frames: the handshake's, then the reader thread's (what
  // came in one read with the Welcome is not lost).
  wire::FrameReader frames_;
  std::atomic<uint64_t> next_id_{1};
  std::array<Notice, static_cast<size_t>(wire::Body::MAX) + 1> notices_;  // fixed at start()
  std::vector<std::function<void(const std::string &)>> closed_listeners_;
  std::mutex write_mu_;
  mutable std::mutex mu_;
  std::condition_variable replied_;
  // Bumped (after mu_ is released) whenever an answer is stored or the session closes: what a
  // caller waiting awake watches (await).
  std::atomic<uint64_t> replies_{0};
  std::map<uint64_t, Reply> waiting_;
  std::map<uint64_t, std::function<void(const std::string &)>> watchers_;
  std::atomic<bool> closed_{false};
  Closing closing_;  // under mu_
  std::thread reader_;
};

}  // namespace gf::client
