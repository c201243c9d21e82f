#include "egress/proxy/ca.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "egress/proxy/client_hello.h"
#include "tls/x509.h"

namespace hutch::egress::proxy {

namespace {

using tls::cryptoError;
using tls::KeyPtr;
using tls::X509Ptr;

}  // namespace

void CertAuthority::X509Free::operator()(X509* x) const {
  X509_free(x);
}
void CertAuthority::KeyFree::operator()(EVP_PKEY* k) const {
  EVP_PKEY_free(k);
}

Result<CaPair> makeBoxCa(std::string_view box_id) {
  if (box_id.empty()) return fail(Errc::kInvalidArgument, "A box CA needs the box id; pass one");
  HUTCH_TRY(KeyPtr key, tls::newEcKey());
  HUTCH_TRY(X509Ptr cert, tls::newCertificate(365L * 24 * 3600));
  std::string cn = "hutch box " + std::string(box_id) + " CA";
  if (cn.size() > 64) cn = "hutch box " + std::string(box_id.substr(0, 40)) + " CA";
  HUTCH_TRY_VOID(tls::setName(X509_get_subject_name(cert.get()), cn));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return fail(cryptoError("Cannot fill the CA certificate"));
  }
  HUTCH_TRY_VOID(tls::addExtension(cert.get(), cert.get(), NID_basic_constraints,
                                   "critical,CA:TRUE,pathlen:0"));
  HUTCH_TRY_VOID(
      tls::addExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  HUTCH_TRY_VOID(tls::addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return fail(cryptoError("Cannot sign the box CA"));
  }
  HUTCH_TRY(std::string cert_pem, tls::pemOf(cert.get()));
  HUTCH_TRY(std::string key_pem, tls::pemOf(key.get()));
  return CaPair{std::move(cert_pem), std::move(key_pem)};
}

Result<CertAuthority> CertAuthority::load(const CaPair& ca) {
  HUTCH_TRY(X509Ptr cert, tls::parseCertPem(ca.cert, "The box CA certificate"));
  HUTCH_TRY(KeyPtr key, tls::parseKeyPem(ca.key, "The box CA key"));
  CertAuthority out;
  out.cert_.reset(cert.release());
  out.key_.reset(key.release());
  if (X509_check_private_key(out.cert_.get(), out.key_.get()) != 1) {
    ERR_clear_error();
    return fail(Errc::kInvalidArgument, "The box CA key does not belong to its certificate");
  }
  if (X509_check_ca(out.cert_.get()) == 0) {
    return fail(Errc::kInvalidArgument,
                "The box CA certificate is not a CA certificate (basicConstraints CA:TRUE)");
  }
  out.cert_pem_ = ca.cert;
  return out;
}

Result<CaPair> CertAuthority::mintLeaf(std::string_view host, std::chrono::hours validity) const {
  if (!isValidHostName(host)) {
    return fail(Errc::kInvalidArgument,
                "Cannot mint a certificate for '" + std::string(host) + "': not a host name");
  }
  HUTCH_TRY(KeyPtr key, tls::newEcKey());
  HUTCH_TRY(X509Ptr cert, tls::newCertificate(
                              std::chrono::duration_cast<std::chrono::seconds>(validity).count()));
  const ASN1_TIME* ca_end = X509_get0_notAfter(cert_.get());
  if (ASN1_TIME_compare(X509_get0_notAfter(cert.get()), ca_end) > 0) {
    X509_set1_notAfter(cert.get(), ca_end);
  }
  HUTCH_TRY_VOID(tls::setName(X509_get_subject_name(cert.get()), host.size() <= 64 ? host : ""));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return fail(cryptoError("Cannot fill the leaf certificate"));
  }
  std::string san = "DNS:" + std::string(host);
  HUTCH_TRY_VOID(
      tls::addExtension(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE"));
  HUTCH_TRY_VOID(
      tls::addExtension(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature"));
  HUTCH_TRY_VOID(tls::addExtension(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth"));
  HUTCH_TRY_VOID(tls::addExtension(cert.get(), cert_.get(), NID_subject_alt_name, san.c_str()));
  HUTCH_TRY_VOID(tls::addExtension(cert.get(), cert_.get(), NID_subject_key_identifier, "hash"));
  HUTCH_TRY_VOID(tls::addExtension(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid"));
  if (X509_sign(cert.get(), key_.get(), EVP_sha256()) == 0) {
    return fail(cryptoError("Cannot sign a leaf certificate"));
  }
  HUTCH_TRY(std::string cert_pem, tls::pemOf(cert.get()));
  HUTCH_TRY(std::string key_pem, tls::pemOf(key.get()));
  return CaPair{std::move(cert_pem), std::move(key_pem)};
}

Result<CaPair> mintLeaf(const CaPair& ca, std::string_view host) {
  HUTCH_TRY(CertAuthority authority, CertAuthority::load(ca));
  return authority.mintLeaf(host);
}

}  // namespace hutch::egress::proxy
