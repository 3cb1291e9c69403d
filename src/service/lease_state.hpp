// The service's grants on disk (lease_state.fbs): written whole and renamed into place whenever
// they change, read back when the service starts, so that a service killed and restarted hands
// out no device whose job still runs (docs/service.md, "A lease owns its job").
//
// The file lives beside the socket (PATH.leases) in the service's runtime directory. It is
// trusted only when it is a regular file of the service's own user that nobody else may write,
// and only after the flatbuffers Verifier and checks of every lease against the devices there
// now. No fsync: the file only needs to outlive the service's process, not the machine (after a
// reboot no job is left to protect).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "service/lease_book.hpp"

namespace gf::service {

struct SavedLease {
  Lease lease;                     // id, name, devices, cpus (since: unused, see since_ms)
  std::vector<std::string> uuids;  // per device of `lease`
  int64_t since_ms = 0;            // unix time
  uint32_t holder_pid = 0;
  uint64_t holder_start = 0;  // jobs::start_time of holder_pid when it connected
  uint32_t uid = 0;
  std::string user;
  std::string holder_name;
  int32_t process_group = 0;  // bound to the lease (0: none)
};

struct SavedBook {
  LeaseId next_lease_id = 1;
  std::vector<SavedLease> leases;
};

std::vector<uint8_t> encode_saved_book(const SavedBook &book);
// Throws gf::Error (GF_ERR_INVALID_ARGUMENT) saying what is wrong with the bytes.
SavedBook decode_saved_book(const uint8_t *data, size_t size);

// Writes `bytes` to PATH.tmp and renames it over `path` (mode 0600). Throws gf::Error
// (GF_ERR_SYSTEM) naming the path and errno.
void write_file_atomically(const std::string &path, const std::vector<uint8_t> &bytes);
// The saved book at `path`; an empty one when there is no file. Throws gf::Error naming the
// path when it is not a regular file of this user that only this user may write, is larger
// than 64 MiB, cannot be read, or does not decode.
SavedBook read_saved_book(const std::string &path);

}  // namespace gf::service
