// hutchd's own TLS certificate: given (--tls-cert/--tls-key) or made once in the state directory
// and kept, so its fingerprint stays the same across restarts.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"

namespace hutch::tls {

struct CertPair {
  std::string cert;  // PEM
  std::string key;   // PEM (unencrypted)
};

// A self-signed certificate for a server (what `openssl req -x509` makes, so that clients can
// trust it directly as a CA file): EC P-256, CN "hutchd", basicConstraints CA:TRUE, keyUsage
// digitalSignature and keyCertSign, serverAuth, subjectAltName the given DNS names and IP
// addresses, valid from an hour ago for ten years.
Result<CertPair> makeSelfSigned(const std::vector<std::string>& dns_names,
                                const std::vector<std::string>& ip_addresses);

struct CertFiles {
  std::filesystem::path cert;
  std::filesystem::path key;
  bool made = false;  // true when this call made them
};

// <dir>/cert.pem and <dir>/key.pem, made with makeSelfSigned if either is missing (the
// directory 0700, the key 0600, written atomically).
Result<CertFiles> ensureSelfSigned(const std::filesystem::path& dir,
                                   const std::vector<std::string>& dns_names,
                                   const std::vector<std::string>& ip_addresses);

// Checks that the files hold a certificate and the private key that belongs to it; the
// certificate's fingerprint (fingerprintSha256).
Result<std::string> checkCertFiles(const std::filesystem::path& cert,
                                   const std::filesystem::path& key);

// The names a certificate for this host should carry: localhost and the host name, and
// 127.0.0.1, ::1 and every address of the host's interfaces.
void hostNames(std::vector<std::string>& dns_names, std::vector<std::string>& ip_addresses);

}  // namespace hutch::tls
