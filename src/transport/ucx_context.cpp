#include "transport/ucx_context.hpp"

#include "core/error.hpp"
#include "transport/ucx_api.hpp"

namespace gf::transport {

void check(ucs_status_t status, const std::string &what) {
  if (status != UCS_OK) {
    fail(GF_ERR_SYSTEM, "UCX: " + what + ": " + ucx().ucs_status_string(status));
  }
}

std::unique_ptr<Worker> Worker::create(const std::string &name, bool rendezvous_only) {
  return create_with(name, kTransports, "", rendezvous_only);
}

std::unique_ptr<Worker> Worker::create_networked(const std::string &name,
                                                 const std::string &net_device) {
  if (net_device.empty()) fail(GF_ERR_INVALID_ARGUMENT, "a networked worker needs a device");
  return create_with(name, kNetworkTransports, net_device);
}

std::unique_ptr<Worker> Worker::create_with(const std::string &name, const char *transports,
                                            const std::string &net_device, bool rendezvous_only) {
  std::unique_ptr<Worker> w(new Worker);
  w->transports_ = transports;
  w->peer_failure_handled_ = !net_device.empty();
  ucp_config_t *config = nullptr;
  check(ucx().ucp_config_read(nullptr, nullptr, &config), "reading its configuration");
  // Set on the configuration read, not in the environment: the process's own UCX users (and
  // its children) keep what the user chose.
  ucs_status_t status = ucx().ucp_config_modify(config, "TLS", transports);
  // Host memory is all there is here: no memory-type cache (it lives on UCM's memory events).
  if (status == UCS_OK) status = ucx().ucp_config_modify(config, "MEMTYPE_CACHE", "n");
  // TCP listens on every device it may use: only the one the control connection takes.
  if (status == UCS_OK && rendezvous_only)
    status = ucx().ucp_config_modify(config, "RNDV_THRESH", "0");
  if (status == UCS_OK && !net_device.empty()) {
    status = ucx().ucp_config_modify(config, "NET_DEVICES", net_device.c_str());
  }
  if (status != UCS_OK) {
    ucx().ucp_config_release(config);
    check(status, "restricting its transports to " + std::string(transports) +
                      (net_device.empty() ? "" : " on " + net_device));
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.name = name.c_str();
  status = ucx().ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &w->context_);
  ucx().ucp_config_release(config);
  check(status, "ucp_init");
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  check(ucx().ucp_worker_create(w->context_, &wp, &w->worker_), "creating a worker");
  check(ucx().ucp_worker_get_efd(w->worker_, &w->efd_), "getting the worker's wake-up descriptor");
  ucp_address_t *address = nullptr;
  size_t length = 0;
  check(ucx().ucp_worker_get_address(w->worker_, &address, &length),
        "getting the worker's address");
  const auto *bytes = reinterpret_cast<const uint8_t *>(address);
  w->address_.assign(bytes, bytes + length);
  ucx().ucp_worker_release_address(w->worker_, address);
  return w;
}

Worker::~Worker() {
  if (worker_) ucx().ucp_worker_destroy(worker_);
  if (context_) ucx().ucp_cleanup(context_);
  kept_.clear();
}

bool Worker::drain() {
  bool any = false;
  while (ucx().ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

void Worker::settle() {
  for (int i = 0; i < 100 && drain(); ++i) {
  }
}

bool Worker::arm() {
  return ucx().ucp_worker_arm(worker_) != UCS_ERR_BUSY;
}

bool Worker::progress_and_arm() {
  drain();
  return ucx().ucp_worker_arm(worker_) != UCS_ERR_BUSY;
}

}  // namespace gf::transport
