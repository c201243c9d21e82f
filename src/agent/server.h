// Server: serves the host protocol (docs/protocol.md) over whatever session fd the channel
// source provides, on the agent's one event loop.
//
// A session starts with kHello and ends when the host goes away or breaks the framing. Framing
// errors are answered with kError on stream 0 (code "protocol") and reset the session: the
// session's running processes go on as detached ones (closeAllStreams), the decoder is dropped
// and the agent waits for a new kHello on the same channel. Writes are buffered and non-blocking;
// while much output is waiting for the host to read it, the agent stops reading the channel.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/channel/channel_source.h"
#include "agent/event_loop.h"
#include "agent/exec/detached_processes.h"
#include "agent/exec/exec_stream.h"
#include "agent/files/file_service.h"
#include "agent/init/identity.h"
#include "agent/init/system_control.h"
#include "agent/net/tcp_stream.h"
#include "agent/services/supervisor.h"
#include "proto/frame.h"

namespace hutch::agent {

struct ServerOptions {
  std::string agent_version;
  std::function<void()> on_poweroff;  // kPoweroff from the host
  std::string passwd_path = "/etc/passwd";
  std::string group_path = "/etc/group";
  // kIdentity is served (and "identity" advertised) only with a SystemControl: as PID 1 the real
  // one, in --listen tests a recording one with files under a temp root. Not owned.
  SystemControl* system = nullptr;
  IdentityFiles identity_files;
  // Where detached processes' logs go; empty: no "detach" (a --listen agent without --root).
  std::string exec_log_dir;
  // The supervised services, for kServices; null: no "services". Not owned.
  Supervisor* services = nullptr;
};

// kIdentity with grow_root: how long the agent waits for the enlarged disk to show, and how often
// it looks.
inline constexpr std::chrono::milliseconds kGrowRootWait{3000};
inline constexpr std::chrono::milliseconds kGrowRootPoll{50};

// How long parked TCP streams wait for a host that resumes them, from the next kHello on (a
// restarted hutchd, or a box booted from a copy of its memory, never does): then they are reset.
inline constexpr std::chrono::seconds kParkedStreamTtl{60};

// Output waiting for the host beyond this pauses reading from the channel.
inline constexpr size_t kPauseInputAt = 4u << 20;

class Server : public StreamSink {
 public:
  Server(EventLoop& loop, ChannelSource& source, ServerOptions options);
  ~Server() override;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Result<> start();

  // The reaper collected pid; routes the status to its stream, if it has one.
  void onChildExited(pid_t pid, int wait_status);

  // Forgets every open stream. Running exec processes go on as detached ones (their output to a
  // log, listed by kProcesses); without detached processes (a --listen agent without --root)
  // they are killed.
  void closeAllStreams();
  // Before power-off: ends the file streams and lets the file workers finish what is queued
  // (unfinished writes' temporary files are removed). Exec streams are left to the power-off.
  void finishFileWork();

  // StreamSink
  void sendFrame(proto::FrameType type, uint32_t stream, std::string_view payload) override;
  void streamFinished(uint32_t stream) override;

 private:
  void onConnected(UniqueFd fd);
  void onChannelEvents(uint32_t events);
  void readChannel();
  void flush();
  void scheduleFlush();
  void updateInterest();
  void disconnect(const std::string& why);

  void handleFrame(const proto::Frame& frame);
  void handleHello(const proto::Frame& frame);
  void handleExec(const proto::Frame& frame);
  void handleIdentity(const proto::Frame& frame);
  void handleDetachedExec(uint32_t stream, const proto::ExecRequest& request);
  void handleProcesses(const proto::Frame& frame);
  void handleSignalProcess(const proto::Frame& frame);
  void handleConnect(const proto::Frame& frame);
  void handlePark(const proto::Frame& frame);
  void handleResume(const proto::Frame& frame);
  // After a kHello: parked streams not resumed within kParkedStreamTtl are reset.
  void expireParkedLater();
  void handleServices(const proto::Frame& frame);
  void routeTcpFrame(const proto::Frame& frame);
  void growRootThenAnswer(uint32_t stream, std::optional<Error> earlier,
                          EventLoop::Clock::time_point deadline);
  // A request may open `stream` (nonzero, not open): otherwise it is answered and false.
  bool openStream(const proto::Frame& frame);
  std::vector<std::string> capabilities() const;
  void sendError(uint32_t stream, const Error& error);
  // kError on stream 0 and a session reset.
  void connectionError(const Error& error);
  void resetSession();

  EventLoop& loop_;
  ChannelSource& source_;
  ServerOptions options_;

  UniqueFd channel_;
  uint32_t channel_events_ = 0;
  proto::FrameDecoder decoder_;
  std::string out_;
  size_t out_offset_ = 0;
  bool flush_posted_ = false;
  bool handshaken_ = false;
  std::map<uint32_t, std::unique_ptr<ExecStream>> streams_;
  // Processes of sessions that ended while they ran, recorded in detached_ (closeAllStreams).
  std::vector<std::unique_ptr<ExecStream>> orphans_;
  std::map<uint32_t, std::unique_ptr<TcpStream>> tcp_streams_;
  // Parked by kPark, by the id they had (docs/protocol.md "Parking"): they outlive sessions.
  std::map<uint32_t, std::unique_ptr<TcpStream>> parked_tcp_;
  std::optional<EventLoop::TimerId> parked_expiry_;
  // Requests whose answer waits for a timer (kIdentity with grow_root), by stream.
  std::map<uint32_t, EventLoop::TimerId> pending_requests_;
  // Outlive sessions; null without options_.exec_log_dir.
  std::unique_ptr<DetachedProcesses> detached_;
  // The files protocol: requests, read, write and watch streams, and their worker threads.
  std::unique_ptr<FileService> files_;
};

}  // namespace hutch::agent
