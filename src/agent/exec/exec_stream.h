// ExecStream: one kExec stream, from kStarted to its last frame (kExit, or kError after a
// stream-level protocol error). Owns the process: destroying a stream whose process is still
// running kills its process group.
//
// Flow control (docs/protocol.md): the stream may send send-window bytes of stdout+stderr
// payload; when the window is used up it stops reading the pipes (the child then blocks on a full
// pipe) until the host grants more with kWindow. The host may send kInitialWindow bytes of kStdin
// payload; the stream grants them back with kWindow as they are written to the child.
//
// On a terminal (tty) stream the "pipes" are the pty master: its output is sent as kStdout, kStdin
// is written to it (so ^C becomes SIGINT through the line discipline), kResize sets its window
// size, and kStdinEof writes the terminal's VEOF character when it is in canonical mode.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/event_loop.h"
#include "agent/exec/spawn.h"
#include "base/unique_fd.h"
#include "proto/frame.h"

namespace hutch::agent {

// What a stream needs from the session that owns it.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual void sendFrame(proto::FrameType type, uint32_t stream, std::string_view payload) = 0;
  // The stream has sent its last frame. The owner destroys it later, never inside this call.
  virtual void streamFinished(uint32_t stream) = 0;
};

// The largest kStdout/kStderr payload the agent sends.
inline constexpr size_t kMaxDataFrame = size_t{64} * 1024;

class ExecStream {
 public:
  ExecStream(EventLoop& loop, StreamSink& sink, uint32_t id, SpawnedProcess process);
  ~ExecStream();
  ExecStream(const ExecStream&) = delete;
  ExecStream& operator=(const ExecStream&) = delete;

  // Starts watching the pipes. Call after kStarted has been sent.
  void start();

  uint32_t id() const { return id_; }
  pid_t pid() const { return pid_; }
  bool finished() const { return finished_; }

  // Frames from the host for this stream.
  void onStdin(std::string_view data);
  void onStdinEof();
  void onWindow(std::string_view payload);
  void onSignal(std::string_view payload);
  void onResize(std::string_view payload);

  // The reaper collected the process.
  void onExited(int wait_status);

  // The host that started the process is gone (another host said kHello): the process goes on
  // without a stream. Its stdin gets EOF and its output is appended to `log` as it comes (no
  // flow control, nothing sent); no frame is sent from now on, and streamFinished() is not
  // called. finished() becomes true once it has exited and its output is drained.
  void orphan(UniqueFd log);
  bool orphaned() const { return orphaned_; }
  bool exited() const { return exited_; }
  // What started it, for the record of an orphan (DetachedProcesses::adopt).
  void describe(std::vector<std::string> argv, std::string user, int64_t started_ns) {
    argv_ = std::move(argv);
    user_ = std::move(user);
    started_ns_ = started_ns;
  }
  const std::vector<std::string>& argv() const { return argv_; }
  const std::string& user() const { return user_; }
  int64_t startedNs() const { return started_ns_; }

 private:
  struct Output {
    UniqueFd fd;
    proto::FrameType type;
    bool watched = false;
    size_t drain_limit = 0;  // after exit: bytes that were in the pipe when the child exited
  };

  enum class ReadResult { kData, kClosed, kWouldBlock };

  ReadResult readOutput(Output& out);
  void drainAfterExit();
  void updateWatches();
  void watchOutput(Output& out, bool want);
  void closeOutput(Output& out);
  void writeStdin();
  void closeStdin();
  void queueTerminalEof();
  void grantStdin(size_t bytes);
  void maybeFinish();
  void streamError(Errc code, const std::string& message);
  void finish();

  EventLoop& loop_;
  StreamSink& sink_;
  const uint32_t id_;
  const pid_t pid_;
  Output stdout_;
  Output stderr_;

  UniqueFd terminal_;  // the pty master, for ioctls; invalid unless tty_
  const bool tty_;

  UniqueFd stdin_;
  const bool has_stdin_;
  bool stdin_watched_ = false;
  bool stdin_eof_ = false;  // kStdinEof received
  std::string stdin_buffer_;
  size_t stdin_offset_ = 0;
  // Bytes at the end of stdin_buffer_ that the host did not send (VEOF on a terminal): written
  // like the rest but never granted back.
  size_t stdin_unbilled_ = 0;
  char last_stdin_byte_ = '\n';  // the last byte the host sent; a newline "before" the first

  uint64_t send_window_;   // stdout+stderr payload bytes we may still send
  uint64_t stdin_credit_;  // kStdin payload bytes the host may still send

  bool exited_ = false;
  int wait_status_ = 0;
  bool finished_ = false;

  bool orphaned_ = false;
  UniqueFd log_;  // an orphan's output goes here
  std::vector<std::string> argv_;
  std::string user_;
  int64_t started_ns_ = 0;
};

}  // namespace hutch::agent
