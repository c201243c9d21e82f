#include "tls/x509.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <filesystem>

#include "tls/server_cert.h"

namespace hutch::tls {
namespace {

TEST(X509Test, SelfSignedServerCertificateCarriesItsNamesAndVerifiesAgainstItself) {
  auto pair = makeSelfSigned({"localhost", "box.example"}, {"127.0.0.1", "::1"});
  ASSERT_TRUE(pair) << pair.error().describe();
  auto cert = parseCertPem(pair->cert, "cert");
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_host(cert->get(), "box.example", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert->get(), "other.example", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(cert->get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert->get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert->get(), "10.0.0.1", 0), 0);
  // A client that trusts the certificate itself (--ca-cert cert.pem) verifies it.
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, cert->get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert->get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  EXPECT_EQ(X509_verify_cert(ctx), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
}

TEST(X509Test, FingerprintIsSha256OfTheDerInColonHex) {
  auto pair = makeSelfSigned({"localhost"}, {});
  ASSERT_TRUE(pair);
  auto fp = fingerprintSha256(pair->cert);
  ASSERT_TRUE(fp);
  EXPECT_EQ(fp->size(), 32u * 3 - 1);
  EXPECT_EQ((*fp)[2], ':');
  auto again = makeSelfSigned({"localhost"}, {});
  ASSERT_TRUE(again);
  EXPECT_NE(*fingerprintSha256(again->cert), *fp) << "every certificate has its own key";
}

TEST(X509Test, NormalizeFingerprintAcceptsColonsOrNotAndAnyCase) {
  std::string plain(64, 'a');
  auto n = normalizeFingerprint(plain);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->substr(0, 6), "AA:AA:");
  EXPECT_EQ(*normalizeFingerprint(*n), *n);
  EXPECT_FALSE(normalizeFingerprint("abc"));
  EXPECT_FALSE(normalizeFingerprint(std::string(64, 'g')));
  EXPECT_EQ(normalizeFingerprint("zz").error().code(), Errc::kInvalidArgument);
}

TEST(X509Test, EnsureSelfSignedMakesOnceAndKeepsTheSameCertificate) {
  auto dir = std::filesystem::temp_directory_path() / ("tls-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto first = ensureSelfSigned(dir, {"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_TRUE(first->made);
  auto fp1 = checkCertFiles(first->cert, first->key);
  ASSERT_TRUE(fp1) << fp1.error().describe();
  auto second = ensureSelfSigned(dir, {"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->made);
  EXPECT_EQ(*checkCertFiles(second->cert, second->key), *fp1);
  EXPECT_EQ(std::filesystem::status(first->key).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::remove_all(dir);
}

TEST(X509Test, CheckCertFilesRefusesAKeyOfAnotherCertificate) {
  auto dir = std::filesystem::temp_directory_path() / ("tls-test2-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto a = ensureSelfSigned(dir / "a", {"localhost"}, {});
  auto b = ensureSelfSigned(dir / "b", {"localhost"}, {});
  ASSERT_TRUE(a && b);
  auto mixed = checkCertFiles(a->cert, b->key);
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().code(), Errc::kInvalidArgument);
  auto missing = checkCertFiles(dir / "nope.pem", a->key);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::tls
