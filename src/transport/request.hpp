// Tagged sends and receives with a completion function instead of UCX's raw callbacks. Small
// messages go eagerly, large ones by rendezvous (UCX picks by size; with cma the receiver reads
// the sender's pages directly: one copy, no staging). Each runs `done` exactly once, on the
// worker's thread: at once when UCX finished it inside the call, else from ucp_worker_progress
// (with UCS_ERR_CANCELED after cancel(), or the endpoint's error after a peer failure).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <functional>

namespace gf::transport {

// status, and for receives the bytes that arrived (the sender's size when it was too big).
using Done = std::function<void(ucs_status_t status, size_t length)>;

constexpr uint64_t kFullTagMask = ~uint64_t{0};

// The in-flight request, or nullptr when `done` already ran. Valid until `done` runs.
void *tag_send(ucp_ep_h ep, const void *data, size_t size, uint64_t tag, Done done);
void *tag_recv(ucp_worker_h worker, void *data, size_t size, uint64_t tag, Done done);
// Takes every message already arrived for tags matching `tag`/`mask` that no receive matched
// (a client's stray sends), at most `limit` of them, and throws the bytes away. Returns how many.
size_t discard_unexpected(ucp_worker_h worker, uint64_t tag, uint64_t mask, size_t limit);
// Asks UCX to end a receive early (`done` then runs with UCS_ERR_CANCELED). Sends end when
// their endpoint closes.
void cancel(ucp_worker_h worker, void *request);

}  // namespace gf::transport
