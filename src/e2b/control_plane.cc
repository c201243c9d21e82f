// E2B's control plane: sandboxes created, listed, connected to, paused, forked, timed out and
// killed, as hutch boxes of the caller's key.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "api/handlers.h"
#include "e2b/control_model.h"
#include "e2b/facade_internal.h"
#include "e2b/template_build.h"

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

// The box's egress policy for a sandbox's network request (egressPolicy). A hutchd without
// networking (--no-network) gives boxes none: a request that asks for nothing gets nothing.
Result<std::string> policyText(box::BoxService& service, const FacadeOptions& options,
                               const NetworkRequest& network) {
  if (service.network() == nullptr && network.allow_out.empty() && network.deny_out.empty() &&
      network.allow_internet_access.value_or(true)) {
    return std::string();
  }
  return egressPolicy(network, options.network_policy);
}

int64_t unixNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the façade keeps with a box it makes: the E2B template id, when it was made (to the
// nanosecond, for Sandbox.list's order), and autoPause.
void keepSandboxMetadata(box::BoxMetadata& metadata, const NewSandbox& spec) {
  metadata[std::string(kTemplateMetadataKey)] = spec.template_id;
  metadata[std::string(kCreatedMetadataKey)] = std::to_string(unixNanos());
  if (spec.auto_pause) metadata[std::string(kAutoPauseMetadataKey)] = "true";
}

// A sandbox from a snapshot: the saved box's processes and files, with this request's
// metadata, environment variables and timeout (its network is the snapshot's).
awaitable<Reply> createFromSnapshot(box::BoxService& service, const FacadeOptions& options,
                                    RequestContext& ctx, const NewSandbox& spec,
                                    const box::Snapshot& saved) {
  box::BoxSpec box_spec;
  box_spec.env = spec.env;
  box_spec.metadata = spec.metadata;
  keepSandboxMetadata(box_spec.metadata, spec);
  // The saved sandbox's default user and working directory (its template's) stay.
  if (auto source = box::savedSource(saved)) {
    for (std::string_view key : {kUserMetadataKey, kWorkdirMetadataKey}) {
      auto it = source->metadata.find(std::string(key));
      if (it != source->metadata.end()) box_spec.metadata[it->first] = it->second;
    }
  }
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
                               const TemplateBuilds* builds, RequestContext& ctx) {
  auto spec = parseNewSandbox(ctx.request.body());
  if (!spec) co_return controlError(spec.error());
  // A snapshot's id or name (Sandbox.create(snapshotId)) before a template's.
  auto saved = service.findSaved(api::ownerFilter(ctx.principal), spec->template_id);
  if (saved) co_return co_await createFromSnapshot(service, options, ctx, *spec, *saved);
  box::BoxSpec box_spec;
  box_spec.config.template_name = mapTemplate(options.templates, spec->template_id);
  // A template E2B's builder made ("name", "name:tag", its id): the hutch template of that tag.
  std::optional<E2bTemplate::Tag> built;
  if (builds != nullptr) {
    auto resolved = builds->resolve(ctx.principal, spec->template_id);
    if (!resolved) co_return controlError(resolved.error());
    built = std::move(*resolved);
    if (built) box_spec.config.template_name = built->hutch_template;
  }
  box_spec.env = spec->env;
  box_spec.owner = ctx.principal.owner();
  if (spec->timeout_s > 0) {
    box_spec.expires_at = box::unixNow() + spec->timeout_s;
    box_spec.on_expiry = spec->auto_pause ? box::Expiry::kSuspend : box::Expiry::kRemove;
  }
  auto policy = policyText(service, options, spec->network);
  if (!policy) co_return controlError(policy.error());
  box_spec.metadata = spec->metadata;
  keepSandboxMetadata(box_spec.metadata, *spec);
  if (built && !built->user.empty()) box_spec.metadata[std::string(kUserMetadataKey)] = built->user;
  if (built && !built->workdir.empty()) {
    box_spec.metadata[std::string(kWorkdirMetadataKey)] = built->workdir;
  }
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

// GET /sandboxes, /v2/sandboxes: the caller's sandboxes, newest first unless order=asc, in
// pages of `limit` (listPage).
awaitable<Reply> listSandboxes(box::BoxService& service, RequestContext& ctx) {
  auto query = parseListQuery(ctx.query, metadataFilter(ctx.query));
  if (!query) co_return controlError(query.error());
  auto boxes = service.list(api::ownerFilter(ctx.principal));
  if (!boxes) co_return controlError(boxes.error());
  ListPage page = listPage(std::move(*boxes), *query);
  json items = json::array();
  for (const auto& b : page.items) {
    items.push_back(sandboxDetailJson(b, templateIdOf(b), diskMib(b)));
  }
  Response res = jsonReply(http::status::ok, items);
  if (!page.next_token.empty()) res.set("X-Next-Token", page.next_token);
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
  // 0 ends the lifetime now: hutchd's next check (within a second) kills or pauses it.
  auto set = service.setLifetime(b->id, timeoutExpiry(box::unixNow(), **timeout), expiryAction(*b));
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
  const bool resume = b->state == box::BoxState::kStopped || b->state == box::BoxState::kFailed ||
                      b->state == box::BoxState::kSuspended;
  if (resume) {
    auto started = co_await service.start(b->id);
    if (!started) co_return controlError(started.error());
    b = std::move(started);
    status = http::status::created;
  }
  // E2B's connect only ever extends a running sandbox's lifetime.
  if (*timeout) {
    const int64_t expires = connectExpiry(b->expires_at, box::unixNow(), **timeout, resume);
    if (expires != b->expires_at) {
      auto set = service.setLifetime(b->id, expires, expiryAction(*b));
      if (!set) co_return controlError(set.error());
    }
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

// GET /sandboxes/{id}/metrics?start=&end= (unix seconds): hutch has one sample, the VM's
// usage now (its cgroup), stamped within the window (metricTime); none for a window that
// misses the sandbox's life. CPU is the average since the VM started; the page cache of the
// guest is not seen from the host (memCache 0), nor what its disk holds (diskUsed 0).
awaitable<Reply> sandboxMetrics(box::BoxService& service, RequestContext& ctx) {
  std::optional<int64_t> window[2];
  const char* names[2] = {"start", "end"};
  for (int i = 0; i < 2; ++i) {
    auto it = ctx.query.find(names[i]);
    if (it == ctx.query.end() || it->second.empty()) continue;
    try {
      size_t used = 0;
      window[i] = std::stoll(it->second, &used);
      if (used != it->second.size()) throw std::invalid_argument(it->second);
    } catch (const std::exception&) {
      co_return controlError(Error(Errc::kInvalidArgument,
                                   fmt::format("{} must be a unix time in seconds", names[i])));
    }
  }
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  json samples = json::array();
  const int64_t now = box::unixNow();
  auto when = metricTime(now, b->created_at, window[0], window[1]);
  auto usage = service.usage(b->id);
  if (when && usage) {
    const double cpus = std::max(1u, b->config.cpus);
    const double seconds = static_cast<double>(std::max<int64_t>(1, now - b->updated_at));
    const double pct = static_cast<double>(usage->cpu_ns) / 1e9 / seconds / cpus * 100.0;
    samples.push_back({{"timestamp", rfc3339(*when)},
                       {"timestampUnix", *when},
                       {"cpuCount", b->config.cpus},
                       {"cpuUsedPct", std::clamp(pct, 0.0, 100.0)},
                       {"memUsed", usage->memory_bytes},
                       {"memTotal", b->config.memory_mib << 20},
                       {"memCache", 0},
                       {"diskUsed", 0},
                       {"diskTotal", diskMib(*b) << 20}});
  }
  co_return jsonReply(http::status::ok, samples);
}

// PUT /sandboxes/{id}/network: the sandbox's egress rules replaced (hutch's live policy change:
// the next connection and DNS question follow it).
awaitable<Reply> updateSandboxNetwork(box::BoxService& service, const FacadeOptions& options,
                                      RequestContext& ctx) {
  auto network = parseNetworkUpdate(ctx.request.body());
  if (!network) co_return controlError(network.error());
  auto b = service.get(boxOf(ctx));
  if (!b) co_return controlError(b.error());
  if (service.network() == nullptr) {
    co_return controlError(Error(Errc::kUnsupported,
                                 "This hutchd runs without networking (--no-network): sandboxes "
                                 "have no network to update"));
  }
  auto policy = egressPolicy(*network, options.network_policy);
  if (!policy) co_return controlError(policy.error());
  auto set = service.setPolicy(b->id, *policy, ctx.principal.actor());
  if (!set) co_return controlError(set.error());
  co_return noContent();
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
