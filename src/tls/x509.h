// OpenSSL X.509 building blocks shared by everything in hutch that makes certificates: the
// per-box CA and its leaves (egress/proxy/ca.h) and hutchd's own server certificate
// (tls/server_cert.h). RAII pointers, errors as Result values, PEM text in and out (OpenSSL 3).
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::tls {

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// The first queued OpenSSL error as text, and the queue cleared.
std::string sslError();
// kInternal "what: <OpenSSL's error>".
Error cryptoError(std::string_view what);

Result<std::string> pemOf(X509* cert);
Result<std::string> pemOf(EVP_PKEY* key);
// The first certificate / the private key in PEM text; kInvalidArgument naming `what` otherwise.
Result<X509Ptr> parseCertPem(std::string_view pem, std::string_view what);
Result<KeyPtr> parseKeyPem(std::string_view pem, std::string_view what);

Result<KeyPtr> newEcKey();  // P-256
// A new X509 v3 with a random positive serial, valid from an hour ago for `valid_seconds`.
Result<X509Ptr> newCertificate(long valid_seconds);
// Adds an extension in OpenSSL's config syntax ("critical,CA:TRUE", "DNS:a,IP:127.0.0.1").
Result<> addExtension(X509* cert, X509* issuer, int nid, const char* value);
// O=hutch, and CN=cn when cn is not empty.
Result<> setName(X509_NAME* name, std::string_view cn);

// SHA-256 of the certificate's DER form, as colon-separated upper-case hex ("AB:CD:...").
std::string fingerprintSha256(X509* cert);
Result<std::string> fingerprintSha256(std::string_view cert_pem);
// Normalises a fingerprint written with or without colons, in any case, to the form above;
// kInvalidArgument unless it is 32 bytes of hex.
Result<std::string> normalizeFingerprint(std::string_view text);

}  // namespace hutch::tls
