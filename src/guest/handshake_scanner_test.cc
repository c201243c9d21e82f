#include "guest/handshake_scanner.h"

#include <gtest/gtest.h>

#include "proto/messages.h"

namespace hutch::guest {
namespace {

using proto::Frame;
using proto::FrameType;

std::string ack() {
  return proto::encodeFrame(
      proto::makeFrame(FrameType::kHelloAck, 0, proto::HelloAck{1, "0.1.0", {"exec"}}));
}

std::string staleSession() {
  std::string bytes;
  proto::encodeFrame(Frame{FrameType::kStdout, 7, std::string(70000, 'o')}, bytes);
  proto::encodeFrame(
      proto::makeFrame(FrameType::kError, 0, proto::ErrorMessage{"protocol", "old garbage"}),
      bytes);
  // The tail of a frame whose head went to the previous host.
  bytes += std::string("\x02\x00\x00\x00\x00\x00\x00\x00 tail of something", 26);
  return bytes;
}

TEST(HandshakeScannerTest, CleanStreamFindsTheAckAndKeepsWhatFollows) {
  const std::string after = proto::encodeFrame(Frame{FrameType::kPong, 0, "1"});
  HandshakeScanner scanner;
  auto found = scanner.feed(ack() + after);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->frame.type, FrameType::kHelloAck);
  EXPECT_EQ(found->rest, after);
}

TEST(HandshakeScannerTest, SkipsLeftoversOfAnEarlierSessionAtEverySplit) {
  const std::string wire = staleSession() + ack() + ack();
  for (size_t split = 0; split <= wire.size(); split += (split < 200 ? 1 : 1013)) {
    HandshakeScanner scanner;
    auto first = scanner.feed(std::span<const char>(wire.data(), split));
    std::optional<HandshakeScanner::Found> found = first;
    if (!found)
      found = scanner.feed(std::span<const char>(wire.data() + split, wire.size() - split));
    ASSERT_TRUE(found) << "split " << split;
    EXPECT_EQ(found->frame.type, FrameType::kHelloAck) << "split " << split;
    if (!first) {
      EXPECT_EQ(found->rest, ack()) << "split " << split;
    }
  }
}

TEST(HandshakeScannerTest, AnUnsupportedVersionAnswerIsFound) {
  HandshakeScanner scanner;
  auto found = scanner.feed(proto::encodeFrame(proto::makeFrame(
      FrameType::kError, 0, proto::ErrorMessage{"unsupported", "version 2 unknown"})));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->frame.type, FrameType::kError);
}

TEST(HandshakeScannerTest, AHeaderThatNeverCompletesDoesNotHideALaterAck) {
  // A plausible header claiming 4000 bytes, then a real answer inside that range.
  std::string wire("\xa0\x0f\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00", 12);
  wire += "xx" + ack();
  HandshakeScanner scanner;
  auto found = scanner.feed(wire);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->frame.type, FrameType::kHelloAck);
}

TEST(HandshakeScannerTest, GarbageAloneFindsNothingAndStaysSmall) {
  HandshakeScanner scanner;
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(scanner.feed(std::string(10000, static_cast<char>(i))));
  }
  EXPECT_LE(scanner.buffered(), HandshakeScanner::kMaxAnswerPayload + proto::kHeaderSize);
  // A malformed ack is not an answer.
  EXPECT_FALSE(scanner.feed(proto::encodeFrame(Frame{FrameType::kHelloAck, 0, "{bad"})));
  EXPECT_TRUE(scanner.feed(ack()));
}

}  // namespace
}  // namespace hutch::guest
