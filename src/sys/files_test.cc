#include "sys/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace hutch::sys {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hutch-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FilesTest, WriteAtomicThenRead) {
  ASSERT_TRUE(writeFileAtomic(dir_ / "a", "hello\n"));
  ASSERT_TRUE(writeFileAtomic(dir_ / "a", "world\n"));
  EXPECT_EQ(*readFile(dir_ / "a"), "world\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
  EXPECT_FALSE(readFile(dir_ / "a", 3));
  auto missing = readFile(dir_ / "missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
}

TEST_F(FilesTest, TailStartsAtALine) {
  ASSERT_TRUE(writeFileAtomic(dir_ / "log", "first line\nsecond line\nthird\n"));
  EXPECT_EQ(*readTail(dir_ / "log", 14), "third\n");
  EXPECT_EQ(*readTail(dir_ / "log", 1000), "first line\nsecond line\nthird\n");
}

TEST_F(FilesTest, AppendKeepsContent) {
  for (const char* text : {"a\n", "b\n"}) {
    auto fd = openForAppend(dir_ / "log");
    ASSERT_TRUE(fd);
    ASSERT_EQ(::write(fd->get(), text, 2), 2);
  }
  EXPECT_EQ(*readFile(dir_ / "log"), "a\nb\n");
}

}  // namespace
}  // namespace hutch::sys
