#include "transport/endpoint.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "transport/ucx_api.hpp"
#include "transport/ucx_context.hpp"

namespace gf::transport {

struct Endpoint::ErrorSink {
  std::string peer;
  OnError on_error;
  bool armed = true;
};

namespace {

void on_ep_error(void *arg, ucp_ep_h, ucs_status_t status) {
  auto *sink = static_cast<Endpoint::ErrorSink *>(arg);
  if (!sink->armed || !sink->on_error) return;
  sink->armed = false;
  sink->on_error("the UCX data plane to " + sink->peer +
                 " failed: " + ucx().ucs_status_string(status));
}

}  // namespace

Endpoint::Endpoint(Worker &worker, const std::vector<uint8_t> &peer_address, std::string peer,
                   OnError on_error)
    : peer_(std::move(peer)), sink_(std::make_shared<ErrorSink>()) {
  sink_->peer = peer_;
  sink_->on_error = std::move(on_error);
  worker.keep(sink_);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t *>(peer_address.data());
  // UCX refuses peer-error mode on transports without a failure handler ("destination is
  // unreachable"): asked for only where it can be had.
  params.err_mode =
      worker.peer_failure_handled() ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = on_ep_error;
  params.err_handler.arg = sink_.get();
  ucs_status_t status = ucx().ucp_ep_create(worker.get(), &params, &ep_);
  if (status != UCS_OK) {
    ep_ = nullptr;
    sink_->armed = false;
    sink_->on_error = nullptr;
    check(status, "connecting to " + peer_);
  }
}

Endpoint::~Endpoint() {
  close();
}

void Endpoint::close() {
  if (!ep_) return;
  sink_->armed = false;
  // What the callback holds (its owner's `this`, closures) goes now; the sink itself stays.
  sink_->on_error = nullptr;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  param.cb.send = [](void *request, ucs_status_t, void *) { ucx().ucp_request_free(request); };
  ucx().ucp_ep_close_nbx(ep_, &param);  // a request frees itself; NULL or an error: done
  ep_ = nullptr;
}

std::string Endpoint::transports() const {
  if (!ep_) return {};
  if (!transports_.empty()) return transports_;  // printing the lanes is not cheap; they stay
  char *text = nullptr;
  size_t size = 0;
  FILE *stream = open_memstream(&text, &size);
  if (!stream) return {};
  ucx().ucp_ep_print_info(ep_, stream);
  std::fclose(stream);
  transports_ = transports_of_ep_info(std::string(text, size));
  std::free(text);
  return transports_;
}

std::string transports_of_ep_info(const std::string &text) {
  // "#   lane[1]:  5:cma/memory.0 md[4]   -> md[4]/cma/sysdev[255] rma_bw#0"
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find("lane[");
    if (at == std::string::npos || (at = line.find("]:", at)) == std::string::npos) continue;
    at = line.find_first_not_of(' ', at + 2);
    const size_t colon = at == std::string::npos ? at : line.find(':', at);
    if (colon == std::string::npos) continue;
    const size_t end = line.find(' ', colon);
    std::string name = line.substr(colon + 1, end == std::string::npos ? end : end - colon - 1);
    const size_t dot = name.rfind('.');  // the path index: "memory.0"
    if (dot != std::string::npos && name.find('/') < dot) name.erase(dot);
    if (name.find('/') == std::string::npos) continue;
    if (("," + out + ",").find("," + name + ",") != std::string::npos) continue;
    out += (out.empty() ? "" : ",") + name;
  }
  return out;
}

}  // namespace gf::transport
