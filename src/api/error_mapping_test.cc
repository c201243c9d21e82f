#include "api/error_mapping.h"

#include <gtest/gtest.h>

#include <set>

namespace hutch::api {
namespace {

TEST(ErrorMappingTest, StatusesForTheCommonCases) {
  EXPECT_EQ(httpStatus(Errc::kInvalidArgument), 400);
  EXPECT_EQ(httpStatus(Errc::kNotFound), 404);
  EXPECT_EQ(httpStatus(Errc::kAlreadyExists), 409);
  EXPECT_EQ(httpStatus(Errc::kFailedPrecondition), 409);
  EXPECT_EQ(httpStatus(Errc::kUnavailable), 503);
  EXPECT_EQ(httpStatus(Errc::kInternal), 500);
}

TEST(ErrorMappingTest, EveryCodeRoundTripsThroughItsName) {
  for (Errc c : kAllErrcs) {
    EXPECT_EQ(errcFromHttp(httpStatus(c), errcName(c)), c) << errcName(c);
    EXPECT_NE(cliExitCode(c), 0) << errcName(c);
    EXPECT_GE(httpStatus(c), 400) << errcName(c);
  }
}

TEST(ErrorMappingTest, AuthCodes) {
  EXPECT_EQ(httpStatus(Errc::kUnauthenticated), 401);
  EXPECT_EQ(httpStatus(Errc::kPermissionDenied), 403);
  EXPECT_EQ(httpStatus(Errc::kResourceExhausted), 429);
  EXPECT_EQ(errcFromHttp(401, ""), Errc::kUnauthenticated);
  EXPECT_EQ(errcFromHttp(429, "resource_exhausted"), Errc::kResourceExhausted);
}

TEST(ErrorMappingTest, UnknownNameFallsBackToStatus) {
  EXPECT_EQ(errcFromHttp(404, "weird"), Errc::kNotFound);
  EXPECT_EQ(errcFromHttp(418, ""), Errc::kInternal);
}

TEST(ErrorMappingTest, DistinctExitCodesForUserVisibleCauses) {
  std::set<int> codes{cliExitCode(Errc::kInvalidArgument), cliExitCode(Errc::kNotFound),
                      cliExitCode(Errc::kAlreadyExists), cliExitCode(Errc::kFailedPrecondition),
                      cliExitCode(Errc::kUnavailable)};
  EXPECT_EQ(codes.size(), 5u);
}

}  // namespace
}  // namespace hutch::api
