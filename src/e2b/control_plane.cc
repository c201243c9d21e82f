// E2B's control plane: sandboxes created, listed, connected to, paused, forked, timed out and
// killed, as hutch boxes of the caller's key.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "api/handlers.h"
#include "e2b/facade_internal.h"

namespace hutch::e2b {

using api::RequestContext;
using api::Response;
using asio::awaitable;

namespace {

// ---- control plane ----

uint64_t diskMib(const box::Box& b) {
  if (b.config.disk_mib != 0) return b.config.disk_mib;
  std::error_code ec;
  auto size = std::filesystem::file_size(std::filesystem::path(b.image_dir) / "rootfs.img", ec);
  return ec ? 0 : size >> 20;
}

// network.allowOut / denyOut as hutch's egress policy (docs/e2b.md): domains only; denying
// 0.0.0.0/0 means "nothing but allowOut".
Result<std::string> policyFor(const NewSandbox& spec) {
  if (!spec.allow_internet_access && spec.allow_out.empty()) return std::string("none");
  if (spec.allow_out.empty() && spec.deny_out.empty()) return std::string();
  json allow = json::array();
  json deny = json::array();
  bool deny_all = !spec.allow_internet_access;
  auto isNetwork = [](const std::string& s) {
    return s.find('/') != std::string::npos ||
           s.find_first_not_of("0123456789.:") == std::string::npos;
  };
  for (const auto& d : spec.deny_out) {
    if (d == "0.0.0.0/0" || d == "::/0") {
      deny_all = true;
    } else if (isNetwork(d)) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("denyOut '{}': hutch's egress rules name domains; of address "
                              "ranges only 0.0.0.0/0 (everything) is understood",
                              d));
    } else {
      deny.push_back({{"domain", d}});
    }
  }
  for (const auto& a : spec.allow_out) {
    if (isNetwork(a)) {
      return fail(Errc::kInvalidArgument,
                  fmt::format("allowOut '{}': hutch's egress rules name domains, not addresses "
                              "(see docs/network.md)",
                              a));
    }
    allow.push_back({{"domain", a}});
  }
  if (!deny_all) allow.push_back({{"domain", "*"}});
  return json{{"allow", allow}, {"deny", deny}}.dump();
}
// A sandbox from a snapshot: the saved box's processes and files, with this request's
// metadata, environment variables and timeout (its network is the snapshot's).
awaitable<Reply> createFromSnapshot(box::BoxService& service, const FacadeOptions& options,
                                    RequestContext& ctx, const NewSandbox& spec,
                                    const box::Snapshot& saved) {
  box::BoxSpec box_spec;
  box_spec.env = spec.env;
  box_spec.metadata = spec.metadata;
  box_spec.metadata[std::string(kTemplateMetadataKey)] = spec.template_id;
  box_spec.owner = ctx.principal.owner();
  if (spec.timeout_s > 0) {
    box_spec.expires_at = box::unixNow() + spec.timeout_s;
    box_spec.on_expiry = spec.auto_pause ? box::Expiry::kSuspend : box::Expiry::kRemove;
  }
  auto created = co_await service.createFromSaved(saved, std::move(box_spec));
  if (!created) co_return controlError(created.error());
  co_return jsonReply(http::status::created, sandboxJson(*created, spec.template_id,
                                                         accessToken(options.secret, created->id)));
}

}  // namespace

awaitable<Reply> createSandbox(box::BoxService& service, const FacadeOptions& options,
                               RequestContext& ctx) {
  auto spec = parseNewSandbox(ctx.request.body());
  if (!spec) co_return controlError(spec.error());
  // A snapshot's id or name (Sandbox.create(snapshotId)) before a template's.
  auto saved = service.findSaved(api::ownerFilter(ctx.principal), spec->template_id);
  if (saved) co_return co_await createFromSnapshot(service, options, ctx, *spec, *saved);
  box::BoxSpec box_spec;
  box_spec.config.template_name = mapTemplate(options.templates, spec->template_id);
  box_spec.env = spec->env;
  box_spec.metadata = spec->metadata;
  box_spec.metadata[std::string(kTemplateMetadataKey)] = spec->template_id;
  box_spec.owner = ctx.principal.owner();
  if (spec->timeout_s > 0) {
    box_spec.expires_at = box::unixNow() + spec->timeout_s;
    box_spec.on_expiry = spec->auto_pause ? box::Expiry::kSuspend : box::Expiry::kRemove;
  }
  auto policy = policyFor(*spec);
  if (!policy) co_return controlError(policy.error());
  box_spec.network_policy = *policy;
  auto created = co_await service.create(std::move(box_spec));
  if (!created) co_return controlError(created.error());
  co_return jsonReply(http::status::created, sandboxJson(*created, spec->template_id,
                                                         accessToken(options.secret, created->id)));
}

awaitable<Reply> getSandbox(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  co_return jsonReply(http::status::ok, sandboxDetailJson(*b, templateIdOf(*b), diskMib(*b)));
}
namespace {

// ?metadata=k1%3Dv1%26k2%3Dv2 (one URL-encoded query string), E2B's list filter.
std::map<std::string, std::string> metadataFilter(const api::PathParams& query) {
  std::map<std::string, std::string> out;
  auto it = query.find("metadata");
  if (it == query.end() || it->second.empty()) return out;
  for (const auto& [k, v] : api::parseQuery(it->second)) out[k] = v;
  return out;
}
}  // namespace

awaitable<Reply> listSandboxes(box::BoxService& service, RequestContext& ctx) {
  auto boxes = service.list(api::ownerFilter(ctx.principal));
  if (!boxes) co_return controlError(boxes.error());
  auto filter = metadataFilter(ctx.query);
  std::vector<std::string> states;
  if (auto s = ctx.query.find("state"); s != ctx.query.end() && !s->second.empty()) {
    std::string list = s->second;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      if (comma > start) states.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  size_t limit = 1000;
  if (auto l = ctx.query.find("limit"); l != ctx.query.end() && !l->second.empty()) {
    try {
      limit = std::clamp<size_t>(std::stoul(l->second), 1, 1000);
    } catch (const std::exception&) {
      co_return controlError(Error(Errc::kInvalidArgument, "limit must be a number 1-1000"));
    }
  }
  std::string after;
  if (auto t = ctx.query.find("nextToken"); t != ctx.query.end()) after = t->second;
  std::sort(boxes->begin(), boxes->end(),
            [](const box::Box& a, const box::Box& b) { return a.id < b.id; });
  json items = json::array();
  std::string next;
  for (const auto& b : *boxes) {
    if (!after.empty() && b.id <= after) continue;
    bool match = true;
    for (const auto& [k, v] : filter) {
      auto m = b.metadata.find(k);
      if (m == b.metadata.end() || m->second != v) match = false;
    }
    if (!states.empty() &&
        std::find(states.begin(), states.end(), sandboxState(b)) == states.end()) {
      match = false;
    }
    if (!match) continue;
    if (items.size() == limit) {
      next = items.back()["sandboxID"].get<std::string>();
      break;
    }
    items.push_back(sandboxDetailJson(b, templateIdOf(b), diskMib(b)));
  }
  Response res = jsonReply(http::status::ok, items);
  if (!next.empty()) res.set("X-Next-Token", next);
  co_return res;
}

awaitable<Reply> killSandbox(box::BoxService& service, RequestContext& ctx) {
  auto removed = co_await service.remove(boxOf(ctx), true);
  if (!removed) co_return controlError(removed.error());
  co_return noContent();
}

awaitable<Reply> setSandboxTimeout(box::BoxService& service, RequestContext& ctx) {
  auto timeout = parseTimeoutBody(ctx.request.body(), true);
  if (!timeout) co_return controlError(timeout.error());
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  box::Expiry action = b->on_expiry == box::Expiry::kNone ? box::Expiry::kRemove : b->on_expiry;
  auto set = service.setLifetime(b->id, **timeout == 0 ? 0 : box::unixNow() + **timeout, action);
  if (!set) co_return controlError(set.error());
  co_return noContent();
}

awaitable<Reply> connectSandbox(box::BoxService& service, const FacadeOptions& options,
                                RequestContext& ctx) {
  auto timeout = parseTimeoutBody(ctx.request.body(), false);
  if (!timeout) co_return controlError(timeout.error());
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  http::status status = http::status::ok;
  if (b->state == box::BoxState::kStopped || b->state == box::BoxState::kFailed ||
      b->state == box::BoxState::kSuspended) {
    auto started = co_await service.start(b->id);
    if (!started) co_return controlError(started.error());
    b = std::move(started);
    status = http::status::created;
  }
  if (*timeout) {
    box::Expiry action = b->on_expiry == box::Expiry::kNone ? box::Expiry::kRemove : b->on_expiry;
    auto set = service.setLifetime(b->id, box::unixNow() + **timeout, action);
    if (!set) co_return controlError(set.error());
  }
  co_return jsonReply(status,
                      sandboxJson(*b, templateIdOf(*b), accessToken(options.secret, b->id)));
}

awaitable<Reply> pauseSandbox(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  if (b->state != box::BoxState::kRunning && b->state != box::BoxState::kPaused) {
    co_return controlError(
        Error(Errc::kAlreadyExists, fmt::format("The sandbox {} is already paused", b->id)));
  }
  // E2B's pause keeps memory and processes: hutch's suspend.
  auto stopped = co_await service.suspend(b->id);
  if (!stopped) co_return controlError(stopped.error());
  co_return noContent();
}

awaitable<Reply> sandboxMetrics(box::BoxService& service, RequestContext& ctx) {
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  json samples = json::array();
  if (auto usage = service.usage(b->id); usage) {
    samples.push_back({{"timestamp", rfc3339(box::unixNow())},
                       {"timestampUnix", box::unixNow()},
                       {"cpuCount", b->config.cpus},
                       {"cpuUsedPct", 0.0},
                       {"memUsed", usage->memory_bytes},
                       {"memTotal", b->config.memory_mib << 20},
                       {"diskUsed", 0},
                       {"diskTotal", diskMib(*b) << 20}});
  }
  co_return jsonReply(http::status::ok, samples);
}

awaitable<Reply> forkSandbox(box::BoxService& service, const FacadeOptions& options,
                             RequestContext& ctx) {
  auto message = parseMessage(ctx.request.body());
  if (!message) co_return controlError(message.error());
  int64_t count = message->value("count", 1);
  if (count < 1 || count > 16) {
    co_return controlError(Error(Errc::kInvalidArgument, "count must be 1-16"));
  }
  box::ForkSpec spec{.count = static_cast<unsigned>(count)};
  auto children = co_await service.fork(boxOf(ctx), std::move(spec));
  if (!children) co_return controlError(children.error());
  json out = json::array();
  for (const auto& child : *children) {
    out.push_back({{"sandbox", sandboxJson(child, templateIdOf(child),
                                           accessToken(options.secret, child.id))}});
  }
  co_return jsonReply(http::status::created, out);
}

namespace {

// ---- snapshots ----

json snapshotJson(const box::Snapshot& s) {
  return {{"snapshotID", s.id}, {"names", json::array({s.name})}};
}

}  // namespace

// POST /sandboxes/{id}/snapshots {name?, memory?}: the box saved with its memory (BoxService::
// save); it runs on. `memory: false` (a filesystem-only snapshot) is served as a full one.
awaitable<Reply> createSnapshot(box::BoxService& service, RequestContext& ctx) {
  std::string name;
  if (!ctx.request.body().empty()) {
    auto message = parseMessage(ctx.request.body());
    if (!message) co_return controlError(message.error());
    if (auto n = message->find("name"); n != message->end() && !n->is_null()) {
      if (!n->is_string()) {
        co_return controlError(Error(Errc::kInvalidArgument, "name must be a string"));
      }
      name = n->get<std::string>();
    }
  }
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  if (b->state != box::BoxState::kRunning && b->state != box::BoxState::kPaused) {
    co_return controlError(Error(
        Errc::kFailedPrecondition,
        fmt::format("The sandbox {} is not running; connect to it (resume) before snapshotting",
                    b->id)));
  }
  auto saved = co_await service.save(b->id, std::move(name));
  if (!saved) co_return controlError(saved.error());
  co_return jsonReply(http::status::created, snapshotJson(*saved));
}

// GET /snapshots?sandboxID=&name=&limit=&nextToken=: the caller's snapshots, oldest first.
awaitable<Reply> listSnapshots(box::BoxService& service, RequestContext& ctx) {
  auto all = service.saved(api::ownerFilter(ctx.principal));
  if (!all) co_return controlError(all.error());
  auto query = [&](const char* key) {
    auto it = ctx.query.find(key);
    return it == ctx.query.end() ? std::string() : it->second;
  };
  const std::string sandbox = query("sandboxID");
  const std::string name = query("name");
  const std::string after = query("nextToken");
  size_t limit = 1000;
  if (std::string l = query("limit"); !l.empty()) {
    try {
      limit = std::clamp<size_t>(std::stoul(l), 1, 1000);
    } catch (const std::exception&) {
      co_return controlError(Error(Errc::kInvalidArgument, "limit must be a number 1-1000"));
    }
  }
  json items = json::array();
  std::string next;
  bool past = after.empty();
  for (const auto& s : *all) {
    if (!past) {
      past = s.id == after;
      continue;
    }
    if ((!sandbox.empty() && s.box_id != sandbox) || (!name.empty() && s.name != name)) continue;
    if (items.size() == limit) {
      next = items.back()["snapshotID"].get<std::string>();
      break;
    }
    items.push_back(snapshotJson(s));
  }
  Response res = jsonReply(http::status::ok, items);
  if (!next.empty()) res.set("X-Next-Token", next);
  co_return res;
}

// DELETE /templates/{id}: E2B deletes a snapshot this way. Only the caller's snapshots; hutch's
// templates are not E2B's to delete (404).
awaitable<Reply> deleteSnapshot(box::BoxService& service, RequestContext& ctx) {
  const std::string& id = ctx.params.find("snapshot")->second;
  auto saved = service.findSaved(api::ownerFilter(ctx.principal), id);
  if (!saved) co_return controlError(saved.error());
  auto removed = service.removeSaved(*saved);
  if (!removed) co_return controlError(removed.error());
  co_return noContent();
}

}  // namespace hutch::e2b
