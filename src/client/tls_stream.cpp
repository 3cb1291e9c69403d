#include "client/tls_stream.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "client/deadlines.hpp"
#include "core/error.hpp"

namespace gf::client {

namespace {

// OpenSSL writes to the socket with write(2): a service that closed the connection would raise
// SIGPIPE, whose default kills the whole program. Blocked on this thread for the call, the write
// fails with EPIPE instead, and a SIGPIPE it left pending is taken back.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe &) = delete;
  NoSigpipe &operator=(const NoSigpipe &) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false;
};

class TlsStream final : public ByteStream {
 public:
  TlsStream(int fd, tls::Context ctx, SSL *ssl) : ByteStream(fd), ctx_(std::move(ctx)), ssl_(ssl) {}
  ~TlsStream() override { SSL_free(ssl_); }

  std::string write_all(const uint8_t *bytes, size_t size) override {
    if (size == 0) return {};
    std::unique_lock lock(mu_);
    for (;;) {
      ERR_clear_error();
      errno = 0;
      // Not partial: a write either takes it all or is retried with the same bytes.
      NoSigpipe quiet;
      const int n = SSL_write(ssl_, bytes, static_cast<int>(size));
      if (n > 0) return {};
      const int e = SSL_get_error(ssl_, n);
      if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) {
        return e == SSL_ERROR_SYSCALL && errno != 0 ? std::strerror(errno)
                                                    : tls::errors("the TLS session ended");
      }
      lock.unlock();
      wait_for(e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, -1);
      lock.lock();
    }
  }

  ssize_t read_some(char *buffer, size_t size, int timeout_ms, std::string &why) override {
    const int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    std::unique_lock lock(mu_);
    for (;;) {
      ERR_clear_error();
      errno = 0;
      NoSigpipe quiet;
      const int n = SSL_read(ssl_, buffer, static_cast<int>(size));
      if (n > 0) return n;
      const int e = SSL_get_error(ssl_, n);
      if (e == SSL_ERROR_ZERO_RETURN) return 0;
      if (e == SSL_ERROR_SYSCALL) {
        if (errno == 0 || errno == EPIPE || errno == ECONNRESET) return 0;
        why = std::strerror(errno);
        return -2;
      }
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        why = tls::errors("the TLS session failed");
        return -2;
      }
      lock.unlock();
      int left = -1;
      if (deadline >= 0) {
        left = static_cast<int>(deadline - now_ms());
        if (left <= 0) return -1;
      }
      const bool ready = wait_for(e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, left);
      lock.lock();
      if (!ready) return -1;
    }
  }

 private:
  tls::Context ctx_;
  SSL *ssl_;
  std::mutex mu_;  // one OpenSSL call on ssl_ at a time
};

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

tls::ClientFiles client_tls_files() {
  return {env("GPUFLOW_TLS_CA"), env("GPUFLOW_TLS_CERT"), env("GPUFLOW_TLS_KEY")};
}

std::unique_ptr<ByteStream> tls_connect(int fd, const std::string &endpoint,
                                        const std::string &host, const tls::ClientFiles &files,
                                        int timeout_ms) {
  tls::Context ctx;
  try {
    ctx = tls::client_context(files);
  } catch (...) {
    ::close(fd);
    throw;
  }
  SSL *ssl = SSL_new(ctx.get());
  if (!ssl) {
    ::close(fd);
    fail(GF_ERR_SYSTEM, tls::errors("SSL_new failed"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto stream = std::make_unique<TlsStream>(fd, ctx, ssl);
  SSL_set_fd(ssl, fd);
  in_addr ip{};
  if (::inet_pton(AF_INET, host.c_str(), &ip) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    // SNI (SSL_set_tlsext_host_name, a macro with a C cast).
    SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char *>(host.c_str()));
    SSL_set1_host(ssl, host.c_str());
  }
  const std::string against =
      files.ca.empty() ? "the system's trust store (GPUFLOW_TLS_CA unset)" : "the CA " + files.ca;
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    ERR_clear_error();
    errno = 0;
    int rc;
    {
      NoSigpipe quiet;
      rc = SSL_connect(ssl);
    }
    if (rc == 1) break;
    const int e = SSL_get_error(ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      const int64_t left = deadline - now_ms();
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
        fail(GF_ERR_SYSTEM, "the gpuflow service at " + endpoint +
                                " did not finish the TLS handshake within " +
                                std::to_string(timeout_ms) + " ms");
      }
      continue;
    }
    if (std::string verify = tls::verify_failure(ssl); !verify.empty()) {
      fail(GF_ERR_SYSTEM, "the gpuflow service at " + endpoint +
                              " showed a certificate that does not verify: " + verify +
                              " (checked against " + against + ", for the name " + host + ")");
    }
    const std::string why = e == SSL_ERROR_SYSCALL && errno != 0
                                ? std::string(std::strerror(errno))
                                : tls::errors("the service closed the connection");
    fail(GF_ERR_SYSTEM, "the TLS handshake with the gpuflow service at " + endpoint +
                            " failed: " + why +
                            " (a service listening with --insecure-listen takes "
                            "tcp+insecure:// endpoints)");
  }
  return stream;
}

}  // namespace gf::client
