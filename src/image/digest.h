// Content digests of OCI blobs: "sha256:<64 lowercase hex>", the only algorithm hutch accepts
// (sha512 is legal in OCI but no registry serves it; a digest of another algorithm is refused
// rather than trusted unchecked).
#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::image {

// True for "sha256:" followed by exactly 64 lowercase hex digits.
bool isValidDigest(std::string_view digest);

// The 64 hex digits of a valid digest (a view into it). HUTCH_CHECKs isValidDigest.
std::string_view digestHex(std::string_view digest);

// Incremental SHA-256. Move-only.
class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  void update(const void* data, size_t size) {
    update(std::string_view(static_cast<const char*>(data), size));
  }
  // "sha256:<hex>" of everything updated so far; the hasher may not be used afterwards.
  std::string finish();

 private:
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

// "sha256:<hex>" of `data`.
std::string sha256Digest(std::string_view data);

// Ok when `data` hashes to `digest`. kInvalidArgument when `digest` is malformed (or not sha256),
// or when the data does not match it (a corrupted or substituted blob: pull the image again).
Result<> verifyDigest(std::string_view digest, std::string_view data);

}  // namespace hutch::image
