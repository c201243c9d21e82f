// The hutch frame: the wire unit of the host<->guest agent protocol, also carried by the API's
// upgraded exec connections. Shared by hutch-agent (guest), hutchd and the CLI.
// Specification: docs/protocol.md. Keep the two in step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace hutch::proto {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxPayload = 1u << 20;         // 1 MiB; larger is a protocol error
inline constexpr uint32_t kInitialWindow = 256u * 1024u;  // per stream, per direction

enum class FrameType : uint8_t {
  kHello = 0x01,     // host->guest  JSON {"version":1,"host":"..."}
  kHelloAck = 0x02,  // guest->host  JSON {"version":1,"agent":"x.y.z","capabilities":[...]}
  kPing = 0x03,      // either way   payload echoed in kPong
  kPong = 0x04,
  kExec = 0x10,      // host->guest  JSON ExecRequest; opens stream id
  kStarted = 0x11,   // guest->host  JSON {"pid":N}
  kStdin = 0x12,     // host->guest  bytes
  kStdinEof = 0x13,  // host->guest  empty
  kStdout = 0x14,    // guest->host  bytes
  kStderr = 0x15,    // guest->host  bytes
  kExit = 0x16,      // guest->host  JSON {"code":N} or {"signal":N}; last frame of a stream
  kSignal = 0x17,    // host->guest  JSON {"signal":N}
  kWindow = 0x18,    // either way   4-byte LE credit increment for the stream's data
  kResize = 0x19,    // host->guest  JSON {"rows":N,"cols":N}: a tty stream's window size
  kPoweroff = 0x20,  // host->guest  empty: sync, unmount, power off
  // Requests: the host opens a fresh stream S with one of these; the agent answers on S with
  // exactly one kResult or kError, which closes S. Each needs the capability named beside it.
  kIdentity = 0x21,       // host->guest  JSON Identity ("identity")
  kResult = 0x22,         // guest->host  JSON: the answer to the request that opened S
  kProcesses = 0x23,      // host->guest  {} -> ProcessList: the detached processes ("detach")
  kSignalProcess = 0x24,  // host->guest  JSON SignalProcess: signal one by id ("detach")
  kServices = 0x25,       // host->guest  {} -> ServiceList: the supervised services ("services")
  // TCP streams ("tcp"): kConnect opens S; data flows both ways under the kWindow credits.
  kConnect = 0x30,    // host->guest  JSON ConnectRequest {"port":N,"address":"127.0.0.1"}
  kConnected = 0x31,  // guest->host  {}: the connection is up (else kError ends S)
  kData = 0x32,       // either way   bytes, at most 64 KiB, counted against the window
  kEof = 0x33,        // either way   empty: the sender will send no more data (half-close)
  kClose = 0x34,      // host->guest: abort (reset); guest->host: {} the last frame of S
  // Parking ("park"): TCP streams kept across a suspend, under a new stream id after it.
  kPark = 0x35,    // host->guest  {} on a fresh S -> kResult ParkResult: every TCP stream parked
  kResume = 0x36,  // host->guest  JSON ResumeRequest on a fresh S: a parked stream goes on as S
  // Files ("files"; kWatch: "watch"): requests answered by kResult or kError, and streams of
  // content (kData/kWindow/kEof/kClose as on TCP streams) or events. See proto/files.h.
  kFileStat = 0x40,     // host->guest  JSON FileStatRequest -> FileInfo
  kFileList = 0x41,     // host->guest  JSON FileListRequest -> kFileEntries*, kResult FileList
  kFileEntries = 0x42,  // guest->host  JSON FileList: a part of a long listing, before kResult
  kFileMkdir = 0x43,    // host->guest  JSON FileMkdirRequest -> FileMkdirResult
  kFileMove = 0x44,     // host->guest  JSON FileMoveRequest -> FileInfo
  kFileRemove = 0x45,   // host->guest  JSON FileRemoveRequest -> {}
  kFileRead = 0x46,     // host->guest  JSON FileReadRequest; opens a read stream
  kFileWrite = 0x47,    // host->guest  JSON FileWriteRequest; opens a write stream
  kFileOpened = 0x48,   // guest->host  JSON: the stream is open (FileInfo or FileWriteOpened)
  kWatch = 0x49,        // host->guest  JSON WatchRequest; opens a watch stream
  kFileEvents = 0x4a,   // guest->host  JSON FileEvents, under the window
  kError = 0x7f,        // either way   JSON {"code":"not_found","message":"..."}; 0 = connection
};

bool isKnownFrameType(uint8_t type);

struct Frame {
  FrameType type{};
  uint32_t stream = 0;
  std::string payload;  // bytes; JSON text for the JSON types

  bool operator==(const Frame&) const = default;
};

// Header layout (little-endian): u32 payload length, u8 type, u8 flags (0), u16 reserved (0),
// u32 stream id.
// Encoding a payload larger than kMaxPayload is a bug (HUTCH_CHECK): split data before framing.
void encodeFrame(const Frame& frame, std::string& out);
std::string encodeFrame(const Frame& frame);
// Appends one frame without building a Frame first (the hot path for output data).
void encodeFrame(FrameType type, uint32_t stream, std::string_view payload, std::string& out);

// Incremental decoder for a byte stream. Feed bytes as they arrive, then pull frames.
// After a protocol error (unknown type, nonzero flags/reserved, oversized length) the decoder
// stays failed: the connection must be reset.
class FrameDecoder {
 public:
  void feed(std::span<const char> bytes);
  // A frame if one is complete; std::nullopt if more bytes are needed; an error if the stream is
  // corrupt.
  Result<std::optional<Frame>> next();
  size_t buffered() const { return buffer_.size() - offset_; }
  bool failed() const { return failed_; }

 private:
  // Checks as much of the header as has arrived, so garbage fails fast and an oversized length is
  // refused before any of its payload is buffered.
  Result<> checkHeader();

  std::string buffer_;
  size_t offset_ = 0;
  bool failed_ = false;
  std::string error_;
};

}  // namespace hutch::proto
