// TcpStream: one kConnect stream (docs/protocol.md, "TCP streams"): a TCP connection the agent
// makes inside the box, relayed to the host as kData both ways.
//
// Connecting is non-blocking (10 s limit); the stream then answers kConnected, or kError with
// the reason. Flow control is the exec streams' in both directions: the agent sends at most the
// window the host granted (and stops reading the socket when it is used up, so the peer blocks on
// TCP's own window), and grants back the host's kData as it is written into the socket. kEof from
// the host becomes shutdown(SHUT_WR) once its data is written; the socket's end of data becomes
// kEof to the host. When both directions are done the stream ends with kClose; a reset, a write
// to a closed peer or a protocol error ends it with kError. kClose from the host aborts it (the
// peer sees a reset). Destroying a stream that has not ended resets the connection.
//
// Parking (kPark, before the host suspends the box): the stream stops reading the socket and
// sends nothing; what it would send (window grants for the host's data it goes on writing into
// the socket, kConnected, an error) is held. resume() gives it its new id and sends what was
// held: the connection goes on as if the host had never left.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/event_loop.h"
#include "agent/exec/exec_stream.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "proto/tcp.h"

namespace hutch::agent {

inline constexpr std::chrono::seconds kConnectTimeout{10};

class TcpStream {
 public:
  TcpStream(EventLoop& loop, StreamSink& sink, uint32_t id);
  ~TcpStream();
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  // Starts connecting. An error found at once (no such address family, ...) is returned and the
  // stream sends nothing; the caller answers with kError.
  Result<> connect(const proto::ConnectRequest& request);

  bool finished() const { return finished_; }
  uint32_t id() const { return id_; }

  // Stops reading the socket and holds every frame until resume(new_id), which sends them on
  // new_id (and reports the stream finished if it ended meanwhile).
  void park();
  void resume(uint32_t new_id);
  bool parked() const { return parked_; }

  // Frames from the host for this stream.
  void onData(std::string_view data);
  void onEof();
  void onWindow(std::string_view payload);
  void onClose();

 private:
  void onEvents(uint32_t events);
  void onConnectDone();
  void readSocket();
  void writeSocket();
  void updateInterest();
  void grant(size_t bytes);
  void maybeFinish();
  void endWithError(const Error& error);
  void finish();
  void resetSocket();
  // Every frame of the stream goes through here: held while parked.
  void emit(proto::FrameType type, std::string_view payload);

  EventLoop& loop_;
  StreamSink& sink_;
  uint32_t id_;
  std::string peer_;  // "127.0.0.1:8080", for messages
  uint16_t port_ = 0;

  UniqueFd socket_;
  uint32_t events_ = 0;  // what the loop watches (0: not registered)
  bool connecting_ = false;
  std::optional<EventLoop::TimerId> connect_timer_;

  uint64_t send_window_;     // kData payload we may still send
  uint64_t receive_credit_;  // kData payload the host may still send
  std::string out_;          // the host's data not yet written into the socket
  size_t out_offset_ = 0;
  bool host_eof_ = false;    // kEof received
  bool write_shut_ = false;  // shutdown(SHUT_WR) done
  bool socket_eof_ = false;  // the peer finished sending; kEof sent
  bool finished_ = false;
  bool parked_ = false;
  std::vector<std::pair<proto::FrameType, std::string>> held_;  // while parked
};

}  // namespace hutch::agent
