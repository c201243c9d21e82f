#include "observe/event_bus.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hutch::observe {

using json = nlohmann::json;

namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Subject subjectOf(const box::Box& box) {
  return {.box_id = box.id, .box_name = box.name, .owner_id = box.owner.id};
}

json toJson(const Event& event) {
  json data = json::parse(event.data, nullptr, false);
  if (!data.is_object()) data = json::object();
  json box = nullptr;
  if (!event.box_id.empty()) box = json{{"id", event.box_id}, {"name", event.box_name}};
  return json{{"id", event.id},        {"time_ms", event.time},   {"type", event.type},
              {"box", std::move(box)}, {"owner", event.owner_id}, {"data", std::move(data)}};
}

Subscription::Subscription(EventBus& bus, EventQuery query, size_t max_queued)
    : bus_(&bus), query_(std::move(query)), max_queued_(max_queued), changed_(bus.loop_) {
  query_.after_id = 0;
  query_.since_time = 0;
}

Subscription::~Subscription() {
  if (bus_) bus_->subscriptions_.erase(self_);
}

void Subscription::offer(const Event& event) {
  if (!query_.matches(event)) return;
  if (queue_.size() >= max_queued_) {
    // The reader is too slow: forget what it has not read; it catches up from the store.
    queue_.clear();
    behind_ = true;
  } else {
    queue_.push_back(event);
  }
  changed_.notify();
}

asio::awaitable<std::vector<Event>> Subscription::next(
    std::chrono::steady_clock::time_point deadline) {
  if (queue_.empty() && !behind_) co_await changed_.waitUntil(deadline);
  std::vector<Event> out(std::make_move_iterator(queue_.begin()),
                         std::make_move_iterator(queue_.end()));
  queue_.clear();
  co_return out;
}

EventBus::EventBus(asio::any_io_executor loop, storage::EventStore& store)
    : loop_(std::move(loop)), store_(store) {}

EventBus::~EventBus() {
  // Subscriptions may outlive the bus in a stream being torn down: they must not touch it.
  for (Subscription* s : subscriptions_) s->bus_ = nullptr;
}

int64_t EventBus::publish(std::string type, const Subject& subject, const json& data) {
  Event event;
  event.time = nowMs();
  event.type = std::move(type);
  event.box_id = subject.box_id;
  event.box_name = subject.box_name;
  event.owner_id = subject.owner_id;
  // Names, paths and messages come from clients and boxes: bytes that are not UTF-8 are replaced,
  // never a reason to fail.
  event.data = data.dump(-1, ' ', false, json::error_handler_t::replace);
  if (auto id = store_.insert(event); id) {
    event.id = *id;
  } else {
    spdlog::warn("events: {} not stored: {}", event.type, id.error().describe());
  }
  for (const Listener& listener : listeners_) listener(event);
  for (Subscription* s : subscriptions_) s->offer(event);
  return event.id;
}

std::shared_ptr<Subscription> EventBus::subscribe(EventQuery query, size_t max_queued) {
  std::shared_ptr<Subscription> s(new Subscription(*this, std::move(query), max_queued));
  s->self_ = subscriptions_.insert(subscriptions_.end(), s.get());
  return s;
}

EventCursor::EventCursor(EventBus& bus, EventQuery query)
    : bus_(bus), query_(std::move(query)), live_(bus.subscribe(query_)) {}

asio::awaitable<Result<std::vector<Event>>> EventCursor::next(
    std::chrono::steady_clock::time_point deadline) {
  while (true) {
    if (catching_up_) {
      // Whatever the live queue holds is also in the store: read it there, in order.
      live_->clearBehind();
      (void)co_await live_->next(std::chrono::steady_clock::time_point::min());
      auto stored = bus_.read(query_);
      if (!stored) co_return fail(stored.error());
      if (!stored->empty()) {
        query_.after_id = stored->back().id;
        co_return std::move(*stored);
      }
      catching_up_ = false;
    }
    std::vector<Event> live = co_await live_->next(deadline);
    if (live_->behind()) {
      catching_up_ = true;
      continue;
    }
    std::erase_if(live, [this](const Event& e) { return e.id <= query_.after_id; });
    if (live.size() > query_.limit) {
      // More than one batch arrived at once: take the first, read the rest from the store.
      live.resize(query_.limit);
      catching_up_ = true;
    }
    if (!live.empty()) query_.after_id = live.back().id;
    co_return live;
  }
}

}  // namespace hutch::observe
