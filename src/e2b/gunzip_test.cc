#include "e2b/gunzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace hutch::e2b {
namespace {

// `text` as one gzip member.
std::string gzip(std::string_view text) {
  z_stream z{};
  EXPECT_EQ(
      deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
      Z_OK);
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(GunzipTest, InflatesWhateverTheChunksAre) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "Streamed gzipped octet-stream upload. ";
  const std::string packed = gzip(text);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, packed.size()}) {
    Gunzip g;
    std::string out;
    for (size_t at = 0; at < packed.size(); at += chunk) {
      auto part = g.feed(std::string_view(packed).substr(at, chunk));
      ASSERT_TRUE(part) << part.error().describe();
      out += *part;
    }
    EXPECT_TRUE(g.finish());
    EXPECT_EQ(out, text) << "chunks of " << chunk;
  }
}

TEST(GunzipTest, ConcatenatedMembersAreOneStream) {
  Gunzip g;
  auto out = g.feed(gzip("hello ") + gzip("world"));
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "hello world");
  EXPECT_TRUE(g.finish());
}

TEST(GunzipTest, AnEmptyBodyIsAnEmptyFile) {
  Gunzip g;
  EXPECT_TRUE(g.finish());
}

TEST(GunzipTest, WhatIsNotGzipOrStopsMidwayIsRefused) {
  Gunzip plain;
  auto refused = plain.feed("this is not gzip at all");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("gzip"), std::string::npos);
  const std::string packed = gzip("some text that is long enough");
  Gunzip cut;
  ASSERT_TRUE(cut.feed(std::string_view(packed).substr(0, packed.size() - 4)));
  EXPECT_FALSE(cut.finish());
  std::string corrupt = packed;
  corrupt[corrupt.size() - 6] ^= 0x55;  // the CRC
  Gunzip bad;
  auto r = bad.feed(corrupt);
  EXPECT_TRUE(!r || !bad.finish());
}

}  // namespace
}  // namespace hutch::e2b
