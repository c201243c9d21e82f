#include "agent/init/kernel_cmdline.h"

#include <gtest/gtest.h>

#include "agent/init/identity.h"

namespace hutch::agent {
namespace {

TEST(KernelCmdlineTest, FindsParameters) {
  const std::string cmdline =
      "console=ttyS0 root=/dev/vda rw hutch.hostname=box-1 quiet tsc=reliable\n";
  EXPECT_EQ(kernelParam(cmdline, "hutch.hostname"), "box-1");
  EXPECT_EQ(kernelParam(cmdline, "quiet"), "");
  EXPECT_EQ(kernelParam(cmdline, "tsc"), "reliable");
  EXPECT_EQ(kernelParam(cmdline, "hutch"), std::nullopt);
  EXPECT_EQ(kernelParam(cmdline, "hutch.host"), std::nullopt);
  EXPECT_EQ(kernelParam(cmdline, "absent"), std::nullopt);
}

TEST(KernelCmdlineTest, LastOneWinsAndQuotesAreRemoved) {
  EXPECT_EQ(kernelParam("a=1 a=2", "a"), "2");
  EXPECT_EQ(kernelParam("x \"msg=hello world\" y", "msg"), "hello world");
  EXPECT_EQ(kernelParam("msg=\"a b\"", "msg"), "a b");
}

TEST(IdentityTest, HostnameValidation) {
  EXPECT_TRUE(isValidHostname("box-1.example"));
  EXPECT_FALSE(isValidHostname(""));
  EXPECT_FALSE(isValidHostname("-x"));
  EXPECT_FALSE(isValidHostname("a b"));
  EXPECT_FALSE(isValidHostname(std::string(65, 'a')));
  auto system = recordingSystemControl("/nonexistent");
  EXPECT_EQ(applyHostname("hutch.hostname=bad/name", *system).error().code(),
            Errc::kInvalidArgument);
  EXPECT_TRUE(applyHostname("no hostname here", *system));
}

}  // namespace
}  // namespace hutch::agent
