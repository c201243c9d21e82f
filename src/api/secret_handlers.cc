// The caller's host secrets (docs/api.md "Network"): GET /v1/secrets, PUT and DELETE
// /v1/secrets/{name}. Thin: decode, call SecretService (which scopes, validates and reports),
// map errors. Secret values go in, never out.
#include "api/handlers.h"
#include "api/json_model.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

const std::string& nameParam(const RequestContext& ctx) {
  return ctx.params.find("name")->second;
}

// {"value", "domains", "header"?, "format"?} and the name from the path.
Result<net::Secret> parseSecret(std::string_view body, const std::string& name) {
  constexpr std::string_view kWhat = "a secret";
  HUTCH_TRY(json j, parseObject(body));
  HUTCH_TRY_VOID(rejectUnknownFields(j, {"value", "domains", "header", "format"}, kWhat));
  net::Secret secret;
  secret.name = name;
  HUTCH_TRY_VOID(readField(j, "value", secret.value, kWhat));
  HUTCH_TRY_VOID(readField(j, "domains", secret.domains, kWhat));
  HUTCH_TRY_VOID(readField(j, "header", secret.header, kWhat));
  HUTCH_TRY_VOID(readField(j, "format", secret.format, kWhat));
  return secret;
}

// GET /v1/secrets
awaitable<Reply> listSecrets(SecretService& secrets, RequestContext& ctx) {
  auto all = secrets.list(ctx.principal);
  if (!all) co_return errorResponse(all.error());
  json items = json::array();
  for (const auto& s : *all) items.push_back(net::describeSecret(s));
  co_return jsonResponse(http::status::ok, json{{"secrets", items}});
}

// PUT /v1/secrets/{name}: the secret as stored, without its value.
awaitable<Reply> putSecret(SecretService& secrets, RequestContext& ctx) {
  auto secret = parseSecret(ctx.request.body(), nameParam(ctx));
  if (!secret) co_return errorResponse(secret.error());
  auto stored = secrets.put(ctx.principal, *secret);
  if (!stored) co_return errorResponse(stored.error());
  co_return jsonResponse(http::status::ok, net::describeSecret(stored->secret));
}

// DELETE /v1/secrets/{name}
awaitable<Reply> removeSecret(SecretService& secrets, RequestContext& ctx) {
  if (auto removed = secrets.remove(ctx.principal, nameParam(ctx)); !removed) {
    co_return errorResponse(removed.error());
  }
  co_return jsonResponse(http::status::ok, json{{"removed", nameParam(ctx)}});
}

}  // namespace

void registerSecretRoutes(ApiRouter& router, SecretService& secrets) {
  using http::verb;
  auto withSecrets = [&secrets](auto f) {
    return [f, &secrets](RequestContext& ctx) { return f(secrets, ctx); };
  };
  router.add(verb::get, "/v1/secrets", withSecrets(listSecrets));
  router.add(verb::put, "/v1/secrets/{name}", withSecrets(putSecret));
  router.add(verb::delete_, "/v1/secrets/{name}", withSecrets(removeSecret));
}

}  // namespace hutch::api
