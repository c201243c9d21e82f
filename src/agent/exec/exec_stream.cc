#include "agent/exec/exec_stream.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "agent/log.h"
#include "proto/messages.h"

namespace hutch::agent {

using proto::FrameType;

namespace {

// After the process exits while something else (a background job) still holds its terminal,
// output it wrote may still be on its way from the slave to the master (the kernel moves it in a
// work item). Reading until the master has nothing, but at most this much beyond what was
// readable at exit, gets that without letting a writing background job hold the stream open.
constexpr size_t kTerminalInFlight = size_t{64} * 1024;

// True once no process holds the slave open any more (the master then reports POLLHUP).
bool terminalHungUp(int master) {
  pollfd p{master, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) != 0;
}

}  // namespace

ExecStream::ExecStream(EventLoop& loop, StreamSink& sink, uint32_t id, SpawnedProcess process)
    : loop_(loop),
      sink_(sink),
      id_(id),
      pid_(process.pid),
      stdout_{std::move(process.stdout_fd), FrameType::kStdout},
      stderr_{std::move(process.stderr_fd), FrameType::kStderr},
      terminal_(std::move(process.terminal_fd)),
      tty_(terminal_.valid()),
      stdin_(std::move(process.stdin_fd)),
      has_stdin_(stdin_.valid()),
      send_window_(proto::kInitialWindow),
      stdin_credit_(proto::kInitialWindow) {}

ExecStream::~ExecStream() {
  watchOutput(stdout_, false);
  watchOutput(stderr_, false);
  if (stdin_watched_) loop_.remove(stdin_.get());
  // Only a process we have not reaped yet: after that its pid may belong to someone else.
  if (!exited_) ::kill(-pid_, SIGKILL);
}

void ExecStream::start() {
  updateWatches();
}

ExecStream::ReadResult ExecStream::readOutput(Output& out) {
  if (!out.fd) return ReadResult::kClosed;
  size_t want = static_cast<size_t>(std::min<uint64_t>(send_window_, kMaxDataFrame));
  if (exited_) want = std::min(want, out.drain_limit);
  if (want == 0) return ReadResult::kWouldBlock;
  char buffer[kMaxDataFrame];
  while (true) {
    const ssize_t n = ::read(out.fd.get(), buffer, want);
    if (n > 0) {
      if (orphaned_) {
        // Best effort: a full disk loses an orphan's output, never blocks the agent.
        (void)!::write(log_.get(), buffer, static_cast<size_t>(n));
      } else {
        sink_.sendFrame(out.type, id_, std::string_view(buffer, static_cast<size_t>(n)));
        send_window_ -= static_cast<uint64_t>(n);
      }
      if (exited_) {
        out.drain_limit -= static_cast<size_t>(n);
        if (out.drain_limit == 0) closeOutput(out);
      }
      return ReadResult::kData;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !exited_) {
      return ReadResult::kWouldBlock;
    }
    // EOF, an error, or nothing readable after the child exited (a grandchild may hold the pipe
    // open forever): this output is done.
    closeOutput(out);
    return ReadResult::kClosed;
  }
}

void ExecStream::drainAfterExit() {
  for (Output* out : {&stdout_, &stderr_}) {
    while (out->fd && send_window_ > 0) {
      if (readOutput(*out) != ReadResult::kData) break;
    }
  }
}

void ExecStream::watchOutput(Output& out, bool want) {
  if (!out.fd || want == out.watched) return;
  if (want) {
    auto added = loop_.add(out.fd.get(), EPOLLIN, [this, &out](uint32_t) {
      readOutput(out);
      updateWatches();
      maybeFinish();
    });
    if (!added) {
      logError("Cannot watch a process pipe: " + added.error().describe());
      return;
    }
  } else {
    loop_.remove(out.fd.get());
  }
  out.watched = want;
}

void ExecStream::updateWatches() {
  if (finished_) return;
  // A pipe is watched only while there is window to send what it yields: epoll reports a
  // writer's hangup even with no events requested, so a paused pipe must leave the loop.
  const bool want_output = !exited_ && send_window_ > 0;
  watchOutput(stdout_, want_output);
  watchOutput(stderr_, want_output);

  const bool want_stdin = stdin_.valid() && stdin_offset_ < stdin_buffer_.size();
  if (want_stdin != stdin_watched_) {
    if (want_stdin) {
      auto added = loop_.add(stdin_.get(), EPOLLOUT, [this](uint32_t) { writeStdin(); });
      if (!added) {
        logError("Cannot watch a process pipe: " + added.error().describe());
        return;
      }
    } else {
      loop_.remove(stdin_.get());
    }
    stdin_watched_ = want_stdin;
  }
}

void ExecStream::closeOutput(Output& out) {
  watchOutput(out, false);
  out.fd.reset();
}

void ExecStream::grantStdin(size_t bytes) {
  if (bytes == 0 || finished_ || orphaned_) return;
  stdin_credit_ += bytes;
  sink_.sendFrame(FrameType::kWindow, id_, proto::encodeWindow(static_cast<uint32_t>(bytes)));
}

void ExecStream::closeStdin() {
  if (stdin_watched_) {
    loop_.remove(stdin_.get());
    stdin_watched_ = false;
  }
  stdin_.reset();
  // Bytes that will never reach the child are granted back so the host never waits on them.
  const size_t discarded = stdin_buffer_.size() - stdin_offset_ - stdin_unbilled_;
  stdin_buffer_.clear();
  stdin_offset_ = 0;
  stdin_unbilled_ = 0;
  grantStdin(discarded);
}

void ExecStream::writeStdin() {
  const size_t billed = stdin_buffer_.size() - stdin_offset_ - stdin_unbilled_;
  size_t written = 0;
  bool broken = false;
  while (stdin_ && stdin_offset_ < stdin_buffer_.size()) {
    const ssize_t n = ::write(stdin_.get(), stdin_buffer_.data() + stdin_offset_,
                              stdin_buffer_.size() - stdin_offset_);
    if (n > 0) {
      stdin_offset_ += static_cast<size_t>(n);
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    broken = true;  // EPIPE: the child closed its stdin
    break;
  }
  if (stdin_offset_ == stdin_buffer_.size()) {
    stdin_buffer_.clear();
    stdin_offset_ = 0;
  }
  if (written > billed) stdin_unbilled_ -= written - billed;
  grantStdin(std::min(written, billed));
  if (broken || (stdin_ && stdin_eof_ && stdin_buffer_.empty())) closeStdin();
  updateWatches();
}

void ExecStream::onStdin(std::string_view data) {
  if (finished_) return;
  if (!has_stdin_) return streamError(Errc::kProtocol, "Stdin data for a process without stdin");
  if (stdin_eof_) return streamError(Errc::kProtocol, "Stdin data after stdin EOF");
  if (data.size() > stdin_credit_) {
    return streamError(Errc::kProtocol, "Stdin data exceeds the stream's window");
  }
  stdin_credit_ -= data.size();
  if (!data.empty()) last_stdin_byte_ = data.back();
  if (!stdin_) {
    grantStdin(data.size());  // the child's stdin is gone: discard
    return;
  }
  stdin_buffer_.append(data);
  writeStdin();
}

void ExecStream::onStdinEof() {
  if (finished_ || !has_stdin_ || stdin_eof_) return;
  stdin_eof_ = true;
  if (tty_) {
    // Closing our descriptor would not close the terminal (and a hang-up would end the whole
    // session): the end of input is the terminal's own EOF character.
    queueTerminalEof();
    if (stdin_) writeStdin();  // writes what is queued, then closes our side
    return;
  }
  if (stdin_ && stdin_buffer_.empty()) closeStdin();
}

void ExecStream::queueTerminalEof() {
  struct termios modes {};
  if (!stdin_ || ::tcgetattr(terminal_.get(), &modes) != 0) return;
  // In raw mode (an editor, a program reading keys) there is no EOF character: input just ends.
  const auto veof = static_cast<char>(modes.c_cc[VEOF]);
  if ((modes.c_lflag & ICANON) == 0 || veof == static_cast<char>(_POSIX_VDISABLE)) return;
  // VEOF at the start of a line is end-of-file; after an unterminated line it only hands that
  // line to the reader, so a second one is needed.
  const char last = last_stdin_byte_;
  const bool line_open = last != '\n' && last != '\r' && last != veof &&
                         last != static_cast<char>(modes.c_cc[VEOL]) &&
                         last != static_cast<char>(modes.c_cc[VINTR]);
  const size_t count = line_open ? 2 : 1;
  stdin_buffer_.append(count, veof);
  stdin_unbilled_ += count;
}

void ExecStream::onWindow(std::string_view payload) {
  if (finished_) return;
  auto increment = proto::decodeWindow(payload);
  if (!increment) return streamError(Errc::kProtocol, increment.error().message());
  send_window_ += *increment;
  if (exited_) drainAfterExit();
  updateWatches();
  maybeFinish();
}

void ExecStream::onSignal(std::string_view payload) {
  if (finished_) return;
  auto request = proto::decodeMessage<proto::SignalRequest>(payload);
  if (!request) return streamError(Errc::kProtocol, request.error().message());
  if (request->signal < 1 || request->signal > SIGRTMAX) {
    logWarning("Ignoring signal " + std::to_string(request->signal) + " for stream " +
               std::to_string(id_) + ": not a signal number");
    return;
  }
  if (exited_) return;
  ::kill(-pid_, request->signal);
  if (tty_) {
    // An interactive shell runs its foreground job in a process group of its own: that job is
    // what a signal from the host is meant for (as ^C would be), the shell's group gets it too.
    const pid_t foreground = ::tcgetpgrp(terminal_.get());
    if (foreground > 0 && foreground != pid_) ::kill(-foreground, request->signal);
  }
}

void ExecStream::onResize(std::string_view payload) {
  if (finished_) return;
  auto size = proto::decodeMessage<proto::WindowSize>(payload);
  if (!size) return streamError(Errc::kProtocol, size.error().message());
  if (!tty_) return;  // a stream without a terminal has no size
  struct winsize window {};
  window.ws_row = size->rows;
  window.ws_col = size->cols;
  // The kernel sends SIGWINCH to the terminal's foreground process group.
  if (::ioctl(terminal_.get(), TIOCSWINSZ, &window) != 0) {
    logWarning("Stream " + std::to_string(id_) +
               ": cannot resize the terminal: " + std::strerror(errno));
  }
}

void ExecStream::onExited(int wait_status) {
  if (exited_) return;
  exited_ = true;  // even when finished: the pid is no longer ours to signal
  wait_status_ = wait_status;
  if (finished_) return;
  closeStdin();
  // Send what the child wrote before it exited, and no more: a grandchild that keeps the pipe
  // open (or keeps writing) must not hold the exec open.
  for (Output* out : {&stdout_, &stderr_}) {
    if (!out->fd) continue;
    if (tty_) {
      // Once nobody holds the slave, reading the master yields everything written to it (the
      // kernel flushes what is in flight) and then EIO: read until then.
      if (terminalHungUp(out->fd.get())) {
        out->drain_limit = SIZE_MAX;
        continue;
      }
    }
    int pending = 0;
    if (::ioctl(out->fd.get(), FIONREAD, &pending) != 0) pending = 0;
    out->drain_limit = static_cast<size_t>(std::max(pending, 0));
    if (tty_) out->drain_limit += kTerminalInFlight;  // ends early when the master is empty
    if (out->drain_limit == 0) closeOutput(*out);
  }
  drainAfterExit();
  updateWatches();
  maybeFinish();
}

void ExecStream::orphan(UniqueFd log) {
  if (finished_) return;
  orphaned_ = true;
  log_ = std::move(log);
  send_window_ = UINT64_MAX;  // no host to wait for: read whatever comes
  stdin_eof_ = true;
  closeStdin();
  if (exited_) drainAfterExit();
  updateWatches();
  maybeFinish();
}

void ExecStream::maybeFinish() {
  if (finished_ || !exited_ || stdout_.fd || stderr_.fd) return;
  if (orphaned_) {
    finish();
    return;
  }
  proto::ExitStatus status;
  if (WIFSIGNALED(wait_status_)) {
    status = proto::ExitStatus::signaled(WTERMSIG(wait_status_));
  } else {
    status = proto::ExitStatus::exited(WEXITSTATUS(wait_status_));
  }
  sink_.sendFrame(FrameType::kExit, id_, proto::encodeMessage(status));
  finish();
}

void ExecStream::streamError(Errc code, const std::string& message) {
  if (finished_) return;
  logWarning("Stream " + std::to_string(id_) + ": " + message);
  sink_.sendFrame(FrameType::kError, id_,
                  proto::encodeMessage(proto::ErrorMessage{std::string(errcName(code)), message}));
  if (!exited_) ::kill(-pid_, SIGKILL);
  finish();
}

void ExecStream::finish() {
  closeOutput(stdout_);
  closeOutput(stderr_);
  if (stdin_watched_) loop_.remove(stdin_.get());
  stdin_watched_ = false;
  stdin_.reset();
  stdin_buffer_.clear();
  stdin_offset_ = 0;
  stdin_unbilled_ = 0;
  finished_ = true;
  if (!orphaned_) sink_.streamFinished(id_);
}

}  // namespace hutch::agent
