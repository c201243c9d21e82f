// The JSON payloads of the agent protocol (docs/protocol.md) and their checked decoding.
//
// Decoding never throws: malformed JSON, a payload that is not an object, a missing required
// field or a field of the wrong type is Errc::kProtocol (the peer broke the protocol); a
// well-formed request with a bad value (empty argv, "FOO" in env) is Errc::kInvalidArgument.
// Unknown fields are ignored so that newer peers can add fields without a version bump.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/frame.h"

namespace hutch::proto {

// kHello, host->guest. Starts a session.
struct Hello {
  uint32_t version = kProtocolVersion;
  std::string host;  // free text naming the host side, for the agent's log

  bool operator==(const Hello&) const = default;
};

// kHelloAck, guest->host.
struct HelloAck {
  uint32_t version = kProtocolVersion;
  std::string agent;  // agent version "x.y.z"
  std::vector<std::string> capabilities;

  bool hasCapability(std::string_view name) const;
  bool operator==(const HelloAck&) const = default;
};

// kExec, host->guest. Opens the stream id of its frame.
struct ExecRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it contains '/'
  std::vector<std::string> env;   // "KEY=VALUE"; the process gets exactly these plus defaults
  std::string cwd;                // empty: the user's home, else /
  std::string user;               // name or numeric uid; empty: root
  bool pipe_stdin = false;        // JSON "stdin": true gives a pipe (a tty: kStdin is accepted)
  // A pseudo-terminal as stdin, stdout and stderr (output comes as kStdout only). Needs the
  // agent's "tty" capability.
  bool tty = false;
  uint16_t rows = 0;  // the terminal's initial size (tty only); 0: left to the kernel (0x0)
  uint16_t cols = 0;
  // Run the user's login shell (/bin/bash -l if present, else /bin/sh -l); argv must be empty.
  bool login_shell = false;
  // A detached process (needs the "detach" capability): its own session, stdin /dev/null,
  // stdout and stderr appended to a log file in the box; the agent answers kStarted with its id
  // and log path, which also ends the stream. It outlives the session. Not with stdin, tty or
  // login_shell.
  bool detach = false;

  bool operator==(const ExecRequest&) const = default;
};

// Checks the values of a request (both sides call it: the host before sending, the agent after
// decoding).
Result<> validate(const ExecRequest& request);

// kStarted, guest->host.
struct Started {
  int pid = 0;
  // A detached process only: the id the agent gave it and its log file.
  std::string id;
  std::string log;

  bool operator==(const Started&) const = default;
};

// kExit, guest->host: exactly one of code and signal.
struct ExitStatus {
  std::optional<int> code;
  std::optional<int> signal;

  static ExitStatus exited(int code) { return ExitStatus{code, std::nullopt}; }
  static ExitStatus signaled(int signal) { return ExitStatus{std::nullopt, signal}; }
  bool operator==(const ExitStatus&) const = default;
};

// kResize, host->guest: a tty stream's new window size in character cells.
struct WindowSize {
  uint16_t rows = 0;
  uint16_t cols = 0;

  bool operator==(const WindowSize&) const = default;
};

// kSignal, host->guest.
struct SignalRequest {
  int signal = 0;

  bool operator==(const SignalRequest&) const = default;
};

// kError, either way. code is an errcName() string ("not_found", "protocol", ...).
struct ErrorMessage {
  std::string code;
  std::string message;

  static ErrorMessage fromError(const Error& error);
  // The Error this message describes; an unknown code becomes Errc::kInternal.
  Error toError() const;
  bool operator==(const ErrorMessage&) const = default;
};

// The Errc whose errcName() is name, if any.
std::optional<Errc> errcFromName(std::string_view name);

std::string encodeMessage(const Hello& message);
std::string encodeMessage(const HelloAck& message);
std::string encodeMessage(const ExecRequest& message);
std::string encodeMessage(const Started& message);
std::string encodeMessage(const ExitStatus& message);
std::string encodeMessage(const SignalRequest& message);
std::string encodeMessage(const WindowSize& message);
std::string encodeMessage(const ErrorMessage& message);

// decodeMessage<Hello>(payload) etc.; defined for the message structs above.
template <class T>
Result<T> decodeMessage(std::string_view payload);

template <>
Result<Hello> decodeMessage<Hello>(std::string_view payload);
template <>
Result<HelloAck> decodeMessage<HelloAck>(std::string_view payload);
template <>
Result<ExecRequest> decodeMessage<ExecRequest>(std::string_view payload);
template <>
Result<Started> decodeMessage<Started>(std::string_view payload);
template <>
Result<ExitStatus> decodeMessage<ExitStatus>(std::string_view payload);
template <>
Result<SignalRequest> decodeMessage<SignalRequest>(std::string_view payload);
template <>
Result<WindowSize> decodeMessage<WindowSize>(std::string_view payload);
template <>
Result<ErrorMessage> decodeMessage<ErrorMessage>(std::string_view payload);

// A frame carrying the JSON encoding of message.
template <class T>
Frame makeFrame(FrameType type, uint32_t stream, const T& message) {
  return Frame{type, stream, encodeMessage(message)};
}

// kWindow payload: a u32 little-endian credit increment, exactly 4 bytes.
std::string encodeWindow(uint32_t increment);
Result<uint32_t> decodeWindow(std::string_view payload);

}  // namespace hutch::proto
