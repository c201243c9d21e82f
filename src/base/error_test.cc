#include <gtest/gtest.h>

#include <cerrno>

#include "base/result.h"

namespace hutch {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return fail(Errc::kInvalidArgument, "Value must be even");
  return x / 2;
}

Result<int> quarter(int x) {
  HUTCH_TRY(int h, half(x));
  HUTCH_TRY(int q, half(h));
  return q;
}

TEST(ResultTest, PropagatesTheFirstError) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "Value must be even");
}

TEST(ErrorTest, ContextAndErrnoAreRendered) {
  Error e = sysError("Cannot open /x", ENOENT).withContext("Loading template");
  EXPECT_EQ(e.code(), Errc::kNotFound);
  EXPECT_EQ(e.message(), "Loading template: Cannot open /x");
  EXPECT_NE(e.describe().find("No such file"), std::string::npos);
  EXPECT_EQ(errcName(Errc::kFailedPrecondition), "failed_precondition");
}

}  // namespace
}  // namespace hutch
