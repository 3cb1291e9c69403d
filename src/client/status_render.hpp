// A service's StatusReply as people and programs read it: the table `gpuflow status` prints
// (devices as nvidia-smi lists them, leases and the queue as squeue does, then clients), and
// one JSON object with the same content.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gf::client {

// `payload` is a verified Message holding a StatusReply (Connection::status()).
std::string status_text(const std::vector<uint8_t> &payload);
std::string status_json(const std::vector<uint8_t> &payload);

}  // namespace gf::client
