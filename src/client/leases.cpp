#include "client/leases.hpp"

#include "client/deadlines.hpp"
#include "core/error.hpp"

namespace gf::client {

namespace fb = flatbuffers;

namespace {

// Bind and status are answered at once; this only guards against a service that stopped
// answering without closing.
constexpr int64_t kAnswerMs = 10000;

std::vector<uint8_t> lease_request_frame(uint64_t id, const LeaseAsk &ask, int64_t timeout_ms) {
  fb::FlatBufferBuilder b;
  auto request = wire::encode(b, id, ask, timeout_ms);
  return wire::frame_of(b, request);
}

}  // namespace

LeaseClient::LeaseClient(Session &session) : session_(session) {
  session_.on(wire::Body::LeaseRevoke, [this](const std::vector<uint8_t> &payload) {
    const uint64_t lease = wire::message_of(payload)->body_as_LeaseRevoke()->lease_id();
    std::function<void(uint64_t)> callback;
    {
      std::lock_guard lock(mu_);
      revoked_.insert(lease);
      callback = on_revoke_;
    }
    if (callback) callback(lease);
  });
  session_.on_close([this](const std::string &) {
    std::function<void(uint64_t)> callback;
    {
      std::lock_guard lock(mu_);
      callback = on_revoke_;
    }
    if (callback) callback(0);
  });
}

Grant LeaseClient::acquire(const LeaseAsk &ask, int64_t timeout_ms) {
  const uint64_t id = session_.next_id();
  // The service answers at its deadline; ours only guards against a service that stopped
  // answering without closing (stopped, stuck).
  const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms + 10000;
  // A grant that comes after this gave up is handed straight back: nobody waits for it.
  auto late = [this](const std::vector<uint8_t> *payload, const std::string &) {
    if (!payload) return;
    const auto *g = wire::message_of(*payload)->body_as_LeaseGranted();
    if (!g) return;
    fb::FlatBufferBuilder b;
    try {
      session_.send(wire::frame_of(b, wire::CreateLeaseRelease(b, 0, g->lease_id(), true)));
    } catch (const Error &) {
    }
  };
  std::vector<uint8_t> payload =
      session_.call(id, lease_request_frame(id, ask, timeout_ms), deadline, late);
  Grant grant;
  if (Refusal refused = grant_of(payload, grant)) fail(refused.status, refused.why);
  return grant;
}

Refusal LeaseClient::grant_of(const std::vector<uint8_t> &payload, Grant &grant) const {
  const wire::Message *m = wire::message_of(payload);
  if (const auto *g = m->body_as_LeaseGranted()) {
    grant = wire::decode(*g);
    return {};
  }
  if (Refusal refused = wire::refusal_of(*m)) return refused;
  return {GF_ERR_SYSTEM, session_.endpoint() + " answered a lease request with " +
                             wire::body_name(m->body_type())};
}

void LeaseClient::acquire_async(const LeaseAsk &ask, GrantDone done) {
  ask_grant(
      [&ask](fb::FlatBufferBuilder &, uint64_t id) { return lease_request_frame(id, ask, -1); },
      std::move(done));
}

void LeaseClient::reclaim_async(uint64_t lease_id, GrantDone done) {
  if (!session_.welcome().reclaims_leases) {
    return done(nullptr, GF_ERR_STATE,
                "the gpuflow service at " + session_.endpoint() +
                    " is older than this client: it gives no lease back after a restart");
  }
  ask_grant(
      [lease_id](fb::FlatBufferBuilder &b, uint64_t id) {
        return wire::frame_of(b, wire::CreateLeaseReclaim(b, id, lease_id));
      },
      std::move(done));
}

Grant LeaseClient::reclaim(uint64_t lease_id) {
  if (!session_.welcome().reclaims_leases) {
    fail(GF_ERR_STATE, "the gpuflow service at " + session_.endpoint() +
                           " is older than this client: it gives no lease back after a restart");
  }
  const std::vector<uint8_t> payload =
      ask(wire::Body::LeaseGranted, "a LeaseReclaim",
          [lease_id](fb::FlatBufferBuilder &b, uint64_t id) {
            return wire::frame_of(b, wire::CreateLeaseReclaim(b, id, lease_id));
          });
  Grant grant;
  if (Refusal refused = grant_of(payload, grant)) fail(refused.status, refused.why);
  return grant;
}

void LeaseClient::ask_grant(const Session::FrameBuilder &frame, GrantDone done) {
  const uint64_t id = session_.next_id();
  std::string why_gone;
  const bool asked = session_.expect(
      id,
      [this, done](const std::vector<uint8_t> *payload, const std::string &reason) {
        if (!payload) return done(nullptr, GF_ERR_SYSTEM, reason);
        Grant grant;
        if (Refusal refused = grant_of(*payload, grant))
          return done(nullptr, refused.status, refused.why);
        done(&grant, GF_OK, {});
      },
      why_gone);
  if (!asked) return done(nullptr, GF_ERR_SYSTEM, why_gone);
  try {
    fb::FlatBufferBuilder b;
    session_.send(frame(b, id));
  } catch (const Error &e) {
    // Nothing was sent (GF_ERR_INVALID_ARGUMENT: the connection is fine), or the connection
    // failed; either way `done` hears it here, unless the reader already failed it.
    Session::Answered callback = session_.take(id);
    if (!callback) return;
    if (e.status() == GF_ERR_INVALID_ARGUMENT) return done(nullptr, e.status(), e.what());
    callback(nullptr, e.what());
  }
}

std::vector<uint8_t> LeaseClient::ask(wire::Body expected, const char *what,
                                      const Session::FrameBuilder &frame) {
  const uint64_t id = session_.next_id();
  fb::FlatBufferBuilder b;
  return session_.ask(id, frame(b, id), deadline_in(kAnswerMs), expected, what);
}

void LeaseClient::release(uint64_t lease_id) {
  if (!session_.alive()) session_.fail_gone();
  // Quiet (wire.fbs): one write, no round trip. This connection's next request is read after
  // it, so it finds the devices free.
  fb::FlatBufferBuilder b;
  session_.send(wire::frame_of(b, wire::CreateLeaseRelease(b, 0, lease_id, true)));
  std::lock_guard lock(mu_);
  revoked_.erase(lease_id);
}

void LeaseClient::bind_process_group(uint64_t lease_id, int32_t process_group) {
  if (!session_.welcome().binds_process_groups) {
    // An older service would read the message as garbage and close the connection.
    fail(GF_ERR_STATE, "the gpuflow service at " + session_.endpoint() +
                           " is older than this client: it binds no process group to a lease");
  }
  ask(wire::Body::LeaseBound, "a LeaseBind",
      [lease_id, process_group](fb::FlatBufferBuilder &b, uint64_t id) {
        return wire::frame_of(b, wire::CreateLeaseBind(b, id, lease_id, process_group));
      });
}

std::vector<uint8_t> LeaseClient::status() {
  return ask(wire::Body::StatusReply, "a status request",
             [](fb::FlatBufferBuilder &b, uint64_t id) {
               return wire::frame_of(b, wire::CreateStatusRequest(b, id));
             });
}

bool LeaseClient::revoked(uint64_t lease_id) const {
  if (!session_.alive()) return true;
  std::lock_guard lock(mu_);
  return revoked_.count(lease_id) > 0;
}

void LeaseClient::on_revoke(std::function<void(uint64_t)> callback) {
  std::lock_guard lock(mu_);
  on_revoke_ = std::move(callback);
}

}  // namespace gf::client
