#include "core/tls.hpp"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/error.hpp"

namespace gf::tls {

namespace {

Context fresh(const SSL_METHOD *method) {
  Context ctx(SSL_CTX_new(method), SSL_CTX_free);
  if (!ctx) fail(GF_ERR_SYSTEM, errors("SSL_CTX_new failed"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_AUTO_RETRY);
  return ctx;
}

[[noreturn]] void bad_file(const std::string &what, const std::string &path) {
  fail(GF_ERR_INVALID_ARGUMENT, "the TLS " + what + " " + path + ": " + errors("unreadable"));
}

void load_identity(SSL_CTX *ctx, const std::string &certificate, const std::string &key,
                   const std::string &whose) {
  if (certificate.empty() != key.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, whose + " certificate and key go together: " +
                                      (certificate.empty() ? "a key without a certificate"
                                                           : "a certificate without its key"));
  }
  if (certificate.empty()) return;
  if (SSL_CTX_use_certificate_chain_file(ctx, certificate.c_str()) != 1) {
    bad_file(whose + " certificate", certificate);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    bad_file(whose + " key", key);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    fail(GF_ERR_INVALID_ARGUMENT, "the TLS key " + key + " is not the key of the certificate " +
                                      certificate + ": " + errors("they do not match"));
  }
}

void load_ca(SSL_CTX *ctx, const std::string &path, const std::string &what) {
  if (SSL_CTX_load_verify_locations(ctx, path.c_str(), nullptr) != 1) bad_file(what, path);
}

}  // namespace

Context server_context(const ServerFiles &files) {
  if (files.certificate.empty()) {
    fail(GF_ERR_INVALID_ARGUMENT, "a TLS listener needs the service's certificate and key");
  }
  Context ctx = fresh(TLS_server_method());
  load_identity(ctx.get(), files.certificate, files.key, "the service's");
  if (!files.client_ca.empty()) {
    load_ca(ctx.get(), files.client_ca, "client CA");
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(files.client_ca.c_str());
    if (names) SSL_CTX_set_client_CA_list(ctx.get(), names);
    // Asked for, not required: a client without one may still show the token.
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  }
  return ctx;
}

Context client_context(const ClientFiles &files) {
  Context ctx = fresh(TLS_client_method());
  if (files.ca.empty()) {
    SSL_CTX_set_default_verify_paths(ctx.get());
  } else {
    load_ca(ctx.get(), files.ca, "CA file");
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  load_identity(ctx.get(), files.certificate, files.key, "this client's");
  return ctx;
}

std::string errors(const std::string &fallback) {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(e, line, sizeof line);
    if (!text.empty()) text += "; ";
    text += line;
  }
  return text.empty() ? fallback : text;
}

std::string verify_failure(const SSL *ssl) {
  const long result = SSL_get_verify_result(ssl);
  if (result == X509_V_OK) return {};
  return X509_verify_cert_error_string(result);
}

std::string peer_common_name(const SSL *ssl) {
  X509 *cert = SSL_get0_peer_certificate(ssl);
  if (!cert) return {};
  char name[256] = "";
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof name);
  return name;
}

}  // namespace gf::tls
