#include "service/lease_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
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

void write_file_atomically(const std::string &path, const std::vector<uint8_t> &bytes) {
  const std::string temporary = path + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) system_error("cannot write", temporary);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      errno = saved;
      system_error("cannot write", temporary);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    errno = saved;
    system_error("cannot rename " + temporary + " to", path);
  }
}

SavedBook read_saved_book(const std::string &path) {
  // Non-blocking and not following links: a FIFO or a link planted there cannot stall or steer
  // the service's start.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    system_error("cannot open the saved lease book", path);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) system_error("cannot stat the saved lease book", path);
  const std::string named = "the saved lease book " + path;
  if (!S_ISREG(st.st_mode)) fail(GF_ERR_INVALID_ARGUMENT, named + " is not a regular file");
  if (st.st_uid != ::geteuid()) {
    fail(GF_ERR_INVALID_ARGUMENT,
         named + " belongs to uid " + std::to_string(st.st_uid) + ", not to the service's user");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    fail(GF_ERR_INVALID_ARGUMENT, named + " may be written by others than the service's user");
  }
  if (static_cast<size_t>(st.st_size) > kMaxStateFile) {
    fail(GF_ERR_INVALID_ARGUMENT, named + " is larger than 64 MiB");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) system_error("cannot read", path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  try {
    return decode_saved_book(bytes.data(), bytes.size());
  } catch (const Error &e) {
    fail(GF_ERR_INVALID_ARGUMENT, named + ": " + e.what());
  }
}

}  // namespace gf::service
