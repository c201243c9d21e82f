// E2B's template builder, its builds (template_build_internal.h): POST /v3/templates, the
// build's start, its status and logs; the routes of all its parts; what a sandbox's template
// name resolves to.

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

#include "api/encoding.h"
#include "e2b/template_build_internal.h"

namespace hutch::e2b {

namespace fs = std::filesystem;
using api::Response;
using asio::awaitable;
using Build = Impl::Build;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The path segment of an owner: the key's id, "host" for the host administrator.
std::string ownerSegment(const std::string& owner_id) {
  return owner_id.empty() ? "host" : owner_id;
}

namespace {

// E2B's build ids are UUIDs.
std::string newBuildId() {
  unsigned char b[16];
  if (getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
    std::string r = box::randomId() + box::randomId() + box::randomId();
    return fmt::format("{}-{}-{}-{}-{}", r.substr(0, 8), r.substr(8, 4), r.substr(12, 4),
                       r.substr(16, 4), r.substr(20, 12));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  const std::string h = api::hexEncode(b, sizeof b);
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4),
                     h.substr(16, 4), h.substr(20, 12));
}

}  // namespace

void Impl::Build::log(int step, std::string message, std::string level) {
  engine_step = step;
  if (lines.size() > kMaxLogLines) return;
  if (lines.size() == kMaxLogLines) {
    message = "(the log is longer than hutch keeps: the rest is left out)";
    level = "warn";
  }
  lines.push_back({nowMs(), std::move(level), std::move(message), stepLabel(step, origin)});
}

Result<E2bTemplate> Impl::mine(const api::Principal& p, const std::string& id) const {
  auto t = registry.find(id);
  if (!t) {
    return fail(Errc::kNotFound,
                fmt::format("No template '{}' built through E2B's template builder", id));
  }
  if (!visible(p, *t)) return fail(notYours(id));
  return *t;
}

Result<std::shared_ptr<Build>> Impl::findBuild(const api::Principal& p,
                                               const std::string& template_id,
                                               const std::string& build_id) const {
  auto it = builds.find(build_id);
  if (it == builds.end() || it->second->template_id != template_id) {
    return fail(Errc::kNotFound,
                fmt::format("No build {} of template {} (hutchd keeps builds in memory: a "
                            "restart forgets them)",
                            build_id, template_id));
  }
  auto t = registry.byId(template_id);
  if (t && !visible(p, *t)) return fail(notYours(t->name));
  return it->second;
}

Result<> Impl::makeRoom() {
  while (builds.size() >= kMaxBuilds) {
    auto victim = std::find_if(order.begin(), order.end(), [&](const std::string& id) {
      auto it = builds.find(id);
      return it == builds.end() || it->second->status != "building";
    });
    if (victim == order.end()) {
      return fail(Errc::kResourceExhausted,
                  fmt::format("{} builds are under way; wait for one to finish", builds.size()));
    }
    builds.erase(*victim);
    order.erase(victim);
  }
  return ok();
}

void Impl::sweep(const std::string& template_id, const std::optional<E2bTemplate>& t) {
  const std::string prefix = "e2b-" + template_id + "-";
  std::vector<std::string> keep = t ? t->hutchTemplates() : std::vector<std::string>{};
  for (const auto& [_, b] : builds) {
    if (b->status == "building" && !b->hutch_template.empty()) keep.push_back(b->hutch_template);
  }
  auto all = templates.list();
  if (!all) return;
  for (const json& j : *all) {
    const std::string name = j.value("name", "");
    if (!name.starts_with(prefix)) continue;
    if (std::find(keep.begin(), keep.end(), name) != keep.end()) continue;
    auto removed = templates.remove(name);
    if (!removed) {
      spdlog::info("e2b: template {} kept for now: {}", name, removed.error().describe());
    }
  }
}

Result<std::optional<E2bTemplate::Tag>> Impl::tagFor(const api::Principal& p,
                                                     const std::string& ref) const {
  std::string name = ref;
  std::string tag(kDefaultTag);
  if (size_t colon = ref.find(':'); colon != std::string::npos) {
    name = ref.substr(0, colon);
    tag = ref.substr(colon + 1);
  }
  auto t = registry.find(name);
  if (!t) return std::optional<E2bTemplate::Tag>();
  if (!usable(p, *t)) return fail(notYours(name));
  auto it = t->tags.find(tag);
  if (it == t->tags.end()) {
    return fail(
        Errc::kNotFound,
        fmt::format("Template {} has no build tagged '{}' (Template.build it first)", name, tag));
  }
  return std::optional<E2bTemplate::Tag>(it->second);
}

std::string Impl::lastStatus(const std::string& template_id) const {
  std::string status = "ready";
  for (const std::string& id : order) {
    auto it = builds.find(id);
    if (it != builds.end() && it->second->template_id == template_id) status = it->second->status;
  }
  return status;
}

namespace {

// POST /v3/templates
awaitable<Reply> requestBuild(Impl& s, Ctx& ctx) {
  auto req = parseNewTemplate(ctx.request.body());
  if (!req) co_return controlError(req.error());
  const std::string& name = req->ref.name;
  auto existing = s.registry.byName(name);
  if (existing && !Impl::visible(ctx.principal, *existing)) {
    co_return controlError(Impl::notYours(name));
  }
  if (!existing && (s.templates.find(name) || s.mapped.contains(name))) {
    co_return controlError(
        Error(Errc::kAlreadyExists,
              fmt::format("'{}' is one of hutchd's own templates; give the template another name",
                          name)));
  }
  if (auto room = s.makeRoom(); !room) co_return controlError(room.error());
  E2bTemplate t;
  if (existing) {
    t = *existing;
  } else {
    t.id = box::randomId() + box::randomId().substr(0, 8);
    t.name = name;
    t.owner_id = ctx.principal.owner().id;
    t.owner_name = ctx.principal.owner().name;
    t.created_at = box::unixNow();
  }
  t.cpus = req->cpus;
  t.memory_mib = req->memory_mib;
  t.updated_at = box::unixNow();
  if (auto put = s.registry.put(t); !put) co_return controlError(put.error());
  auto build = std::make_shared<Build>();
  build->id = newBuildId();
  build->template_id = t.id;
  build->owner_id = t.owner_id;
  build->tags = req->tags;
  build->cpus = req->cpus;
  build->memory_mib = req->memory_mib;
  build->created_at = build->updated_at = box::unixNow();
  s.builds[build->id] = build;
  s.order.push_back(build->id);
  co_return jsonReply(http::status::accepted, {{"templateID", t.id},
                                               {"buildID", build->id},
                                               {"public", t.is_public},
                                               {"names", json::array({name})},
                                               {"aliases", json::array({name})},
                                               {"tags", req->tags}});
}

// The background part of a build.
awaitable<void> runBuild(std::shared_ptr<Impl> s, std::shared_ptr<Build> build, box::BuildPlan plan,
                         std::string name, observe::Actor actor) {
  auto executor = s->executor;
  box::BuildProgress progress = [executor, build](const box::BuildLog& log) {
    // The engine may call from a worker thread (an image pull): the log is the loop's.
    asio::post(executor, [build, log] { build->log(log.step, log.message, log.level); });
  };
  auto made = co_await s->builder.build(name, std::move(plan), actor, progress);
  // Logs posted before this are appended first.
  co_await asio::post(executor, asio::use_awaitable);
  build->updated_at = box::unixNow();
  if (!made) {
    std::string message = made.error().describe();
    const Errc code = made.error().code();
    if (build->engine_step == box::BuildLog::kBaseStep && !build->from_image.empty() &&
        (code == Errc::kPermissionDenied || code == Errc::kUnauthenticated)) {
      // The pull's error speaks of the host's logins; a build may bring its own.
      message +=
          " (or give the build the registry's credentials: fromImage(image, {username, "
          "password}))";
    }
    build->log(build->engine_step, message, "error");
    build->reason =
        LogLine{nowMs(), "error", message, stepLabel(build->engine_step, build->origin)};
    build->status = "error";
    co_return;
  }
  auto t = s->registry.byId(build->template_id);
  if (!t) {
    // Deleted while it was built.
    build->hutch_template.clear();
    s->sweep(build->template_id, std::nullopt);
    build->reason =
        LogLine{nowMs(), "error", "The template was deleted while it was built", "finalize"};
    build->status = "error";
    co_return;
  }
  for (const std::string& tag : build->tags) {
    t->tags[tag] = {build->id, name, box::unixNow(), build->user, build->workdir};
  }
  ++t->build_count;
  t->updated_at = box::unixNow();
  if (auto put = s->registry.put(*t); !put) {
    build->reason = LogLine{nowMs(), "error", put.error().describe(), "finalize"};
    build->status = "error";
    co_return;
  }
  build->status = "ready";
  build->log(box::BuildLog::kFinalizeStep, fmt::format("Template {} ({}) built: tags {}", t->name,
                                                       t->id, fmt::join(build->tags, ", ")));
  s->sweep(t->id, t);
}

// POST /v2/templates/{templateID}/builds/{buildID}
awaitable<Reply> startBuild(const std::shared_ptr<Impl>& sp, Ctx& ctx) {
  Impl& s = *sp;
  const std::string& id = ctx.params.find("templateID")->second;
  const std::string& build_id = ctx.params.find("buildID")->second;
  auto found = s.findBuild(ctx.principal, id, build_id);
  if (!found) co_return controlError(found.error());
  std::shared_ptr<Build> build = *found;
  if (build->status != "waiting") {
    co_return controlError(
        Error(Errc::kFailedPrecondition,
              fmt::format("Build {} was started already ({})", build_id, build->status)));
  }
  auto start = parseBuildStart(ctx.request.body());
  if (!start) co_return controlError(start.error());
  // What it starts from: an E2B-built template's tag (its sandboxes' defaults too, as E2B's
  // fromTemplate inherits them), else hutch's own or --e2b-template's.
  E2bTemplate::Tag base;
  if (!start->from_template.empty()) {
    auto resolved = s.tagFor(ctx.principal, start->from_template);
    if (!resolved) co_return controlError(resolved.error());
    base = resolved->value_or(
        E2bTemplate::Tag{.hutch_template = mapTemplate(s.mapped, start->from_template)});
  }
  const fs::path files = s.filesDir(build->owner_id);
  auto plan = planBuild(*start, base.hutch_template,
                        [&files](const std::string& hash) -> std::optional<fs::path> {
                          std::error_code ec;
                          if (fs::is_directory(files / hash, ec)) return files / hash;
                          return std::nullopt;
                        });
  if (!plan) co_return controlError(plan.error());
  if (start->registry) {
    plan->plan.base_scope =
        credentialScope(s.secret, ownerSegment(build->owner_id), *start->registry);
  }
  plan->plan.cpus = build->cpus;
  plan->plan.memory_mib = build->memory_mib;
  build->origin = plan->origin;
  build->status = "building";
  build->updated_at = box::unixNow();
  build->hutch_template = fmt::format("e2b-{}-{}", id, build_id.substr(0, 8));
  build->from_image = start->from_image;
  build->user = plan->user.value_or(base.user);
  build->workdir = plan->workdir.value_or(base.workdir);
  build->log(box::BuildLog::kBaseStep,
             fmt::format("Building {} as hutch template {}",
                         start->from_template.empty() ? "from image " + start->from_image
                                                      : "from template " + start->from_template,
                         build->hutch_template));
  asio::co_spawn(
      s.executor,
      runBuild(sp, build, std::move(plan->plan), build->hutch_template, ctx.principal.actor()),
      asio::detached);
  Response res{http::status::accepted, 11};
  res.prepare_payload();
  co_return res;
}

// The build a logs request names, and which of its lines it asks for.
struct LogsRequest {
  std::shared_ptr<Build> build;
  LogsQuery page;
};
Result<LogsRequest> logsRequest(Impl& s, Ctx& ctx) {
  auto build = s.findBuild(ctx.principal, ctx.params.find("templateID")->second,
                           ctx.params.find("buildID")->second);
  if (!build) return fail(build.error());
  auto page = parseLogsQuery(ctx.query);
  if (!page) return fail(page.error());
  return LogsRequest{std::move(*build), *page};
}

// GET /templates/{templateID}/builds/{buildID}/status?logsOffset=&limit=&level=
awaitable<Reply> buildStatus(Impl& s, Ctx& ctx) {
  auto req = logsRequest(s, ctx);
  if (!req) co_return controlError(req.error());
  const Build& b = *req->build;
  co_return jsonReply(http::status::ok,
                      buildInfoJson(b.template_id, b.id, b.status, b.lines, req->page, b.reason));
}

// GET /templates/{templateID}/builds/{buildID}/logs?cursor=&limit=&direction=&level=&source=
awaitable<Reply> buildLogs(Impl& s, Ctx& ctx) {
  auto req = logsRequest(s, ctx);
  if (!req) co_return controlError(req.error());
  co_return jsonReply(http::status::ok, buildLogsJson(req->build->lines, req->page, nowMs()));
}

}  // namespace

Result<std::unique_ptr<TemplateBuilds>> TemplateBuilds::open(
    asio::any_io_executor executor, box::BoxService& boxes, box::TemplateBuilder& builder,
    box::TemplateService& templates, fs::path dir, const FacadeOptions& options) {
  HUTCH_TRY(TemplateRegistry registry, TemplateRegistry::open(dir / "templates.json"));
  // Uploads a hutchd that stopped mid-way left.
  std::error_code ec;
  if (fs::exists(dir / "files", ec)) {
    for (const auto& owner : fs::directory_iterator(dir / "files", ec)) {
      for (const auto& e : fs::directory_iterator(owner.path(), ec)) {
        const std::string n = e.path().filename().string();
        if (n.find(".upload-") != std::string::npos || n.find(".tmp-") != std::string::npos) {
          fs::remove_all(e.path(), ec);
        }
      }
    }
  }
  auto impl = std::make_shared<Impl>(std::move(executor), boxes, builder, templates, std::move(dir),
                                     options, std::move(registry));
  return std::unique_ptr<TemplateBuilds>(new TemplateBuilds(std::move(impl)));
}

TemplateBuilds::~TemplateBuilds() = default;

void TemplateBuilds::addRoutes(api::ApiRouter& control, api::Route otherwise) {
  using http::verb;
  auto sp = impl_;
  Impl& s = *impl_;
  auto route = [](auto f) { return api::Route(std::move(f)); };
  control.add(verb::post, "/v3/templates", route([&s](Ctx& ctx) { return requestBuild(s, ctx); }));
  control.add(verb::post, "/v2/templates/{templateID}/builds/{buildID}",
              route([sp](Ctx& ctx) { return startBuild(sp, ctx); }));
  control.add(verb::get, "/v2/templates", route([&s](Ctx& ctx) { return listTemplates(s, ctx); }));
  control.add(verb::get, "/templates", route([&s](Ctx& ctx) { return listTemplates(s, ctx); }));
  control.add(verb::get, "/templates/aliases/{alias}",
              route([&s](Ctx& ctx) { return aliasInfo(s, ctx); }));
  control.add(verb::post, "/templates/tags", route([&s](Ctx& ctx) { return assignTags(s, ctx); }));
  control.add(verb::delete_, "/templates/tags",
              route([&s](Ctx& ctx) { return removeTags(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/files/{hash}",
              route([&s](Ctx& ctx) { return filesLink(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/builds/{buildID}/status",
              route([&s](Ctx& ctx) { return buildStatus(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/builds/{buildID}/logs",
              route([&s](Ctx& ctx) { return buildLogs(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/tags",
              route([&s](Ctx& ctx) { return listTags(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}",
              route([&s](Ctx& ctx) { return getTemplate(s, ctx); }));
  control.add(verb::patch, "/v2/templates/{templateID}",
              route([&s](Ctx& ctx) { return updateTemplate(s, true, ctx); }));
  control.add(verb::patch, "/templates/{templateID}",
              route([&s](Ctx& ctx) { return updateTemplate(s, false, ctx); }));
  auto other = std::make_shared<api::Route>(std::move(otherwise));
  control.add(verb::delete_, "/templates/{templateID}",
              route([&s, other](Ctx& ctx) { return deleteTemplate(s, *other, ctx); }));

  api::Route put = route([&s](Ctx& ctx) { return upload(s, ctx); });
  put.options.stream_body = true;
  uploads_.add(verb::put, std::string(kUploadPrefix) + "{owner}/{hash}", std::move(put));
}

Result<std::optional<E2bTemplate::Tag>> TemplateBuilds::resolve(const api::Principal& principal,
                                                                const std::string& id) const {
  return impl_->tagFor(principal, id);
}

}  // namespace hutch::e2b
