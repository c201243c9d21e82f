#include "agent/init/mounts.h"

#include <gtest/gtest.h>

namespace hutch::agent {
namespace {

TEST(MountsTest, ParsesMountPointsFromMountinfo) {
  const std::string mountinfo =
      "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"
      "23 1 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=4k\n"
      "40 23 0:33 / /mnt/with\\040space rw - tmpfs tmpfs rw\n";
  auto points = parseMountPoints(mountinfo);
  EXPECT_EQ(points, (std::set<std::string>{"/proc", "/dev", "/mnt/with space"}));
}

}  // namespace
}  // namespace hutch::agent
