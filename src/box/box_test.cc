#include "box/box.h"

#include <gtest/gtest.h>

namespace hutch::box {
namespace {

constexpr BoxState kAll[] = {BoxState::kCreating, BoxState::kRunning, BoxState::kStopping,
                             BoxState::kStopped,  BoxState::kFailed,  BoxState::kPaused,
                             BoxState::kSuspended};

TEST(BoxStateTest, LegalTransitions) {
  // The full table: rows are `from`, columns are `to` in kAll's order (creating, running,
  // stopping, stopped, failed, paused, suspended).
  const bool legal[7][7] = {
      /* creating  */ {false, true, false, true, true, false, false},
      /* running   */ {false, false, true, false, true, true, false},
      /* stopping  */ {false, false, false, true, true, false, true},
      /* stopped   */ {true, false, false, false, false, false, false},
      /* failed    */ {true, false, false, false, true, false, false},
      /* paused    */ {false, true, true, false, true, false, false},
      /* suspended */ {true, false, false, true, false, false, false},
  };
  for (int f = 0; f < 7; ++f) {
    for (int t = 0; t < 7; ++t) {
      auto r = checkTransition(kAll[f], kAll[t]);
      EXPECT_EQ(r.has_value(), legal[f][t]) << stateName(kAll[f]) << " -> " << stateName(kAll[t]);
      if (!r) {
        EXPECT_EQ(r.error().code(), Errc::kFailedPrecondition);
      }
    }
  }
}

TEST(BoxStateTest, NamesRoundTrip) {
  for (BoxState s : kAll) EXPECT_EQ(*parseState(stateName(s)), s);
  EXPECT_FALSE(parseState("exploded"));
}

TEST(ExpiryTest, NamesRoundTrip) {
  for (auto e : {Expiry::kNone, Expiry::kRemove, Expiry::kStop, Expiry::kSuspend}) {
    EXPECT_EQ(*parseExpiry(expiryName(e)), e);
  }
  auto bad = parseExpiry("explode");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("stop, suspend or remove"), std::string::npos);
}

TEST(BoxConfigTest, RejectsOutOfRangeValues) {
  BoxConfig c;
  EXPECT_TRUE(c.validate());
  c.cpus = 0;
  EXPECT_EQ(c.validate().error().code(), Errc::kInvalidArgument);
  c.cpus = 2;
  c.memory_mib = 64;
  EXPECT_NE(c.validate().error().message().find("memory"), std::string::npos);
}

TEST(BoxNameTest, DockerLikeNames) {
  EXPECT_TRUE(validateName("web-1"));
  EXPECT_TRUE(validateName("a.b_c"));
  EXPECT_FALSE(validateName(""));
  EXPECT_FALSE(validateName("-lead"));
  EXPECT_FALSE(validateName("has space"));
  EXPECT_FALSE(validateName("slash/no"));
  EXPECT_FALSE(validateName(std::string(64, 'a')));
}

TEST(BoxShareTest, DockerLikeVolumesAndTheirErrors) {
  auto rw = parseShare("/srv/project:/work");
  ASSERT_TRUE(rw) << rw.error().describe();
  EXPECT_EQ(*rw, (BoxShare{"/srv/project", "/work", false}));
  auto ro = parseShare("/srv/data:/data:ro");
  ASSERT_TRUE(ro);
  EXPECT_TRUE(ro->read_only);
  EXPECT_EQ(shareText(*ro), "/srv/data:/data:ro");
  EXPECT_EQ(parseShare(shareText(*ro)), ro);
  EXPECT_FALSE(parseShare("/srv/data:/data:rw")->read_only);

  auto message = [](std::string_view text) {
    auto r = parseShare(text);
    EXPECT_FALSE(r) << text;
    return r ? std::string() : r.error().message();
  };
  EXPECT_NE(message("/srv/project").find("HOSTDIR:BOXDIR"), std::string::npos);
  EXPECT_NE(message("/a:/b:/c").find("HOSTDIR:BOXDIR"), std::string::npos);
  EXPECT_NE(message("project:/work").find("absolute"), std::string::npos);
  EXPECT_NE(message("/srv/project:work").find("absolute"), std::string::npos);
  EXPECT_NE(message("/srv/a,b:/work").find("comma"), std::string::npos);
  EXPECT_NE(message("/srv/../etc:/work").find(".."), std::string::npos);
  EXPECT_NE(message("/srv/project:/").find("'/'"), std::string::npos);
  EXPECT_NE(message("/srv/project:/work/..//").find(".."), std::string::npos);

  std::vector<BoxShare> twice{{"/a", "/work", false}, {"/b", "/work/", true}};
  auto clash = validateShares(twice);
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().message().find("/work"), std::string::npos);
  std::vector<BoxShare> many(kMaxShares + 1, BoxShare{"/a", "/b", false});
  for (size_t i = 0; i < many.size(); ++i) many[i].box_dir += std::to_string(i);
  EXPECT_FALSE(validateShares(many));
}

}  // namespace
}  // namespace hutch::box
