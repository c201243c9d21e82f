#include "guest/tcp_stream.h"

#include <algorithm>

#include "guest/agent_client.h"
#include "proto/messages.h"
#include "proto/tcp.h"

namespace hutch::guest {

namespace asio = boost::asio;
using proto::Frame;
using proto::FrameType;

namespace {
// Consumed data is granted back in batches of this size (as for exec output).
constexpr uint64_t kGrantBatch = proto::kInitialWindow / 4;
}  // namespace

TcpStream::TcpStream(std::shared_ptr<AgentClient> client, uint32_t stream)
    : client_(std::move(client)),
      stream_(stream),
      changed_(client_->executor()),
      receive_window_(proto::kInitialWindow),
      send_credit_(proto::kInitialWindow) {}

TcpStream::~TcpStream() {
  if (!ended_ && !parked_ && client_->isOpen()) client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
}

void TcpStream::end(std::optional<Error> error) {
  if (ended_) return;
  ended_ = true;
  if (error && !error_) error_ = std::move(error);
  changed_.notify();
}

void TcpStream::onStreamClosed(const Error& error) {
  if (parked_) return;  // the box is being suspended: the stream waits for its resumed client
  end(error.code() == Errc::kCancelled
          ? error
          : Error(Errc::kUnavailable, "Lost the connection to the agent: " + error.message()));
}

void TcpStream::onStreamFrame(const Frame& frame) {
  if (ended_) return;
  switch (frame.type) {
    case FrameType::kConnected:
      connected_ = true;
      changed_.notify();
      return;
    case FrameType::kData:
      if (frame.payload.size() > receive_window_ || peer_eof_) {
        client_->send(FrameType::kClose, stream_, {});
        return end(Error(Errc::kProtocol, "The agent sent data beyond the window or after EOF"));
      }
      receive_window_ -= frame.payload.size();
      data_.push_back(frame.payload);
      changed_.notify();
      return;
    case FrameType::kEof:
      peer_eof_ = true;
      changed_.notify();
      return;
    case FrameType::kWindow: {
      auto increment = proto::decodeWindow(frame.payload);
      if (!increment) return end(increment.error());
      send_credit_ += *increment;
      changed_.notify();
      return;
    }
    case FrameType::kClose: return end(std::nullopt);
    case FrameType::kError: {
      auto message = proto::decodeMessage<proto::ErrorMessage>(frame.payload);
      return end(message ? message->toError()
                         : Error(Errc::kProtocol, "The agent sent a malformed error"));
    }
    default:
      return end(Error(Errc::kProtocol, "The agent sent frame type " +
                                            std::to_string(static_cast<int>(frame.type)) +
                                            " on a TCP stream"));
  }
}

asio::awaitable<Result<std::string>> TcpStream::read() {
  while (true) {
    if (!data_.empty()) {
      std::string bytes = std::move(data_.front());
      data_.pop_front();
      ungranted_ += bytes.size();
      if (ungranted_ >= kGrantBatch && !ended_ && !peer_eof_ && !parked_) {
        receive_window_ += ungranted_;
        client_->send(FrameType::kWindow, stream_,
                      proto::encodeWindow(static_cast<uint32_t>(ungranted_)));
        ungranted_ = 0;
      }
      co_return bytes;
    }
    if (peer_eof_) co_return std::string();
    if (error_) co_return fail(*error_);
    if (ended_) co_return fail(Errc::kUnavailable, "The connection ended without end-of-file");
    co_await changed_.wait();
  }
}

asio::awaitable<Result<>> TcpStream::write(std::string_view bytes) {
  if (write_shut_) co_return fail(Errc::kFailedPrecondition, "Writing was shut down");
  const std::function<Result<>()> usable = [this]() -> Result<> {
    if (error_) return fail(*error_);
    if (ended_) return fail(Errc::kFailedPrecondition, "The connection has ended");
    if (parked_) return fail(Errc::kUnavailable, "The connection is parked");
    return ok();
  };
  size_t offset = 0;
  while (true) {
    // A parked stream sends nothing until it is resumed, on whichever client that is.
    while (parked_ && !ended_) co_await changed_.wait();
    uint64_t sent = 0;
    auto client = client_;
    auto result = co_await client->sendWithCredit(FrameType::kData, stream_, bytes.substr(offset),
                                                  proto::kMaxDataPayload, send_credit_, changed_,
                                                  usable, &sent);
    offset += sent;
    if (result || !parked_ || ended_) co_return result;
  }
}

Result<> TcpStream::shutdownWrite() {
  if (write_shut_) return ok();
  write_shut_ = true;
  if (parked_) {
    eof_held_ = true;
  } else if (!ended_) {
    client_->send(FrameType::kEof, stream_, {});
  }
  return ok();
}

boost::asio::awaitable<bool> TcpStream::waitAnswered(
    std::chrono::steady_clock::time_point deadline) {
  while (!connected_ && !ended_ && std::chrono::steady_clock::now() < deadline) {
    co_await changed_.waitUntil(deadline);
  }
  co_return connected_;
}

void TcpStream::park() {
  parked_ = true;
  changed_.notify();  // a write() waiting for window now waits for the resume instead
}

void TcpStream::unpark() {
  parked_ = false;
  if (!ended_) {
    if (eof_held_) client_->send(FrameType::kEof, stream_, {});
    if (ungranted_ > 0 && !peer_eof_) {
      receive_window_ += ungranted_;
      client_->send(FrameType::kWindow, stream_,
                    proto::encodeWindow(static_cast<uint32_t>(ungranted_)));
      ungranted_ = 0;
    }
  }
  eof_held_ = false;
  changed_.notify();
}

void TcpStream::close() {
  if (ended_) return;
  if (parked_) {
    // Nothing reaches the agent now; its parked end is reset when no host resumes it.
    parked_ = false;
    client_->forget(stream_);
    data_.clear();
    peer_eof_ = false;
    return end(Error(Errc::kCancelled, "The connection was closed"));
  }
  client_->send(FrameType::kClose, stream_, {});
  client_->forget(stream_);
  data_.clear();
  peer_eof_ = false;
  end(Error(Errc::kCancelled, "The connection was closed"));
}

asio::awaitable<Result<>> TcpStream::done() {
  while (!ended_) co_await changed_.wait();
  if (error_) co_return fail(*error_);
  co_return ok();
}

}  // namespace hutch::guest
