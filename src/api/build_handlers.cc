// POST /v1/builds: a template built from a Dockerfile (docs/api.md "Builds", docs/templates.md
// "Builds"). The body is the build context as a tar (the CLI leaves out what .dockerignore
// names); the query says what to build. Admin only, as every template change.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "api/error_mapping.h"
#include "api/handlers.h"
#include "base/unique_fd.h"
#include "box/dockerfile_plan.h"
#include "box/template_builder.h"
#include "image/digest.h"

namespace hutch::api {

namespace {

using nlohmann::json;
namespace http = boost::beast::http;
using Reply = std::optional<Response>;

constexpr std::string_view kKnown[] = {"build_args", "cpus",    "disk_mib",       "dockerfile",
                                       "memory_mib", "name",    "network_policy", "no_cache",
                                       "ready_cmd",  "secrets", "step_timeout_s", "start_cmd",
                                       "target"};

Result<uint64_t> number(const PathParams& query, const std::string& key, uint64_t fallback,
                        uint64_t max) {
  auto it = query.find(key);
  if (it == query.end()) return fallback;
  uint64_t value = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > max) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{} must be a whole number from 1 to {}, not '{}'", key, max, text));
  }
  return value;
}

std::string text(const PathParams& query, const std::string& key,
                 const std::string& fallback = {}) {
  auto it = query.find(key);
  return it == query.end() ? fallback : it->second;
}

Result<std::pair<std::string, box::DockerfileOptions>> parseBuildQuery(const PathParams& query) {
  for (const auto& [key, _] : query) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown)) {
      return fail(Errc::kInvalidArgument, fmt::format("Unknown query parameter '{}'; known: {}",
                                                      key, fmt::join(kKnown, ", ")));
    }
  }
  std::string name = text(query, "name");
  if (name.empty()) {
    return fail(Errc::kInvalidArgument,
                "Say which template to build: ?name=NAME (the body is the build context as a tar)");
  }
  box::DockerfileOptions options;
  options.dockerfile = text(query, "dockerfile", "Dockerfile");
  options.target = text(query, "target");
  if (auto args = text(query, "build_args"); !args.empty()) {
    json j = json::parse(args, nullptr, false);
    if (!j.is_object()) {
      return fail(Errc::kInvalidArgument,
                  "build_args must be a JSON object of strings: {\"NAME\": \"value\"}");
    }
    for (const auto& [k, v] : j.items()) {
      if (!v.is_string()) {
        return fail(Errc::kInvalidArgument, fmt::format("build_args.{} must be a string", k));
      }
      options.build_args[k] = v.get<std::string>();
    }
  }
  box::BuildPlan& plan = options.plan;
  const std::string no_cache = text(query, "no_cache", "false");
  if (no_cache != "true" && no_cache != "false" && no_cache != "1" && no_cache != "0") {
    return fail(Errc::kInvalidArgument, "no_cache is true or false");
  }
  plan.no_cache = no_cache == "true" || no_cache == "1";
  plan.start_cmd = text(query, "start_cmd");
  plan.ready_cmd = text(query, "ready_cmd");
  plan.network_policy = text(query, "network_policy");
  // Host secrets the RUN steps may use: their names, comma-separated.
  const std::string secrets = text(query, "secrets");
  for (std::string_view rest = secrets; !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string_view secret = rest.substr(0, comma);
    if (secret.empty()) {
      return fail(Errc::kInvalidArgument,
                  "secrets is a comma-separated list of secret names (hutch secret ls)");
    }
    plan.secrets.emplace_back(secret);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  HUTCH_TRY(uint64_t cpus, number(query, "cpus", plan.cpus, 64));
  plan.cpus = static_cast<unsigned>(cpus);
  HUTCH_TRY(plan.memory_mib, number(query, "memory_mib", plan.memory_mib, 1 << 20));
  HUTCH_TRY(plan.disk_mib, number(query, "disk_mib", plan.disk_mib, uint64_t{1} << 24));
  HUTCH_TRY(uint64_t timeout,
            number(query, "step_timeout_s", static_cast<uint64_t>(plan.step_timeout.count()),
                   7 * 24 * 3600));
  plan.step_timeout = std::chrono::seconds(timeout);
  return std::pair{std::move(name), std::move(options)};
}

// The body into the workspace's context.tar, measured and hashed as it comes.
asio::awaitable<Result<std::pair<std::string, uint64_t>>> receiveContext(
    RequestContext& ctx, const box::TemplateBuilder::Workspace& ws, uint64_t limit) {
  UniqueFd out(::open(ws.contextTar().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) co_return fail(sysError("Cannot create " + ws.contextTar().string(), errno));
  image::Sha256 hash;
  uint64_t size = 0;
  for (;;) {
    auto chunk = co_await ctx.body->read();
    if (!chunk) co_return fail(chunk.error());
    if (chunk->empty()) break;
    size += chunk->size();
    if (size > limit) {
      co_return fail(Errc::kResourceExhausted,
                     fmt::format("The build context is larger than {} MiB; leave out what the "
                                 "build does not need (.dockerignore)",
                                 limit >> 20));
    }
    hash.update(*chunk);
    std::string_view rest = *chunk;
    while (!rest.empty()) {
      ssize_t n = ::write(out.get(), rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) co_return fail(sysError("Cannot write " + ws.contextTar().string(), errno));
      rest.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (size == 0) {
    co_return fail(Errc::kInvalidArgument,
                   "The body must be the build context as a tar (with the Dockerfile in it)");
  }
  co_return std::pair{hash.finish(), size};
}

asio::awaitable<Reply> buildTemplate(box::TemplateBuilder& builder, RequestContext& ctx) {
  auto query = parseBuildQuery(ctx.query);
  if (!query) co_return errorResponse(query.error());
  const std::string name = std::move(query->first);
  const box::DockerfileOptions options = std::move(query->second);
  auto ws = builder.newWorkspace();
  if (!ws) co_return errorResponse(ws.error());
  auto workspace = std::make_shared<box::TemplateBuilder::Workspace>(std::move(*ws));
  auto received = co_await receiveContext(ctx, *workspace, builder.contextLimit());
  if (!received) co_return errorResponse(received.error());
  auto unpacked = co_await builder.unpackContext(*workspace, received->first, received->second);
  if (!unpacked) co_return errorResponse(unpacked.error());
  auto plan = box::planFromDockerfile(workspace->context(), options);
  if (!plan) co_return errorResponse(plan.error());
  observe::Actor actor = ctx.principal.actor();
  plan->secrets_owner = ctx.principal.owner().id;
  // A streamed build whose client goes away stops (its RUN is killed, the box removed).
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  plan->cancel = cancel;
  TemplateMaker make = [&builder, workspace, name, plan = std::move(*plan),
                        actor](const box::TemplateService::Progress& progress) {
    box::BuildProgress say = [progress](const box::BuildLog& log) {
      if (progress) progress(log.message + "\n");
    };
    return builder.build(name, plan, actor, std::move(say));
  };
  if (ctx.request[http::field::accept].find("application/x-ndjson") != std::string_view::npos) {
    co_return co_await streamBuild(ctx, std::move(make), cancel);
  }
  auto made = co_await make({});
  if (!made) co_return errorResponse(made.error());
  co_return jsonResponse(http::status::created, *made);
}

}  // namespace

void registerBuildRoutes(ApiRouter& router, box::TemplateBuilder& builder) {
  const RouteOptions options{.access = Access::kAdmin, .stream_body = true};
  router.add(
      http::verb::post, "/v1/builds",
      Route([&builder](RequestContext& ctx) { return buildTemplate(builder, ctx); }, options));
}

}  // namespace hutch::api
