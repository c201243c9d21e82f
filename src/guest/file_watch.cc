#include "guest/file_watch.h"

#include "guest/agent_client.h"
#include "proto/messages.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

namespace {
constexpr uint64_t kGrantBatch = proto::kInitialWindow / 4;
}  // namespace

FileWatch::FileWatch(std::shared_ptr<AgentClient> client, uint32_t stream)
    : client_(std::move(client)),
      stream_(stream),
      changed_(client_->executor()),
      receive_window_(proto::kInitialWindow) {}

FileWatch::~FileWatch() {
  if (!ended_ && client_->isOpen()) client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
}

void FileWatch::end(std::optional<Error> error) {
  if (ended_) return;
  ended_ = true;
  if (error && !error_) error_ = std::move(error);
  changed_.notify();
}

void FileWatch::abortWith(Error error) {
  if (ended_) return;
  client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
  batches_.clear();
  end(std::move(error));
}

void FileWatch::onStreamClosed(const Error& error) {
  end(error.code() == Errc::kCancelled
          ? error
          : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message()));
}

void FileWatch::onStreamFrame(const Frame& frame) {
  if (ended_) return;
  switch (frame.type) {
    case FrameType::kFileOpened: {
      if (opened_) return abortWith(Error(Errc::kProtocol, "The agent opened the watch twice"));
      auto info = proto::decodeMessage<proto::FileInfo>(frame.payload);
      if (!info) return abortWith(info.error());
      info_ = std::move(*info);
      opened_ = true;
      changed_.notify();
      return;
    }
    case FrameType::kFileEvents: {
      if (!opened_ || frame.payload.size() > receive_window_) {
        return abortWith(Error(Errc::kProtocol,
                               "The agent sent events before the watch was set or beyond the "
                               "window"));
      }
      auto events = proto::decodeMessage<proto::FileEvents>(frame.payload);
      if (!events) return abortWith(events.error());
      receive_window_ -= frame.payload.size();
      batches_.push_back(Batch{std::move(*events), frame.payload.size()});
      changed_.notify();
      return;
    }
    case FrameType::kClose: agent_closed_ = true; return end(std::nullopt);
    case FrameType::kError: {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      return end(message ? message->toError()
                         : Error(Errc::kProtocol, "The agent sent a malformed error"));
    }
    default:
      return abortWith(Error(Errc::kProtocol, "The agent sent frame type " +
                                                  std::to_string(static_cast<int>(frame.type)) +
                                                  " on a watch stream"));
  }
}

asio::awaitable<Result<std::optional<proto::FileEvents>>> FileWatch::next() {
  while (true) {
    if (!batches_.empty()) {
      Batch batch = std::move(batches_.front());
      batches_.pop_front();
      ungranted_ += batch.bytes;
      if (ungranted_ >= kGrantBatch && !ended_) {
        receive_window_ += ungranted_;
        client_->send(FrameType::kWindow, stream_,
                      proto::encodeWindow(static_cast<uint32_t>(ungranted_)));
        ungranted_ = 0;
      }
      co_return std::optional<proto::FileEvents>(std::move(batch.events));
    }
    if (error_) co_return fail(*error_);
    if (agent_closed_) co_return std::optional<proto::FileEvents>();
    if (ended_) co_return fail(Errc::kUnavailable, "The watch ended");
    co_await changed_.wait();
  }
}

void FileWatch::close() {
  if (ended_) return;
  abortWith(Error(Errc::kCancelled, "The watch was closed"));
}

}  // namespace hutch::guest
