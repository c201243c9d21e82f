#include "api/secret_service.h"

#include <spdlog/spdlog.h>

namespace hutch::api {

using nlohmann::json;

net::SecretStore SecretService::storeOf(const Principal& caller) const {
  return store_.forOwner(caller.owner().id);
}

Result<std::vector<net::Secret>> SecretService::list(const Principal& caller) const {
  HUTCH_TRY(std::vector<net::Secret> all, storeOf(caller).list());
  for (net::Secret& s : all) s.value.clear();
  return all;
}

Result<SecretService::Stored> SecretService::put(const Principal& caller,
                                                 const net::Secret& secret) {
  HUTCH_TRY_VOID(net::validateSecret(secret));
  net::SecretStore own = storeOf(caller);
  auto before = own.get(secret.name);
  // A file that is there but unreadable is replaced too.
  const bool replaced = before || before.error().code() != Errc::kNotFound;
  HUTCH_TRY_VOID(own.put(secret));
  HUTCH_TRY(net::Secret stored, own.get(secret.name));
  stored.value.clear();
  report(caller, replaced ? "replaced" : "created", replaced ? "replace" : "create", stored.name);
  return Stored{.secret = std::move(stored), .replaced = replaced};
}

Result<> SecretService::remove(const Principal& caller, const std::string& name) {
  HUTCH_TRY_VOID(storeOf(caller).remove(name));
  report(caller, "removed", "remove", name);
  return ok();
}

void SecretService::report(const Principal& caller, const std::string& done,
                           const std::string& verb, const std::string& name) {
  const std::string owner = caller.owner().id;
  if (events_) {
    events_->publish("secret." + done, {.owner_id = owner},
                     json{{"name", name}, {"actor", observe::actorJson(caller.actor())}});
  }
  if (!audit_) return;
  auto written = audit_->append({.type = "secret." + verb,
                                 .actor = caller.actor(),
                                 .owner_id = owner,
                                 .data = json{{"name", name}}});
  if (!written) {
    spdlog::error("audit: secret.{} of {} not recorded: {}", verb, name,
                  written.error().describe());
  }
}

}  // namespace hutch::api
