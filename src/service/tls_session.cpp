#include "service/tls_session.hpp"

#include <openssl/err.h>

#include "core/error.hpp"
#include "core/tls.hpp"

namespace gf::service {

TlsSession::TlsSession(SSL_CTX *ctx) : ssl_(SSL_new(ctx)) {
  if (!ssl_) fail(GF_ERR_SYSTEM, tls::errors("SSL_new failed"));
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(in_, -1);  // an empty input is "more to come", not the end
  SSL_set_bio(ssl_, in_, out_);
  SSL_set_accept_state(ssl_);
}

TlsSession::~TlsSession() {
  SSL_free(ssl_);
}

std::string TlsSession::feed(const char *bytes, size_t size, std::string &plain) {
  if (failed_) return "the TLS session already failed";
  ERR_clear_error();
  if (size > 0 && BIO_write(in_, bytes, static_cast<int>(size)) != static_cast<int>(size)) {
    failed_ = true;
    return tls::errors("buffering TLS input failed");
  }
  if (!established_) {
    const int rc = SSL_do_handshake(ssl_);
    if (rc != 1) {
      const int e = SSL_get_error(ssl_, rc);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return {};
      failed_ = true;
      const std::string verify = tls::verify_failure(ssl_);
      return "TLS handshake failed: " + (verify.empty()
                                             ? tls::errors("the peer broke it off")
                                             : "its certificate does not verify: " + verify);
    }
    established_ = true;
    principal_ = tls::peer_common_name(ssl_);
  }
  char buffer[16 << 10];
  for (;;) {
    const int n = SSL_read(ssl_, buffer, sizeof buffer);
    if (n > 0) {
      plain.append(buffer, static_cast<size_t>(n));
      continue;
    }
    const int e = SSL_get_error(ssl_, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return {};
    failed_ = true;
    if (e == SSL_ERROR_ZERO_RETURN) return "it closed its TLS session";
    return "TLS failed: " + tls::errors("the record could not be read");
  }
}

void TlsSession::write(const uint8_t *bytes, size_t size) {
  if (!established_ || failed_ || size == 0) return;
  // Into a memory BIO, which grows: it takes everything at once.
  if (SSL_write(ssl_, bytes, static_cast<int>(size)) <= 0) {
    failed_ = true;
    ERR_clear_error();
  }
}

void TlsSession::close() {
  if (established_ && !failed_) SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::vector<uint8_t> TlsSession::take_output() {
  std::vector<uint8_t> out(BIO_ctrl_pending(out_));
  if (!out.empty()) {
    const int n = BIO_read(out_, out.data(), static_cast<int>(out.size()));
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  return out;
}

}  // namespace gf::service
