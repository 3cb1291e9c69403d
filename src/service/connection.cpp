#include "service/connection.hpp"

#include <memory>

namespace gf::service {

namespace fb = flatbuffers;

namespace {

// A client whose unsent replies pass this is not reading: it is cut off rather than let the
// service's memory grow.
constexpr size_t kMaxQueuedWrite = 16u << 20;

// One frame on its way: freed once libuv wrote it (or gave up).
struct Pending {
  uv_write_t request;
  std::vector<uint8_t> bytes;
};

int write_frame(uv_stream_t *stream, Pending *p, uv_write_cb done) {
  uv_buf_t buf = uv_buf_init(reinterpret_cast<char *>(p->bytes.data()),
                             static_cast<unsigned>(p->bytes.size()));
  return uv_write(&p->request, stream, &buf, 1, done);
}

}  // namespace

void Connection::admit() {
  id = set_.clients.next_id();
  set_.clients.add(*this);
  set_.deadlines.set(Deadline::kHello, id, 0, set_.now() + kHelloTimeout_s);
  uv_read_start(
      stream(),
      [](uv_handle_t *, size_t suggested, uv_buf_t *buf) {
        buf->base = new char[suggested];
        buf->len = suggested;
      },
      [](uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
        std::unique_ptr<char[]> owned(buf->base);
        static_cast<Connection *>(s->data)->on_bytes(n, buf->base);
      });
}

void Connection::discard() {
  uv_close(handle(), [](uv_handle_t *h) { delete static_cast<Connection *>(h->data); });
}

// Not in the ClientTable: nothing else sees it, and it goes once its refusal was written.
void Connection::refuse_and_close(const std::string &why) {
  fb::FlatBufferBuilder b;
  auto *p = new Pending{
      {}, wire::frame_of(b, wire::CreateError(b, 0, GF_ERR_STATE, b.CreateString(why)))};
  if (write_frame(stream(), p, [](uv_write_t *req, int) {
        uv_handle_t *h = reinterpret_cast<uv_handle_t *>(req->handle);
        delete reinterpret_cast<Pending *>(req);
        if (!uv_is_closing(h)) {
          uv_close(h, [](uv_handle_t *closed) { delete static_cast<Connection *>(closed->data); });
        }
      }) != 0) {
    delete p;
    discard();
  }
}

void Connection::send(std::vector<uint8_t> frame) {
  if (closing) return;
  if (uv_stream_get_write_queue_size(stream()) > kMaxQueuedWrite) {
    drop("it does not read its replies (more than " + std::to_string(kMaxQueuedWrite >> 20) +
             " MiB queued)",
         false);
    return;
  }
  transmit(std::move(frame));
}

void Connection::write_raw(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return;
  // Written at once when nothing is queued (uv_try_write keeps the order: it refuses while
  // writes wait): an answer then costs one write, not a write request whose completion takes
  // another loop turn and re-arms the socket in epoll.
  uv_buf_t whole =
      uv_buf_init(reinterpret_cast<char *>(bytes.data()), static_cast<unsigned>(bytes.size()));
  const int written = uv_try_write(stream(), &whole, 1);
  if (written == static_cast<int>(bytes.size())) return;
  if (written > 0) bytes.erase(bytes.begin(), bytes.begin() + written);
  auto *p = new Pending{{}, std::move(bytes)};
  int rc = write_frame(stream(), p,
                       [](uv_write_t *req, int) { delete reinterpret_cast<Pending *>(req); });
  if (rc != 0) {
    delete p;
    drop(std::string("writing to it failed: ") + uv_strerror(rc));
  }
}

void Connection::on_read(ssize_t n, const char *bytes) {
  if (n == 0 || closing) return;
  if (set_.stop_asked_.load()) {
    uv_read_stop(stream());  // what it sent goes unanswered: the connection ends with the stop
    return;
  }
  if (n < 0) {
    std::string reason;
    if (n != UV_EOF) {
      reason = std::string("reading failed: ") + uv_strerror(static_cast<int>(n));
    } else if (reader_.buffered() > 0) {
      reason = "it closed the connection in the middle of a frame (" +
               std::to_string(reader_.buffered()) + " bytes of it came)";
    }
    drop(reason, false);
    return;
  }
  Refusal violation{GF_ERR_INVALID_ARGUMENT, reader_.feed(bytes, static_cast<size_t>(n))};
  if (violation.why.empty() && !greeted && reader_.buffered() > max_before_hello()) {
    violation.why = "more than " + std::to_string(max_before_hello()) + " bytes before its Hello";
  }
  std::vector<uint8_t> payload;
  while (violation.why.empty() && !closing && !set_.stop_asked_.load() &&
         reader_.next(payload, violation.why)) {
    if (Refusal r = set_.hooks.message(*this, *wire::message_of(payload))) violation = r;
  }
  if (!violation.why.empty() && !closing) {
    send_error(0, violation.status, "closing the connection: you sent " + violation.why);
    drop("it sent " + violation.why);
  }
}

// What it held goes back to the book at once; with `flush`, replies already queued go first (a
// client that does not read is closed at once).
void Connection::drop(const std::string &reason, bool flush) {
  if (closing) return;
  closing = true;
  uv_read_stop(stream());
  set_.clients.remove(id);
  set_.deadlines.forget(id);
  std::string line = who() + " disconnected";
  if (!reason.empty()) line += ": " + reason;
  line += set_.hooks.departed(*this, reason);
  set_.dropped_.insert(this);
  set_.log(line);
  if (flush) finish();
  auto *shutdown = new uv_shutdown_t;
  if (!flush || uv_shutdown(shutdown, stream(), [](uv_shutdown_t *req, int) {
                  close(reinterpret_cast<uv_handle_t *>(req->handle));
                  delete req;
                }) != 0) {
    delete shutdown;
    close(handle());
  }
}

void Connection::close(uv_handle_t *handle) {
  if (uv_is_closing(handle)) return;
  uv_close(handle, [](uv_handle_t *h) {
    auto *c = static_cast<Connection *>(h->data);
    c->set_.dropped_.erase(c);
    delete c;
  });
}

void ConnectionSet::hello_missed(ClientId id) {
  Client *c = clients.find(id);
  if (!c || c->greeted) return;
  c->drop(std::string(c->peer.remote ? "no Hello with the token" : "no Hello") + " within " +
              amount_text(kHelloTimeout_s) + " s",
          false);
}

void ConnectionSet::drop_all(const std::string &why) {
  std::vector<Client *> all;
  for (const auto &[id, c] : clients.all()) all.push_back(c);
  for (Client *c : all) {
    fb::FlatBufferBuilder b;
    c->send(wire::frame_of(b, wire::CreateGoodbye(b, b.CreateString(why))));
    c->drop(why);
  }
}

size_t ConnectionSet::close_dropped(bool force) {
  size_t open = 0;
  for (Connection *c : std::vector<Connection *>(dropped_.begin(), dropped_.end())) {
    if (uv_is_closing(c->handle())) continue;
    if (force) {
      Connection::close(c->handle());
    } else {
      ++open;
    }
  }
  return open;
}

}  // namespace gf::service
