#include "proto/frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hutch::proto {
namespace {

// Pulls every complete frame out of the decoder; stops at the first error.
Result<std::vector<Frame>> drain(FrameDecoder& decoder) {
  std::vector<Frame> frames;
  while (true) {
    auto next = decoder.next();
    if (!next) return fail(next.error());
    if (!next->has_value()) return frames;
    frames.push_back(std::move(**next));
  }
}

std::vector<Frame> sampleFrames() {
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  return {
      Frame{FrameType::kHello, 0, R"({"version":1})"},
      Frame{FrameType::kStdout, 7, binary},
      Frame{FrameType::kStdinEof, 7, ""},
      Frame{FrameType::kWindow, 0xfffffffe, std::string("\x01\x00\x00\x00", 4)},
      Frame{FrameType::kStderr, 3, std::string(70000, 'e')},
      Frame{FrameType::kError, 0, R"({"code":"protocol","message":"x"})"},
  };
}

std::string header(uint32_t length, uint8_t type, uint8_t flags, uint16_t reserved,
                   uint32_t stream) {
  std::string h;
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  h.push_back(static_cast<char>(type));
  h.push_back(static_cast<char>(flags));
  h.push_back(static_cast<char>(reserved & 0xff));
  h.push_back(static_cast<char>(reserved >> 8));
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>((stream >> (8 * i)) & 0xff));
  return h;
}

TEST(FrameTest, HeaderLayoutIsLittleEndian) {
  const std::string bytes = encodeFrame(Frame{FrameType::kExit, 0x01020304, "ab"});
  ASSERT_EQ(bytes.size(), kHeaderSize + 2);
  EXPECT_EQ(bytes.substr(0, kHeaderSize), header(2, 0x16, 0, 0, 0x01020304));
  EXPECT_EQ(bytes.substr(kHeaderSize), "ab");
}

TEST(FrameTest, RoundTripsManyFramesInOneFeed) {
  std::string wire;
  for (const auto& f : sampleFrames()) encodeFrame(f, wire);
  FrameDecoder decoder;
  decoder.feed(wire);
  auto frames = drain(decoder);
  ASSERT_TRUE(frames) << frames.error().message();
  EXPECT_EQ(*frames, sampleFrames());
  EXPECT_EQ(decoder.buffered(), 0u);
}

TEST(FrameTest, DecodesFramesSplitAtEveryBoundary) {
  std::string wire;
  for (const auto& f : sampleFrames()) encodeFrame(f, wire);
  // Two pieces, split at every possible offset.
  for (size_t split = 0; split <= wire.size(); split += (split < 400 ? 1 : 997)) {
    FrameDecoder decoder;
    std::vector<Frame> got;
    decoder.feed(std::span<const char>(wire.data(), split));
    auto first = drain(decoder);
    ASSERT_TRUE(first) << "split " << split;
    got = *first;
    decoder.feed(std::span<const char>(wire.data() + split, wire.size() - split));
    auto second = drain(decoder);
    ASSERT_TRUE(second) << "split " << split;
    got.insert(got.end(), second->begin(), second->end());
    ASSERT_EQ(got, sampleFrames()) << "split " << split;
  }
}

TEST(FrameTest, DecodesByteByByte) {
  std::string wire;
  for (const auto& f : sampleFrames()) encodeFrame(f, wire);
  FrameDecoder decoder;
  std::vector<Frame> got;
  for (char c : wire) {
    decoder.feed(std::span<const char>(&c, 1));
    auto frames = drain(decoder);
    ASSERT_TRUE(frames);
    got.insert(got.end(), frames->begin(), frames->end());
  }
  EXPECT_EQ(got, sampleFrames());
}

TEST(FrameTest, TruncatedFrameWaitsForMoreBytes) {
  const std::string wire = encodeFrame(Frame{FrameType::kStdout, 1, "hello"});
  for (size_t cut = 0; cut < wire.size(); ++cut) {
    FrameDecoder decoder;
    decoder.feed(std::span<const char>(wire.data(), cut));
    auto next = decoder.next();
    ASSERT_TRUE(next) << "cut " << cut;
    EXPECT_FALSE(next->has_value()) << "cut " << cut;
    EXPECT_FALSE(decoder.failed());
  }
}

TEST(FrameTest, MaxPayloadIsAcceptedAndOneMoreIsRefused) {
  FrameDecoder ok_decoder;
  ok_decoder.feed(encodeFrame(Frame{FrameType::kStdout, 1, std::string(kMaxPayload, 'x')}));
  auto frame = ok_decoder.next();
  ASSERT_TRUE(frame);
  ASSERT_TRUE(frame->has_value());
  EXPECT_EQ((*frame)->payload.size(), kMaxPayload);

  FrameDecoder decoder;
  decoder.feed(header(kMaxPayload + 1, 0x14, 0, 0, 1));
  auto next = decoder.next();
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().code(), Errc::kProtocol);
  EXPECT_TRUE(decoder.failed());
}

TEST(FrameTest, OversizedLengthFailsFromTheFirstFourBytesWithoutBuffering) {
  FrameDecoder decoder;
  decoder.feed(std::string("\xff\xff\xff\xff", 4));
  auto next = decoder.next();
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().code(), Errc::kProtocol);
  // A failed decoder stays failed and buffers nothing more.
  decoder.feed(std::string(1000, 'x'));
  EXPECT_EQ(decoder.buffered(), 0u);
  EXPECT_FALSE(decoder.next());
}

TEST(FrameTest, UnknownTypeIsAProtocolError) {
  for (uint8_t type : {0x00, 0x05, 0x1a, 0x5f, 0x7e, 0x80, 0xff}) {
    FrameDecoder decoder;
    decoder.feed(header(0, type, 0, 0, 0));
    auto next = decoder.next();
    ASSERT_FALSE(next) << int(type);
    EXPECT_EQ(next.error().code(), Errc::kProtocol);
  }
}

TEST(FrameTest, NonzeroFlagsOrReservedAreProtocolErrors) {
  for (auto h :
       {header(0, 0x03, 1, 0, 0), header(0, 0x03, 0, 1, 0), header(0, 0x03, 0, 0x100, 0)}) {
    FrameDecoder decoder;
    decoder.feed(h);
    auto next = decoder.next();
    ASSERT_FALSE(next);
    EXPECT_EQ(next.error().code(), Errc::kProtocol);
  }
}

TEST(FrameTest, GarbageIsRefusedEvenWhenShorterThanAHeader) {
  FrameDecoder decoder;
  decoder.feed(std::string("hello\n"));
  auto next = decoder.next();
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().code(), Errc::kProtocol);

  FrameDecoder http;
  http.feed(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(http.next());
}

TEST(FrameTest, ValidFramesBeforeGarbageAreDelivered) {
  std::string wire = encodeFrame(Frame{FrameType::kPing, 0, "1"});
  wire += header(0, 0x99, 0, 0, 0);
  FrameDecoder decoder;
  decoder.feed(wire);
  auto first = decoder.next();
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->type, FrameType::kPing);
  EXPECT_FALSE(decoder.next());
}

TEST(FrameTest, KnownTypesAreExactlyTheEnumerators) {
  int known = 0;
  for (int t = 0; t < 256; ++t) known += isKnownFrameType(static_cast<uint8_t>(t)) ? 1 : 0;
  EXPECT_EQ(known, 39);
}

}  // namespace
}  // namespace hutch::proto
