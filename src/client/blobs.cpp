// Connection's data-plane calls (declared in client/connection.hpp): the control messages that
// say what moves, and the UCX transfers (transport/client_plane) that move it.
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "client/connection.hpp"
#include "client/message_support.hpp"
#include "core/error.hpp"
#include "wire/framing.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

// The service's Error as an exception, or nothing.
void throw_if_error(const wire::Message &m) {
  if (const auto *e = m.body_as_Error()) {
    fail(static_cast<gf_status>(e->status()), str(e->message()));
  }
}

// Control answers come quickly (the service never waits for a transfer before answering); this
// only guards against a service that stopped answering without closing.
constexpr int64_t kAnswerMs = 30000;

}  // namespace

std::shared_ptr<transport::ClientPlane> Connection::plane() {
  open_data_plane();
  std::lock_guard lock(mu_);
  return plane_;
}

std::shared_ptr<transport::ClientPlane> Connection::working_plane() {
  std::shared_ptr<transport::ClientPlane> plane = this->plane();
  if (plane->failure().empty()) return plane;
  // A put starts afresh on a new data plane (the service lets the old one go, with the blobs it
  // held). Gets keep the failed one, so that they say why their blob cannot come.
  open_data_plane(plane);
  plane = this->plane();
  // A put must not be announced on a plane whose bytes cannot move (the service would hold its
  // reservation until the put timed out, and the caller would wait as long).
  if (std::string why = plane->failure(); !why.empty()) fail(GF_ERR_SYSTEM, why);
  return plane;
}

void Connection::open_data_plane(const std::shared_ptr<transport::ClientPlane> &failed) {
  std::lock_guard opening(plane_mu_);
  {
    std::lock_guard lock(mu_);
    if (plane_ && plane_ != failed) return;  // there is one (or another thread replaced it)
  }
  const std::string service = "the gpuflow service at " + endpoint_;
  if (!welcome_.data_plane) {
    fail(GF_ERR_STATE, service +
                           " offers no data plane (an older gpuflow, or UCX did not start "
                           "there: see its log)");
  }
  std::shared_ptr<transport::ClientPlane> plane =
      transport::ClientPlane::create("gpuflow-client", service, net_device_);
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload = call(
      id, wire::frame_of(b, wire::CreateDataPlaneHello(b, id, b.CreateVector(plane->address()))),
      deadline_in(kAnswerMs));
  const wire::Message *m = wire::message_of(payload);
  throw_if_error(*m);
  const auto *w = m->body_as_DataPlaneWelcome();
  if (!w || !w->worker_address()) {
    fail(GF_ERR_SYSTEM,
         service + " answered DataPlaneHello with " + wire::body_name(m->body_type()));
  }
  plane->connect(std::vector<uint8_t>(w->worker_address()->begin(), w->worker_address()->end()));
  std::lock_guard lock(mu_);
  if (closed_) fail(GF_ERR_SYSTEM, service + " is gone: " + close_reason_);
  blob_cap_ = w->blob_cap();
  bytes_follow_puts_ = w->bytes_follow_puts();
  plane_ = std::move(plane);
}

uint64_t Connection::blob_cap() {
  open_data_plane();
  std::lock_guard lock(mu_);
  return blob_cap_;
}

std::string Connection::data_plane_transports() {
  return plane()->transports();
}

void Connection::check_blob_size(uint64_t blob_id, uint64_t size) {
  std::lock_guard lock(mu_);
  if (size <= blob_cap_) return;
  fail(GF_ERR_INVALID_ARGUMENT, "blob " + std::to_string(blob_id) + " of " + std::to_string(size) +
                                    " bytes is over the cap of " + std::to_string(blob_cap_) +
                                    " bytes the service at " + endpoint_ +
                                    " holds for one client; nothing was sent");
}

Connection::PutTicket Connection::announce_put(uint64_t blob_id, uint64_t size, uint64_t tag) {
  open_data_plane();
  PutTicket t;
  t.request_id = next_id_++;
  t.blob_id = blob_id;
  t.size = size;
  t.tag = tag != 0 ? tag : next_tag();
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload = call(
      t.request_id, wire::frame_of(b, wire::CreateBlobPut(b, t.request_id, blob_id, size, t.tag)),
      deadline_in(kAnswerMs));
  const wire::Message *m = wire::message_of(payload);
  throw_if_error(*m);
  if (!m->body_as_BlobPutReady()) {
    fail(GF_ERR_SYSTEM, endpoint_ + " answered BlobPut with " + wire::body_name(m->body_type()));
  }
  return t;
}

void Connection::finish_put(const PutTicket &t, const void *data) {
  std::shared_ptr<transport::ClientPlane> plane = this->plane();
  {
    std::lock_guard lock(mu_);
    if (closed_) fail(GF_ERR_SYSTEM, gone());
    waiting_[t.request_id];  // BlobStored, or an Error, answers once the bytes are in
  }
  transport::ClientPlane::OpHandle op = plane->start_send(t.tag, data, t.size);
  std::vector<uint8_t> payload;
  try {
    payload = await(t.request_id, -1);
  } catch (const Error &e) {
    plane->fail(e.what());  // the send must end before `data` goes back to the caller
    try {
      plane->wait(op);
    } catch (const Error &) {
    }
    throw;
  }
  const wire::Message *m = wire::message_of(payload);
  if (const auto *e = m->body_as_Error()) {
    // The service gave up on the bytes (they never matched its receive): a send still in flight
    // would never end, so the data plane goes down with it.
    if (!plane->finished(op))
      plane->fail("blob " + std::to_string(t.blob_id) + ": " + str(e->message()));
    try {
      plane->wait(op);
    } catch (const Error &) {
    }
    fail(static_cast<gf_status>(e->status()), str(e->message()));
  }
  plane->wait(op);
  if (!m->body_as_BlobStored()) {
    fail(GF_ERR_SYSTEM, endpoint_ + " answered a put with " + wire::body_name(m->body_type()));
  }
}

// The one-step calls below let the connection's reader thread begin the transfer the moment
// the service's answer comes, so the caller sleeps once per call rather than once per message
// (each wake-up is ~20 µs on an idle VM: docs/benchmarks.md, "UCX data plane").

void Connection::send_answered(uint64_t id, const std::vector<uint8_t> &frame) {
  try {
    send(frame);
  } catch (...) {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(id);
    if (it != waiting_.end() && it->second.callback) waiting_.erase(it);  // nobody will call it
    throw;
  }
}

void Connection::put(uint64_t blob_id, const void *data, size_t size) {
  std::shared_ptr<transport::ClientPlane> plane = working_plane();
  check_blob_size(blob_id, size);
  const uint64_t id = next_id_++;
  const uint64_t tag = next_tag();
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool sent = false, answered = false;
    gf_status status = GF_OK;
    std::string error;
  };
  auto state = std::make_shared<State>();
  auto answer = [state](gf_status status, const std::string &error) {
    {
      std::lock_guard lock(state->mu);
      state->answered = true;
      state->status = status;
      state->error = error;
    }
    state->cv.notify_all();
  };
  transport::ClientPlane::OpHandle op = plane->prepare([state] {
    {
      std::lock_guard lock(state->mu);
      state->sent = true;
    }
    state->cv.notify_all();
  });
  // BlobStored once the bytes are in; a BlobRefused or an Error if not.
  auto stored = [this, answer, plane, op, blob_id](const std::vector<uint8_t> *payload,
                                                   const std::string &why) {
    if (!payload) return answer(GF_ERR_SYSTEM, why);
    const wire::Message *m = wire::message_of(*payload);
    gf_status status = GF_ERR_SYSTEM;
    std::string error;
    bool drained = false;
    if (const auto *e = m->body_as_Error()) {
      status = static_cast<gf_status>(e->status());
      error = str(e->message());
    } else if (const auto *r = m->body_as_BlobRefused()) {
      status = static_cast<gf_status>(r->status());
      error = str(r->message());
      drained = r->drained();
    } else if (!m->body_as_BlobStored()) {
      error = endpoint_ + " answered a put with " + wire::body_name(m->body_type());
    }
    if (error.empty()) return answer(GF_OK, {});
    // Bytes the service neither took nor drains leave the send in flight for good, so the data
    // plane goes down with it (the caller waits for the send before `data` is its own again).
    if (!drained && !plane->finished(op))
      plane->fail("blob " + std::to_string(blob_id) + ": " + error);
    answer(status, error);
  };
  // BlobPutReady (older services): the service's receive is posted, send now (on the reader
  // thread).
  auto ready = [this, plane, op, answer, stored, id, tag, data, size](
                   const std::vector<uint8_t> *payload, const std::string &why) {
    gf_status status = GF_ERR_SYSTEM;
    std::string error = why;
    if (payload) {
      const wire::Message *m = wire::message_of(*payload);
      if (const auto *e = m->body_as_Error()) {
        status = static_cast<gf_status>(e->status());
        error = str(e->message());
      } else if (!m->body_as_BlobPutReady()) {
        error = endpoint_ + " answered BlobPut with " + wire::body_name(m->body_type());
      } else {
        std::lock_guard lock(mu_);
        if (closed_) {
          error = gone();
        } else {
          waiting_[id].callback = stored;
        }
      }
      if (error.empty()) return plane->begin(op, false, tag, const_cast<void *>(data), size);
    }
    plane->abandon(op, status, error);
    answer(status, error);
  };
  bool bytes_follow = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      fail(GF_ERR_SYSTEM, gone());
    }
    // A service that takes bytes following BlobPut unasked (0.7) receives them whenever they
    // come and drains them if it refuses the put: one control message instead of two.
    bytes_follow = bytes_follow_puts_;
    if (bytes_follow) {
      waiting_[id].callback = stored;
    } else {
      waiting_[id].callback = ready;
    }
  }
  fb::FlatBufferBuilder b;
  send_answered(id,
                wire::frame_of(b, wire::CreateBlobPut(b, id, blob_id, size, tag, bytes_follow)));
  if (bytes_follow) plane->begin(op, false, tag, const_cast<void *>(data), size);
  {
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, [&] { return state->sent && state->answered; });
  }
  if (!state->error.empty()) {
    // Refused before the send began (abandoned, so `sent`), or after it ended.
    fail(state->status, state->error);
  }
  plane->wait(op);
}

std::vector<uint8_t> Connection::get(uint64_t blob_id) {
  // Not working_plane(): on a failed plane the service's answer says why in its words (a relay
  // that died, named), and the receive then fails at once.
  std::shared_ptr<transport::ClientPlane> plane = this->plane();
  const uint64_t id = next_id_++;
  const uint64_t tag = next_tag();
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  transport::ClientPlane::OpHandle op = plane->prepare();
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      fail(GF_ERR_SYSTEM, gone());
    }
    // BlobSending: the receive is posted here, on the reader thread.
    waiting_[id].callback = [this, plane, op, bytes, tag](const std::vector<uint8_t> *payload,
                                                          const std::string &why) {
      if (!payload) return plane->abandon(op, GF_ERR_SYSTEM, why);
      const wire::Message *m = wire::message_of(*payload);
      if (const auto *e = m->body_as_Error()) {
        return plane->abandon(op, static_cast<gf_status>(e->status()), str(e->message()));
      }
      const auto *sending = m->body_as_BlobSending();
      if (!sending) {
        return plane->abandon(
            op, GF_ERR_SYSTEM,
            endpoint_ + " answered BlobGet with " + wire::body_name(m->body_type()));
      }
      // The size is the service's word: no more than this client may hold there.
      if (sending->size() > blob_cap_) {
        return plane->abandon(op, GF_ERR_SYSTEM,
                              endpoint_ + " announced a blob of " +
                                  std::to_string(sending->size()) + " bytes, over the cap of " +
                                  std::to_string(blob_cap_));
      }
      try {
        bytes->resize(sending->size());
      } catch (const std::bad_alloc &) {
        return plane->abandon(op, GF_ERR_OUT_OF_MEMORY,
                              "no memory here for blob of " + std::to_string(sending->size()) +
                                  " bytes from " + endpoint_);
      }
      plane->begin(op, true, tag, bytes->data(), bytes->size());
    };
    // An Error after BlobSending means the service's send failed: the receive would wait forever.
    watchers_[id] = [plane, blob_id](const std::string &why) {
      plane->fail("blob " + std::to_string(blob_id) + ": " + why);
    };
  }
  struct Unwatch {
    Connection *c;
    uint64_t id;
    ~Unwatch() {
      std::lock_guard lock(c->mu_);
      c->watchers_.erase(id);
    }
  } unwatch{this, id};
  fb::FlatBufferBuilder b;
  send_answered(id, wire::frame_of(b, wire::CreateBlobGet(b, id, blob_id, tag)));
  if (!plane->wait_begun(op, deadline_in(kAnswerMs))) {
    bool mine = false;
    {
      std::lock_guard lock(mu_);
      auto it = waiting_.find(id);
      if (it != waiting_.end() && it->second.callback) {
        waiting_.erase(it);
        mine = true;
      }
    }
    if (mine) fail(GF_TIMEOUT, "the gpuflow service at " + endpoint_ + " did not answer in time");
  }
  plane->wait(op);
  return std::move(*bytes);
}

void Connection::drop_blob(uint64_t blob_id) {
  open_data_plane();
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload =
      call(id, wire::frame_of(b, wire::CreateBlobDrop(b, id, blob_id)), deadline_in(kAnswerMs));
  throw_if_error(*wire::message_of(payload));
}

void Connection::forget_blob(uint64_t blob_id) {
  send_unanswered([blob_id](fb::FlatBufferBuilder &b, uint64_t id) {
    return wire::frame_of(b, wire::CreateBlobDrop(b, id, blob_id));
  });
}

void Connection::send_unanswered(
    const std::function<std::vector<uint8_t>(flatbuffers::FlatBufferBuilder &, uint64_t)> &frame) {
  const uint64_t id = next_id_++;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;  // gone: the service ended what this would have asked with the connection
    waiting_[id].callback = [](const std::vector<uint8_t> *, const std::string &) {};
  }
  flatbuffers::FlatBufferBuilder b;
  try {
    send_answered(id, frame(b, id));
  } catch (const Error &) {
  }
}

}  // namespace gf::client
