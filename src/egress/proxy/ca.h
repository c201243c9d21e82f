// The per-box certificate authority: hutchd makes one per box with makeBoxCa() and installs its
// certificate in the box's trust store; hutch-egress mints a leaf certificate per intercepted
// host name from it. Plain functions over PEM text, no global state (OpenSSL 3).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

using X509 = struct x509_st;
using EVP_PKEY = struct evp_pkey_st;

namespace hutch::egress::proxy {

// A certificate and its private key, both PEM ("-----BEGIN CERTIFICATE-----",
// "-----BEGIN PRIVATE KEY-----").
struct CaPair {
  std::string cert;
  std::string key;
  bool operator==(const CaPair&) const = default;
};

// A new CA for a box: EC P-256, CA:TRUE with pathlen 0, keyCertSign/cRLSign, subject
// "CN=hutch box <id> CA, O=hutch", valid from an hour ago for a year.
Result<CaPair> makeBoxCa(std::string_view box_id);

// A CA loaded once, minting leaves for host names. Move-only.
class CertAuthority {
 public:
  // Parses and checks the pair: the key must match the certificate, which must be a CA.
  static Result<CertAuthority> load(const CaPair& ca);

  // A leaf for `host` (a DNS name): EC P-256, SAN dNSName=host, serverAuth, CA:FALSE, valid from
  // an hour ago for `validity` but never beyond the CA's own end. PEM cert and key.
  Result<CaPair> mintLeaf(std::string_view host,
                          std::chrono::hours validity = std::chrono::hours(24 * 90)) const;

  const std::string& certPem() const { return cert_pem_; }

 private:
  struct X509Free {
    void operator()(X509* x) const;
  };
  struct KeyFree {
    void operator()(EVP_PKEY* k) const;
  };
  CertAuthority() = default;
  std::unique_ptr<X509, X509Free> cert_;
  std::unique_ptr<EVP_PKEY, KeyFree> key_;
  std::string cert_pem_;
};

// One-shot form of CertAuthority::load(ca)->mintLeaf(host).
Result<CaPair> mintLeaf(const CaPair& ca, std::string_view host);

}  // namespace hutch::egress::proxy
