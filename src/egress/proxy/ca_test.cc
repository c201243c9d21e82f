#include "egress/proxy/ca.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>

namespace hutch::egress::proxy {
namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

X509Ptr parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

// Verifies `leaf` against `ca` alone, for the purpose of a TLS server named `host`.
int verify(const std::string& ca, const std::string& leaf, const std::string& host) {
  X509Ptr ca_cert = parse(ca);
  X509Ptr leaf_cert = parse(leaf);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca_cert.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf_cert.get(), nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  int result = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return result;
}

TEST(CaTest, MakesAnEcCaForTheBox) {
  auto ca = makeBoxCa("b-123");
  ASSERT_TRUE(ca) << ca.error().describe();
  X509Ptr cert = parse(ca->cert);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof cn);
  EXPECT_STREQ(cn, "hutch box b-123 CA");
  EVP_PKEY* key = X509_get0_pubkey(cert.get());
  EXPECT_EQ(EVP_PKEY_get_base_id(key), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(key), 256);
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert.get(), NID_basic_constraints, nullptr, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE(bc->ca);
  EXPECT_EQ(ASN1_INTEGER_get(bc->pathlen), 0);
  BASIC_CONSTRAINTS_free(bc);
  // About a year.
  int days = 0, secs = 0;
  ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(cert.get()), X509_get0_notAfter(cert.get()));
  EXPECT_GE(days, 364);
  EXPECT_LE(days, 366);
  EXPECT_NE(ca->key.find("BEGIN PRIVATE KEY"), std::string::npos);
}

TEST(CaTest, TwoBoxesGetDifferentCas) {
  auto a = makeBoxCa("a");
  auto b = makeBoxCa("a");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->cert, b->cert);
  EXPECT_NE(a->key, b->key);
}

TEST(CaTest, LeafVerifiesAgainstItsCaForItsNameOnly) {
  auto ca = makeBoxCa("box");
  ASSERT_TRUE(ca);
  auto leaf = mintLeaf(*ca, "api.example.test");
  ASSERT_TRUE(leaf) << leaf.error().describe();
  EXPECT_EQ(verify(ca->cert, leaf->cert, "api.example.test"), X509_V_OK);
  EXPECT_EQ(verify(ca->cert, leaf->cert, "other.example.test"), X509_V_ERR_HOSTNAME_MISMATCH);
  auto other = makeBoxCa("other");
  ASSERT_TRUE(other);
  EXPECT_NE(verify(other->cert, leaf->cert, "api.example.test"), X509_V_OK);
}

TEST(CaTest, LeafNeverOutlivesItsCa) {
  auto ca = makeBoxCa("box");
  ASSERT_TRUE(ca);
  auto authority = CertAuthority::load(*ca);
  ASSERT_TRUE(authority);
  auto leaf = authority->mintLeaf("x.example.test", std::chrono::hours(24 * 3650));
  ASSERT_TRUE(leaf);
  X509Ptr ca_cert = parse(ca->cert);
  X509Ptr leaf_cert = parse(leaf->cert);
  EXPECT_LE(
      ASN1_TIME_compare(X509_get0_notAfter(leaf_cert.get()), X509_get0_notAfter(ca_cert.get())), 0);
}

TEST(CaTest, RefusesBadInput) {
  auto ca = makeBoxCa("box");
  ASSERT_TRUE(ca);
  EXPECT_FALSE(makeBoxCa(""));
  EXPECT_FALSE(mintLeaf(*ca, "not a name"));
  EXPECT_FALSE(mintLeaf(*ca, ""));
  EXPECT_FALSE(CertAuthority::load(CaPair{"garbage", ca->key}));
  EXPECT_FALSE(CertAuthority::load(CaPair{ca->cert, "garbage"}));
  auto other = makeBoxCa("other");
  ASSERT_TRUE(other);
  auto mismatched = CertAuthority::load(CaPair{ca->cert, other->key});
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message().find("does not belong"), std::string::npos);
  // A leaf is not a CA.
  auto leaf = mintLeaf(*ca, "leaf.example.test");
  ASSERT_TRUE(leaf);
  EXPECT_FALSE(CertAuthority::load(*leaf));
}

}  // namespace
}  // namespace hutch::egress::proxy
