// GET /v1/boxes/{box}/diff, /diff/patch and /diff/export (docs/api.md "Diff"): thin faces of
// BoxService::diff, diffPatch and diffExport.
#include <unistd.h>

#include <charconv>

#include "api/handlers.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;

// Every value of a repeated query key (`?ignore=a&ignore=b`): the parsed query keeps one.
std::vector<std::string> allValues(const RequestContext& ctx, std::string_view key) {
  std::vector<std::string> values;
  std::string_view target(ctx.request.target().data(), ctx.request.target().size());
  size_t q = target.find('?');
  if (q == std::string_view::npos) return values;
  std::string_view query = target.substr(q + 1);
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    PathParams one = parseQuery(query.substr(start, end - start));
    if (auto it = one.find(std::string(key)); it != one.end()) values.push_back(it->second);
    start = end + 1;
  }
  return values;
}

Result<box::BoxService::DiffRequest> diffRequest(const RequestContext& ctx) {
  box::BoxService::DiffRequest request;
  request.actor = ctx.principal.actor();
  if (auto it = ctx.query.find("from"); it != ctx.query.end()) request.from = it->second;
  if (auto it = ctx.query.find("all"); it != ctx.query.end()) {
    const std::string& v = it->second;
    if (v != "true" && v != "false" && v != "1" && v != "0") {
      return fail(Errc::kInvalidArgument, "all=" + v + " is not true or false");
    }
    request.all = v == "true" || v == "1";
  }
  request.ignore = allValues(ctx, "ignore");
  if (auto it = ctx.query.find("limit"); it != ctx.query.end()) {
    size_t limit = 0;
    const std::string& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec != std::errc() || end != text.data() + text.size() || limit < 1 || limit > 100000) {
      return fail(Errc::kInvalidArgument, "limit=" + text + " is not a number from 1 to 100000");
    }
    request.limit = limit;
  }
  return request;
}

const std::string& boxOf(const RequestContext& ctx) {
  return ctx.params.find("box")->second;
}

awaitable<Reply> getDiff(box::BoxService& service, RequestContext& ctx) {
  auto request = diffRequest(ctx);
  if (!request) co_return errorResponse(request.error());
  auto body = co_await service.diff(boxOf(ctx), std::move(*request));
  if (!body) co_return errorResponse(body.error());
  co_return jsonResponse(http::status::ok, *body);
}

awaitable<Reply> getDiffPatch(box::BoxService& service, RequestContext& ctx) {
  auto path = ctx.query.find("path");
  if (path == ctx.query.end()) {
    co_return errorResponse(Error(Errc::kInvalidArgument,
                                  "path is missing: the file in the box, like ?path=/etc/motd"));
  }
  // Named before the call: GCC 12 destroys a temporary handed to a coroutine's by-value
  // parameter twice.
  std::string file = path->second;
  std::string from;
  if (auto it = ctx.query.find("from"); it != ctx.query.end()) from = it->second;
  observe::Actor actor = ctx.principal.actor();
  auto patch = co_await service.diffPatch(boxOf(ctx), file, from, actor);
  if (!patch) co_return errorResponse(patch.error());
  Response res{http::status::ok, 11};
  res.set(http::field::content_type, "text/x-diff; charset=utf-8");
  res.body() = std::move(patch->text);
  res.prepare_payload();
  co_return res;
}

awaitable<Reply> getDiffExport(box::BoxService& service, RequestContext& ctx) {
  auto request = diffRequest(ctx);
  if (!request) co_return errorResponse(request.error());
  auto tar = co_await service.diffExport(boxOf(ctx), std::move(*request));
  if (!tar) co_return errorResponse(tar.error());
  ChunkedWriter out(*ctx.connection);
  if (!co_await out.start(http::status::ok, "application/x-tar")) co_return std::nullopt;
  std::string buf(256 << 10, '\0');
  for (;;) {
    ssize_t n = ::read(tar->get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) co_return std::nullopt;  // no last chunk: the client sees the transfer break off
    if (n == 0) break;
    if (!co_await out.write(std::string_view(buf.data(), static_cast<size_t>(n)))) {
      co_return std::nullopt;
    }
  }
  if (!co_await out.finish()) co_return std::nullopt;
  ctx.keep_alive = true;
  co_return std::nullopt;
}

}  // namespace

void registerDiffRoutes(ApiRouter& router, box::BoxService& service) {
  using http::verb;
  auto bind = [&service](auto handler) {
    return [handler, &service](RequestContext& ctx) { return handler(service, ctx); };
  };
  router.add(verb::get, "/v1/boxes/{box}/diff", bind(getDiff));
  router.add(verb::get, "/v1/boxes/{box}/diff/patch", bind(getDiffPatch));
  router.add(verb::get, "/v1/boxes/{box}/diff/export", bind(getDiffExport));
}

}  // namespace hutch::api
