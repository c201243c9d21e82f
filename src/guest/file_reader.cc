#include "guest/file_reader.h"

#include "guest/agent_client.h"
#include "proto/messages.h"
#include "proto/tcp.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

namespace {
constexpr uint64_t kGrantBatch = proto::kInitialWindow / 4;
}  // namespace

FileReader::FileReader(std::shared_ptr<AgentClient> client, uint32_t stream)
    : client_(std::move(client)),
      stream_(stream),
      changed_(client_->executor()),
      receive_window_(proto::kInitialWindow) {}

FileReader::~FileReader() {
  if (!ended_ && client_->isOpen()) client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
}

void FileReader::end(std::optional<Error> error) {
  if (ended_) return;
  ended_ = true;
  if (error && !error_) error_ = std::move(error);
  changed_.notify();
}

void FileReader::abortWith(Error error) {
  if (ended_) return;
  client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
  chunks_.clear();
  end(std::move(error));
}

void FileReader::onStreamClosed(const Error& error) {
  end(error.code() == Errc::kCancelled
          ? error
          : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message()));
}

void FileReader::onStreamFrame(const Frame& frame) {
  if (ended_) return;
  switch (frame.type) {
    case FrameType::kFileOpened: {
      if (opened_) return abortWith(Error(Errc::kProtocol, "The agent opened the file twice"));
      auto info = proto::decodeMessage<proto::FileInfo>(frame.payload);
      if (!info) return abortWith(info.error());
      info_ = std::move(*info);
      opened_ = true;
      changed_.notify();
      return;
    }
    case FrameType::kData:
      if (!opened_ || eof_ || frame.payload.size() > receive_window_ ||
          frame.payload.size() > proto::kMaxDataPayload) {
        return abortWith(Error(Errc::kProtocol,
                               "The agent sent file data before opening the file, after its end "
                               "or beyond the window"));
      }
      receive_window_ -= frame.payload.size();
      received_ += frame.payload.size();
      chunks_.push_back(frame.payload);
      changed_.notify();
      return;
    case FrameType::kEof:
      if (!opened_) return abortWith(Error(Errc::kProtocol, "The agent ended an unopened read"));
      eof_ = true;
      return end(std::nullopt);
    case FrameType::kClose: return end(Error(Errc::kCancelled, "The read was aborted"));
    case FrameType::kError: {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      return end(message ? message->toError()
                         : Error(Errc::kProtocol, "The agent sent a malformed error"));
    }
    default:
      return abortWith(Error(Errc::kProtocol, "The agent sent frame type " +
                                                  std::to_string(static_cast<int>(frame.type)) +
                                                  " on a read stream"));
  }
}

asio::awaitable<Result<std::optional<std::string>>> FileReader::next() {
  while (true) {
    if (!chunks_.empty()) {
      std::string chunk = std::move(chunks_.front());
      chunks_.pop_front();
      ungranted_ += chunk.size();
      if (ungranted_ >= kGrantBatch && !ended_) {
        receive_window_ += ungranted_;
        client_->send(FrameType::kWindow, stream_,
                      proto::encodeWindow(static_cast<uint32_t>(ungranted_)));
        ungranted_ = 0;
      }
      co_return std::optional<std::string>(std::move(chunk));
    }
    if (eof_) co_return std::optional<std::string>();
    if (error_) co_return fail(*error_);
    if (ended_) co_return fail(Errc::kUnavailable, "The read ended without end of file");
    co_await changed_.wait();
  }
}

void FileReader::close() {
  if (ended_) return;
  abortWith(Error(Errc::kCancelled, "The read was closed"));
}

}  // namespace hutch::guest
