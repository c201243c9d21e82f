#include "net/secrets.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace hutch::net {
namespace {

namespace fs = std::filesystem;

class SecretStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hutch-secrets-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    auto store = SecretStore::open(dir_ / "secrets");
    ASSERT_TRUE(store) << store.error().describe();
    store_.emplace(std::move(*store));
  }
  void TearDown() override { fs::remove_all(dir_); }
  static Secret key() {
    return Secret{.name = "OPENAI_KEY",
                  .value = "sk-real-1234",
                  .domains = {"api.example.test"},
                  .header = "Authorization",
                  .format = "Bearer {value}"};
  }
  fs::path dir_;
  std::optional<SecretStore> store_;
};

TEST_F(SecretStoreTest, StoredPrivatelyAndReadBack) {
  ASSERT_TRUE(store_->put(key()));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "secrets").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir_ / "secrets" / "OPENAI_KEY.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto got = store_->get("OPENAI_KEY");
  ASSERT_TRUE(got) << got.error().describe();
  EXPECT_EQ(got->value, "sk-real-1234");
  EXPECT_EQ(got->format, "Bearer {value}");
  EXPECT_GT(got->updated_at, 0);
  // What the API shows never has the value.
  EXPECT_EQ(describeSecret(*got).dump().find("sk-real"), std::string::npos);
  auto all = store_->list();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  ASSERT_TRUE(store_->remove("OPENAI_KEY"));
  EXPECT_EQ(store_->get("OPENAI_KEY").error().code(), Errc::kNotFound);
  EXPECT_EQ(store_->remove("OPENAI_KEY").error().code(), Errc::kNotFound);
}

TEST_F(SecretStoreTest, BadSecretsAreRefusedWithWhatToDo) {
  auto refused = [&](Secret s) {
    auto put = store_->put(s);
    EXPECT_FALSE(put);
    return put ? std::string() : put.error().message();
  };
  Secret s = key();
  s.name = "lower";
  EXPECT_NE(refused(s).find("A-Z, 0-9 and _"), std::string::npos);
  s = key();
  s.name = "../../etc/passwd";
  EXPECT_NE(refused(s).find("not a secret name"), std::string::npos);
  s = key();
  s.value = "";
  EXPECT_NE(refused(s).find("standard input"), std::string::npos);
  s = key();
  s.value = "a\r\nX-Evil: 1";
  EXPECT_NE(refused(s).find("one line"), std::string::npos);
  s = key();
  s.value = std::string("sk-live\0tail", 12);  // hutch-egress refuses NUL: it would refuse the box
  EXPECT_NE(refused(s).find("without NUL bytes"), std::string::npos);
  s = key();
  s.domains.clear();
  EXPECT_NE(refused(s).find("--domain"), std::string::npos);
  s = key();
  s.domains = {"1.2.3.4"};
  EXPECT_NE(refused(s).find("Bad secret domain"), std::string::npos);
  for (std::vector<std::string> broad :
       {std::vector<std::string>{"*"}, std::vector<std::string>{"api.example.test", "*.test"},
        std::vector<std::string>{"*.COM."}}) {
    s = key();
    s.domains = broad;
    std::string m = refused(s);
    EXPECT_NE(m.find("Bad secret domain"), std::string::npos) << m;
    EXPECT_NE(m.find("would send the secret to every"), std::string::npos) << m;
    EXPECT_NE(m.find("bind it to the API's own name"), std::string::npos) << m;
  }
  s = key();
  s.domains = {"*.example.test", "API.example.test"};
  EXPECT_TRUE(store_->put(s)) << "a domain's names, or one name, may be bound";
  ASSERT_TRUE(store_->remove(s.name));
  s = key();
  s.header = "Bad Header";
  EXPECT_NE(refused(s).find("HTTP header name"), std::string::npos);
  s = key();
  s.format = "Bearer";
  EXPECT_NE(refused(s).find("{value} exactly once"), std::string::npos);
  auto all = store_->list();
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty()) << "nothing refused was stored";
}

TEST(PlaceholderTest, UniqueAndNamed) {
  std::string a = makePlaceholder("K");
  std::string b = makePlaceholder("K");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("hutch-secret-K-", 0), 0u);
  EXPECT_EQ(a.size(), std::string("hutch-secret-K-").size() + 32);
}

}  // namespace
}  // namespace hutch::net
