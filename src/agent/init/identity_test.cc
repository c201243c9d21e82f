#include "agent/init/identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hutch::agent {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(IdentityTest, HostsEntryIsAddedOnce) {
  auto path =
      std::filesystem::temp_directory_path() / ("hutch-hosts-" + std::to_string(::getpid()));
  {
    std::ofstream out(path);
    out << "127.0.0.1\tlocalhost\n# 127.0.1.1 web (a comment does not count)\n";
  }
  ASSERT_TRUE(addHostsEntry(path.string(), "web"));
  ASSERT_TRUE(addHostsEntry(path.string(), "web"));
  EXPECT_EQ(slurp(path),
            "127.0.0.1\tlocalhost\n# 127.0.1.1 web (a comment does not count)\n127.0.1.1\tweb\n");
  ASSERT_TRUE(addHostsEntry(path.string(), "localhost"));  // already there: unchanged
  EXPECT_EQ(slurp(path).find("127.0.1.1\tlocalhost"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(IdentityTest, HostnameValidation) {
  EXPECT_TRUE(isValidHostname("box-1.dev"));
  EXPECT_FALSE(isValidHostname("under_score"));
  EXPECT_FALSE(isValidHostname("-lead"));
  EXPECT_FALSE(isValidHostname(""));
}

}  // namespace
}  // namespace hutch::agent
