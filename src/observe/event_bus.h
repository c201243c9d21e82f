// EventBus: what happened to boxes, keys and the daemon (docs/observability.md). The services
// publish() at each change; the event is stored (storage::EventStore, SQLite, kept up to a
// retention limit) and handed at once to every listener (in-process consumers: metrics) and to
// every subscription (the API's event streams). Event loop only.
//
// Nothing waits for a reader: a subscription's queue is bounded, and when it is full the
// subscription is marked behind and its queue dropped. An EventCursor then reads what it missed
// from the store, so a slow reader loses nothing that is still retained, and never holds
// hutchd's memory or time.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "event/async_event.h"
#include "storage/event_store.h"

namespace hutch::observe {

namespace asio = boost::asio;
using Event = storage::StoredEvent;
using EventQuery = storage::EventQuery;

// What an event is about: a box (id, name, owner) or, for keys, only an owner.
struct Subject {
  std::string box_id;
  std::string box_name;
  std::string owner_id;
};
Subject subjectOf(const box::Box& box);

// The event as the API shows it: {"id","time_ms","type","box":{"id","name"}|null,"owner","data"}.
nlohmann::json toJson(const Event& event);

class EventBus;

// Events published since the subscription was made that match its query. Unregisters itself
// when destroyed.
class Subscription {
 public:
  ~Subscription();
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // What is queued, oldest first (possibly nothing); waits for something until `deadline`
  // when the queue is empty. After an overflow the queue restarts empty and behind() is true
  // until clearBehind().
  asio::awaitable<std::vector<Event>> next(std::chrono::steady_clock::time_point deadline);
  bool behind() const { return behind_; }
  void clearBehind() { behind_ = false; }

 private:
  friend class EventBus;
  Subscription(EventBus& bus, EventQuery query, size_t max_queued);
  void offer(const Event& event);

  EventBus* bus_;
  EventQuery query_;
  size_t max_queued_;
  std::deque<Event> queue_;
  bool behind_ = false;
  event::AsyncEvent changed_;
  std::list<Subscription*>::iterator self_;
};

class EventBus {
 public:
  using Listener = std::function<void(const Event&)>;

  // `store` must outlive the bus.
  EventBus(asio::any_io_executor loop, storage::EventStore& store);
  EventBus(const EventBus&) = delete;
  EventBus& operator=(const EventBus&) = delete;
  ~EventBus();

  // Stores and delivers an event; its id (0 if it could not be stored: it is still delivered,
  // and the failure is logged, since losing an event must never fail the operation it reports).
  int64_t publish(std::string type, const Subject& subject,
                  const nlohmann::json& data = nlohmann::json::object());
  // Called with every event, on the loop, as it is published. Listeners must be quick.
  void addListener(Listener listener) { listeners_.push_back(std::move(listener)); }
  // Events published from now on that match `query` (after_id, since_time and limit are not
  // used), up to `max_queued` held at once.
  std::shared_ptr<Subscription> subscribe(EventQuery query, size_t max_queued = 4096);
  // Stored events, oldest first.
  Result<std::vector<Event>> read(const EventQuery& query) { return store_.query(query); }
  Result<int64_t> lastId() { return store_.lastId(); }
  asio::any_io_executor executor() const { return loop_; }

 private:
  friend class Subscription;
  asio::any_io_executor loop_;
  storage::EventStore& store_;
  std::vector<Listener> listeners_;
  std::list<Subscription*> subscriptions_;
};

// Reads the events of a query in order without gaps: first what is stored after
// query.after_id, then live ones as they come, going back to the store whenever the live
// subscription fell behind. Subscribes at construction, so nothing published afterwards is
// missed while the stored ones are read.
class EventCursor {
 public:
  EventCursor(EventBus& bus, EventQuery query);
  // The next events (at most query.limit at a time), oldest first; an empty vector when none
  // came before `deadline`. Errors: the store could not be read.
  asio::awaitable<Result<std::vector<Event>>> next(std::chrono::steady_clock::time_point deadline);
  int64_t lastId() const { return query_.after_id; }

 private:
  EventBus& bus_;
  EventQuery query_;
  std::shared_ptr<Subscription> live_;
  bool catching_up_ = true;
};

}  // namespace hutch::observe
