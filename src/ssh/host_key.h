// HostKey: hutchd's one SSH host key (docs/ssh.md), ed25519, made on first start in hutchd's
// state directory (mode 0600) and kept: boxes come and go, are forked and restored, and the key
// clients check stays the same.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "base/result.h"

struct ssh_key_struct;

namespace hutch::ssh {

class HostKey {
 public:
  // Loads the key at `path`, or makes one there when no file exists. kInternal when the file is
  // not a private key libssh reads (it is never replaced: remove it to make a new one, and
  // every client's known host entry changes) or cannot be written.
  static Result<HostKey> loadOrCreate(const std::filesystem::path& path);

  // The libssh key (owned here; ssh_bind takes a copy).
  ssh_key_struct* key() const { return key_.get(); }
  // "ssh-ed25519 AAAA...", as in a known_hosts or authorized_keys line.
  const std::string& publicKey() const { return public_; }
  // "SHA256:..." as ssh-keygen -l prints it.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  struct Free {
    void operator()(ssh_key_struct* key) const;
  };
  std::unique_ptr<ssh_key_struct, Free> key_;
  std::string public_;
  std::string fingerprint_;
};

}  // namespace hutch::ssh
