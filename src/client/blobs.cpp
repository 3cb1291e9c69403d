// Connection's data-plane calls (declared in client/connection.hpp): the control messages that
// say what moves, and the UCX transfers (transport/client_plane) that move it.
#include <chrono>

#include "client/connection.hpp"
#include "core/error.hpp"
#include "wire/framing.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

int64_t deadline_in(int64_t ms) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
             .count() +
         ms;
}

std::string str(const fb::String *s) {
  return s ? s->str() : std::string();
}

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

void Connection::open_data_plane() {
  std::lock_guard opening(plane_mu_);
  {
    std::lock_guard lock(mu_);
    if (plane_) return;
  }
  const std::string service = "the gpuflow service at " + endpoint_;
  if (!welcome_.data_plane) {
    fail(GF_ERR_STATE, service +
                           " offers no data plane (an older gpuflow, or UCX did not start "
                           "there: see its log)");
  }
  std::shared_ptr<transport::ClientPlane> plane =
      transport::ClientPlane::create("gpuflow-client", service);
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
  plane_ = std::move(plane);
}

uint64_t Connection::blob_cap() {
  open_data_plane();
  std::lock_guard lock(mu_);
  return blob_cap_;
}

transport::ClientPlane &Connection::data_plane() {
  return *plane();
}

std::string Connection::data_plane_transports() {
  return plane()->transports();
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
    if (closed_)
      fail(GF_ERR_SYSTEM, "the gpuflow service at " + endpoint_ + " is gone: " + close_reason_);
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

void Connection::put(uint64_t blob_id, const void *data, size_t size) {
  finish_put(announce_put(blob_id, size), data);
}

std::vector<uint8_t> Connection::get(uint64_t blob_id) {
  std::shared_ptr<transport::ClientPlane> plane = this->plane();
  const uint64_t id = next_id_++;
  const uint64_t tag = next_tag();
  {
    // An Error after BlobSending means the service's send failed: the receive would wait forever.
    std::lock_guard lock(mu_);
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
  std::vector<uint8_t> payload =
      call(id, wire::frame_of(b, wire::CreateBlobGet(b, id, blob_id, tag)), deadline_in(kAnswerMs));
  const wire::Message *m = wire::message_of(payload);
  throw_if_error(*m);
  const auto *sending = m->body_as_BlobSending();
  if (!sending) {
    fail(GF_ERR_SYSTEM, endpoint_ + " answered BlobGet with " + wire::body_name(m->body_type()));
  }
  std::vector<uint8_t> bytes(sending->size());
  plane->recv(tag, bytes.data(), bytes.size());
  return bytes;
}

void Connection::drop_blob(uint64_t blob_id) {
  open_data_plane();
  const uint64_t id = next_id_++;
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload =
      call(id, wire::frame_of(b, wire::CreateBlobDrop(b, id, blob_id)), deadline_in(kAnswerMs));
  throw_if_error(*wire::message_of(payload));
}

}  // namespace gf::client
