#include "guest/exec_session.h"

#include <signal.h>

#include <algorithm>

#include "guest/agent_client.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

namespace {

// Consumed output is granted back to the agent in batches of this size: small enough that the
// agent never runs dry while the consumer keeps pulling, large enough to keep kWindow frames rare.
constexpr uint64_t kGrantBatch = proto::kInitialWindow / 4;

// The largest kStdin payload the client sends.
constexpr size_t kMaxStdinFrame = size_t{64} * 1024;

}  // namespace

ExecSession::ExecSession(std::shared_ptr<AgentClient> client, uint32_t stream, bool pipe_stdin,
                         bool tty, bool detached)
    : client_(std::move(client)),
      stream_(stream),
      pipe_stdin_(pipe_stdin),
      tty_(tty),
      detached_(detached),
      changed_(client_->executor()) {}

ExecSession::~ExecSession() {
  if (!finished_ && client_->isOpen()) {
    // The owner let go of a running process: it dies with its handle.
    client_->send(FrameType::kSignal, stream_, proto::encodeMessage(proto::SignalRequest{SIGKILL}));
  }
  if (!finished_ && started_) {
    summary_.error = Error(Errc::kCancelled, "The session was dropped while its process ran");
    notifyObserver();
  }
  client_->forget(stream_);
}

void ExecSession::onFinished(std::function<void(const Summary&)> observer) {
  if (detached_) return;
  observer_ = std::move(observer);
  if (finished_) notifyObserver();
}

void ExecSession::notifyObserver() {
  if (!observer_) return;
  auto observer = std::move(observer_);
  observer_ = nullptr;
  summary_.detached = detached_;
  observer(summary_);
}

void ExecSession::finishWith(std::optional<Error> error) {
  finished_ = true;
  // A started session reports its error in the summary; read it before it is moved below.
  if (started_ && error && !summary_.exit_status) summary_.error = *error;
  if (!started_ && error) {
    start_error_ = std::move(error);
  } else if (error && !error_) {
    error_ = std::move(error);
  }
  if (started_) notifyObserver();
  changed_.notify();
}

void ExecSession::onStreamClosed(const Error& error) {
  if (finished_) return;
  finishWith(
      error.code() == Errc::kCancelled
          ? error
          : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message()));
}

void ExecSession::onStreamFrame(const Frame& frame) {
  if (finished_) return;
  switch (frame.type) {
    case FrameType::kStarted: {
      auto started = proto::decodeMessage<proto::Started>(frame.payload);
      if (!started) return finishWith(started.error());
      started_ = true;
      pid_ = started->pid;
      if (detached_) {
        // The agent's last frame on this stream: the process is on its own.
        detached_id_ = started->id;
        log_path_ = started->log;
        return finishWith(std::nullopt);
      }
      changed_.notify();
      return;
    }
    case FrameType::kStdout:
    case FrameType::kStderr: {
      if (frame.payload.size() > receive_window_) {
        client_->send(FrameType::kSignal, stream_,
                      proto::encodeMessage(proto::SignalRequest{SIGKILL}));
        return finishWith(Error(Errc::kProtocol, "The agent sent more output than the window"));
      }
      receive_window_ -= frame.payload.size();
      summary_.bytes_out += frame.payload.size();
      ExecEvent event;
      event.kind =
          frame.type == FrameType::kStdout ? ExecEvent::Kind::kStdout : ExecEvent::Kind::kStderr;
      event.data = frame.payload;
      events_.push_back(std::move(event));
      changed_.notify();
      return;
    }
    case FrameType::kExit: {
      auto status = proto::decodeMessage<proto::ExitStatus>(frame.payload);
      if (!status) return finishWith(status.error());
      ExecEvent event;
      event.kind = ExecEvent::Kind::kExit;
      event.exit_status = *status;
      summary_.exit_status = *status;
      events_.push_back(std::move(event));
      return finishWith(std::nullopt);
    }
    case FrameType::kWindow: {
      auto increment = proto::decodeWindow(frame.payload);
      if (!increment) return finishWith(increment.error());
      stdin_credit_ += *increment;
      changed_.notify();
      return;
    }
    case FrameType::kError: {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      return finishWith(message ? message->toError()
                                : Error(Errc::kProtocol, "The agent sent a malformed error"));
    }
    default:
      return finishWith(Error(Errc::kProtocol, "The agent sent an unexpected frame type " +
                                                   std::to_string(static_cast<int>(frame.type)) +
                                                   " on an exec stream"));
  }
}

asio::awaitable<Result<ExecEvent>> ExecSession::next() {
  while (true) {
    if (!events_.empty()) {
      ExecEvent event = std::move(events_.front());
      events_.pop_front();
      if (event.kind == ExecEvent::Kind::kExit) {
        exit_returned_ = true;
      } else {
        ungranted_ += event.data.size();
        if (ungranted_ >= kGrantBatch && !finished_) {
          receive_window_ += ungranted_;
          client_->send(FrameType::kWindow, stream_,
                        proto::encodeWindow(static_cast<uint32_t>(ungranted_)));
          ungranted_ = 0;
        }
      }
      co_return event;
    }
    if (error_) co_return fail(*error_);
    if (detached_) {
      co_return fail(Errc::kFailedPrecondition,
                     "A detached process has no events; its output is in " + log_path_);
    }
    if (exit_returned_) {
      co_return fail(Errc::kFailedPrecondition, "The process has exited; there are no more events");
    }
    co_await changed_.wait();
  }
}

Result<> ExecSession::checkUsable() const {
  if (error_) return fail(*error_);
  if (finished_) return fail(Errc::kFailedPrecondition, "The process has exited");
  return ok();
}

asio::awaitable<Result<>> ExecSession::writeStdin(std::string_view bytes) {
  if (!pipe_stdin_) {
    co_return fail(Errc::kFailedPrecondition, "The process was started without stdin");
  }
  if (stdin_closed_) co_return fail(Errc::kFailedPrecondition, "Stdin is already closed");
  const std::function<Result<>()> usable = [this] { return checkUsable(); };
  co_return co_await client_->sendWithCredit(FrameType::kStdin, stream_, bytes, kMaxStdinFrame,
                                             stdin_credit_, changed_, usable, &summary_.bytes_in);
}

Result<> ExecSession::closeStdin() {
  if (!pipe_stdin_) return fail(Errc::kFailedPrecondition, "The process was started without stdin");
  if (stdin_closed_) return ok();
  stdin_closed_ = true;
  if (!finished_) client_->send(FrameType::kStdinEof, stream_, {});
  return ok();
}

Result<> ExecSession::signal(int signo) {
  if (signo < 1 || signo > 64) {
    return fail(Errc::kInvalidArgument, "Signal " + std::to_string(signo) + " is not 1-64");
  }
  HUTCH_TRY_VOID(checkUsable());
  client_->send(FrameType::kSignal, stream_, proto::encodeMessage(proto::SignalRequest{signo}));
  return ok();
}

Result<> ExecSession::killForTimeout() {
  HUTCH_TRY_VOID(signal(SIGKILL));
  summary_.timed_out = true;
  return ok();
}

void ExecSession::abandon(Error why) {
  if (finished_) return;
  if (client_->isOpen()) {
    client_->send(FrameType::kSignal, stream_, proto::encodeMessage(proto::SignalRequest{SIGKILL}));
  }
  finishWith(std::move(why));
}

Result<> ExecSession::resize(uint16_t rows, uint16_t cols) {
  // Only a tty session may send kResize: the agent then has the "tty" capability (an older one
  // would take the unknown frame type for a broken connection).
  if (!tty_) return fail(Errc::kFailedPrecondition, "The process was started without a terminal");
  HUTCH_TRY_VOID(checkUsable());
  client_->send(FrameType::kResize, stream_, proto::encodeMessage(proto::WindowSize{rows, cols}));
  return ok();
}

}  // namespace hutch::guest
