// Events, the audit log and metrics (docs/observability.md): GET /v1/events (a page, or a
// stream: NDJSON or server-sent events), GET /v1/audit, GET /v1/audit/verify, GET /metrics.
// A key sees the events and audit records of its own boxes and of itself; the host and admin
// keys see everything. Thin: decode, call, write.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "api/handlers.h"
#include "api/json_model.h"

namespace hutch::api {

namespace {

using asio::awaitable;
using Reply = std::optional<Response>;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxPage = 10000;
constexpr auto kHeartbeat = std::chrono::seconds(15);

Result<int64_t> integerParam(const RequestContext& ctx, const char* name, int64_t fallback) {
  auto it = ctx.query.find(name);
  if (it == ctx.query.end()) return fallback;
  int64_t value = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return fail(Errc::kInvalidArgument,
                fmt::format("{}={} is not a whole number of 0 or more", name, text));
  }
  return value;
}

bool flag(const RequestContext& ctx, const char* name) {
  auto it = ctx.query.find(name);
  return it != ctx.query.end() && (it->second == "1" || it->second == "true" || it->second.empty());
}

// ?box=: a box the caller sees (by id, prefix or name), or the exact id of one that is gone
// (its events and audit records stay after it is removed).
Result<std::string> boxFilter(box::BoxService& service, const RequestContext& ctx) {
  auto it = ctx.query.find("box");
  if (it == ctx.query.end() || it->second.empty()) return std::string();
  if (auto found = service.get(it->second, ownerFilter(ctx.principal)); found) return found->id;
  const std::string& key = it->second;
  bool id = key.size() == 12 && std::all_of(key.begin(), key.end(), [](char c) {
              return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
            });
  if (id) return key;
  return fail(Errc::kNotFound, fmt::format("No box '{}' (for a removed box, give its id)", key));
}

// The query of GET /v1/events from its parameters: after (an event id; Last-Event-ID too),
// since (unix seconds), box, type (comma-separated; "box." matches a prefix), limit.
Result<observe::EventQuery> eventQuery(box::BoxService& service, const RequestContext& ctx) {
  observe::EventQuery q;
  HUTCH_TRY(q.after_id, integerParam(ctx, "after", 0));
  if (auto last = ctx.request.find("Last-Event-ID"); last != ctx.request.end()) {
    int64_t id = 0;
    std::string_view text(last->value().data(), last->value().size());
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec == std::errc() && end == text.data() + text.size())
      q.after_id = std::max(q.after_id, id);
  }
  HUTCH_TRY(int64_t since, integerParam(ctx, "since", 0));
  q.since_time = since * 1000;
  HUTCH_TRY(q.box_id, boxFilter(service, ctx));
  if (auto it = ctx.query.find("type"); it != ctx.query.end()) {
    std::string_view rest = it->second;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view one = rest.substr(0, comma);
      if (!one.empty()) q.types.emplace_back(one);
      rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
    }
  }
  HUTCH_TRY(int64_t limit, integerParam(ctx, "limit", 1000));
  if (limit < 1 || static_cast<size_t>(limit) > kMaxPage) {
    return fail(Errc::kInvalidArgument, fmt::format("limit must be 1 to {}", kMaxPage));
  }
  q.limit = static_cast<size_t>(limit);
  if (!ctx.principal.seesEverything()) q.owner_id = ctx.principal.key_id;
  return q;
}

std::string line(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string sse(const observe::Event& e) {
  return fmt::format("id: {}\nevent: {}\ndata: {}\n", e.id, e.type,
                     observe::toJson(e).dump(-1, ' ', false, json::error_handler_t::replace)) +
         "\n";
}

// GET /v1/events: {"events": [...], "last_id"}; with ?follow (or Accept: text/event-stream)
// a stream that stays open: NDJSON, or server-sent events with ids for Last-Event-ID.
awaitable<Reply> events(box::BoxService& service, observe::EventBus& bus, RequestContext& ctx) {
  auto query = eventQuery(service, ctx);
  if (!query) co_return errorResponse(query.error());
  const auto accept = ctx.request[http::field::accept];
  const bool event_stream = accept.find("text/event-stream") != boost::string_view::npos;
  if (!event_stream && !flag(ctx, "follow")) {
    auto page = bus.read(*query);
    if (!page) co_return errorResponse(page.error());
    json items = json::array();
    for (const auto& e : *page) items.push_back(observe::toJson(e));
    int64_t last = page->empty() ? query->after_id : page->back().id;
    co_return jsonResponse(http::status::ok, json{{"events", items}, {"last_id", last}});
  }
  observe::EventCursor cursor(bus, *query);
  ChunkedWriter out(*ctx.connection);
  http::fields extra;
  extra.set("X-Accel-Buffering", "no");
  if (!co_await out.start(http::status::ok,
                          event_stream ? "text/event-stream" : "application/x-ndjson", extra)) {
    co_return std::nullopt;
  }
  while (true) {
    auto batch = co_await cursor.next(Clock::now() + kHeartbeat);
    if (!batch) {
      // The store could not be read: say so in the stream's own way, then end it.
      json error = errorJson(batch.error());
      std::string text = event_stream ? "event: error\ndata: " + line(error) + "\n" : line(error);
      co_await out.write(text);
      break;
    }
    std::string text;
    for (const auto& e : *batch) text += event_stream ? sse(e) : line(observe::toJson(e));
    // Nothing new: a keep-alive, which also finds a client that has gone away.
    if (text.empty()) text = event_stream ? ": keep-alive\n\n" : "\n";
    if (!co_await out.write(text)) co_return std::nullopt;
  }
  if (co_await out.finish()) ctx.keep_alive = true;
  co_return std::nullopt;
}

// GET /v1/audit?box=&since=&after=&limit=: {"records": [...]}, oldest first.
awaitable<Reply> audit(box::BoxService& service, observe::AuditLog* log, RequestContext& ctx) {
  if (!log) {
    co_return errorResponse(Error(Errc::kUnsupported,
                                  "This hutchd keeps no audit log (it was started with "
                                  "--no-audit)"));
  }
  observe::AuditQuery q;
  auto box = boxFilter(service, ctx);
  auto since = integerParam(ctx, "since", 0);
  auto after = integerParam(ctx, "after", 0);
  auto limit = integerParam(ctx, "limit", 1000);
  for (const auto* r : {&since, &after, &limit}) {
    if (!*r) co_return errorResponse(r->error());
  }
  if (!box) co_return errorResponse(box.error());
  if (*limit < 1 || static_cast<size_t>(*limit) > kMaxPage) {
    co_return errorResponse(
        Error(Errc::kInvalidArgument, fmt::format("limit must be 1 to {}", kMaxPage)));
  }
  q.box_id = *box;
  q.since_ms = *since * 1000;
  q.after_seq = *after;
  q.limit = static_cast<size_t>(*limit);
  if (!ctx.principal.seesEverything()) q.visible_to = ctx.principal.key_id;
  auto records = log->read(q);
  if (!records) co_return errorResponse(records.error());
  json items = json::array();
  for (const auto& r : *records) items.push_back(observe::toJson(r));
  co_return jsonResponse(http::status::ok, json{{"records", items}});
}

// GET /v1/audit/verify (admin): whether the chain holds, and where it breaks.
awaitable<Reply> verifyAudit(observe::AuditLog* log, RequestContext&) {
  if (!log) {
    co_return errorResponse(Error(Errc::kUnsupported, "This hutchd keeps no audit log"));
  }
  auto verdict = log->verify();
  if (!verdict) co_return errorResponse(verdict.error());
  json body = observe::toJson(*verdict);
  body["path"] = log->path().string();
  co_return jsonResponse(http::status::ok, body);
}

// GET /metrics (admin): the Prometheus text format.
awaitable<Reply> metrics(observe::Metrics& metrics, RequestContext&) {
  Response res{http::status::ok, 11};
  res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  res.set(http::field::cache_control, "no-store");
  res.body() = metrics.render();
  res.prepare_payload();
  co_return res;
}

}  // namespace

void registerObserveRoutes(ApiRouter& router, box::BoxService& service, observe::EventBus& bus,
                           observe::AuditLog* audit_log, observe::Metrics& m) {
  router.add(http::verb::get, "/v1/events",
             [&service, &bus](RequestContext& ctx) { return events(service, bus, ctx); });
  router.add(http::verb::get, "/v1/audit",
             [&service, audit_log](RequestContext& ctx) { return audit(service, audit_log, ctx); });
  router.add(http::verb::get, "/v1/audit/verify",
             Route([audit_log](RequestContext& ctx) { return verifyAudit(audit_log, ctx); },
                   {.access = Access::kAdmin}));
  router.add(
      http::verb::get, "/metrics",
      Route([&m](RequestContext& ctx) { return metrics(m, ctx); }, {.access = Access::kAdmin}));
}

}  // namespace hutch::api
