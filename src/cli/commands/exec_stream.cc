#include "cli/commands/exec_stream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/terminal.h"
#include "proto/frame.h"
#include "proto/messages.h"

namespace hutch::cli {

namespace {

constexpr uint32_t kStream = 1;
constexpr size_t kStdinChunk = size_t{64} * 1024;
constexpr size_t kReadChunk = size_t{256} * 1024;
// Stdin is not read while this much is waiting to be written to hutchd: the socket's own
// back-pressure then reaches whoever writes our stdin.
constexpr size_t kMaxPending = size_t{256} * 1024;

bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// How one exec ended: the exit code, or a reason to stop early.
struct Outcome {
  Result<int> code;
  std::string notice;  // printed on stderr once the terminal is back to normal
};

// One poll() loop over the hutchd connection, our stdin and the watched signals. Writes to hutchd
// are non-blocking and buffered, so a command that is not reading its stdin never keeps us from
// reading its output (which would deadlock both).
class ExecLoop {
 public:
  ExecLoop(UpgradedStream stream, const ExecOptions& options, SignalWatch& signals,
           std::optional<TerminalSize> sent_size)
      : sock_(std::move(stream.fd)),
        options_(options),
        signals_(signals),
        sent_size_(sent_size),
        stdin_open_(options.interactive) {
    decoder_.feed(stream.leftover);
  }

  Outcome run();

 private:
  void queue(proto::FrameType type, std::string_view payload = {}) {
    if (!write_failed_) proto::encodeFrame(type, kStream, payload, out_);
  }
  size_t pending() const { return out_.size() - out_offset_; }
  void flush();
  void readStdin();
  void sendSizeIfChanged();
  // An outcome if a signal ends hutch.
  std::optional<Outcome> onSignals();
  // An outcome once the command's last frame arrived or the connection ended.
  std::optional<Outcome> readSocket();
  // Handles every complete frame the decoder holds.
  std::optional<Outcome> handleFrames();

  UniqueFd sock_;
  const ExecOptions& options_;
  SignalWatch& signals_;
  std::optional<TerminalSize> sent_size_;
  bool stdin_open_;
  bool write_failed_ = false;
  proto::FrameDecoder decoder_;
  std::string out_;  // frames for hutchd not yet written
  size_t out_offset_ = 0;
  std::string buffer_ = std::string(kReadChunk, '\0');  // for reads from stdin and hutchd
};

Outcome ExecLoop::run() {
  const int flags = ::fcntl(sock_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(sock_.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return {fail(sysError("Cannot make the hutchd connection non-blocking", errno)), {}};
  }
  // A resize between reading the size for the request and watching SIGWINCH was not seen.
  sendSizeIfChanged();
  // Frames that came with the 101 answer.
  if (auto done = handleFrames(); done) return std::move(*done);
  while (true) {
    pollfd fds[3] = {};
    fds[0] = {signals_.fd(), POLLIN, 0};
    const bool want_stdin = stdin_open_ && pending() < kMaxPending;
    fds[1] = {want_stdin ? STDIN_FILENO : -1, POLLIN, 0};
    fds[2] = {sock_.get(), static_cast<short>(POLLIN | (pending() > 0 ? POLLOUT : 0)), 0};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return {fail(sysError("poll failed", errno)), {}};
    }
    // Signals first: a resize that happened before some input reaches the box before it.
    if (fds[0].revents != 0) {
      if (auto done = onSignals(); done) return std::move(*done);
    }
    if (fds[1].revents != 0) readStdin();
    if (pending() > 0) flush();
    if ((fds[2].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      if (auto done = readSocket(); done) return std::move(*done);
    }
  }
}

void ExecLoop::flush() {
  while (!write_failed_ && pending() > 0) {
    const ssize_t n =
        ::send(sock_.get(), out_.data() + out_offset_, pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_offset_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // hutchd closed its side; what it sent before is still to be read.
    write_failed_ = true;
    stdin_open_ = false;
  }
  if (out_offset_ == out_.size() || write_failed_) {
    out_.clear();
    out_offset_ = 0;
  } else if (out_offset_ >= kMaxPending) {
    out_.erase(0, out_offset_);
    out_offset_ = 0;
  }
}

void ExecLoop::readStdin() {
  const ssize_t n = ::read(STDIN_FILENO, buffer_.data(), kStdinChunk);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) {
    queue(proto::FrameType::kStdin, std::string_view(buffer_.data(), static_cast<size_t>(n)));
    return;
  }
  // End of input, or an error such as EIO from a terminal that hung up: the same for the box.
  queue(proto::FrameType::kStdinEof);
  stdin_open_ = false;
}

void ExecLoop::sendSizeIfChanged() {
  if (!options_.tty) return;
  auto size = terminalSize(STDIN_FILENO);
  if (!size || size == sent_size_) return;
  sent_size_ = size;
  queue(proto::FrameType::kResize, proto::encodeMessage(proto::WindowSize{size->rows, size->cols}));
}

std::optional<Outcome> ExecLoop::onSignals() {
  while (int signo = signals_.take()) {
    switch (signo) {
      case SIGWINCH: sendSizeIfChanged(); break;
      case SIGINT:
        // In raw mode ^C is a byte for the box's terminal; a SIGINT still arriving (kill -INT)
        // is meant for the command as well.
        queue(proto::FrameType::kSignal, proto::encodeMessage(proto::SignalRequest{SIGINT}));
        break;
      default:
        // SIGTERM, SIGHUP, SIGQUIT: hutch ends; hutchd kills the command when we hang up.
        return Outcome{128 + signo, {}};
    }
  }
  return std::nullopt;
}

std::optional<Outcome> ExecLoop::readSocket() {
  const ssize_t n = ::read(sock_.get(), buffer_.data(), buffer_.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
  if (n <= 0) {
    return Outcome{
        fail(Errc::kUnavailable, "The connection to hutchd closed before the command finished"),
        {}};
  }
  decoder_.feed(std::span<const char>(buffer_.data(), static_cast<size_t>(n)));
  return handleFrames();
}

std::optional<Outcome> ExecLoop::handleFrames() {
  while (true) {
    auto next = decoder_.next();
    if (!next) return Outcome{fail(next.error().withContext("Bad exec stream from hutchd")), {}};
    if (!*next) return std::nullopt;
    const proto::Frame& frame = **next;
    switch (frame.type) {
      case proto::FrameType::kStdout:
        writeAll(STDOUT_FILENO, frame.payload.data(), frame.payload.size());
        break;
      case proto::FrameType::kStderr:
        writeAll(STDERR_FILENO, frame.payload.data(), frame.payload.size());
        break;
      case proto::FrameType::kExit: {
        auto status = proto::decodeMessage<proto::ExitStatus>(frame.payload);
        if (!status) return Outcome{fail(status.error()), {}};
        return Outcome{status->signal ? 128 + *status->signal : status->code.value_or(1), {}};
      }
      case proto::FrameType::kError: {
        auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
        if (!message) return Outcome{fail(message.error()), {}};
        Error e = message->toError();
        if (e.code() == Errc::kNotFound || e.code() == Errc::kInvalidArgument) {
          return Outcome{e.code() == Errc::kNotFound ? 127 : 126, e.message()};
        }
        return Outcome{fail(e), {}};
      }
      default: break;  // kStarted and anything newer: nothing to do
    }
  }
}

}  // namespace

Result<> checkTerminal(const ExecOptions& options) {
  if (options.tty && !isTerminal(STDIN_FILENO)) {
    return fail(Errc::kInvalidArgument,
                "The input device is not a TTY: -t needs a terminal on stdin (drop -t when "
                "running from a script or a pipe)");
  }
  return ok();
}

Result<int> runExec(const ApiClient& client, const std::string& box, const ExecOptions& options) {
  HUTCH_TRY_VOID(checkTerminal(options));
  proto::ExecRequest request;
  request.argv = options.argv;
  request.env = options.env;
  request.cwd = options.cwd;
  request.user = options.user;
  request.pipe_stdin = options.interactive;
  request.tty = options.tty;
  request.login_shell = options.login_shell;
  std::optional<TerminalSize> size;
  if (options.tty) size = terminalSize(STDIN_FILENO);
  if (size) {
    request.rows = size->rows;
    request.cols = size->cols;
  }
  HUTCH_TRY_VOID(proto::validate(request));
  nlohmann::json body = nlohmann::json::parse(proto::encodeMessage(request));
  if (options.timeout_ms != 0) body["timeout_ms"] = options.timeout_ms;
  const auto started = std::chrono::steady_clock::now();
  HUTCH_TRY(UpgradedStream stream, client.upgrade("/v1/boxes/" + box + "/exec", body));

  // Watched from here on, so that ^C before the upgrade still ends hutch at once.
  HUTCH_TRY(std::unique_ptr<SignalWatch> signals,
            SignalWatch::create({SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT}));
  std::unique_ptr<RawMode> raw;
  if (options.tty && options.interactive) {
    HUTCH_TRY(raw, RawMode::enter(STDIN_FILENO));
  }
  Outcome outcome = ExecLoop(std::move(stream), options, *signals, size).run();
  raw.reset();  // the terminal is normal again before anything else is printed
  signals.reset();
  if (!outcome.notice.empty()) fmt::print(stderr, "hutch: {}\n", outcome.notice);
  // hutchd kills a command that runs past its limit with SIGKILL: exit 124, as timeout(1) does.
  if (options.timeout_ms != 0 && outcome.code && *outcome.code == 128 + SIGKILL &&
      std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(options.timeout_ms)) {
    fmt::print(stderr, "hutch: the command ran longer than {} ms and was killed\n",
               options.timeout_ms);
    return 124;
  }
  return std::move(outcome.code);
}

}  // namespace hutch::cli
