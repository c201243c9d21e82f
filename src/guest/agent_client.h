// AgentClient: the host side of the agent protocol (docs/protocol.md) over one ByteChannel.
//
// Single-threaded: every method must be called on the executor of the channel it was created
// with, where its read and write loops run too. Errors are Result values; no exception leaves a
// coroutine.
//
//   auto channel = co_await connectUnix(executor, path, deadline);
//   auto client = AgentClient::create(std::move(*channel));
//   co_await client->handshake(30s);
//   auto session = co_await client->exec({.argv = {"uname", "-a"}});
//   while (auto event = co_await (*session)->next()) { ... until event->kind == kExit }
//   client->close();
//
// Connection loss (the agent or QEMU went away, or the agent broke the protocol) ends every open
// session with Errc::kUnavailable; closed() returns the reason. close() ends them with
// Errc::kCancelled. The client holds itself alive while the connection is open: call close()
// when done with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "event/async_event.h"
#include "guest/asio.h"
#include "guest/byte_channel.h"
#include "guest/exec_session.h"
#include "guest/file_reader.h"
#include "guest/file_watch.h"
#include "guest/file_writer.h"
#include "guest/handshake_scanner.h"
#include "guest/identity.h"
#include "guest/stream_handler.h"
#include "guest/tcp_stream.h"
#include "proto/files.h"
#include "proto/frame.h"
#include "proto/identity.h"
#include "proto/messages.h"
#include "proto/processes.h"
#include "proto/services.h"

namespace hutch::guest {

struct AgentClientOptions {
  std::string host_name = "hutchd";  // sent in kHello, for the agent's log
  // kHello is resent this often until answered: a guest that has not booted yet leaves it unread
  // (QEMU accepts the connection before the guest opens its port).
  std::chrono::milliseconds hello_interval{200};
  // exec() gives up when the agent reports neither kStarted nor an error in this time: a guest
  // that stopped answering (or sent half a frame) must not hold the caller forever.
  std::chrono::milliseconds exec_start_timeout{30000};
};

class AgentClient : public std::enable_shared_from_this<AgentClient> {
 public:
  using Clock = std::chrono::steady_clock;

  // The default deadlines of file requests: one file, and a whole tree (a recursive list,
  // remove or watch can take seconds in a box without KVM).
  static constexpr std::chrono::milliseconds kFileRequestTimeout{30000};
  static constexpr std::chrono::milliseconds kFileTreeTimeout{120000};

  // Starts reading from the channel at once.
  static std::shared_ptr<AgentClient> create(ByteChannel channel, AgentClientOptions options = {});

  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  boost::asio::any_io_executor executor() const { return executor_; }

  // Sends kHello (again every hello_interval) until the agent answers kHelloAck. kTimeout if it
  // does not answer in time, kUnsupported if it speaks another protocol version. Calling it
  // again after success returns the first answer.
  boost::asio::awaitable<Result<proto::HelloAck>> handshake(std::chrono::milliseconds timeout);

  // Starts a process; returns once the agent reports it started (kStarted) or refused it: a
  // missing command, cwd or user is kNotFound, a bad request kInvalidArgument, tty with an agent
  // that lacks the "tty" capability kUnsupported; kTimeout when the agent answers neither within
  // options.exec_start_timeout (the stream is then given up: a late start is killed). With
  // request.detach the process runs on its own (outliving this connection, output to a log file in
  // the box): the returned session is already finished and carries pid(), detachedId() and
  // logPath(); kUnsupported without the agent's "detach" capability.
  boost::asio::awaitable<Result<std::shared_ptr<ExecSession>>> exec(proto::ExecRequest request);

  // Gives a box restored from a snapshot its own identity (docs/protocol.md, "Identity"): the
  // host's clock (when identity.set_clock, read as the request is sent), a new RNG seed,
  // machine id and hostname; with identity.grow_root the root filesystem is grown onto the disk
  // the host has just enlarged (the agent waits up to 3 s for the guest to see the new size).
  // Send it right after handshake(). kUnsupported without the agent's "identity" capability,
  // kInvalidArgument for bad values (nothing is sent), kTimeout, or the agent's error (e.g.
  // kInternal if a file could not be written; the other parts are applied regardless).
  boost::asio::awaitable<Result<proto::IdentityResult>> applyIdentity(
      const Identity& identity, std::chrono::milliseconds timeout);

  // Connects to a TCP port inside the box (address: an IP literal or "localhost"); returns once
  // the connection is up. kUnavailable when it is refused ("Connection refused on
  // 127.0.0.1:8080 ...") or fails, kTimeout (the agent gives up after 10 s; timeout bounds the
  // wait here), kInvalidArgument for port 0 or a bad address, kUnsupported without the agent's
  // "tcp" capability. Many connections may be open at once.
  boost::asio::awaitable<Result<std::shared_ptr<TcpStream>>> connect(
      uint16_t port, std::string address = "127.0.0.1",
      std::chrono::milliseconds timeout = std::chrono::seconds(15));

  // Before the box is suspended (docs/protocol.md "Parking"): every open TCP stream of this
  // client stops, here and in the agent, with nothing in flight either way, and outlives this
  // client; returned are the streams parked. Their users (a port forward's relay) simply wait.
  // kUnsupported without the agent's "park" capability (nothing is parked). When the agent
  // does not answer, the streams are closed (their peers see a reset) and the error returned.
  boost::asio::awaitable<Result<std::vector<std::shared_ptr<TcpStream>>>> parkTcpStreams(
      std::chrono::milliseconds timeout);

  // Makes a parked stream go on through this client (the resumed box's, or the same one when
  // the suspend did not happen), under a new stream id. kNotFound when the agent no longer has
  // it (the box booted cold, or the agent reset it), kTimeout; on error the stream is ended.
  boost::asio::awaitable<Result<>> resumeTcpStream(std::shared_ptr<TcpStream> stream,
                                                   std::chrono::milliseconds timeout);

  // The detached processes of the box: running ones and the last 100 that ended, oldest first.
  boost::asio::awaitable<Result<proto::ProcessList>> listProcesses(
      std::chrono::milliseconds timeout);

  // Sends signo (1-64) to the process group of detached process `id`. kNotFound (no such id),
  // kFailedPrecondition (it has ended), kInvalidArgument (bad signal).
  boost::asio::awaitable<Result<>> signalProcess(std::string id, int signo,
                                                 std::chrono::milliseconds timeout);

  // The services the box's image declares (/etc/hutch/services), by name: state, pid,
  // restarts, last exit. kUnsupported without the agent's "services" capability.
  boost::asio::awaitable<Result<proto::ServiceList>> listServices(
      std::chrono::milliseconds timeout);

  // Files in the box (docs/protocol.md, "Files"), without exec. Every request runs as its
  // `user` (empty: root): permissions are checked as that user and what it makes belongs to it;
  // a relative path is relative to that user's home. kUnsupported (nothing sent) without the
  // agent's "files" capability ("watch" for watch()), kInvalidArgument for a bad request
  // (nothing sent), kTimeout when the agent does not answer in time (a late answer is dropped).
  // The agent's errors: kNotFound (no such file or user), kPermissionDenied (the user may not),
  // kInvalidArgument (a directory where a file is expected or the other way round),
  // kAlreadyExists, kFailedPrecondition (a directory not empty, another filesystem),
  // kResourceExhausted (a full disk, the inotify limits), kInternal.
  //
  // stat: the file (a symlink itself unless request.follow).
  boost::asio::awaitable<Result<proto::FileInfo>> stat(
      proto::FileStatRequest request, std::chrono::milliseconds timeout = kFileRequestTimeout);
  // The entries of a directory down to request.depth, sorted by path, at most max_entries
  // (truncated says whether there were more).
  boost::asio::awaitable<Result<proto::FileList>> listDir(
      proto::FileListRequest request, std::chrono::milliseconds timeout = kFileTreeTimeout);
  // Makes a directory (and its parents); created is false when it was there already;
  // kAlreadyExists when something that is not a directory is in the way.
  boost::asio::awaitable<Result<proto::FileMkdirResult>> makeDir(
      proto::FileMkdirRequest request, std::chrono::milliseconds timeout = kFileRequestTimeout);
  // Renames from to `to`; the FileInfo of `to`. kAlreadyExists when `to` exists and not
  // request.overwrite.
  boost::asio::awaitable<Result<proto::FileInfo>> move(
      proto::FileMoveRequest request, std::chrono::milliseconds timeout = kFileRequestTimeout);
  // Removes a file, a symlink (not what it points to) or a directory (with its contents only
  // with request.recursive: else kFailedPrecondition when it is not empty).
  boost::asio::awaitable<Result<>> remove(proto::FileRemoveRequest request,
                                          std::chrono::milliseconds timeout = kFileTreeTimeout);
  // Opens a regular file for reading (timeout bounds the opening); its content comes with
  // FileReader::next(), under flow control.
  boost::asio::awaitable<Result<std::shared_ptr<FileReader>>> openRead(
      proto::FileReadRequest request, std::chrono::milliseconds timeout = kFileRequestTimeout);
  // Starts writing a file (parents made, a temporary file beside it); returns once the agent is
  // ready for the content. See FileWriter.
  boost::asio::awaitable<Result<std::shared_ptr<FileWriter>>> openWrite(
      proto::FileWriteRequest request, std::chrono::milliseconds timeout = kFileRequestTimeout);
  // Watches a directory (and its subdirectories with request.recursive); returns once the
  // watch is set (kNotFound: no such directory, kInvalidArgument: not a directory).
  boost::asio::awaitable<Result<std::shared_ptr<FileWatch>>> watch(
      proto::WatchRequest request, std::chrono::milliseconds timeout = kFileTreeTimeout);

  // A round trip through the agent's loop (after the handshake).
  boost::asio::awaitable<Result<>> ping(std::chrono::milliseconds timeout);

  // Asks the box to power off and waits for the connection to close (QEMU exits). kTimeout if
  // it is still open after timeout.
  boost::asio::awaitable<Result<>> poweroff(std::chrono::milliseconds timeout);

  // Waits until the connection is closed; returns why (kUnavailable with the cause, or
  // kCancelled after close()).
  boost::asio::awaitable<Error> closed();

  // Closes the connection; every open session ends with kCancelled.
  void close();

  // What the host may queue for an agent that does not read it. Senders of data (stdin, TCP,
  // file content) wait while kWriteHighWater bytes are queued or being written (back-pressure,
  // on top of the agent's windows, which a hostile agent may inflate); what the host must send
  // at once (pongs, window grants, signals) is queued regardless, and the connection is closed
  // when that exceeds kMaxQueued: the agent does not read what it asks for.
  static constexpr size_t kWriteHighWater = size_t{1} << 20;
  static constexpr size_t kMaxQueued = size_t{16} << 20;
  // Bytes queued for the agent or being written to it.
  size_t queued() const { return out_.size() + in_flight_; }

  bool isOpen() const { return open_; }
  // Why the connection is closed (what closed() returns); kUnavailable when it never opened.
  Error closedError() const;
  const std::optional<proto::HelloAck>& helloAck() const { return hello_ack_; }

 private:
  friend class ExecSession;
  friend class TcpStream;
  friend class FileReader;
  friend class FileWriter;
  friend class FileWatch;

  AgentClient(ByteChannel channel, AgentClientOptions options);

  boost::asio::awaitable<void> readLoop();
  boost::asio::awaitable<void> writeLoop();
  void route(const proto::Frame& frame);
  void routeConnectionFrame(const proto::Frame& frame);
  void shutdown(const Error& reason);

  // A request on a fresh stream (kIdentity, ...): the payload of the agent's kResult, or its
  // kError as an error; kTimeout if there is no answer in time (a late one is dropped).
  boost::asio::awaitable<Result<std::string>> request(proto::FrameType type, std::string payload,
                                                      std::chrono::milliseconds timeout);
  uint32_t allocateStream();
  // The checks every file request makes before sending anything.
  Result<> checkFiles(std::string_view capability) const;

  // Used by ExecSession.
  void send(proto::FrameType type, uint32_t stream, std::string_view payload);
  // Waits while kWriteHighWater bytes are queued (returns at once when closed).
  boost::asio::awaitable<void> writable();
  // What a stream sends under flow control: `bytes` as `type` frames of at most `max_frame`
  // bytes, each within the stream's `credit` (spent here; the stream's frame handler adds to
  // it and fires `changed`), and only while the connection's queue is below kWriteHighWater
  // (an agent that grants and never reads would otherwise have the host queue everything).
  // `usable` is asked before each chunk and its error ends the send; `sent`, when given, counts
  // the bytes sent. The caller co_awaits it at once: it holds references.
  boost::asio::awaitable<Result<>> sendWithCredit(proto::FrameType type, uint32_t stream,
                                                  std::string_view bytes, size_t max_frame,
                                                  uint64_t& credit, event::AsyncEvent& changed,
                                                  const std::function<Result<>()>& usable,
                                                  uint64_t* sent = nullptr);
  void forget(uint32_t stream);

  boost::asio::any_io_executor executor_;
  ByteChannel channel_;
  AgentClientOptions options_;
  bool open_ = true;
  std::optional<Error> close_reason_;
  event::AsyncEvent changed_;  // connection-level state changed (hello, pong, closed)
  event::AsyncEvent output_ready_;
  event::AsyncEvent drained_;  // a write to the channel completed, or the connection closed

  HandshakeScanner scanner_;     // until the handshake
  proto::FrameDecoder decoder_;  // after it
  std::string out_;
  size_t in_flight_ = 0;  // bytes of the write in progress

  std::optional<proto::HelloAck> hello_ack_;
  std::optional<Error> hello_error_;
  uint64_t pings_sent_ = 0;
  uint64_t pongs_received_ = 0;

  uint32_t next_stream_ = 1;
  std::unordered_map<uint32_t, std::weak_ptr<StreamHandler>> streams_;
};

}  // namespace hutch::guest
