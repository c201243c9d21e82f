#include "ssh/host_key.h"

#include <fmt/format.h>
#include <libssh/libssh.h>
#include <spdlog/spdlog.h>

#include <system_error>

#include "sys/files.h"

namespace hutch::ssh {

void HostKey::Free::operator()(ssh_key_struct* key) const {
  ssh_key_free(key);
}

Result<HostKey> HostKey::loadOrCreate(const std::filesystem::path& path) {
  HostKey host;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    HUTCH_TRY(std::string text, sys::readFile(path, 64 << 10));
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_base64(text.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
      return fail(Errc::kInternal,
                  fmt::format("{} is not an SSH private key; remove it to make a new one (every "
                              "client's known host entry for hutch then changes)",
                              path.string()));
    }
    host.key_.reset(key);
  } else {
    ssh_key key = nullptr;
    if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK) {
      return fail(Errc::kInternal, "libssh could not make an ed25519 key");
    }
    host.key_.reset(key);
    char* b64 = nullptr;
    if (ssh_pki_export_privkey_base64(key, nullptr, nullptr, nullptr, &b64) != SSH_OK) {
      return fail(Errc::kInternal, "libssh could not export the new host key");
    }
    std::string text(b64);
    ssh_string_free_char(b64);
    if (!text.ends_with('\n')) text += '\n';
    HUTCH_TRY_VOID(sys::writeFileAtomic(path, text, 0600));
    spdlog::info("ssh: made the host key {}", path.string());
  }
  ssh_key pub = nullptr;
  if (ssh_pki_export_privkey_to_pubkey(host.key_.get(), &pub) != SSH_OK) {
    return fail(Errc::kInternal, "libssh could not take the host key's public half");
  }
  char* b64 = nullptr;
  const int exported = ssh_pki_export_pubkey_base64(pub, &b64);
  unsigned char* hash = nullptr;
  size_t hash_len = 0;
  const int hashed = ssh_get_publickey_hash(pub, SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_len);
  ssh_key_free(pub);
  if (exported != SSH_OK || hashed != SSH_OK) {
    if (b64 != nullptr) ssh_string_free_char(b64);
    if (hash != nullptr) ssh_clean_pubkey_hash(&hash);
    return fail(Errc::kInternal, "libssh could not export the host key's public half");
  }
  host.public_ = fmt::format("{} {}", ssh_key_type_to_char(ssh_key_type(host.key_.get())), b64);
  ssh_string_free_char(b64);
  char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_len);
  ssh_clean_pubkey_hash(&hash);
  if (fp != nullptr) {
    host.fingerprint_ = fp;
    ssh_string_free_char(fp);
  }
  return host;
}

}  // namespace hutch::ssh
