#include "service/lease_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/regular_file.hpp"
#include "service/lease_state_generated.h"

namespace gf::service {

namespace fb = flatbuffers;

namespace {

constexpr size_t kMaxStateFile = 64u << 20;

std::string str(const fb::String *s) {
  return s ? s->str() : std::string();
}

[[noreturn]] void system_error(const std::string &what, const std::string &path) {
  fail(GF_ERR_SYSTEM, what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

std::vector<uint8_t> encode_saved_book(const SavedBook &book) {
  fb::FlatBufferBuilder b;
  std::vector<fb::Offset<state::SavedLease>> leases;
  for (const SavedLease &s : book.leases) {
    std::vector<fb::Offset<state::SavedDevice>> devices;
    for (size_t i = 0; i < s.lease.devices.size(); ++i) {
      const DeviceShare &d = s.lease.devices[i];
      devices.push_back(state::CreateSavedDevice(
          b, d.ordinal, b.CreateString(i < s.uuids.size() ? s.uuids[i] : std::string()),
          d.share.raw(), d.memory));
    }
    leases.push_back(state::CreateSavedLease(
        b, s.lease.id, b.CreateString(s.lease.name), b.CreateVector(devices), s.lease.cpus.raw(),
        s.since_ms, s.holder_pid, s.holder_start, s.uid, b.CreateString(s.user),
        b.CreateString(s.holder_name), s.process_group));
  }
  b.Finish(state::CreateSavedBook(b, book.next_lease_id, b.CreateVector(leases)),
           state::SavedBookIdentifier());
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

SavedBook decode_saved_book(const uint8_t *data, size_t size) {
  auto bad = [](const std::string &why) { fail(GF_ERR_INVALID_ARGUMENT, why); };
  if (size < 8 || !fb::BufferHasIdentifier(data, state::SavedBookIdentifier())) {
    bad("not a saved lease book (no GFLS identifier)");
  }
  fb::Verifier verifier(data, size);
  if (!state::VerifySavedBookBuffer(verifier)) bad("the saved lease book does not verify");
  const state::SavedBook *root = state::GetSavedBook(data);
  SavedBook out;
  out.next_lease_id = root->next_lease_id();
  if (!root->leases()) return out;
  for (const state::SavedLease *l : *root->leases()) {
    SavedLease s;
    s.lease.id = l->lease_id();
    s.lease.name = str(l->name());
    if (l->devices()) {
      for (const state::SavedDevice *d : *l->devices()) {
        if (d->share_raw() <= 0 || d->share_raw() > FixedPoint::kScale) {
          bad("lease " + std::to_string(s.lease.id) + " holds share " +
              std::to_string(d->share_raw()) + "/" + std::to_string(FixedPoint::kScale));
        }
        s.lease.devices.push_back(
            {d->ordinal(), FixedPoint::from_raw(d->share_raw()), d->memory()});
        s.uuids.push_back(str(d->uuid()));
      }
    }
    if (l->cpus_raw() < 0 || l->cpus_raw() > FixedPoint::kMaxRaw) {
      bad("lease " + std::to_string(s.lease.id) + " holds " + std::to_string(l->cpus_raw()) +
          " raw CPU units");
    }
    s.lease.cpus = FixedPoint::from_raw(l->cpus_raw());
    s.since_ms = l->since_ms();
    s.holder_pid = l->holder_pid();
    s.holder_start = l->holder_start();
    s.uid = l->uid();
    s.user = str(l->user());
    s.holder_name = str(l->holder_name());
    s.process_group = l->process_group();
    out.leases.push_back(std::move(s));
  }
  return out;
}

namespace {

constexpr char kMagic[4] = {'G', 'F', 'L', 'S'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHeader = 4 + 4 + 8 + 4 + 4;  // magic, format, sequence, length, crc

void put_le(uint8_t *at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t get_le(const uint8_t *at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(at[i]) << (8 * i);
  return v;
}

// Over the header without its crc field, then the payload.
uint32_t checksum(const uint8_t *header, const uint8_t *payload, size_t length) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, header, kHeader - 4);
  crc = crc32(crc, payload, static_cast<uInt>(length));
  return static_cast<uint32_t>(crc);
}

// Why the file open at `fd` is not one the service may trust ("" when it is).
std::string distrust(int fd) {
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot stat it: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = std::string("it is ") + core::file_kind(st.st_mode) + ", not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    problem = "it belongs to uid " + std::to_string(st.st_uid) + ", not to the service's user";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    problem = "others than the service's user may write it";
  } else if (static_cast<size_t>(st.st_size) > kHeader + kMaxStateFile) {
    problem = "it is larger than 64 MiB";
  }
  return problem;
}

// Opens one slot: what is not a regular file is not even opened (opening a device may act on
// it), and then not following links, never blocking (a FIFO swapped in meanwhile cannot stall
// the start), checked again on the descriptor. One that cannot be trusted is moved aside
// (PATH.bad, for the administrator to look at) and a fresh one made.
int open_slot(const std::string &path, std::vector<std::string> &moved_aside) {
  for (int attempt = 0;; ++attempt) {
    struct stat st {};
    int fd = -1;
    std::string problem;
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      problem = std::string("it is ") + core::file_kind(st.st_mode) + ", not a regular file";
    } else {
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      problem = fd < 0 ? std::string("cannot open it: ") + std::strerror(errno) : distrust(fd);
    }
    if (problem.empty()) return fd;
    if (fd >= 0) ::close(fd);
    if (attempt > 0 || ::rename(path.c_str(), (path + ".bad").c_str()) != 0) {
      fail(GF_ERR_SYSTEM, "the saved lease book " + path + ": " + problem);
    }
    moved_aside.push_back(path + ": " + problem + "; moved to " + path + ".bad");
  }
}

}  // namespace

SavedBookFile::SavedBookFile(std::string path, std::vector<std::string> &moved_aside)
    : path_(std::move(path)) {
  fds_[0] = open_slot(path_ + ".a", moved_aside);
  try {
    fds_[1] = open_slot(path_ + ".b", moved_aside);
  } catch (...) {
    ::close(fds_[0]);
    throw;
  }
}

SavedBookFile::~SavedBookFile() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

SavedBook SavedBookFile::load(std::vector<std::string> &problems) {
  SavedBook best;
  bool found = false;
  for (int slot = 0; slot < 2; ++slot) {
    const std::string name = path_ + (slot ? ".b" : ".a");
    struct stat st {};
    if (::fstat(fds_[slot], &st) != 0 || st.st_size == 0) continue;  // never written
    std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
    ssize_t n = ::pread(fds_[slot], bytes.data(), bytes.size(), 0);
    if (n < static_cast<ssize_t>(kHeader) || std::memcmp(bytes.data(), kMagic, 4) != 0) {
      problems.push_back(name + ": no saved lease book there (no GFLS header)");
      continue;
    }
    const uint32_t format = static_cast<uint32_t>(get_le(bytes.data() + 4, 4));
    const uint64_t sequence = get_le(bytes.data() + 8, 8);
    const size_t length = get_le(bytes.data() + 16, 4);
    const uint32_t crc = static_cast<uint32_t>(get_le(bytes.data() + 20, 4));
    if (format != kFormat) {
      problems.push_back(name + ": format " + std::to_string(format) + ", not " +
                         std::to_string(kFormat));
      continue;
    }
    if (kHeader + length > static_cast<size_t>(n) ||
        checksum(bytes.data(), bytes.data() + kHeader, length) != crc) {
      problems.push_back(name + ": its last write was cut short (the checksum does not match)");
      continue;
    }
    try {
      SavedBook book = decode_saved_book(bytes.data() + kHeader, length);
      if (!found || sequence > sequence_) {
        best = std::move(book);
        sequence_ = sequence;
        newest_ = slot;
        found = true;
      }
    } catch (const Error &e) {
      problems.push_back(name + ": " + e.what());
    }
  }
  return best;
}

void SavedBookFile::remove() {
  for (int slot = 0; slot < 2; ++slot) {
    if (fds_[slot] < 0) continue;
    ::close(fds_[slot]);
    fds_[slot] = -1;
    ::unlink((path_ + (slot ? ".b" : ".a")).c_str());
  }
}

void SavedBookFile::save(const SavedBook &book) {
  if (fds_[0] < 0) return;  // removed
  const std::vector<uint8_t> payload = encode_saved_book(book);
  std::vector<uint8_t> bytes(kHeader + payload.size());
  std::memcpy(bytes.data(), kMagic, 4);
  put_le(bytes.data() + 4, kFormat, 4);
  put_le(bytes.data() + 8, sequence_ + 1, 8);
  put_le(bytes.data() + 16, payload.size(), 4);
  std::memcpy(bytes.data() + kHeader, payload.data(), payload.size());
  put_le(bytes.data() + 20, checksum(bytes.data(), payload.data(), payload.size()), 4);
  const int slot = 1 - newest_;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::pwrite(fds_[slot], bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) system_error("cannot write", path_ + (slot ? ".b" : ".a"));
    done += static_cast<size_t>(n);
  }
  ++sequence_;
  newest_ = slot;
}

}  // namespace gf::service
