#include "e2b/template_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace hutch::e2b {
namespace {

namespace fs = std::filesystem;

TEST(TemplateRegistryTest, KeptAcrossOpens) {
  std::string tmpl = (fs::temp_directory_path() / "e2b-registry-XXXXXX").string();
  const fs::path dir = ::mkdtemp(tmpl.data());
  const fs::path file = dir / "sub" / "templates.json";
  {
    auto r = TemplateRegistry::open(file);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->all().empty());
    E2bTemplate t{.id = "t1", .name = "app", .owner_id = "k1", .created_at = 5};
    t.tags["default"] = {"b1", "e2b-t1-b1", 6};
    t.tags["v1"] = {"b1", "e2b-t1-b1", 6, "root", "/srv/app"};
    t.is_public = true;
    ASSERT_TRUE(r->put(t));
    ASSERT_TRUE(
        r->put(E2bTemplate{.id = "t2", .name = "other", .owner_id = "k2", .created_at = 1}));
  }
  auto r = TemplateRegistry::open(file);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->all().size(), 2u);
  EXPECT_EQ(r->all()[0].id, "t2");  // oldest first
  auto app = r->find("app");
  ASSERT_TRUE(app);
  EXPECT_EQ(app->id, "t1");
  EXPECT_EQ(app->tags.at("v1").hutch_template, "e2b-t1-b1");
  EXPECT_EQ(app->tags.at("v1").user, "root");
  EXPECT_EQ(app->tags.at("v1").workdir, "/srv/app");
  EXPECT_EQ(app->tags.at("default").workdir, "");
  EXPECT_TRUE(app->is_public);
  EXPECT_FALSE(r->find("other")->is_public);
  EXPECT_EQ(app->hutchTemplates(), std::vector<std::string>{"e2b-t1-b1"});
  EXPECT_EQ(r->find("t1")->name, "app");
  ASSERT_TRUE(r->remove("t1"));
  EXPECT_FALSE(TemplateRegistry::open(file)->find("app"));

  std::ofstream(file) << "not json";
  EXPECT_EQ(TemplateRegistry::open(file).error().code(), Errc::kInternal);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hutch::e2b
