// UCX, loaded the first time a data plane starts rather than linked: libucs's constructor patches
// libc's mmap/munmap/madvise in every process that loads it (docs/transport.md, "UCX's memory
// hooks"), and a process that never uses the data plane should not pay for that. Only UCX's
// headers are used at build time; every call goes through ucx().
#pragma once

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <string>

namespace gf::transport {

#define GF_UCX_FUNCTIONS(X)                                                   \
  X(ucp_config_read)                                                          \
  X(ucp_config_modify)                                                        \
  X(ucp_config_release)                                                       \
  X(ucp_init_version)                                                         \
  X(ucp_cleanup)                                                              \
  X(ucp_worker_create)                                                        \
  X(ucp_worker_destroy)                                                       \
  X(ucp_worker_get_efd)                                                       \
  X(ucp_worker_get_address)                                                   \
  X(ucp_worker_release_address)                                               \
  X(ucp_worker_progress)                                                      \
  X(ucp_worker_arm)                                                           \
  X(ucp_ep_create)                                                            \
  X(ucp_ep_close_nbx)                                                         \
  X(ucp_ep_print_info)                                                        \
  X(ucp_request_free)                                                         \
  X(ucp_request_cancel)                                                       \
  X(ucp_tag_send_nbx)                                                         \
  X(ucp_tag_recv_nbx)                                                         \
  X(ucp_tag_probe_nb)                                                         \
  X(ucp_tag_msg_recv_nbx)                                                     \
  X(ucs_status_string)                                                        \
  X(ucp_get_version_string)                                                   \
  /* what UCX offers (transport/inventory.cpp): libuct, loaded with libucp */ \
  X(uct_query_components)                                                     \
  X(uct_release_component_list)                                               \
  X(uct_component_query)                                                      \
  X(uct_md_config_read)                                                       \
  X(uct_config_release)                                                       \
  X(uct_md_open)                                                              \
  X(uct_md_close)                                                             \
  X(uct_md_query_tl_resources)                                                \
  X(uct_release_tl_resource_list)

struct UcxApi {
#define GF_UCX_MEMBER(name) decltype(&::name) name = nullptr;
  GF_UCX_FUNCTIONS(GF_UCX_MEMBER)
#undef GF_UCX_MEMBER
};

// The loaded library (libucp.so.0, and through it libucs). Throws gf::Error (GF_ERR_SYSTEM)
// with dlopen's or dlsym's words when UCX cannot be loaded; later calls throw the same.
const UcxApi &ucx();
// The file UCX was loaded from (GPUFLOW_UCX_LIBRARY, else the configured one, as the dynamic
// loader resolved it). Throws like ucx().
const std::string &ucx_library();

}  // namespace gf::transport
