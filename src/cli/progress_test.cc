#include "cli/progress.h"

#include <gtest/gtest.h>

namespace hutch::cli {
namespace {

TEST(ProgressTest, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(formatBytes(100u * 1024 * 1024), "100.0 MiB");
  EXPECT_EQ(formatBytes(uint64_t{3} << 30), "3.0 GiB");
}

TEST(ProgressTest, LineAndSummaryShowBytesAndRate) {
  EXPECT_EQ(progressLine("Copying to dev:/tmp", 50u * 1024 * 1024, 2.0),
            "Copying to dev:/tmp  50.0 MiB  25.0 MiB/s");
  EXPECT_EQ(progressSummary(100u * 1024 * 1024, 4.0), "Copied 100.0 MiB in 4.0 s (25.0 MiB/s)");
  EXPECT_EQ(progressSummary(10, 0), "Copied 10 B in 0.0 s (-)");
}

TEST(ProgressTest, CountsWithoutATerminal) {
  Progress progress(nullptr, "x");
  progress.add(10);
  progress.add(5);
  progress.finish();
  EXPECT_EQ(progress.bytes(), 15u);
}

}  // namespace
}  // namespace hutch::cli
