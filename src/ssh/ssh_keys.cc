#include "ssh/ssh_keys.h"

#include <fmt/format.h>
#include <libssh/libssh.h>

#include <ctime>

#include "api/handlers.h"
#include "ssh/ssh_model.h"

namespace hutch::ssh {

namespace {

constexpr size_t kMaxKeyText = 16 << 10;
constexpr size_t kMaxKeyName = 64;

api::Principal principalOf(const storage::ApiKey& key) {
  api::Principal p;
  p.kind = api::Principal::Kind::kKey;
  p.key_id = key.id;
  p.key_name = key.name;
  p.admin = key.admin;
  p.quota = key.quota;
  return p;
}

}  // namespace

Result<std::string> fingerprintOf(ssh_key_struct* key) {
  unsigned char* hash = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) != SSH_OK) {
    return fail(Errc::kInvalidArgument, "libssh could not hash the key");
  }
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
  ssh_clean_pubkey_hash(&hash);
  if (text == nullptr) return fail(Errc::kInvalidArgument, "libssh could not hash the key");
  std::string out(text);
  ssh_string_free_char(text);
  return out;
}

Result<ParsedKey> parsePublicKey(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  const auto bad = [] {
    return fail(Errc::kInvalidArgument,
                "Not an SSH public key: give one line of an authorized_keys file or a .pub file "
                "(ssh-ed25519 AAAA... [comment]), never the private key");
  };
  if (text.empty() || text.size() > kMaxKeyText || text.find('\n') != std::string_view::npos) {
    return bad();
  }
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return bad();
  const std::string type(text.substr(0, space));
  std::string_view rest = text.substr(space + 1);
  const std::string base64(rest.substr(0, rest.find(' ')));
  const enum ssh_keytypes_e kind = ssh_key_type_from_name(type.c_str());
  if (kind == SSH_KEYTYPE_UNKNOWN) return bad();
  ssh_key key = nullptr;
  if (ssh_pki_import_pubkey_base64(base64.c_str(), kind, &key) != SSH_OK) return bad();
  auto fingerprint = fingerprintOf(key);
  ssh_key_free(key);
  if (!fingerprint) return bad();
  return ParsedKey{type + " " + base64, *fingerprint};
}

Result<storage::SshKey> SshKeys::add(const api::Principal& principal, const std::string& name,
                                     std::string_view public_key) {
  if (name.empty() || name.size() > kMaxKeyName ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("An SSH key's name is 1 to {} letters, digits, '.', '_' or '-'", kMaxKeyName));
  }
  HUTCH_TRY(ParsedKey parsed, parsePublicKey(public_key));
  storage::SshKey key{.owner_id = principal.key_id,
                      .owner_name = principal.key_name,
                      .name = name,
                      .public_key = parsed.public_key,
                      .fingerprint = parsed.fingerprint,
                      .created_at = static_cast<int64_t>(std::time(nullptr))};
  HUTCH_TRY_VOID(store_.insert(key));
  return key;
}

Result<std::vector<storage::SshKey>> SshKeys::list(const api::Principal& principal) {
  return store_.listOf(principal.key_id);
}

Result<> SshKeys::remove(const api::Principal& principal, const std::string& name) {
  return store_.remove(principal.key_id, name);
}

bool SshKeys::known(const std::string& fingerprint) {
  return store_.findByFingerprint(fingerprint).has_value();
}

Result<Client> SshKeys::authorize(std::string_view user, const std::string& fingerprint,
                                  const std::string& from) {
  const auto denied = [] { return fail(Errc::kUnauthenticated, "Permission denied"); };
  auto key = store_.findByFingerprint(fingerprint);
  if (!key) return denied();
  api::Principal principal = api::Principal::host();
  if (!key->owner_id.empty()) {
    auto owner = api_keys_.findById(key->owner_id);
    if (!owner) return denied();  // its API key was removed
    principal = principalOf(*owner);
  }
  auto name = parseBoxHost(user);
  if (!name) return denied();
  auto box = service_.get(*name, api::ownerFilter(principal));
  if (!box) return denied();
  return Client{.box = box->id, .actor = principal.actor(), .from = from};
}

}  // namespace hutch::ssh
