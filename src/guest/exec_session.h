// ExecSession: the host's handle on one process started by AgentClient::exec().
//
// Events are pulled with next(). Pulling is what grants the agent more send window, so a
// consumer that stops pulling stops the process (its pipes fill up) without unbounded buffering
// anywhere. Not thread-safe: use it on the client's executor, one next() and one writeStdin() at
// a time. Destroying a session whose process has not finished kills the process group.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "event/async_event.h"
#include "guest/asio.h"
#include "guest/stream_handler.h"
#include "proto/frame.h"
#include "proto/messages.h"

namespace hutch::guest {

class AgentClient;

struct ExecEvent {
  enum class Kind { kStdout, kStderr, kExit };

  Kind kind = Kind::kStdout;
  std::string data;               // kStdout, kStderr: the bytes
  proto::ExitStatus exit_status;  // kExit: the last event of the session
};

class ExecSession : public StreamHandler {
 public:
  ~ExecSession() override;
  ExecSession(const ExecSession&) = delete;
  ExecSession& operator=(const ExecSession&) = delete;

  uint32_t streamId() const { return stream_; }
  int pid() const { return pid_; }
  // A detached process (ExecRequest::detach): the id the agent gave it and its log file in the
  // box. Such a session is finished as soon as it is returned: it has no events (next() is
  // kFailedPrecondition), and dropping it does not touch the process.
  bool detached() const { return detached_; }
  const std::string& detachedId() const { return detached_id_; }
  const std::string& logPath() const { return log_path_; }
  // The agent has sent the last frame of the stream (the exit status or an error).
  bool finished() const { return finished_; }

  // The next event: output in the order the agent sent it, then kExit. Errors: the agent
  // closed the stream with an error (its code, e.g. kProtocol); kUnavailable when the connection
  // to the agent was lost; kCancelled after AgentClient::close(); kFailedPrecondition after kExit
  // was returned.
  boost::asio::awaitable<Result<ExecEvent>> next();

  // Sends bytes to the process's stdin, waiting for window from the agent as needed; returns
  // when all of it is queued for sending. bytes must stay valid until it returns.
  // kFailedPrecondition without stdin, after closeStdin() or once the process has exited.
  boost::asio::awaitable<Result<>> writeStdin(std::string_view bytes);

  // EOF on the process's stdin (after everything written before it).
  Result<> closeStdin();

  // Sends signal signo (1-64) to the process's process group (on a terminal also to its
  // foreground process group).
  Result<> signal(int signo);

  // Kills the process group (SIGKILL) because it ran past its time limit; timedOut() says so
  // from then on.
  Result<> killForTimeout();
  bool timedOut() const { return summary_.timed_out; }

  // Gives up on the process without waiting for the agent: SIGKILL is sent (while the
  // connection is open), the session finishes with `why`, and next() returns it once the queued
  // events are taken. For an owner that cannot wait for an exit a hostile guest may never send.
  void abandon(Error why);

  // Sets the terminal's window size (the process gets SIGWINCH). kFailedPrecondition unless the
  // session was started with tty, or once the process has exited.
  Result<> resize(uint16_t rows, uint16_t cols);

  bool tty() const { return tty_; }

  // What the session carried, for its observer: bytes written to stdin and received from
  // stdout and stderr, and how it ended (the exit status, or the error that ended it).
  struct Summary {
    uint64_t bytes_in = 0;
    uint64_t bytes_out = 0;
    std::optional<proto::ExitStatus> exit_status;
    std::optional<Error> error;  // no exit status: why (lost connection, abandoned, ...)
    bool detached = false;
    bool timed_out = false;  // killed by killForTimeout()
  };
  // Called once, when the session finishes (the agent's last frame, a lost connection, or the
  // session dropped while its process ran); at once if it has finished already. Not for
  // detached sessions (finished before exec() returns, with no summary to give).
  void onFinished(std::function<void(const Summary&)> observer);

 private:
  friend class AgentClient;

  ExecSession(std::shared_ptr<AgentClient> client, uint32_t stream, bool pipe_stdin, bool tty,
              bool detached = false);

  // StreamHandler, called by the client's read loop.
  void onStreamFrame(const proto::Frame& frame) override;
  void onStreamClosed(const Error& error) override;
  bool streamFinished() const override { return finished_; }
  void finishWith(std::optional<Error> error);
  Result<> checkUsable() const;

  std::shared_ptr<AgentClient> client_;
  const uint32_t stream_;
  const bool pipe_stdin_;
  const bool tty_;
  const bool detached_;
  std::string detached_id_;
  std::string log_path_;
  event::AsyncEvent changed_;

  bool started_ = false;
  int pid_ = 0;
  std::optional<Error> start_error_;

  std::deque<ExecEvent> events_;
  bool finished_ = false;       // no more frames will come for this stream
  bool exit_returned_ = false;  // next() has returned kExit
  std::optional<Error> error_;  // returned by next() once the queued events are consumed

  uint64_t receive_window_ = proto::kInitialWindow;  // output the agent may still send us
  uint64_t ungranted_ = 0;                           // consumed but not yet granted back
  uint64_t stdin_credit_ = proto::kInitialWindow;    // stdin we may still send
  bool stdin_closed_ = false;

  Summary summary_;
  std::function<void(const Summary&)> observer_;
  void notifyObserver();
};

}  // namespace hutch::guest
