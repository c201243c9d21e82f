#include "base/fault.h"

#include <gtest/gtest.h>

namespace hutch::fault {
namespace {

int passageToFail(std::string_view spec, std::string_view point) {
  return faultFor(spec, point).passage;
}

TEST(FaultTest, TheVariableNamesAPointAndWhichPassageKills) {
  EXPECT_EQ(passageToFail("boot.vm-launched", "boot.vm-launched"), 1);
  EXPECT_EQ(passageToFail("boot.vm-launched@3", "boot.vm-launched"), 3);
  EXPECT_EQ(passageToFail("remove.recorded,boot.vm-launched@2", "boot.vm-launched"), 2);
  EXPECT_EQ(passageToFail("remove.recorded,boot.vm-launched@2", "remove.recorded"), 1);
  EXPECT_EQ(passageToFail("boot.vm-launched", "boot.agent-ready"), 0);
  // A prefix is not the point, and a count that is not a positive number disables it.
  EXPECT_EQ(passageToFail("boot", "boot.vm-launched"), 0);
  EXPECT_EQ(passageToFail("boot.vm-launched@0", "boot.vm-launched"), 0);
  EXPECT_EQ(passageToFail("boot.vm-launched@x", "boot.vm-launched"), 0);
  EXPECT_EQ(passageToFail("", "boot.vm-launched"), 0);
}

TEST(FaultTest, QemuOrEgressAfterTheNameKillsThatProcessInstead) {
  EXPECT_EQ(faultFor("boot.vm-launched", "boot.vm-launched"),
            (Fault{.passage = 1, .target = Target::kHutchd}));
  EXPECT_EQ(faultFor("boot.vm-launched:qemu", "boot.vm-launched"),
            (Fault{.passage = 1, .target = Target::kQemu}));
  EXPECT_EQ(faultFor("remove.recorded,capture.disk-frozen@2:qemu", "capture.disk-frozen"),
            (Fault{.passage = 2, .target = Target::kQemu}));
  EXPECT_EQ(faultFor("capture.disk-frozen@2:qemu", "remove.recorded"), Fault{});
  EXPECT_EQ(faultFor("remove.recorded:qemu,boot.agent-ready@3:egress", "boot.agent-ready"),
            (Fault{.passage = 3, .target = Target::kEgress}));
  // Anything else after a colon disables the point rather than killing hutchd by surprise.
  EXPECT_EQ(faultFor("boot.vm-launched:hutch-egress", "boot.vm-launched"), Fault{});
  EXPECT_EQ(faultFor("boot.vm-launched:qemu:egress", "boot.vm-launched"), Fault{});
  EXPECT_EQ(faultFor("boot.vm-launched@2:", "boot.vm-launched"), Fault{});
}

TEST(FaultTest, UnnamedPointsAreNoOps) {
  // HUTCH_FAULT_POINTS is not set for unit tests: passing every point does nothing.
  for (std::string_view p : kPoints) point(p);
  SUCCEED();
}

}  // namespace
}  // namespace hutch::fault
