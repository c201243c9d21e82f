// The API's doors to SSH (docs/ssh.md, docs/api.md): GET /v1/boxes/{box}/ssh upgrades an
// authenticated request to a raw SSH byte stream into that box (what `hutch ssh-proxy`, the
// ProxyCommand of `hutch ssh-config`, speaks), and GET /v1/ssh/host-key gives hutchd's host key
// for known_hosts (`hutch ssh-known-hosts`).
#pragma once

#include "api/http_server.h"
#include "box/box_service.h"
#include "ssh/ssh_keys.h"
#include "ssh/ssh_server.h"

namespace hutch::ssh {

// The Upgrade token of GET /v1/boxes/{box}/ssh.
inline constexpr std::string_view kUpgradeProtocol = "ssh";

// Registers both routes. The server and service must outlive the router.
void registerSshRoutes(api::ApiRouter& router, SshServer& server, box::BoxService& service);

// The caller's SSH keys for hutchd --listen-ssh: POST /v1/ssh/keys {"name","public_key"},
// GET /v1/ssh/keys, DELETE /v1/ssh/keys/{name}. Each caller sees and changes only its own (the
// host administrator's are the unix socket's). `keys` must outlive the router.
void registerSshKeyRoutes(api::ApiRouter& router, SshKeys& keys);
nlohmann::json toJson(const storage::SshKey& key);

}  // namespace hutch::ssh
