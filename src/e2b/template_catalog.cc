// E2B's template builder, what was built (template_build_internal.h): Template.exists' alias
// check, tags (Template.assignTags, removeTags, getTags), publishing (`e2b template publish`),
// listing and deletion.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fmt/format.h>

#include <algorithm>

#include "e2b/template_build_internal.h"

namespace hutch::e2b {

using asio::awaitable;
using Build = Impl::Build;

namespace {

json templateJson(const E2bTemplate& t, std::string_view build_status) {
  std::string build_id;
  if (auto it = t.tags.find(std::string(kDefaultTag)); it != t.tags.end()) {
    build_id = it->second.build_id;
  } else if (!t.tags.empty()) {
    build_id = t.tags.begin()->second.build_id;
  }
  return {{"templateID", t.id},
          {"buildID", build_id},
          {"cpuCount", t.cpus},
          {"memoryMB", t.memory_mib},
          {"diskSizeMB", 0},
          {"public", t.is_public},
          {"aliases", json::array({t.name})},
          {"names", json::array({t.name})},
          {"createdAt", rfc3339(t.created_at)},
          {"updatedAt", rfc3339(t.updated_at)},
          {"createdBy", nullptr},
          {"lastSpawnedAt", nullptr},
          {"spawnCount", 0},
          {"buildCount", t.build_count},
          {"envdVersion", std::string(kEnvdVersion)},
          {"buildStatus", build_status}};
}

Result<std::vector<std::string>> tagList(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->empty()) {
    return fail(Errc::kInvalidArgument, fmt::format("{} must be a list of tags", key));
  }
  std::vector<std::string> out;
  for (const json& t : *it) {
    if (!t.is_string()) return fail(Errc::kInvalidArgument, fmt::format("{} must be strings", key));
    HUTCH_TRY_VOID(validateTag(t.get<std::string>()));
    out.push_back(t.get<std::string>());
  }
  return out;
}

}  // namespace

// GET /templates/aliases/{alias}
awaitable<Reply> aliasInfo(Impl& s, Ctx& ctx) {
  std::string alias = ctx.params.find("alias")->second;
  alias = alias.substr(0, alias.find(':'));
  if (auto t = s.registry.byName(alias)) {
    if (!Impl::visible(ctx.principal, *t)) co_return controlError(Impl::notYours(alias));
    co_return jsonReply(http::status::ok, {{"templateID", t->id}, {"public", t->is_public}});
  }
  // hutchd's own templates (and --e2b-template's names) are everyone's.
  if (s.mapped.contains(alias) || s.templates.find(alias)) {
    co_return jsonReply(http::status::ok, {{"templateID", alias}, {"public", true}});
  }
  co_return controlError(Error(Errc::kNotFound, fmt::format("No template '{}'", alias)));
}

// POST /templates/tags {target: "name:tag", tags: [...]}
awaitable<Reply> assignTags(Impl& s, Ctx& ctx) {
  auto body = parseMessage(ctx.request.body());
  if (!body) co_return controlError(body.error());
  auto tags = tagList(*body, "tags");
  if (!tags) co_return controlError(tags.error());
  auto target = parseTemplateRef(body->value("target", ""));
  if (!target) co_return controlError(target.error());
  auto t = s.mine(ctx.principal, target->name);
  if (!t) co_return controlError(t.error());
  auto from = t->tags.find(target->tag);
  if (from == t->tags.end()) {
    co_return controlError(Error(
        Errc::kNotFound, fmt::format("Template {} has no tag '{}'", target->name, target->tag)));
  }
  const E2bTemplate::Tag source = from->second;
  for (const std::string& tag : *tags) {
    E2bTemplate::Tag& assigned = t->tags[tag];
    assigned = source;
    assigned.created_at = box::unixNow();
  }
  t->updated_at = box::unixNow();
  if (auto put = s.registry.put(*t); !put) co_return controlError(put.error());
  s.sweep(t->id, *t);
  co_return jsonReply(http::status::created, {{"buildID", source.build_id}, {"tags", *tags}});
}

// DELETE /templates/tags {name, tags: [...]}
awaitable<Reply> removeTags(Impl& s, Ctx& ctx) {
  auto body = parseMessage(ctx.request.body());
  if (!body) co_return controlError(body.error());
  auto tags = tagList(*body, "tags");
  if (!tags) co_return controlError(tags.error());
  std::string name = body->value("name", "");
  name = name.substr(0, name.find(':'));
  auto t = s.mine(ctx.principal, name);
  if (!t) co_return controlError(t.error());
  for (const std::string& tag : *tags) {
    if (!t->tags.erase(tag)) {
      co_return controlError(
          Error(Errc::kNotFound, fmt::format("Template {} has no tag '{}'", name, tag)));
    }
  }
  t->updated_at = box::unixNow();
  if (auto put = s.registry.put(*t); !put) co_return controlError(put.error());
  s.sweep(t->id, *t);
  co_return noContent();
}

// GET /templates/{templateID}/tags
awaitable<Reply> listTags(Impl& s, Ctx& ctx) {
  auto t = s.mine(ctx.principal, ctx.params.find("templateID")->second);
  if (!t) co_return controlError(t.error());
  json out = json::array();
  for (const auto& [tag, v] : t->tags) {
    out.push_back({{"tag", tag}, {"buildID", v.build_id}, {"createdAt", rfc3339(v.created_at)}});
  }
  co_return jsonReply(http::status::ok, out);
}

// GET /templates, /v2/templates
awaitable<Reply> listTemplates(Impl& s, Ctx& ctx) {
  json out = json::array();
  for (const E2bTemplate& t : s.registry.all()) {
    if (Impl::visible(ctx.principal, t)) out.push_back(templateJson(t, s.lastStatus(t.id)));
  }
  co_return jsonReply(http::status::ok, out);
}

// GET /templates/{templateID}
awaitable<Reply> getTemplate(Impl& s, Ctx& ctx) {
  auto t = s.mine(ctx.principal, ctx.params.find("templateID")->second);
  if (!t) co_return controlError(t.error());
  json builds = json::array();
  for (const std::string& id : s.order) {
    auto it = s.builds.find(id);
    if (it == s.builds.end() || it->second->template_id != t->id) continue;
    const Build& b = *it->second;
    builds.push_back({{"buildID", b.id},
                      {"status", b.status},
                      {"createdAt", rfc3339(b.created_at)},
                      {"updatedAt", rfc3339(b.updated_at)},
                      {"cpuCount", b.cpus},
                      {"memoryMB", b.memory_mib}});
  }
  json j = templateJson(*t, s.lastStatus(t->id));
  j["builds"] = builds;
  co_return jsonReply(http::status::ok, j);
}

// PATCH /v2/templates/{templateID} and /templates/{templateID} {public?}: a published template
// is every key's to start sandboxes of and to build from (by its name); only its owner (or an
// admin) lists, builds, tags, publishes or deletes it. An empty body changes nothing, as E2B.
awaitable<Reply> updateTemplate(Impl& s, bool v2, Ctx& ctx) {
  json body = json::object();
  if (!ctx.request.body().empty()) {
    auto parsed = parseMessage(ctx.request.body());
    if (!parsed) co_return controlError(parsed.error());
    body = std::move(*parsed);
  }
  auto t = s.mine(ctx.principal, ctx.params.find("templateID")->second);
  if (!t) co_return controlError(t.error());
  if (auto it = body.find("public"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      co_return controlError(Error(Errc::kInvalidArgument, "public must be true or false"));
    }
    t->is_public = it->get<bool>();
    t->updated_at = box::unixNow();
    if (auto put = s.registry.put(*t); !put) co_return controlError(put.error());
  }
  if (!v2) co_return jsonReply(http::status::ok, nullptr);
  co_return jsonReply(http::status::ok, {{"names", json::array({t->name})}});
}

// DELETE /templates/{templateID}: the template, its tags and the hutch templates they name.
awaitable<Reply> deleteTemplate(Impl& s, const api::Route& otherwise, Ctx& ctx) {
  const std::string id = ctx.params.find("templateID")->second;
  auto t = s.registry.find(id);
  if (!t) {
    ctx.params["snapshot"] = id;
    co_return co_await otherwise.handler(ctx);
  }
  if (!Impl::visible(ctx.principal, *t)) co_return controlError(Impl::notYours(id));
  for (const std::string& name : t->hutchTemplates()) {
    if (!s.templates.find(name)) continue;
    auto removed = s.templates.remove(name);
    if (!removed) {
      co_return controlError(
          removed.error().withContext(fmt::format("Template {} is not deleted", t->name)));
    }
  }
  if (auto gone = s.registry.remove(t->id); !gone) co_return controlError(gone.error());
  s.sweep(t->id, std::nullopt);
  co_return noContent();
}

}  // namespace hutch::e2b
