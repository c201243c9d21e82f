#include "egress/proxy/ca.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "egress/proxy/client_hello.h"

namespace hutch::egress::proxy {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct NameFree {
  void operator()(X509_NAME* n) const { X509_NAME_free(n); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

// The first queued OpenSSL error as text, and the queue cleared.
std::string sslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no OpenSSL error queued";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

Error cryptoError(std::string_view what) {
  return Error(Errc::kInternal, std::string(what) + ": " + sslError());
}

Result<std::string> pemOf(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return fail(cryptoError("PEM cert"));
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> pemOf(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return fail(cryptoError("PEM key"));
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<KeyPtr> newEcKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return fail(cryptoError("Cannot generate an EC P-256 key"));
  return key;
}

Result<> randomSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return fail(cryptoError("Cannot draw a serial"));
  bytes[0] &= 0x7f;  // positive
  bytes[0] |= 0x01;  // and never zero
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(bytes, sizeof bytes, nullptr), &BN_free);
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert))) {
    return fail(cryptoError("Cannot set a serial"));
  }
  return ok();
}

Result<> addExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, ExtFree> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, const_cast<char*>(value)));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return fail(cryptoError(std::string("Cannot add certificate extension ") + OBJ_nid2sn(nid)));
  }
  return ok();
}

Result<> setName(X509_NAME* name, std::string_view cn) {
  auto add = [&](const char* field, std::string_view text) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                      reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(text.size()), -1, 0) == 1;
  };
  if (!add("O", "hutch") || (!cn.empty() && !add("CN", cn))) {
    return fail(cryptoError("Cannot set a certificate name"));
  }
  return ok();
}

}  // namespace

void CertAuthority::X509Free::operator()(X509* x) const {
  X509_free(x);
}
void CertAuthority::KeyFree::operator()(EVP_PKEY* k) const {
  EVP_PKEY_free(k);
}

Result<CaPair> makeBoxCa(std::string_view box_id) {
  if (box_id.empty()) return fail(Errc::kInvalidArgument, "A box CA needs the box id; pass one");
  HUTCH_TRY(KeyPtr key, newEcKey());
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return fail(cryptoError("X509_new"));
  HUTCH_TRY_VOID(randomSerial(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  std::string cn = "hutch box " + std::string(box_id) + " CA";
  if (cn.size() > 64) cn = "hutch box " + std::string(box_id.substr(0, 40)) + " CA";
  HUTCH_TRY_VOID(setName(X509_get_subject_name(cert.get()), cn));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return fail(cryptoError("Cannot fill the CA certificate"));
  }
  HUTCH_TRY_VOID(
      addExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  HUTCH_TRY_VOID(
      addExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  HUTCH_TRY_VOID(addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return fail(cryptoError("Cannot sign the box CA"));
  }
  HUTCH_TRY(std::string cert_pem, pemOf(cert.get()));
  HUTCH_TRY(std::string key_pem, pemOf(key.get()));
  return CaPair{std::move(cert_pem), std::move(key_pem)};
}

Result<CertAuthority> CertAuthority::load(const CaPair& ca) {
  BioPtr cert_bio(BIO_new_mem_buf(ca.cert.data(), static_cast<int>(ca.cert.size())));
  BioPtr key_bio(BIO_new_mem_buf(ca.key.data(), static_cast<int>(ca.key.size())));
  if (!cert_bio || !key_bio) return fail(cryptoError("BIO_new_mem_buf"));
  CertAuthority out;
  out.cert_.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!out.cert_) {
    return fail(Errc::kInvalidArgument,
                "The box CA certificate is not a PEM certificate (" + sslError() + ")");
  }
  out.key_.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!out.key_) {
    return fail(Errc::kInvalidArgument,
                "The box CA key is not an unencrypted PEM private key (" + sslError() + ")");
  }
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
  HUTCH_TRY(KeyPtr key, newEcKey());
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return fail(cryptoError("X509_new"));
  HUTCH_TRY_VOID(randomSerial(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                  std::chrono::duration_cast<std::chrono::seconds>(validity).count());
  const ASN1_TIME* ca_end = X509_get0_notAfter(cert_.get());
  if (ASN1_TIME_compare(X509_get0_notAfter(cert.get()), ca_end) > 0) {
    X509_set1_notAfter(cert.get(), ca_end);
  }
  HUTCH_TRY_VOID(setName(X509_get_subject_name(cert.get()), host.size() <= 64 ? host : ""));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return fail(cryptoError("Cannot fill the leaf certificate"));
  }
  std::string san = "DNS:" + std::string(host);
  HUTCH_TRY_VOID(addExtension(cert.get(), cert_.get(), NID_basic_constraints, "critical,CA:FALSE"));
  HUTCH_TRY_VOID(addExtension(cert.get(), cert_.get(), NID_key_usage, "critical,digitalSignature"));
  HUTCH_TRY_VOID(addExtension(cert.get(), cert_.get(), NID_ext_key_usage, "serverAuth"));
  HUTCH_TRY_VOID(addExtension(cert.get(), cert_.get(), NID_subject_alt_name, san.c_str()));
  HUTCH_TRY_VOID(addExtension(cert.get(), cert_.get(), NID_subject_key_identifier, "hash"));
  HUTCH_TRY_VOID(addExtension(cert.get(), cert_.get(), NID_authority_key_identifier, "keyid"));
  if (X509_sign(cert.get(), key_.get(), EVP_sha256()) == 0) {
    return fail(cryptoError("Cannot sign a leaf certificate"));
  }
  HUTCH_TRY(std::string cert_pem, pemOf(cert.get()));
  HUTCH_TRY(std::string key_pem, pemOf(key.get()));
  return CaPair{std::move(cert_pem), std::move(key_pem)};
}

Result<CaPair> mintLeaf(const CaPair& ca, std::string_view host) {
  HUTCH_TRY(CertAuthority authority, CertAuthority::load(ca));
  return authority.mintLeaf(host);
}

}  // namespace hutch::egress::proxy
