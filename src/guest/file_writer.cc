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
  size_t offset = 0;
  while (offset < bytes.size()) {
    if (error_) co_return fail(*error_);
    if (ended_) co_return fail(Errc::kFailedPrecondition, "The write has ended");
    if (send_credit_ == 0) {
      co_await changed_.wait();
      continue;
    }
    if (client_->queued() >= AgentClient::kWriteHighWater) {
      // The agent's window is not enough: one that grants and does not read would have the
      // host queue everything.
      co_await client_->writable();
      continue;
    }
    const size_t chunk = static_cast<size_t>(
        std::min<uint64_t>({bytes.size() - offset, send_credit_, proto::kMaxDataPayload}));
    client_->send(FrameType::kData, stream_, bytes.substr(offset, chunk));
    send_credit_ -= chunk;
    offset += chunk;
  }
  co_return ok();
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
