// The lease book as the service last published it (status_handler.hpp), for dashboards and
// metrics on other threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "service/lease_book.hpp"

namespace gf::service {

struct BookSnapshot {
  double now = 0;  // the book's clock
  std::string backend;
  std::vector<DeviceView> devices;
  std::vector<Lease> leases;
  std::vector<QueuedView> queued;
  std::vector<ClientView> clients;
  double cpus = 0, cpus_in_use = 0;
  uint64_t blob_bytes = 0;  // the data plane's blobs, all clients
};

}  // namespace gf::service
