#include "proto/frame.h"

#include <string>

#include "base/check.h"

namespace hutch::proto {
namespace {

void putU32(std::string& out, uint32_t value) {
  const char bytes[4] = {static_cast<char>(value & 0xff), static_cast<char>((value >> 8) & 0xff),
                         static_cast<char>((value >> 16) & 0xff),
                         static_cast<char>((value >> 24) & 0xff)};
  out.append(bytes, sizeof bytes);
}

uint32_t getU32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) | (static_cast<uint32_t>(u[3]) << 24);
}

}  // namespace

bool isKnownFrameType(uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kHello:
    case FrameType::kHelloAck:
    case FrameType::kPing:
    case FrameType::kPong:
    case FrameType::kExec:
    case FrameType::kStarted:
    case FrameType::kStdin:
    case FrameType::kStdinEof:
    case FrameType::kStdout:
    case FrameType::kStderr:
    case FrameType::kExit:
    case FrameType::kSignal:
    case FrameType::kWindow:
    case FrameType::kResize:
    case FrameType::kPoweroff:
    case FrameType::kIdentity:
    case FrameType::kResult:
    case FrameType::kProcesses:
    case FrameType::kSignalProcess:
    case FrameType::kServices:
    case FrameType::kConnect:
    case FrameType::kConnected:
    case FrameType::kData:
    case FrameType::kEof:
    case FrameType::kClose:
    case FrameType::kPark:
    case FrameType::kResume:
    case FrameType::kFileStat:
    case FrameType::kFileList:
    case FrameType::kFileEntries:
    case FrameType::kFileMkdir:
    case FrameType::kFileMove:
    case FrameType::kFileRemove:
    case FrameType::kFileRead:
    case FrameType::kFileWrite:
    case FrameType::kFileOpened:
    case FrameType::kWatch:
    case FrameType::kFileEvents:
    case FrameType::kError: return true;
  }
  return false;
}

void encodeFrame(FrameType type, uint32_t stream, std::string_view payload, std::string& out) {
  HUTCH_CHECK(payload.size() <= kMaxPayload);
  out.reserve(out.size() + kHeaderSize + payload.size());
  putU32(out, static_cast<uint32_t>(payload.size()));
  out.push_back(static_cast<char>(type));
  out.push_back(0);  // flags
  out.push_back(0);  // reserved
  out.push_back(0);
  putU32(out, stream);
  out.append(payload);
}

void encodeFrame(const Frame& frame, std::string& out) {
  encodeFrame(frame.type, frame.stream, frame.payload, out);
}

std::string encodeFrame(const Frame& frame) {
  std::string out;
  encodeFrame(frame, out);
  return out;
}

void FrameDecoder::feed(std::span<const char> bytes) {
  if (failed_ || bytes.empty()) return;
  // Compact once the consumed prefix dominates, so the buffer stays proportional to what is
  // pending rather than to everything ever fed.
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
}

Result<> FrameDecoder::checkHeader() {
  const size_t have = buffered();
  const char* h = buffer_.data() + offset_;
  if (have >= 4) {
    const uint32_t length = getU32(h);
    if (length > kMaxPayload) {
      return fail(Errc::kProtocol, "Frame payload of " + std::to_string(length) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(kMaxPayload));
    }
  }
  if (have >= 5) {
    const auto type = static_cast<uint8_t>(h[4]);
    if (!isKnownFrameType(type)) {
      return fail(Errc::kProtocol, "Unknown frame type " + std::to_string(type));
    }
  }
  if (have >= 6 && h[5] != 0) {
    return fail(Errc::kProtocol, "Frame flags must be zero");
  }
  if (have >= 8 && (h[6] != 0 || h[7] != 0)) {
    return fail(Errc::kProtocol, "Frame reserved bytes must be zero");
  }
  return ok();
}

Result<std::optional<Frame>> FrameDecoder::next() {
  if (failed_) return fail(Errc::kProtocol, error_);
  if (auto header = checkHeader(); !header) {
    failed_ = true;
    error_ = header.error().message();
    buffer_.clear();
    offset_ = 0;
    return fail(header.error());
  }
  if (buffered() < kHeaderSize) return std::optional<Frame>();
  const char* h = buffer_.data() + offset_;
  const uint32_t length = getU32(h);
  if (buffered() < kHeaderSize + length) return std::optional<Frame>();

  Frame frame;
  frame.type = static_cast<FrameType>(static_cast<uint8_t>(h[4]));
  frame.stream = getU32(h + 8);
  frame.payload.assign(h + kHeaderSize, length);
  offset_ += kHeaderSize + length;
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  }
  return std::optional<Frame>(std::move(frame));
}

}  // namespace hutch::proto
