// Reading a file that must be a regular file: a configuration, a token, a graph document, a
// plugin. Any other kind of file is refused, named, before it can do harm: opening a FIFO for
// reading waits for a writer (a service would never start, or never finish a reload), a device
// may never end (/dev/zero) or act on being opened, and a directory reads as an empty file.
// Header-only, so that the gpuflow command (which links only the public ABI) reads its files by
// the same rules as the library.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace gf::core {

// A symbolic link at the path itself: followed (a configuration under /etc may be one), or
// refused, for a file whose owner and mode are checked (the token file) so that the file checked
// is the file read.
enum class Links { kFollow, kRefuse };

// What a file that should be a regular one is instead: "a FIFO (named pipe)", "a directory", …
inline const char *file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a file of an unknown kind";
}

namespace regular_file_detail {

inline std::string named(std::string_view what, const std::string &path) {
  std::string out(what);
  if (!out.empty()) out += ' ';
  return out + path;
}

// Why stat's or open's errno `e` keeps `path` from being read, in words that name it.
inline std::string system_problem(std::string_view what, const std::string &path, int e,
                                  Links links) {
  if (e == ENOENT) return named(what, path) + " does not exist";
  if (e == ELOOP && links == Links::kRefuse) {
    return named(what, path) +
           " is a symbolic link: give the file itself (links are not followed, so that the file "
           "checked is the file read)";
  }
  return named(what, path) + " cannot be read: " + std::strerror(e);
}

inline std::string kind_problem(std::string_view what, const std::string &path, mode_t mode,
                                Links links) {
  if (S_ISLNK(mode) && links == Links::kRefuse) return system_problem(what, path, ELOOP, links);
  return named(what, path) + " is " + file_kind(mode) + ", not a regular file";
}

// Why `path` is not a regular file ("" when it is), from its status alone; `e` is the errno of
// a failed stat, else 0.
inline std::string check(const std::string &path, std::string_view what, Links links, int &e) {
  struct stat st {};
  e = 0;
  if ((links == Links::kFollow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    e = errno;
    return system_problem(what, path, e, links);
  }
  return S_ISREG(st.st_mode) ? std::string() : kind_problem(what, path, st.st_mode, links);
}

}  // namespace regular_file_detail

// Why `path` is not a regular file one may read ("" when it is), without opening it: for a file
// something else opens (dlopen of a plugin, which would wait on a FIFO like any open).
inline std::string regular_file_problem(const std::string &path, std::string_view what,
                                        Links links = Links::kFollow) {
  int ignored = 0;
  return regular_file_detail::check(path, what, links, ignored);
}

// A file's contents, or why it was not read.
struct FileText {
  std::string contents;
  // "" when read; otherwise it names what and the path and says what is wrong: "the
  // configuration file /etc/gpuflow/serve.toml is a FIFO (named pipe), not a regular file".
  std::string error;
  int error_number = 0;   // errno when the system refused (ENOENT: it does not exist), else 0
  struct stat status {};  // of the file read: its owner and mode, for callers that check them
  explicit operator bool() const { return error.empty(); }
};

// Reads `path`, a regular file of at most `max_bytes`; `what` ("the token file") starts each
// error. Never waits: the path is checked before it is opened, so a device is not even opened;
// it is opened without blocking, so a path swapped for a FIFO meanwhile cannot stall it either;
// and the descriptor is checked again, so the file read is the file checked.
inline FileText read_regular_file(const std::string &path, size_t max_bytes, std::string_view what,
                                  Links links = Links::kFollow) {
  using namespace regular_file_detail;
  FileText out;
  const auto refuse = [&out](std::string why, int e = 0) {
    out.error = std::move(why);
    out.error_number = e;
    return std::move(out);
  };
  int e = 0;
  if (std::string why = check(path, what, links, e); !why.empty()) return refuse(std::move(why), e);
  const int flags =
      O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (links == Links::kRefuse ? O_NOFOLLOW : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    e = errno;
    return refuse(system_problem(what, path, e, links), e);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &out.status) != 0) {
    e = errno;
    return refuse(system_problem(what, path, e, links), e);
  }
  if (!S_ISREG(out.status.st_mode))
    return refuse(kind_problem(what, path, out.status.st_mode, links));
  const std::string too_large =
      named(what, path) + " is larger than " + std::to_string(max_bytes) + " bytes";
  if (static_cast<unsigned long long>(out.status.st_size) > max_bytes) return refuse(too_large);
  // One byte more than allowed, so that a file grown since fstat is refused, not cut short.
  out.contents.resize(static_cast<size_t>(out.status.st_size) + 1);
  size_t have = 0;
  for (;;) {
    if (have == out.contents.size()) {
      if (have > max_bytes) return refuse(too_large);
      out.contents.resize(have + 4096 < max_bytes + 1 ? have + 4096 : max_bytes + 1);
    }
    const ssize_t n = ::read(fd, out.contents.data() + have, out.contents.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      e = errno;
      return refuse(system_problem(what, path, e, links), e);
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  if (have > max_bytes) return refuse(too_large);
  out.contents.resize(have);
  return out;
}

}  // namespace gf::core
