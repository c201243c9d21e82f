#include "storage/event_store.h"

#include <gtest/gtest.h>

#include "storage/box_store.h"

namespace hutch::storage {
namespace {

StoredEvent event(int64_t time, const char* type, const char* box, const char* owner) {
  StoredEvent e;
  e.time = time;
  e.type = type;
  e.box_id = box;
  e.box_name = std::string("name-") + box;
  e.owner_id = owner;
  e.data = R"({"k":1})";
  return e;
}

TEST(EventStoreTest, IdsIncreaseAndQueriesFilterByIdTimeBoxOwnerAndType) {
  auto boxes = BoxStore::open(":memory:");
  ASSERT_TRUE(boxes) << boxes.error().describe();
  EventStore events(boxes->database(), 1000);
  EXPECT_EQ(*events.lastId(), 0);
  EXPECT_EQ(*events.insert(event(100, "box.created", "b1", "k1")), 1);
  EXPECT_EQ(*events.insert(event(200, "box.started", "b1", "k1")), 2);
  EXPECT_EQ(*events.insert(event(300, "exec.ended", "b2", "k2")), 3);
  EXPECT_EQ(*events.insert(event(400, "key.created", "", "")), 4);
  EXPECT_EQ(*events.lastId(), 4);

  auto ids = [&](const EventQuery& q) {
    std::vector<int64_t> out;
    auto found = events.query(q);
    for (const auto& e : *found) out.push_back(e.id);
    return out;
  };
  EXPECT_EQ(ids({}), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(ids({.after_id = 2}), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ids({.since_time = 300}), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ids({.box_id = "b1"}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ids({.types = {"box."}}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ids({.types = {"box.started", "key.created"}}), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(ids({.types = {"box"}}), (std::vector<int64_t>{}));  // neither exact nor a prefix
  EXPECT_EQ(ids({.owner_id = std::string("k2")}), (std::vector<int64_t>{3}));
  EXPECT_EQ(ids({.owner_id = std::string("")}), (std::vector<int64_t>{4}));
  EXPECT_EQ(ids({.limit = 2}), (std::vector<int64_t>{1, 2}));
  auto got = events.query({.after_id = 2, .limit = 1});
  ASSERT_EQ(got->size(), 1u);
  StoredEvent want = event(300, "exec.ended", "b2", "k2");
  want.id = 3;
  EXPECT_EQ(got->front(), want);
  EXPECT_TRUE(EventQuery{.box_id = "b2"}.matches(want));
  EXPECT_FALSE(EventQuery{.after_id = 3}.matches(want));
}

TEST(EventStoreTest, KeepsOnlyTheNewestAndNeverReusesAnId) {
  auto boxes = BoxStore::open(":memory:");
  ASSERT_TRUE(boxes);
  EventStore events(boxes->database(), 10);
  for (int i = 0; i < 600; ++i) ASSERT_TRUE(events.insert(event(i, "box.started", "b", "")));
  // Pruned every 256 inserts: at most retain + 255 are kept, the newest always.
  auto kept = events.query({.limit = 100000});
  ASSERT_TRUE(kept);
  EXPECT_LE(kept->size(), 10u + 255u);
  EXPECT_GE(kept->size(), 10u);
  EXPECT_EQ(kept->back().id, 600);
  EXPECT_GT(*events.firstId(), 1);
  EXPECT_EQ(*events.insert(event(1000, "box.stopped", "b", "")), 601);
}

}  // namespace
}  // namespace hutch::storage
