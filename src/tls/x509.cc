#include "tls/x509.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <cctype>

namespace hutch::tls {

namespace {
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

Result<std::string> bioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

BioPtr readBio(std::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}
}  // namespace

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
  return bioText(bio.get());
}

Result<std::string> pemOf(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return fail(cryptoError("PEM key"));
  }
  return bioText(bio.get());
}

Result<X509Ptr> parseCertPem(std::string_view pem, std::string_view what) {
  BioPtr bio = readBio(pem);
  if (!bio) return fail(cryptoError("BIO_new_mem_buf"));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return fail(Errc::kInvalidArgument,
                std::string(what) + " is not a PEM certificate (" + sslError() + ")");
  }
  return cert;
}

Result<KeyPtr> parseKeyPem(std::string_view pem, std::string_view what) {
  BioPtr bio = readBio(pem);
  if (!bio) return fail(cryptoError("BIO_new_mem_buf"));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return fail(Errc::kInvalidArgument,
                std::string(what) + " is not an unencrypted PEM private key (" + sslError() + ")");
  }
  return key;
}

Result<KeyPtr> newEcKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return fail(cryptoError("Cannot generate an EC P-256 key"));
  return key;
}

Result<X509Ptr> newCertificate(long valid_seconds) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return fail(cryptoError("X509_new"));
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return fail(cryptoError("Cannot draw a serial"));
  bytes[0] &= 0x7f;  // positive
  bytes[0] |= 0x01;  // and never zero
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(bytes, sizeof bytes, nullptr), &BN_free);
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get()))) {
    return fail(cryptoError("Cannot set a serial"));
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), valid_seconds);
  return cert;
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

std::string fingerprintSha256(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  X509_digest(cert, EVP_sha256(), md, &n);
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    if (i) out += ':';
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

Result<std::string> fingerprintSha256(std::string_view cert_pem) {
  HUTCH_TRY(X509Ptr cert, parseCertPem(cert_pem, "The certificate"));
  return fingerprintSha256(cert.get());
}

Result<std::string> normalizeFingerprint(std::string_view text) {
  std::string hex;
  for (char c : text) {
    if (c == ':' || c == ' ') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return fail(Errc::kInvalidArgument,
                  "A SHA-256 fingerprint is 64 hex digits, optionally with colons (as 'hutch "
                  "doctor' prints it); '" +
                      std::string(text) + "' is not one");
    }
    hex += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (hex.size() != 64) {
    return fail(Errc::kInvalidArgument,
                "A SHA-256 fingerprint is 64 hex digits (32 bytes); this one has " +
                    std::to_string(hex.size()));
  }
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    if (i) out += ':';
    out += hex.substr(i, 2);
  }
  return out;
}

}  // namespace hutch::tls
