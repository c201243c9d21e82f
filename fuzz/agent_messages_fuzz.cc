// The agent protocol's JSON messages, fed by a box (and, in hutch-agent, by the host): the first
// byte picks the frame type whose decoders read the rest (agent_payloads.h).
#include <array>

#include "agent_payloads.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hutch::proto::FrameType;
  static constexpr std::array kTypes = {
      FrameType::kHello,       FrameType::kHelloAck,      FrameType::kExec,
      FrameType::kStarted,     FrameType::kExit,          FrameType::kSignal,
      FrameType::kWindow,      FrameType::kResize,        FrameType::kIdentity,
      FrameType::kResult,      FrameType::kSignalProcess, FrameType::kServices,
      FrameType::kConnect,     FrameType::kFileStat,      FrameType::kFileList,
      FrameType::kFileEntries, FrameType::kFileMkdir,     FrameType::kFileMove,
      FrameType::kFileRemove,  FrameType::kFileRead,      FrameType::kFileWrite,
      FrameType::kFileOpened,  FrameType::kWatch,         FrameType::kFileEvents,
      FrameType::kError};
  hutch::fuzz::FuzzInput input(data, size);
  FrameType type = kTypes[input.byte() % kTypes.size()];
  hutch::fuzz::decodePayload(type, input.rest());
  return 0;
}
