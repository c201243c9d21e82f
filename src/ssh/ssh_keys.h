// SshKeys: the public keys with which owners reach their boxes through hutchd --listen-ssh
// (docs/ssh.md "The TCP gateway"), and the decision that gateway makes for each login: which
// key, whose, and which box the user name names among that owner's boxes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"
#include "base/result.h"
#include "box/box_service.h"
#include "ssh/ssh_server.h"
#include "storage/key_store.h"
#include "storage/ssh_key_store.h"

struct ssh_key_struct;

namespace hutch::ssh {

// "SHA256:..." of a public key, as ssh-keygen -l prints it.
Result<std::string> fingerprintOf(ssh_key_struct* key);

// A public key as an authorized_keys line has it ("TYPE BASE64 [COMMENT]"): "TYPE BASE64" and
// its fingerprint. kInvalidArgument for anything else (a private key, a certificate type libssh
// does not know, several lines).
struct ParsedKey {
  std::string public_key;
  std::string fingerprint;
};
Result<ParsedKey> parsePublicKey(std::string_view text);

class SshKeys {
 public:
  // All must outlive this.
  SshKeys(storage::SshKeyStore& store, storage::KeyStore& api_keys, box::BoxService& service)
      : store_(store), api_keys_(api_keys), service_(service) {}

  // The principal's keys (the host administrator's are its own, owner "").
  Result<storage::SshKey> add(const api::Principal& principal, const std::string& name,
                              std::string_view public_key);
  Result<std::vector<storage::SshKey>> list(const api::Principal& principal);
  Result<> remove(const api::Principal& principal, const std::string& name);

  // Whether a key with this fingerprint is registered (the gateway's answer to a key offered
  // without a signature).
  bool known(const std::string& fingerprint);
  // Who logs in with the key `fingerprint` (its signature checked by libssh) as SSH user
  // `user` (a box's name or id, optionally BOX.hutch), from `from`: the client, with the box
  // resolved among the key owner's boxes. kUnauthenticated for an unknown key, one whose API
  // key was removed, and a box that does not exist or is another owner's (the same error: the
  // gateway says no more than "Permission denied").
  Result<Client> authorize(std::string_view user, const std::string& fingerprint,
                           const std::string& from);

 private:
  storage::SshKeyStore& store_;
  storage::KeyStore& api_keys_;
  box::BoxService& service_;
};

}  // namespace hutch::ssh
