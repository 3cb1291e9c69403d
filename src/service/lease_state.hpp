// The service's grants on disk (lease_state.fbs): written whenever they change, read back when
// the service starts, so that a service killed and restarted hands out no device whose job
// still runs (docs/service.md, "A lease owns its job").
//
// The files live beside the socket (SOCKET.leases.a and .b) in the service's runtime directory.
// They are trusted only when they are regular files of the service's own user that nobody else
// may write, and only after a checksum, the flatbuffers Verifier and checks of every lease
// against the devices there now. No fsync: they only need to outlive the service's process, not
// the machine (after a reboot no job is left to protect).
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

// The saved book on disk: two slots, PATH.a and PATH.b, written in turn in place (pwrite at
// offset 0: about a microsecond, where creating and renaming a file costs ~200 µs on ext4, and the
// service writes before every grant it sends). Each slot is a header — "GFLS", a format version,
// a sequence number, the payload's length and a CRC-32 (zlib) over all of it — and the payload.
// A write cut short (the service killed in the middle) spoils only the slot being written; the
// other still holds the state before it. Loading takes the valid slot with the higher sequence.
class SavedBookFile {
 public:
  // Opens (creating, mode 0600) both slots. A slot that is not a regular file of this user that
  // only this user may write is moved aside (PATH.a.bad) and made afresh: a line for each in
  // `moved_aside`. Throws gf::Error (GF_ERR_SYSTEM) naming the path when that fails too.
  SavedBookFile(std::string path, std::vector<std::string> &moved_aside);
  ~SavedBookFile();
  SavedBookFile(const SavedBookFile &) = delete;
  SavedBookFile &operator=(const SavedBookFile &) = delete;

  // The newest valid saved book (empty when neither slot holds one); `problems` gets a line per
  // slot that held something it could not use (a cut write, bytes that do not decode).
  SavedBook load(std::vector<std::string> &problems);
  // Writes `book` into the older slot. Throws gf::Error (GF_ERR_SYSTEM) naming the path.
  void save(const SavedBook &book);
  // Removes both slots (a service that stops with no lease left leaves nothing behind); later
  // saves do nothing.
  void remove();
  const std::string &path() const { return path_; }

 private:
  std::string path_;
  int fds_[2] = {-1, -1};
  uint64_t sequence_ = 0;  // of the newest slot
  int newest_ = 1;         // the slot written last (so the next goes to the other)
};

}  // namespace gf::service
