#include "transport/tag_relay.hpp"

#include <new>

#include "transport/request.hpp"
#include "transport/ucx_api.hpp"

namespace gf::transport {

struct TagRelay::Message {
  std::unique_ptr<uint8_t[]> bytes;
  size_t size = 0;
  uint64_t tag = 0;
};

TagRelay::TagRelay(Side a, Side b, uint64_t max_message)
    : sides_{a, b}, max_message_(max_message) {}

TagRelay::~TagRelay() = default;

void TagRelay::take_arrivals(int from) {
  ucp_worker_h worker = sides_[from].worker->get();
  for (;;) {
    ucp_tag_recv_info_t info{};
    if (!ucx().ucp_tag_probe_nb(worker, 0, 0, 0, &info)) return;
    const Side &side = sides_[from];
    if (side.tag_space != 0 && (info.sender_tag >> 32) != side.tag_space) {
      fail(side.name + " sent tag " + std::to_string(info.sender_tag) +
           ", outside its tag space (" + std::to_string(side.tag_space) + " << 32)");
      return;
    }
    if (messages_held_ >= kMaxMessagesHeld) return;
    if (info.length > max_message_) {
      fail(sides_[from].name + " sent a message of " + std::to_string(info.length) +
           " bytes, more than the " + std::to_string(max_message_) + " a client may hold");
      return;
    }
    // Bytes held here stay under twice a client's cap: the rest waits in UCX (rendezvous
    // messages are only announced; their bytes stay with the sender until received).
    if (bytes_held_ > 0 && bytes_held_ + info.length > max_message_) return;
    ucp_tag_message_h handle = ucx().ucp_tag_probe_nb(worker, 0, 0, 1, &info);
    if (!handle) return;
    bytes_held_ += info.length;
    ++messages_held_;
    auto message = std::make_shared<Message>();
    message->size = info.length;
    message->tag = info.sender_tag;
    message->bytes.reset(new (std::nothrow) uint8_t[info.length == 0 ? 1 : info.length]);
    if (!message->bytes) {
      fail("no memory for a message of " + std::to_string(info.length) + " bytes from " +
           sides_[from].name);
      return;
    }
    ++in_flight_;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    struct Arrival {
      TagRelay *relay;
      std::shared_ptr<Message> message;
      int from;
    };
    param.user_data = new Arrival{this, message, from};
    param.cb.recv = [](void *request, ucs_status_t status, const ucp_tag_recv_info_t *,
                       void *user_data) {
      std::unique_ptr<Arrival> arrival(static_cast<Arrival *>(user_data));
      if (request) ucx().ucp_request_free(request);
      TagRelay &relay = *arrival->relay;
      --relay.in_flight_;
      if (status != UCS_OK) {
        relay.bytes_held_ -= arrival->message->size;
        --relay.messages_held_;
        relay.fail("receiving from " + relay.sides_[arrival->from].name +
                   " failed: " + ucx().ucs_status_string(status));
        return;
      }
      relay.arrived_[arrival->from].push_back(std::move(arrival->message));
    };
    ucs_status_ptr_t r =
        ucx().ucp_tag_msg_recv_nbx(worker, message->bytes.get(), message->size, handle, &param);
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
      // Done (or failed) inside the call: the callback did not run.
      std::unique_ptr<Arrival> arrival(static_cast<Arrival *>(param.user_data));
      --in_flight_;
      if (r != nullptr) {
        bytes_held_ -= message->size;
        --messages_held_;
        fail("receiving from " + sides_[from].name +
             " failed: " + ucx().ucs_status_string(UCS_PTR_STATUS(r)));
        return;
      }
      arrived_[from].push_back(message);
    }
  }
}

bool TagRelay::pump() {
  for (int side = 0; side < 2 && error_.empty(); ++side) {
    sides_[side].worker->drain();
    take_arrivals(side);
  }
  for (int from = 0; from < 2 && error_.empty(); ++from) {
    Side &to = sides_[1 - from];
    while (!arrived_[from].empty()) {
      std::shared_ptr<Message> message = std::move(arrived_[from].front());
      arrived_[from].pop_front();
      ++in_flight_;
      const uint8_t *data = message->bytes.get();
      const size_t size = message->size;
      tag_send(to.to_peer->get(), data, size, message->tag,
               [this, message, name = to.name](ucs_status_t status, size_t) {
                 --in_flight_;
                 bytes_held_ -= message->size;
                 --messages_held_;
                 if (status != UCS_OK) {
                   fail("sending to " + name + " failed: " + ucx().ucs_status_string(status));
                 }
               });
    }
  }
  return error_.empty();
}

}  // namespace gf::transport
