// E2B's template builder: its endpoints over hutch's TemplateBuilder (template_build.h).

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on
#include "e2b/template_build.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <map>

#include "api/encoding.h"
#include "api/handlers.h"
#include "base/unique_fd.h"
#include "e2b/facade_internal.h"
#include "e2b/template_model.h"
#include "e2b/template_registry.h"
#include "image/digest.h"
#include "image/layer_apply.h"
#include "image/root_dir.h"

namespace hutch::e2b {

namespace fs = std::filesystem;
using api::RequestContext;
using api::Response;
using asio::awaitable;

namespace {

constexpr std::string_view kUploadPrefix = "/e2b-files/";
constexpr int64_t kUploadUrlSeconds = 3600;  // the SDKs' upload timeout
constexpr size_t kMaxLogLines = 20000;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

// The path segment of an owner: the key's id, "host" for the host administrator.
std::string ownerSegment(const std::string& owner_id) {
  return owner_id.empty() ? "host" : owner_id;
}

bool safeSegment(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

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
          {"public", false},
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

}  // namespace

struct TemplateBuilds::Impl {
  struct Build {
    std::string id;
    std::string template_id;
    std::string owner_id;
    std::vector<std::string> tags;
    unsigned cpus = 2;
    uint64_t memory_mib = 1024;
    std::string status = "waiting";  // waiting building ready error
    std::vector<LogLine> lines;
    std::optional<LogLine> reason;
    std::vector<int> origin;
    int engine_step = box::BuildLog::kBaseStep;  // the step the engine said last
    std::string hutch_template;
    int64_t created_at = 0;
    int64_t updated_at = 0;

    void log(int step, std::string message, std::string level = "info") {
      engine_step = step;
      if (lines.size() > kMaxLogLines) return;
      if (lines.size() == kMaxLogLines) {
        message = "(the log is longer than hutch keeps: the rest is left out)";
        level = "warn";
      }
      lines.push_back({nowMs(), std::move(level), std::move(message), stepLabel(step, origin)});
    }
  };

  asio::any_io_executor executor;
  box::BoxService& boxes;
  box::TemplateBuilder& builder;
  box::TemplateService& templates;
  fs::path dir;
  std::string secret;
  std::map<std::string, std::string> mapped;  // --e2b-template NAME=TEMPLATE
  TemplateRegistry registry;
  std::map<std::string, std::shared_ptr<Build>> builds;  // by build id
  std::vector<std::string> order;                        // build ids, oldest first

  Impl(asio::any_io_executor ex, box::BoxService& b, box::TemplateBuilder& tb,
       box::TemplateService& ts, fs::path d, const FacadeOptions& options, TemplateRegistry r)
      : executor(std::move(ex)),
        boxes(b),
        builder(tb),
        templates(ts),
        dir(std::move(d)),
        secret(options.secret),
        mapped(options.templates),
        registry(std::move(r)) {}

  static bool visible(const api::Principal& p, const E2bTemplate& t) {
    return p.seesEverything() || t.owner_id == p.owner().id;
  }
  static Error notYours(const std::string& name) {
    return Error(Errc::kPermissionDenied,
                 fmt::format("The template '{}' belongs to another API key", name));
  }

  fs::path filesDir(const std::string& owner_id) const {
    return dir / "files" / ownerSegment(owner_id);
  }

  // A template the caller may use, by id or name.
  Result<E2bTemplate> mine(const api::Principal& p, const std::string& id) const {
    auto t = registry.find(id);
    if (!t) {
      return fail(Errc::kNotFound,
                  fmt::format("No template '{}' built through E2B's template builder", id));
    }
    if (!visible(p, *t)) return fail(notYours(id));
    return *t;
  }

  std::shared_ptr<Build> findBuild(const api::Principal& p, const std::string& template_id,
                                   const std::string& build_id, Error& error) const {
    auto it = builds.find(build_id);
    if (it == builds.end() || it->second->template_id != template_id) {
      error = Error(Errc::kNotFound,
                    fmt::format("No build {} of template {} (hutchd keeps builds in memory: a "
                                "restart forgets them)",
                                build_id, template_id));
      return nullptr;
    }
    auto t = registry.byId(template_id);
    if (t && !visible(p, *t)) {
      error = notYours(t->name);
      return nullptr;
    }
    return it->second;
  }

  // Room for one more build: the oldest one not under way goes.
  Result<> makeRoom() {
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

  // Removes the hutch templates of E2B template `t` no tag names and no build under way
  // makes; those boxes still use stay (the next sweep removes them).
  void sweep(const std::string& template_id, const std::optional<E2bTemplate>& t) {
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

  // The hutch template a build starts from (fromTemplate).
  Result<std::string> baseTemplate(const api::Principal& p, const std::string& from) const {
    std::string name = from;
    std::string tag(kDefaultTag);
    if (size_t colon = from.find(':'); colon != std::string::npos) {
      name = from.substr(0, colon);
      tag = from.substr(colon + 1);
    }
    if (auto t = registry.find(name)) {
      if (!visible(p, *t)) return fail(notYours(name));
      auto it = t->tags.find(tag);
      if (it == t->tags.end()) {
        return fail(Errc::kNotFound,
                    fmt::format("Template {} has no build tagged '{}'", name, tag));
      }
      return it->second.hutch_template;
    }
    return mapTemplate(mapped, from);
  }
};

namespace {

using Impl = TemplateBuilds::Impl;
using Build = Impl::Build;

// POST /v3/templates
awaitable<Reply> requestBuild(Impl& s, RequestContext& ctx) {
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
                                               {"public", false},
                                               {"names", json::array({name})},
                                               {"aliases", json::array({name})},
                                               {"tags", req->tags}});
}

// GET /templates/{templateID}/files/{hash}
awaitable<Reply> filesLink(Impl& s, RequestContext& ctx) {
  const std::string& id = ctx.params.find("templateID")->second;
  const std::string& hash = ctx.params.find("hash")->second;
  auto t = s.mine(ctx.principal, id);
  if (!t) co_return controlError(t.error());
  if (!validFilesHash(hash)) {
    co_return controlError(Error(Errc::kInvalidArgument, "A files hash is 64 hex digits"));
  }
  std::error_code ec;
  const bool present = fs::is_directory(s.filesDir(t->owner_id) / hash, ec);
  const std::string owner = ownerSegment(t->owner_id);
  const int64_t expires = box::unixNow() + kUploadUrlSeconds;
  const std::string host(ctx.request[http::field::host]);
  const char* scheme = ctx.connection && ctx.connection->stream.isTls() ? "https" : "http";
  const std::string url =
      fmt::format("{}://{}{}{}/{}?expires={}&token={}", scheme, host, kUploadPrefix, owner, hash,
                  expires, uploadToken(s.secret, owner, hash, expires));
  co_return jsonReply(http::status::created, {{"present", present}, {"url", url}});
}

// PUT /e2b-files/{owner}/{hash}: a COPY's files, a tar (gzip or not).
awaitable<Reply> upload(Impl& s, RequestContext& ctx) {
  const std::string& owner = ctx.params.find("owner")->second;
  const std::string& hash = ctx.params.find("hash")->second;
  // npm e2b 2.14.1 streams the tar chunked (its GCS URLs took that); later SDKs send an exact
  // Content-Length, which the parser then holds the body to.
  auto length = ctx.body->contentLength();
  const uint64_t limit = s.builder.contextLimit();
  if (length && *length > limit) {
    co_return controlError(Error(Errc::kResourceExhausted,
                                 fmt::format("The files are larger than {} MiB", limit >> 20)));
  }
  const fs::path owner_dir = s.dir / "files" / owner;
  std::error_code ec;
  fs::create_directories(owner_dir, ec);
  if (ec) {
    co_return controlError(Error(Errc::kInternal, "Cannot create " + owner_dir.string()));
  }
  const std::string tag = box::randomId();
  const fs::path tar = owner_dir / (hash + ".upload-" + tag);
  const fs::path tree = owner_dir / (hash + ".tmp-" + tag);
  struct Cleanup {
    fs::path a, b;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(a, e);
      fs::remove_all(b, e);
    }
  } cleanup{tar, tree};
  image::Sha256 sha;
  uint64_t size = 0;
  std::string head;
  {
    UniqueFd out(::open(tar.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out) co_return controlError(sysError("Cannot create " + tar.string(), errno));
    for (;;) {
      auto chunk = co_await ctx.body->read();
      if (!chunk) co_return controlError(chunk.error());
      if (chunk->empty()) break;
      size += chunk->size();
      if (size > limit) {
        co_return controlError(Error(Errc::kResourceExhausted,
                                     fmt::format("The files are larger than {} MiB", limit >> 20)));
      }
      if (head.size() < 2) head += chunk->substr(0, 2 - head.size());
      sha.update(*chunk);
      std::string_view rest = *chunk;
      while (!rest.empty()) {
        ssize_t n = ::write(out.get(), rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) co_return controlError(sysError("Cannot write " + tar.string(), errno));
        rest.remove_prefix(static_cast<size_t>(n));
      }
    }
  }
  if (length && size != *length) {
    co_return controlError(Error(Errc::kInvalidArgument,
                                 fmt::format("Got {} bytes of the {} announced", size, *length)));
  }
  // Hostile input: unpacked only through a RootDir, within limits, owners not kept.
  fs::create_directories(tree, ec);
  UniqueFd in(::open(tar.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) co_return controlError(sysError("Cannot open " + tar.string(), errno));
  auto root = image::RootDir::open(tree);
  if (!root) co_return controlError(root.error());
  image::Descriptor layer;
  const bool gzip = head.size() == 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
                    static_cast<unsigned char>(head[1]) == 0x8b;
  layer.media_type = gzip ? "application/vnd.oci.image.layer.v1.tar+gzip"
                          : "application/vnd.oci.image.layer.v1.tar";
  layer.compression = gzip ? image::Compression::kGzip : image::Compression::kNone;
  layer.digest = sha.finish();
  layer.size = static_cast<int64_t>(size);
  image::ApplyLimits limits;
  limits.max_total_bytes = limit;
  limits.keep_owners = false;
  image::ApplyUsage usage;
  auto applied = image::applyLayer(*root, in.get(), layer, limits, usage);
  if (!applied) {
    co_return controlError(Error(Errc::kInvalidArgument, applied.error().message())
                               .withContext("The uploaded files are not a usable tar"));
  }
  const fs::path final_dir = owner_dir / hash;
  if (!fs::exists(final_dir, ec)) {
    fs::rename(tree, final_dir, ec);
    // Another upload of the same files got there first: theirs are the same.
    if (ec && !fs::exists(final_dir)) {
      co_return controlError(Error(Errc::kInternal, "Cannot keep the files: " + ec.message()));
    }
  }
  Response res{http::status::ok, 11};
  res.prepare_payload();
  co_return res;
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
    const std::string message = made.error().describe();
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
    t->tags[tag] = {build->id, name, box::unixNow()};
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
awaitable<Reply> startBuild(const std::shared_ptr<Impl>& sp, RequestContext& ctx) {
  Impl& s = *sp;
  const std::string& id = ctx.params.find("templateID")->second;
  const std::string& build_id = ctx.params.find("buildID")->second;
  Error error(Errc::kInternal, "");
  auto build = s.findBuild(ctx.principal, id, build_id, error);
  if (!build) co_return controlError(error);
  if (build->status != "waiting") {
    co_return controlError(
        Error(Errc::kFailedPrecondition,
              fmt::format("Build {} was started already ({})", build_id, build->status)));
  }
  auto start = parseBuildStart(ctx.request.body());
  if (!start) co_return controlError(start.error());
  std::string base;
  if (!start->from_template.empty()) {
    auto resolved = s.baseTemplate(ctx.principal, start->from_template);
    if (!resolved) co_return controlError(resolved.error());
    base = *resolved;
  }
  const fs::path files = s.filesDir(build->owner_id);
  auto plan = planBuild(*start, base, [&files](const std::string& hash) -> std::optional<fs::path> {
    std::error_code ec;
    if (fs::is_directory(files / hash, ec)) return files / hash;
    return std::nullopt;
  });
  if (!plan) co_return controlError(plan.error());
  plan->plan.cpus = build->cpus;
  plan->plan.memory_mib = build->memory_mib;
  build->origin = plan->origin;
  build->status = "building";
  build->updated_at = box::unixNow();
  build->hutch_template = fmt::format("e2b-{}-{}", id, build_id.substr(0, 8));
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

// GET /templates/{templateID}/builds/{buildID}/status?logsOffset=N
awaitable<Reply> buildStatus(Impl& s, RequestContext& ctx) {
  const std::string& id = ctx.params.find("templateID")->second;
  const std::string& build_id = ctx.params.find("buildID")->second;
  Error error(Errc::kInternal, "");
  auto build = s.findBuild(ctx.principal, id, build_id, error);
  if (!build) co_return controlError(error);
  size_t offset = 0;
  if (auto it = ctx.query.find("logsOffset"); it != ctx.query.end() && !it->second.empty()) {
    try {
      long long n = std::stoll(it->second);
      offset = n < 0 ? 0 : static_cast<size_t>(n);
    } catch (const std::exception&) {
      co_return controlError(Error(Errc::kInvalidArgument, "logsOffset must be a number"));
    }
  }
  co_return jsonReply(http::status::ok, buildInfoJson(id, build_id, build->status, build->lines,
                                                      offset, build->reason));
}

// GET /templates/aliases/{alias}
awaitable<Reply> aliasInfo(Impl& s, RequestContext& ctx) {
  std::string alias = ctx.params.find("alias")->second;
  alias = alias.substr(0, alias.find(':'));
  if (auto t = s.registry.byName(alias)) {
    if (!Impl::visible(ctx.principal, *t)) co_return controlError(Impl::notYours(alias));
    co_return jsonReply(http::status::ok, {{"templateID", t->id}, {"public", false}});
  }
  // hutchd's own templates (and --e2b-template's names) are everyone's.
  if (s.mapped.contains(alias) || s.templates.find(alias)) {
    co_return jsonReply(http::status::ok, {{"templateID", alias}, {"public", true}});
  }
  co_return controlError(Error(Errc::kNotFound, fmt::format("No template '{}'", alias)));
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

// POST /templates/tags {target: "name:tag", tags: [...]}
awaitable<Reply> assignTags(Impl& s, RequestContext& ctx) {
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
  for (const std::string& tag : *tags)
    t->tags[tag] = {source.build_id, source.hutch_template, box::unixNow()};
  t->updated_at = box::unixNow();
  if (auto put = s.registry.put(*t); !put) co_return controlError(put.error());
  s.sweep(t->id, *t);
  co_return jsonReply(http::status::created, {{"buildID", source.build_id}, {"tags", *tags}});
}

// DELETE /templates/tags {name, tags: [...]}
awaitable<Reply> removeTags(Impl& s, RequestContext& ctx) {
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
awaitable<Reply> listTags(Impl& s, RequestContext& ctx) {
  auto t = s.mine(ctx.principal, ctx.params.find("templateID")->second);
  if (!t) co_return controlError(t.error());
  json out = json::array();
  for (const auto& [tag, v] : t->tags) {
    out.push_back({{"tag", tag}, {"buildID", v.build_id}, {"createdAt", rfc3339(v.created_at)}});
  }
  co_return jsonReply(http::status::ok, out);
}

std::string lastStatus(const Impl& s, const std::string& template_id) {
  std::string status = "ready";
  for (const std::string& id : s.order) {
    auto it = s.builds.find(id);
    if (it != s.builds.end() && it->second->template_id == template_id) status = it->second->status;
  }
  return status;
}

// GET /templates, /v2/templates
awaitable<Reply> listTemplates(Impl& s, RequestContext& ctx) {
  json out = json::array();
  for (const E2bTemplate& t : s.registry.all()) {
    if (Impl::visible(ctx.principal, t)) out.push_back(templateJson(t, lastStatus(s, t.id)));
  }
  co_return jsonReply(http::status::ok, out);
}

// GET /templates/{templateID}
awaitable<Reply> getTemplate(Impl& s, RequestContext& ctx) {
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
  json j = templateJson(*t, lastStatus(s, t->id));
  j["builds"] = builds;
  co_return jsonReply(http::status::ok, j);
}

// DELETE /templates/{templateID}: the template, its tags and the hutch templates they name.
awaitable<Reply> deleteTemplate(Impl& s, const api::Route& otherwise, RequestContext& ctx) {
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
  control.add(verb::post, "/v3/templates",
              route([&s](RequestContext& ctx) { return requestBuild(s, ctx); }));
  control.add(verb::post, "/v2/templates/{templateID}/builds/{buildID}",
              route([sp](RequestContext& ctx) { return startBuild(sp, ctx); }));
  control.add(verb::get, "/v2/templates",
              route([&s](RequestContext& ctx) { return listTemplates(s, ctx); }));
  control.add(verb::get, "/templates",
              route([&s](RequestContext& ctx) { return listTemplates(s, ctx); }));
  control.add(verb::get, "/templates/aliases/{alias}",
              route([&s](RequestContext& ctx) { return aliasInfo(s, ctx); }));
  control.add(verb::post, "/templates/tags",
              route([&s](RequestContext& ctx) { return assignTags(s, ctx); }));
  control.add(verb::delete_, "/templates/tags",
              route([&s](RequestContext& ctx) { return removeTags(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/files/{hash}",
              route([&s](RequestContext& ctx) { return filesLink(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/builds/{buildID}/status",
              route([&s](RequestContext& ctx) { return buildStatus(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}/tags",
              route([&s](RequestContext& ctx) { return listTags(s, ctx); }));
  control.add(verb::get, "/templates/{templateID}",
              route([&s](RequestContext& ctx) { return getTemplate(s, ctx); }));
  auto other = std::make_shared<api::Route>(std::move(otherwise));
  control.add(verb::delete_, "/templates/{templateID}",
              route([&s, other](RequestContext& ctx) { return deleteTemplate(s, *other, ctx); }));

  api::Route put = route([&s](RequestContext& ctx) { return upload(s, ctx); });
  put.options.stream_body = true;
  uploads_.add(verb::put, std::string(kUploadPrefix) + "{owner}/{hash}", std::move(put));
}

api::Plane TemplateBuilds::uploadPlane() {
  api::Plane plane;
  plane.name = "e2b-upload";
  plane.claims = [](const http::request_header<>&, std::string_view path) {
    return path.starts_with(kUploadPrefix);
  };
  plane.router = &uploads_;
  plane.render = renderControl;
  std::string secret = impl_->secret;
  plane.authenticate = [secret](const http::request_header<>& header, const api::PathParams& query,
                                api::PathParams&) -> Result<api::Principal> {
    // The URL is its own authorization: /e2b-files/OWNER/HASH?expires=&token=.
    std::string_view target(header.target().data(), header.target().size());
    target = target.substr(0, target.find('?'));
    target.remove_prefix(std::min(target.size(), kUploadPrefix.size()));
    const size_t slash = target.find('/');
    const std::string owner(target.substr(0, slash));
    const std::string hash(slash == std::string_view::npos ? "" : target.substr(slash + 1));
    if (!safeSegment(owner) || !validFilesHash(hash)) {
      return fail(Errc::kNotFound, "No such upload URL");
    }
    auto get = [&](const char* key) {
      auto it = query.find(key);
      return it == query.end() ? std::string() : it->second;
    };
    HUTCH_TRY_VOID(
        checkUploadToken(secret, owner, hash, get("expires"), get("token"), box::unixNow()));
    api::Principal principal;
    principal.kind = api::Principal::Kind::kKey;
    principal.key_id = owner;
    principal.admin = false;
    return principal;
  };
  return plane;
}

Result<std::optional<std::string>> TemplateBuilds::resolve(const api::Principal& principal,
                                                           const std::string& id) const {
  const Impl& s = *impl_;
  std::string name = id;
  std::string tag(kDefaultTag);
  if (size_t colon = id.find(':'); colon != std::string::npos) {
    name = id.substr(0, colon);
    tag = id.substr(colon + 1);
  }
  auto t = s.registry.find(name);
  if (!t) return std::optional<std::string>();
  if (!Impl::visible(principal, *t)) return fail(Impl::notYours(name));
  auto it = t->tags.find(tag);
  if (it == t->tags.end()) {
    return fail(
        Errc::kNotFound,
        fmt::format("Template {} has no build tagged '{}' (Template.build it first)", name, tag));
  }
  return std::optional<std::string>(it->second.hutch_template);
}

}  // namespace hutch::e2b
