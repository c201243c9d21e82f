#include "api/error_mapping.h"

#include <gtest/gtest.h>

#include <set>

namespace hutch::api {
namespace {

constexpr Errc kAll[] = {
    Errc::kInvalidArgument, Errc::kNotFound, Errc::kAlreadyExists, Errc::kFailedPrecondition,
    Errc::kUnavailable,     Errc::kTimeout,  Errc::kProtocol,      Errc::kUnsupported,
    Errc::kCancelled,       Errc::kInternal};

TEST(ErrorMappingTest, StatusesForTheCommonCases) {
  EXPECT_EQ(httpStatus(Errc::kInvalidArgument), 400);
  EXPECT_EQ(httpStatus(Errc::kNotFound), 404);
  EXPECT_EQ(httpStatus(Errc::kAlreadyExists), 409);
  EXPECT_EQ(httpStatus(Errc::kFailedPrecondition), 409);
  EXPECT_EQ(httpStatus(Errc::kUnavailable), 503);
  EXPECT_EQ(httpStatus(Errc::kInternal), 500);
}

TEST(ErrorMappingTest, EveryCodeRoundTripsThroughItsName) {
  for (Errc c : kAll) {
    EXPECT_EQ(errcFromHttp(httpStatus(c), errcName(c)), c) << errcName(c);
    EXPECT_NE(cliExitCode(c), 0) << errcName(c);
    EXPECT_GE(httpStatus(c), 400) << errcName(c);
  }
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
