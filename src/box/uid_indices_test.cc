// uid indices over a real (in-memory) box store.
#include "box/uid_indices.h"

#include <gtest/gtest.h>

namespace hutch::box {
namespace {

TEST(UidIndicesTest, TheLowestIndexNoRecordAndNoHolderHasIsFree) {
  auto store = storage::BoxStore::open(":memory:");
  ASSERT_TRUE(store) << store.error().message();
  for (int64_t index : {0, 2}) {
    Box box;
    box.id = randomId();
    box.name = "box-" + box.id;
    box.uid_index = index;
    ASSERT_TRUE(store->insert(box));
  }
  UidIndices indices(*store);
  EXPECT_EQ(*indices.lowestFree(), 1u);
  EXPECT_EQ(*indices.lowestFree(), 1u);  // only looking takes nothing
  EXPECT_EQ(*indices.take(), 1u);        // a template or pool VM's, with no record
  EXPECT_EQ(*indices.lowestFree(), 3u);
  indices.hold(3);  // a removed box's, until its QEMU is gone
  EXPECT_EQ(*indices.take(), 4u);
  EXPECT_EQ(indices.held(), (std::set<uint32_t>{1, 3, 4}));
  indices.release(1);
  indices.release(3);
  EXPECT_EQ(*indices.lowestFree(), 1u);
  EXPECT_EQ(indices.held(), (std::set<uint32_t>{4}));
}

}  // namespace
}  // namespace hutch::box
