#include "observe/event_bus.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "storage/box_store.h"

namespace hutch::observe {
namespace {

using std::chrono::steady_clock;

class EventBusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened) << opened.error().describe();
    boxes_ = std::make_unique<storage::BoxStore>(std::move(*opened));
    store_ = std::make_unique<storage::EventStore>(boxes_->database(), 100000);
    bus_ = std::make_unique<EventBus>(io_.get_executor(), *store_);
  }

  // Runs a coroutine to completion on the test's loop.
  template <class T>
  T run(asio::awaitable<T> work) {
    auto future = asio::co_spawn(io_, std::move(work), asio::use_future);
    io_.restart();
    io_.run();
    return future.get();
  }

  std::vector<int64_t> ids(const std::vector<Event>& events) {
    std::vector<int64_t> out;
    for (const auto& e : events) out.push_back(e.id);
    return out;
  }

  asio::io_context io_;
  std::unique_ptr<storage::BoxStore> boxes_;
  std::unique_ptr<storage::EventStore> store_;
  std::unique_ptr<EventBus> bus_;
};

TEST_F(EventBusTest, PublishStoresTheEventAndHandsItToListenersAndMatchingSubscriptions) {
  std::vector<std::string> heard;
  bus_->addListener([&](const Event& e) { heard.push_back(e.type); });
  auto all = bus_->subscribe({});
  auto one_box = bus_->subscribe({.box_id = "b1"});
  auto execs = bus_->subscribe({.types = {"exec."}});

  EXPECT_EQ(bus_->publish("box.created", {"b1", "one", "k1"}, {{"template", "base"}}), 1);
  EXPECT_EQ(bus_->publish("exec.ended", {"b2", "two", "k2"}, {{"exit_code", 0}}), 2);
  EXPECT_EQ(bus_->publish("key.created", {"", "", "k3"}), 3);

  EXPECT_EQ(heard, (std::vector<std::string>{"box.created", "exec.ended", "key.created"}));
  auto stored = bus_->read({});
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_EQ((*stored)[0].box_name, "one");
  EXPECT_EQ(nlohmann::json::parse((*stored)[0].data)["template"], "base");

  auto soon = steady_clock::now();
  EXPECT_EQ(ids(run(all->next(soon))), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ids(run(one_box->next(soon))), (std::vector<int64_t>{1}));
  EXPECT_EQ(ids(run(execs->next(soon))), (std::vector<int64_t>{2}));
  EXPECT_TRUE(run(all->next(soon)).empty());  // consumed

  nlohmann::json shown = toJson((*stored)[1]);
  EXPECT_EQ(shown["type"], "exec.ended");
  EXPECT_EQ(shown["box"]["id"], "b2");
  EXPECT_EQ(shown["owner"], "k2");
  EXPECT_EQ(shown["data"]["exit_code"], 0);
  EXPECT_TRUE(toJson((*stored)[2])["box"].is_null());
}

TEST_F(EventBusTest, DataThatIsNotUtf8IsStoredWithReplacements) {
  EXPECT_EQ(bus_->publish("operation.failed", {}, {{"error", std::string("bad \xff name")}}), 1);
  auto stored = bus_->read({});
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(nlohmann::json::parse((*stored)[0].data)["error"], "bad \xef\xbf\xbd name");
}

TEST_F(EventBusTest, ASubscriptionThatFallsBehindDropsItsQueueInsteadOfGrowing) {
  auto slow = bus_->subscribe({}, 4);
  for (int i = 0; i < 10; ++i) bus_->publish("box.started", {"b1", "one", ""});
  EXPECT_TRUE(slow->behind());
  auto got = run(slow->next(steady_clock::now()));
  EXPECT_LE(got.size(), 4u);  // never more than it may hold
}

TEST_F(EventBusTest, ACursorReadsTheStoreThenLiveEventsWithoutGapsOrRepeats) {
  for (int i = 0; i < 5; ++i) bus_->publish("box.started", {"b1", "one", ""});
  EventCursor cursor(*bus_, {.after_id = 2, .limit = 2});
  auto deadline = [] { return steady_clock::now() + std::chrono::milliseconds(50); };
  EXPECT_EQ(ids(*run(cursor.next(deadline()))), (std::vector<int64_t>{3, 4}));
  bus_->publish("box.stopped", {"b1", "one", ""});  // 6: live, but also in the store
  EXPECT_EQ(ids(*run(cursor.next(deadline()))), (std::vector<int64_t>{5, 6}));
  EXPECT_TRUE(run(cursor.next(deadline()))->empty());
  bus_->publish("box.stopped", {"b1", "one", ""});  // 7
  EXPECT_EQ(ids(*run(cursor.next(deadline()))), (std::vector<int64_t>{7}));
  EXPECT_EQ(cursor.lastId(), 7);
}

TEST_F(EventBusTest, ACursorThatFellBehindCatchesUpFromTheStore) {
  EventCursor cursor(*bus_, {.limit = 1000});
  auto deadline = [] { return steady_clock::now() + std::chrono::milliseconds(50); };
  EXPECT_TRUE(run(cursor.next(deadline()))->empty());  // caught up: now live
  // Far more than a subscription holds (4096), published while the reader does nothing.
  for (int i = 0; i < 5000; ++i) bus_->publish("exec.ended", {"b1", "one", ""});
  std::vector<int64_t> seen;
  while (true) {
    auto batch = run(cursor.next(deadline()));
    ASSERT_TRUE(batch);
    if (batch->empty()) break;
    for (const auto& e : *batch) seen.push_back(e.id);
  }
  ASSERT_EQ(seen.size(), 5000u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int64_t>(i + 1));
}

TEST_F(EventBusTest, TheCursorKeepsToItsFilter) {
  EventCursor cursor(*bus_, {.box_id = "b2", .types = {"box."}});
  bus_->publish("box.created", {"b1", "one", ""});
  bus_->publish("exec.ended", {"b2", "two", ""});
  bus_->publish("box.created", {"b2", "two", ""});
  auto got = run(cursor.next(steady_clock::now() + std::chrono::milliseconds(50)));
  ASSERT_TRUE(got);
  EXPECT_EQ(ids(*got), (std::vector<int64_t>{3}));
}

TEST_F(EventBusTest, SubscriptionsOutlivingTheBusAreHarmless) {
  auto sub = bus_->subscribe({});
  bus_.reset();
  sub.reset();  // must not touch the destroyed bus
  SUCCEED();
}

}  // namespace
}  // namespace hutch::observe
