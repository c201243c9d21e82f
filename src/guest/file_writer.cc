#include "guest/file_writer.h"

#include <algorithm>

#include "guest/agent_client.h"
#include "proto/messages.h"
#include "proto/tcp.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

FileWriter::FileWriter(std::shared_ptr<AgentClient> client, uint32_t stream)
    : client_(std::move(client)),
      stream_(stream),
      changed_(client_->executor()),
      send_credit_(proto::kInitialWindow) {}

FileWriter::~FileWriter() {
  if (!ended_ && client_->isOpen()) client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
}

void FileWriter::end(std::optional<Error> error) {
  if (ended_) return;
  ended_ = true;
  if (error && !error_) error_ = std::move(error);
  changed_.notify();
}

void FileWriter::abortWith(Error error) {
  if (ended_) return;
  client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
  end(std::move(error));
}

void FileWriter::onStreamClosed(const Error& error) {
  end(error.code() == Errc::kCancelled
          ? error
          : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message()));
}

void FileWriter::onStreamFrame(const Frame& frame) {
  if (ended_) return;
  switch (frame.type) {
    case FrameType::kFileOpened: {
      if (opened_) return abortWith(Error(Errc::kProtocol, "The agent opened the file twice"));
      auto opened = proto::decodeMessage<proto::FileWriteOpened>(frame.payload);
      if (!opened) return abortWith(opened.error());
      path_ = std::move(opened->path);
      opened_ = true;
      changed_.notify();
      return;
    }
    case FrameType::kWindow: {
      auto increment = proto::decodeWindow(frame.payload);
      if (!increment) return abortWith(increment.error());
      // The agent grants back what it received: never more than was sent.
      send_credit_ += *increment;
      if (send_credit_ > proto::kInitialWindow) {
        return abortWith(Error(Errc::kProtocol, "The agent granted more window than was sent"));
      }
      changed_.notify();
      return;
    }
    case FrameType::kResult: {
      if (!eof_sent_) {
        return abortWith(Error(Errc::kProtocol, "The agent finished a write before its end"));
      }
      auto info = proto::decodeMessage<proto::FileInfo>(frame.payload);
      if (!info) return end(info.error());
      result_ = std::move(*info);
      return end(std::nullopt);
    }
    case FrameType::kClose: return end(Error(Errc::kCancelled, "The write was aborted"));
    case FrameType::kError: {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      return end(message ? message->toError()
                         : Error(Errc::kProtocol, "The agent sent a malformed error"));
    }
    default:
      return abortWith(Error(Errc::kProtocol, "The agent sent frame type " +
                                                  std::to_string(static_cast<int>(frame.type)) +
                                                  " on a write stream"));
  }
}

asio::awaitable<Result<>> FileWriter::write(std::string_view bytes) {
  if (eof_sent_) co_return fail(Errc::kFailedPrecondition, "The write was already finished");
  const std::function<Result<>()> usable = [this]() -> Result<> {
    if (error_) return fail(*error_);
    if (ended_) return fail(Errc::kFailedPrecondition, "The write has ended");
    return ok();
  };
  co_return co_await client_->sendWithCredit(
      FrameType::kData, stream_, bytes, proto::kMaxDataPayload, send_credit_, changed_, usable);
}

asio::awaitable<Result<proto::FileInfo>> FileWriter::finish(std::chrono::milliseconds timeout) {
  if (!eof_sent_) {
    if (error_) co_return fail(*error_);
    if (ended_) co_return fail(Errc::kFailedPrecondition, "The write has ended");
    eof_sent_ = true;
    client_->send(FrameType::kEof, stream_, {});
  }
  const auto deadline = event::AsyncEvent::Clock::now() + timeout;
  while (!ended_ && event::AsyncEvent::Clock::now() < deadline)
    co_await changed_.waitUntil(deadline);
  if (!ended_) {
    abortWith(Error(Errc::kTimeout, "The agent did not finish the write within " +
                                        std::to_string(timeout.count()) + " ms"));
  }
  if (error_) co_return fail(*error_);
  if (!result_) co_return fail(Errc::kProtocol, "The agent ended the write without a result");
  co_return *result_;
}

void FileWriter::abort() {
  if (ended_) return;
  abortWith(Error(Errc::kCancelled, "The write was aborted"));
}

}  // namespace hutch::guest
