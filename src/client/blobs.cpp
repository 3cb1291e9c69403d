#include "client/blobs.hpp"

#include <condition_variable>

#include "client/deadlines.hpp"
#include "core/error.hpp"
#include "wire/records.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

// Control answers come quickly (the service never waits for a transfer before answering); this
// only guards against a service that stopped answering without closing.
constexpr int64_t kAnswerMs = 30000;

}  // namespace

BlobClient::BlobClient(Session &session) : session_(session) {
  session_.on_close([this](const std::string &why) {
    std::shared_ptr<transport::ClientPlane> plane;
    {
      std::lock_guard lock(mu_);
      plane = plane_;
    }
    if (plane) plane->fail(why);  // transfers in flight end now, naming the service
  });
}

std::vector<uint8_t> BlobClient::ask(uint64_t id, const std::vector<uint8_t> &frame,
                                     wire::Body expected, const char *what) {
  return session_.ask(id, frame, deadline_in(kAnswerMs), expected, what);
}

std::shared_ptr<transport::ClientPlane> BlobClient::plane() {
  open_data_plane();
  std::lock_guard lock(mu_);
  return plane_;
}

std::shared_ptr<transport::ClientPlane> BlobClient::working_plane() {
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

void BlobClient::open_data_plane(const std::shared_ptr<transport::ClientPlane> &failed) {
  std::lock_guard opening(plane_mu_);
  {
    std::lock_guard lock(mu_);
    if (plane_ && plane_ != failed) return;  // there is one (or another thread replaced it)
  }
  const std::string service = "the gpuflow service at " + session_.endpoint();
  if (!session_.welcome().data_plane) {
    fail(GF_ERR_STATE, service +
                           " offers no data plane (an older gpuflow, or UCX did not start "
                           "there: see its log)");
  }
  std::shared_ptr<transport::ClientPlane> plane =
      transport::ClientPlane::create("gpuflow-client", service, session_.net_device());
  const uint64_t id = session_.next_id();
  fb::FlatBufferBuilder b;
  std::vector<uint8_t> payload = ask(
      id, wire::frame_of(b, wire::CreateDataPlaneHello(b, id, b.CreateVector(plane->address()))),
      wire::Body::NONE, "DataPlaneHello");
  const wire::Message *m = wire::message_of(payload);
  const auto *w = m->body_as_DataPlaneWelcome();
  if (!w || !w->worker_address()) {
    fail(GF_ERR_SYSTEM,
         service + " answered DataPlaneHello with " + wire::body_name(m->body_type()));
  }
  plane->connect(std::vector<uint8_t>(w->worker_address()->begin(), w->worker_address()->end()));
  std::lock_guard lock(mu_);
  // Checked under mu_: a close that came first has failed the plane there was, not this one.
  if (!session_.alive()) session_.fail_gone();
  blob_cap_ = w->blob_cap();
  bytes_follow_puts_ = w->bytes_follow_puts();
  plane_ = std::move(plane);
}

uint64_t BlobClient::blob_cap() {
  open_data_plane();
  std::lock_guard lock(mu_);
  return blob_cap_;
}

std::string BlobClient::data_plane_transports() {
  return plane()->transports();
}

void BlobClient::check_blob_size(uint64_t blob_id, uint64_t size) {
  std::lock_guard lock(mu_);
  if (size <= blob_cap_) return;
  fail(GF_ERR_INVALID_ARGUMENT, "blob " + std::to_string(blob_id) + " of " + std::to_string(size) +
                                    " bytes is over the cap of " + std::to_string(blob_cap_) +
                                    " bytes the service at " + session_.endpoint() +
                                    " holds for one client; nothing was sent");
}

BlobClient::PutTicket BlobClient::announce_put(uint64_t blob_id, uint64_t size, uint64_t tag) {
  open_data_plane();
  PutTicket t;
  t.request_id = session_.next_id();
  t.blob_id = blob_id;
  t.size = size;
  t.tag = tag != 0 ? tag : next_tag();
  fb::FlatBufferBuilder b;
  ask(t.request_id, wire::frame_of(b, wire::CreateBlobPut(b, t.request_id, blob_id, size, t.tag)),
      wire::Body::BlobPutReady, "BlobPut");
  return t;
}

void BlobClient::finish_put(const PutTicket &t, const void *data) {
  std::shared_ptr<transport::ClientPlane> plane = this->plane();
  session_.expect(t.request_id);  // BlobStored, or an Error, answers once the bytes are in
  transport::ClientPlane::OpHandle op = plane->start_send(t.tag, data, t.size);
  std::vector<uint8_t> payload;
  try {
    payload = session_.await(t.request_id, -1);
  } catch (const Error &e) {
    plane->fail(e.what());  // the send must end before `data` goes back to the caller
    try {
      plane->wait(op);
    } catch (const Error &) {
    }
    throw;
  }
  const wire::Message *m = wire::message_of(payload);
  if (Refusal refused = wire::refusal_of(*m)) {
    // The service gave up on the bytes (they never matched its receive): a send still in flight
    // would never end, so the data plane goes down with it.
    if (!plane->finished(op)) plane->fail("blob " + std::to_string(t.blob_id) + ": " + refused.why);
    try {
      plane->wait(op);
    } catch (const Error &) {
    }
    fail(refused.status, refused.why);
  }
  plane->wait(op);
  if (!m->body_as_BlobStored()) {
    fail(GF_ERR_SYSTEM,
         session_.endpoint() + " answered a put with " + wire::body_name(m->body_type()));
  }
}

// The one-step calls below let the connection's reader thread begin the transfer the moment
// the service's answer comes, so the caller sleeps once per call rather than once per message
// (each wake-up is ~20 µs on an idle VM: docs/benchmarks.md, "UCX data plane").

void BlobClient::put(uint64_t blob_id, const void *data, size_t size) {
  std::shared_ptr<transport::ClientPlane> plane = working_plane();
  check_blob_size(blob_id, size);
  const uint64_t id = session_.next_id();
  const uint64_t tag = next_tag();
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool sent = false, answered = false;
    Refusal refused;
  };
  auto state = std::make_shared<State>();
  auto answer = [state](Refusal refused) {
    {
      std::lock_guard lock(state->mu);
      state->answered = true;
      state->refused = std::move(refused);
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
  const std::string endpoint = session_.endpoint();
  // BlobStored once the bytes are in; a BlobRefused or an Error if not.
  auto stored = [answer, plane, op, blob_id, endpoint](const std::vector<uint8_t> *payload,
                                                       const std::string &why) {
    if (!payload) return answer({GF_ERR_SYSTEM, why});
    const wire::Message *m = wire::message_of(*payload);
    Refusal refused = wire::refusal_of(*m);
    const auto *r = m->body_as_BlobRefused();
    const bool drained = r && r->drained();
    if (!refused && !m->body_as_BlobStored())
      refused = {GF_ERR_SYSTEM,
                 endpoint + " answered a put with " + wire::body_name(m->body_type())};
    if (!refused) return answer({});
    // Bytes the service neither took nor drains leave the send in flight for good, so the data
    // plane goes down with it (the caller waits for the send before `data` is its own again).
    if (!drained && !plane->finished(op))
      plane->fail("blob " + std::to_string(blob_id) + ": " + refused.why);
    answer(std::move(refused));
  };
  // BlobPutReady (older services): the service's receive is posted, send now (on the reader
  // thread).
  auto ready = [this, plane, op, answer, stored, id, tag, data, size, endpoint](
                   const std::vector<uint8_t> *payload, const std::string &why) {
    Refusal refused{GF_ERR_SYSTEM, why};
    if (payload) {
      const wire::Message *m = wire::message_of(*payload);
      refused = wire::refusal_of(*m);
      if (!refused && !m->body_as_BlobPutReady())
        refused = {GF_ERR_SYSTEM,
                   endpoint + " answered BlobPut with " + wire::body_name(m->body_type())};
      std::string gone;
      if (!refused && !session_.expect(id, stored, gone)) refused = {GF_ERR_SYSTEM, gone};
      if (!refused) return plane->begin(op, false, tag, const_cast<void *>(data), size);
    }
    plane->abandon(op, refused.status, refused.why);
    answer(std::move(refused));
  };
  bool bytes_follow;
  {
    std::lock_guard lock(mu_);
    // A service that takes bytes following BlobPut unasked (0.7) receives them whenever they
    // come and drains them if it refuses the put: one control message instead of two.
    bytes_follow = bytes_follow_puts_;
  }
  std::string gone;
  if (!session_.expect(id, bytes_follow ? Session::Answered(stored) : Session::Answered(ready),
                       gone)) {
    fail(GF_ERR_SYSTEM, gone);
  }
  fb::FlatBufferBuilder b;
  session_.send_answered(
      id, wire::frame_of(b, wire::CreateBlobPut(b, id, blob_id, size, tag, bytes_follow)));
  if (bytes_follow) plane->begin(op, false, tag, const_cast<void *>(data), size);
  {
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, [&] { return state->sent && state->answered; });
  }
  // Refused before the send began (abandoned, so `sent`), or after it ended.
  if (state->refused) fail(state->refused.status, state->refused.why);
  plane->wait(op);
}

std::vector<uint8_t> BlobClient::get(uint64_t blob_id) {
  // Not working_plane(): on a failed plane the service's answer says why in its words (a relay
  // that died, named), and the receive then fails at once.
  std::shared_ptr<transport::ClientPlane> plane = this->plane();
  const uint64_t id = session_.next_id();
  const uint64_t tag = next_tag();
  const uint64_t cap = blob_cap();
  const std::string endpoint = session_.endpoint();
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  transport::ClientPlane::OpHandle op = plane->prepare();
  // BlobSending: the receive is posted here, on the reader thread.
  auto sending = [plane, op, bytes, tag, cap, endpoint](const std::vector<uint8_t> *payload,
                                                        const std::string &why) {
    if (!payload) return plane->abandon(op, GF_ERR_SYSTEM, why);
    const wire::Message *m = wire::message_of(*payload);
    if (Refusal refused = wire::refusal_of(*m))
      return plane->abandon(op, refused.status, refused.why);
    const auto *s = m->body_as_BlobSending();
    if (!s) {
      return plane->abandon(op, GF_ERR_SYSTEM,
                            endpoint + " answered BlobGet with " + wire::body_name(m->body_type()));
    }
    // The size is the service's word: no more than this client may hold there.
    if (s->size() > cap) {
      return plane->abandon(op, GF_ERR_SYSTEM,
                            endpoint + " announced a blob of " + std::to_string(s->size()) +
                                " bytes, over the cap of " + std::to_string(cap));
    }
    try {
      bytes->resize(s->size());
    } catch (const std::bad_alloc &) {
      return plane->abandon(
          op, GF_ERR_OUT_OF_MEMORY,
          "no memory here for blob of " + std::to_string(s->size()) + " bytes from " + endpoint);
    }
    plane->begin(op, true, tag, bytes->data(), bytes->size());
  };
  std::string gone;
  if (!session_.expect(id, sending, gone)) fail(GF_ERR_SYSTEM, gone);
  // An Error after BlobSending means the service's send failed: the receive would wait forever.
  session_.watch_errors(id, [plane, blob_id](const std::string &why) {
    plane->fail("blob " + std::to_string(blob_id) + ": " + why);
  });
  struct Unwatch {
    Session &session;
    uint64_t id;
    ~Unwatch() { session.unwatch(id); }
  } unwatch{session_, id};
  fb::FlatBufferBuilder b;
  session_.send_answered(id, wire::frame_of(b, wire::CreateBlobGet(b, id, blob_id, tag)));
  if (!plane->wait_begun(op, deadline_in(kAnswerMs)) && session_.take(id)) {
    fail(GF_TIMEOUT, "the gpuflow service at " + endpoint + " did not answer in time");
  }
  plane->wait(op);
  return std::move(*bytes);
}

void BlobClient::drop_blob(uint64_t blob_id) {
  open_data_plane();
  const uint64_t id = session_.next_id();
  fb::FlatBufferBuilder b;
  ask(id, wire::frame_of(b, wire::CreateBlobDrop(b, id, blob_id)), wire::Body::NONE, "BlobDrop");
}

void BlobClient::forget_blob(uint64_t blob_id) {
  session_.send_unanswered([blob_id](fb::FlatBufferBuilder &b, uint64_t id) {
    return wire::frame_of(b, wire::CreateBlobDrop(b, id, blob_id));
  });
}

}  // namespace gf::client
