// TcpStream: the host's end of a TCP connection the agent made inside the box
// (AgentClient::connect, docs/protocol.md "TCP streams"): bytes both ways, half-close, abort.
//
// Made for a relay: one coroutine may loop on read() while another loops on write(). read()
// grants the agent more window as it returns data, so a relay that stops reading stops the peer
// in the box (through TCP's own flow control) without buffering anywhere beyond 256 KiB. Not
// thread-safe: use it on the client's executor. Destroying a stream that has not ended aborts
// the connection (the peer in the box sees a reset).
//
// Parked (AgentClient::parkTcpStreams, before a suspend): nothing is sent; write() and
// shutdownWrite() wait or are held, read() returns what had arrived and then waits; the loss of
// the connection to the agent does not end the stream. AgentClient::resumeTcpStream, on the
// client of the resumed box, makes it go on. close() ends a parked stream here (the agent resets
// its end when no host resumes it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "event/async_event.h"
#include "guest/asio.h"
#include "guest/stream_handler.h"
#include "proto/frame.h"

namespace hutch::guest {

class AgentClient;

class TcpStream : public StreamHandler {
 public:
  ~TcpStream() override;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  uint32_t streamId() const { return stream_; }
  bool parked() const { return parked_; }

  // The next bytes the peer in the box sent; an empty string once it has shut down its sending
  // side (and on every call after). Errors: the connection failed or was reset (kUnavailable,
  // with the agent's message), kCancelled after close() or AgentClient::close(), kUnavailable
  // when the connection to the agent was lost.
  boost::asio::awaitable<Result<std::string>> read();

  // Sends bytes to the peer, waiting for window from the agent as needed; returns when all of
  // them are queued. bytes must stay valid until it returns. kFailedPrecondition after
  // shutdownWrite(); the stream's error once it has ended.
  boost::asio::awaitable<Result<>> write(std::string_view bytes);

  // Half-close: the peer reads end-of-file after the bytes written before. read() goes on.
  Result<> shutdownWrite();

  // Aborts the connection (the peer sees a reset). Pending and later read()/write() calls fail
  // with kCancelled.
  void close();

  // Waits until the agent ended the stream: ok after both directions finished in order, else
  // the error that ended it.
  boost::asio::awaitable<Result<>> done();

  // The agent has sent the last frame of the stream.
  bool ended() const { return ended_; }

 private:
  friend class AgentClient;

  TcpStream(std::shared_ptr<AgentClient> client, uint32_t stream);

  // StreamHandler
  void onStreamFrame(const proto::Frame& frame) override;
  void onStreamClosed(const Error& error) override;
  bool streamFinished() const override { return ended_; }

  void end(std::optional<Error> error);
  // Waits for the agent's answer to kConnect or kResume: true once connected, false when the
  // stream ended (error_ says why) or the deadline passed.
  boost::asio::awaitable<bool> waitAnswered(std::chrono::steady_clock::time_point deadline);
  void park();
  // Sends what was held while parked (kEof, window grants) on the stream's current id.
  void unpark();

  std::shared_ptr<AgentClient> client_;  // replaced when a parked stream is resumed
  uint32_t stream_;
  event::AsyncEvent changed_;

  bool connected_ = false;
  bool ended_ = false;          // no more frames will come
  std::optional<Error> error_;  // why it ended, if not in order
  std::deque<std::string> data_;
  bool peer_eof_ = false;        // kEof received
  uint64_t receive_window_ = 0;  // data the agent may still send us
  uint64_t ungranted_ = 0;
  uint64_t send_credit_ = 0;  // data we may still send
  bool write_shut_ = false;
  bool parked_ = false;
  bool eof_held_ = false;  // shutdownWrite() while parked
};

}  // namespace hutch::guest
