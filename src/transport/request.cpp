#include "transport/request.hpp"

#include <memory>

#include "transport/ucx_api.hpp"

namespace gf::transport {

namespace {

void finish(void *request, ucs_status_t status, size_t length, void *user_data) {
  std::unique_ptr<Done> done(static_cast<Done *>(user_data));
  if (request) ucx().ucp_request_free(request);
  (*done)(status, length);
}

// What the nbx calls return: a request still running, or done now (NULL or an error pointer).
void *settle(ucs_status_ptr_t result, Done *done, size_t length_if_done) {
  if (result != nullptr && !UCS_PTR_IS_ERR(result)) return result;
  const ucs_status_t status = result == nullptr ? UCS_OK : UCS_PTR_STATUS(result);
  finish(nullptr, status, length_if_done, done);
  return nullptr;
}

}  // namespace

void *tag_send(ucp_ep_h ep, const void *data, size_t size, uint64_t tag, Done done) {
  auto *owned = new Done(std::move(done));
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.send = [](void *request, ucs_status_t status, void *user_data) {
    finish(request, status, 0, user_data);
  };
  param.user_data = owned;
  return settle(ucx().ucp_tag_send_nbx(ep, data, size, tag, &param), owned, 0);
}

void *tag_recv(ucp_worker_h worker, void *data, size_t size, uint64_t tag, Done done) {
  auto *owned = new Done(std::move(done));
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = [](void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                     void *user_data) {
    finish(request, status, info ? info->length : 0, user_data);
  };
  param.user_data = owned;
  return settle(ucx().ucp_tag_recv_nbx(worker, data, size, tag, kFullTagMask, &param), owned, 0);
}

size_t discard_unexpected(ucp_worker_h worker, uint64_t tag, uint64_t mask, size_t limit) {
  size_t n = 0;
  for (; n < limit; ++n) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucx().ucp_tag_probe_nb(worker, tag, mask, 1, &info);
    if (!message) break;
    // Received into nothing: the receive ends truncated, and a rendezvous sender's send still
    // completes (BlobHost::drain relies on the same).
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.recv = [](void *request, ucs_status_t, const ucp_tag_recv_info_t *, void *) {
      ucx().ucp_request_free(request);
    };
    ucx().ucp_tag_msg_recv_nbx(worker, nullptr, 0, message, &param);
  }
  return n;
}

void cancel(ucp_worker_h worker, void *request) {
  ucx().ucp_request_cancel(worker, request);
}

}  // namespace gf::transport
