// Routes for a box's network (docs/api.md): its egress policy and its policy log. Thin: decode,
// call, map errors. The owners' secrets are secret_handlers.cc.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "api/handlers.h"
#include "api/json_model.h"
#include "box/network_service.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

const std::string& param(const RequestContext& ctx, const char* name) {
  return ctx.params.find(name)->second;
}

json policyJson(const box::Box& b) {
  json policy = json::parse(b.network_policy.empty() ? "{}" : b.network_policy, nullptr, false);
  return json{{"id", b.id}, {"name", b.name}, {"policy", policy}};
}

// GET /v1/boxes/{box}/policy
awaitable<Reply> getPolicy(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, policyJson(*b));
}

// PUT /v1/boxes/{box}/policy {"policy": "allow-all" | {...}}: live for a running box.
awaitable<Reply> setPolicy(box::BoxService& service, RequestContext& ctx) {
  auto body = parseObject(ctx.request.body());
  if (!body) co_return errorResponse(body.error());
  if (auto unknown = rejectUnknownFields(*body, {"policy"}, "a policy request"); !unknown) {
    co_return errorResponse(unknown.error());
  }
  std::string text;
  if (body->contains("policy") && (*body)["policy"].is_string()) {
    text = (*body)["policy"].get<std::string>();
  } else if (body->contains("policy") && (*body)["policy"].is_object()) {
    text = (*body)["policy"].dump();
  } else {
    co_return errorResponse(
        Error(Errc::kInvalidArgument,
              "Give \"policy\": a preset name (none, allow-all, "
              "debian-mirrors, npm, pypi) or a policy object (docs/network.md)"));
  }
  auto b = service.setPolicy(param(ctx, "box"), text, ctx.principal.actor());
  if (!b) co_return errorResponse(b.error());
  co_return jsonResponse(http::status::ok, policyJson(*b));
}

Result<uint64_t> numberParam(const RequestContext& ctx, const char* name, uint64_t fallback) {
  auto it = ctx.query.find(name);
  if (it == ctx.query.end()) return fallback;
  uint64_t value = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return fail(Errc::kInvalidArgument, fmt::format("{}={} is not a number", name, text));
  }
  return value;
}

// GET /v1/boxes/{box}/policy/log?after=N&limit=M: {"entries": [...], "next": N}
awaitable<Reply> policyLog(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(param(ctx, "box"));
  if (!b) co_return errorResponse(b.error());
  if (!service.network()) {
    co_return errorResponse(Error(Errc::kUnsupported, "This hutchd runs without networking"));
  }
  auto after = numberParam(ctx, "after", 0);
  auto limit = numberParam(ctx, "limit", 1000);
  if (!after || !limit) co_return errorResponse(!after ? after.error() : limit.error());
  auto page = service.network()->log(b->id, *after, std::min<uint64_t>(*limit, 10000));
  if (!page) co_return errorResponse(page.error());
  co_return jsonResponse(http::status::ok, json{{"entries", page->entries}, {"next", page->next}});
}

}  // namespace

void addBoxEnvironment(const box::Box& box, proto::ExecRequest& request) {
  std::vector<std::string> entries = box::NetworkService::environment(box);
  for (const auto& [name, value] : box.env) entries.push_back(name + "=" + value);
  for (const std::string& entry : entries) {
    std::string key = entry.substr(0, entry.find('=') + 1);
    bool set = std::any_of(request.env.begin(), request.env.end(),
                           [&](const std::string& e) { return e.starts_with(key); });
    if (!set) request.env.push_back(entry);
  }
}

void registerNetworkRoutes(ApiRouter& router, box::BoxService& service) {
  using http::verb;
  auto withService = [&service](auto f) {
    return [f, &service](RequestContext& ctx) { return f(service, ctx); };
  };
  router.add(verb::get, "/v1/boxes/{box}/policy", withService(getPolicy));
  router.add(verb::put, "/v1/boxes/{box}/policy", withService(setPolicy));
  router.add(verb::get, "/v1/boxes/{box}/policy/log", withService(policyLog));
}

}  // namespace hutch::api
