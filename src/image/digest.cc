#include "image/digest.h"

#include <fmt/format.h>

#include "base/check.h"

namespace hutch::image {

bool isValidDigest(std::string_view digest) {
  constexpr std::string_view kPrefix = "sha256:";
  if (digest.size() != kPrefix.size() + 64 || !digest.starts_with(kPrefix)) return false;
  for (char c : digest.substr(kPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string_view digestHex(std::string_view digest) {
  HUTCH_CHECK(isValidDigest(digest));
  return digest.substr(7);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  HUTCH_CHECK(ctx_ != nullptr);
  HUTCH_CHECK(EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
}

void Sha256::update(std::string_view data) {
  if (data.empty()) return;
  HUTCH_CHECK(EVP_DigestUpdate(ctx_.get(), data.data(), data.size()) == 1);
}

std::string Sha256::finish() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HUTCH_CHECK(EVP_DigestFinal_ex(ctx_.get(), md, &n) == 1);
  std::string out = "sha256:";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

std::string sha256Digest(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Result<> verifyDigest(std::string_view digest, std::string_view data) {
  if (!isValidDigest(digest)) {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not a sha256 digest (sha256:<64 lowercase hex digits>); only "
                            "sha256 content digests are supported",
                            digest.substr(0, 100)));
  }
  std::string actual = sha256Digest(data);
  if (actual != digest) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Content does not match its digest {} (it hashes to {}): the blob is "
                            "corrupted or was substituted; pull the image again",
                            digest, actual));
  }
  return ok();
}

}  // namespace hutch::image
