// API keys (docs/api.md "Keys"): admin only. A new key's secret is answered once and never
// again; removing a key closes its connections at once.
#include <fmt/format.h>

#include "api/handlers.h"
#include "api/json_model.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

json keyJson(const storage::ApiKey& k) {
  return json{{"name", k.name},
              {"id", k.id},
              {"admin", k.admin},
              {"max_boxes", k.quota.max_boxes},
              {"max_cpus", k.quota.max_cpus},
              {"max_memory_mib", k.quota.max_memory_mib},
              {"max_disk_mib", k.quota.max_disk_mib},
              {"created_at", k.created_at},
              {"last_used_at", k.last_used_at}};
}

Result<NewKey> parseNewKey(std::string_view body) {
  constexpr std::string_view kWhat = "the key request";
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(
      j, {"name", "admin", "max_boxes", "max_cpus", "max_memory_mib", "max_disk_mib"}, kWhat));
  NewKey key;
  if (!j.contains("name")) {
    return fail(Errc::kInvalidArgument, "A key needs a 'name' (1-63 of a-z, A-Z, 0-9, _ . -)");
  }
  HUTCH_TRY_VOID(readField(j, "name", key.name, kWhat));
  HUTCH_TRY_VOID(readField(j, "admin", key.admin, kWhat));
  struct Limit {
    const char* field;
    uint64_t& out;
  };
  for (Limit limit :
       {Limit{"max_boxes", key.quota.max_boxes}, Limit{"max_cpus", key.quota.max_cpus},
        Limit{"max_memory_mib", key.quota.max_memory_mib},
        Limit{"max_disk_mib", key.quota.max_disk_mib}}) {
    int64_t value = 0;
    HUTCH_TRY_VOID(readField(j, limit.field, value, kWhat));
    if (value < 0) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("{} must be 0 (no limit) or more, not {}", limit.field, value));
    }
    limit.out = static_cast<uint64_t>(value);
  }
  HUTCH_TRY_VOID(box::validateName(key.name));
  return key;
}

}  // namespace

void registerKeyRoutes(ApiRouter& router, KeyService& keys,
                       const std::function<void(const std::string&)>& revoked) {
  using http::verb;
  const RouteOptions admin{.access = Access::kAdmin};
  router.add(verb::post, "/v1/keys",
             Route(
                 [&keys](RequestContext& ctx) -> awaitable<Reply> {
                   auto spec = parseNewKey(ctx.request.body());
                   if (!spec) co_return errorResponse(spec.error());
                   auto made = keys.create(*spec, ctx.principal.actor());
                   if (!made) co_return errorResponse(made.error());
                   json body = keyJson(made->key);
                   body["key"] = made->secret;
                   co_return jsonResponse(http::status::created, body);
                 },
                 admin));
  router.add(verb::get, "/v1/keys",
             Route(
                 [&keys](RequestContext&) -> awaitable<Reply> {
                   auto all = keys.list();
                   if (!all) co_return errorResponse(all.error());
                   json items = json::array();
                   for (const auto& k : *all) items.push_back(keyJson(k));
                   co_return jsonResponse(http::status::ok, json{{"keys", items}});
                 },
                 admin));
  router.add(verb::delete_, "/v1/keys/{name}",
             Route(
                 [&keys, revoked](RequestContext& ctx) -> awaitable<Reply> {
                   const std::string& name = ctx.params.find("name")->second;
                   auto removed = keys.remove(name, ctx.principal.actor());
                   if (!removed) co_return errorResponse(removed.error());
                   if (revoked) revoked(removed->id);
                   co_return jsonResponse(http::status::ok, json{{"removed", name}});
                 },
                 admin));
}

}  // namespace hutch::api
