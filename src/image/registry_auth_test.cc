#include "image/registry_auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hutch::image {
namespace {

namespace fs = std::filesystem;

class RegistryAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-auth-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(RegistryAuthTest, RegistriesAreHostsWithAnOptionalPort) {
  EXPECT_EQ(normalizeRegistry("Registry.Example:5000").value_or(""), "registry.example:5000");
  EXPECT_EQ(normalizeRegistry("127.0.0.1:5000").value_or(""), "127.0.0.1:5000");
  EXPECT_EQ(normalizeRegistry("[::1]:5000").value_or(""), "[::1]:5000");
  EXPECT_EQ(normalizeRegistry("index.docker.io").value_or(""), "docker.io");
  for (const char* bad : {"", "https://r.example", "r.example/team", "r.example:", "r:abc",
                          "-r.example", "[]:1", "a b"}) {
    auto r = normalizeRegistry(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  }
}

TEST_F(RegistryAuthTest, LoginsAreKeptAsSkopeoReadsThemAndPasswordsNeverListed) {
  fs::path file = dir_ / "registries.json";
  EXPECT_TRUE(listLogins(file).value().empty());
  ASSERT_TRUE(saveLogin(file, "r.example:5000", "alice", "s3cret:with:colons"));
  ASSERT_TRUE(saveLogin(file, "docker.io", "bob", "tok"));
  ASSERT_TRUE(saveLogin(file, "r.example:5000", "carol", "other"));  // replaced
  auto logins = listLogins(file);
  ASSERT_TRUE(logins);
  EXPECT_EQ(*logins,
            (std::vector<RegistryLogin>{{"docker.io", "bob"}, {"r.example:5000", "carol"}}));
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str());
  // base64("carol:other")
  EXPECT_EQ(j["auths"]["r.example:5000"]["auth"], "Y2Fyb2w6b3RoZXI=");
  EXPECT_TRUE(removeLogin(file, "docker.io"));
  auto gone = removeLogin(file, "docker.io");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code(), Errc::kNotFound);
  EXPECT_FALSE(saveLogin(file, "r", "a:b", "p"));
  EXPECT_FALSE(saveLogin(file, "r", "a", ""));
}

TEST_F(RegistryAuthTest, AFileThatIsNotAnAuthFileIsSaidSo) {
  fs::path file = dir_ / "registries.json";
  std::ofstream(file) << "[1,2]";
  auto r = listLogins(file);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kFailedPrecondition);
}

}  // namespace
}  // namespace hutch::image
