// Decodes a frame's payload with every decoder of proto/ its type can carry, as hutchd (guest
// to host) and hutch-agent (host to guest) do. Shared by agent_frames_fuzz and
// agent_messages_fuzz.
#pragma once

#include <string_view>

#include "proto/files.h"
#include "proto/frame.h"
#include "proto/identity.h"
#include "proto/messages.h"
#include "proto/processes.h"
#include "proto/services.h"
#include "proto/tcp.h"

namespace hutch::fuzz {

template <class T>
void decodeAs(std::string_view payload) {
  (void)proto::decodeMessage<T>(payload);
}

template <class T>
void decodeAndValidate(std::string_view payload) {
  if (auto message = proto::decodeMessage<T>(payload)) (void)proto::validate(*message);
}

inline void decodePayload(proto::FrameType type, std::string_view payload) {
  using proto::FrameType;
  switch (type) {
    case FrameType::kHello: decodeAs<proto::Hello>(payload); break;
    case FrameType::kHelloAck: decodeAs<proto::HelloAck>(payload); break;
    case FrameType::kExec: decodeAndValidate<proto::ExecRequest>(payload); break;
    case FrameType::kStarted: decodeAs<proto::Started>(payload); break;
    case FrameType::kExit: decodeAs<proto::ExitStatus>(payload); break;
    case FrameType::kSignal: decodeAs<proto::SignalRequest>(payload); break;
    case FrameType::kWindow: (void)proto::decodeWindow(payload); break;
    case FrameType::kResize: decodeAs<proto::WindowSize>(payload); break;
    case FrameType::kIdentity: decodeAndValidate<proto::Identity>(payload); break;
    case FrameType::kResult:
      // The answer to whichever request opened the stream.
      decodeAs<proto::IdentityResult>(payload);
      decodeAs<proto::ProcessList>(payload);
      decodeAs<proto::ServiceList>(payload);
      decodeAs<proto::FileInfo>(payload);
      decodeAs<proto::FileList>(payload);
      decodeAs<proto::FileMkdirResult>(payload);
      decodeAs<proto::ParkResult>(payload);
      break;
    case FrameType::kSignalProcess: decodeAs<proto::SignalProcess>(payload); break;
    case FrameType::kServices:
      // The request is {}; the agent reads its services' files, JSON of this form.
      (void)proto::parseServiceSpec(payload);
      break;
    case FrameType::kConnect: decodeAndValidate<proto::ConnectRequest>(payload); break;
    case FrameType::kResume: decodeAs<proto::ResumeRequest>(payload); break;
    case FrameType::kFileStat: decodeAndValidate<proto::FileStatRequest>(payload); break;
    case FrameType::kFileList: decodeAndValidate<proto::FileListRequest>(payload); break;
    case FrameType::kFileEntries: decodeAs<proto::FileList>(payload); break;
    case FrameType::kFileMkdir: decodeAndValidate<proto::FileMkdirRequest>(payload); break;
    case FrameType::kFileMove: decodeAndValidate<proto::FileMoveRequest>(payload); break;
    case FrameType::kFileRemove: decodeAndValidate<proto::FileRemoveRequest>(payload); break;
    case FrameType::kFileRead: decodeAndValidate<proto::FileReadRequest>(payload); break;
    case FrameType::kFileWrite: decodeAndValidate<proto::FileWriteRequest>(payload); break;
    case FrameType::kFileOpened:
      decodeAs<proto::FileInfo>(payload);
      decodeAs<proto::FileWriteOpened>(payload);
      break;
    case FrameType::kWatch: decodeAndValidate<proto::WatchRequest>(payload); break;
    case FrameType::kFileEvents: decodeAs<proto::FileEvents>(payload); break;
    case FrameType::kError: decodeAs<proto::ErrorMessage>(payload); break;
    default:  // bytes, or empty
      break;
  }
}

}  // namespace hutch::fuzz
