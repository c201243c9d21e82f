// One SSH connection and its channels (internal to ssh/; ssh_server.h is the component's door).
//
// Connection drives a libssh server session without blocking on the event loop: service()
// lets libssh read and process what arrived (key exchange first, then ssh_event_dopoll with a
// zero timeout), then arms asio waits on the socket (readable; writable while libssh holds
// unsent output). Channels write into libssh from their own coroutines and poke() the
// connection; they wait on progress() for window. libssh's callbacks only record what the
// client asked for and start coroutines: they never wait.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "box/box_agent.h"
#include "box/box_service.h"
#include "event/async_event.h"
#include "guest/exec_session.h"
#include "guest/tcp_stream.h"
#include "ssh/ssh_server.h"

namespace hutch::ssh {

class Channel;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // The TCP gateway's checks (ssh_server.h setGateway); without them the client is already
  // authenticated (the API path).
  struct Gate {
    SshKeys* keys = nullptr;
    api::FailureLimiter* limiter = nullptr;
  };
  Connection(asio::any_io_executor executor, box::BoxService& service, Client client,
             std::optional<Gate> gate = std::nullopt);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Takes the socket over and starts the handshake. kInternal when libssh refuses it.
  Result<> start(ssh_bind bind, UniqueFd socket);
  // Ends the connection and every channel (their processes are killed); idempotent.
  void close(std::string_view why);
  bool closed() const { return closed_; }
  // Called when the connection has ended (once).
  void onClosed(std::function<void()> f) { on_closed_ = std::move(f); }

  // Something was written into libssh: let it flush, and service the connection soon.
  void poke();
  // Notified after every service pass (window may have grown, the client may have gone).
  event::AsyncEvent& progress() { return progress_; }

  asio::any_io_executor executor() const { return executor_; }
  box::BoxService& service() { return service_; }
  const Client& client() const { return client_; }
  ssh_session session() { return session_; }
  // The user commands run as in the box (the SSH user name; nullopt: the box's default).
  const std::optional<std::string>& boxUser() const { return box_user_; }
  // The box's own names (name and id), for direct-tcpip destinations.
  const std::vector<std::string>& boxNames() const { return box_names_; }
  // The box's agent (woken or started when needed).
  asio::awaitable<Result<std::shared_ptr<box::BoxAgent>>> agent();

  // A channel that has finished: forgotten (and freed in libssh).
  void drop(Channel* channel);

 private:
  void pump();
  void pumpOnce();
  void arm();
  void afterAuth(const char* user);
  // The gateway: whether key `pubkey` (with `signature_state`) logs in as `user`.
  int gatewayAuth(const char* user, ssh_key_struct* pubkey, char signature_state);

  // libssh's server callbacks (userdata: this).
  static int authNone(ssh_session session, const char* user, void* userdata);
  static int authPubkey(ssh_session session, const char* user, ssh_key_struct* pubkey,
                        char signature_state, void* userdata);
  static ssh_channel openSession(ssh_session session, void* userdata);
  static int onMessage(ssh_session session, ssh_message message, void* userdata);

  asio::any_io_executor executor_;
  box::BoxService& service_;
  Client client_;
  std::optional<Gate> gate_;
  std::optional<asio::steady_timer> auth_deadline_;
  ssh_session session_ = nullptr;
  ssh_event event_ = nullptr;
  ssh_server_callbacks_struct server_callbacks_{};
  std::optional<asio::posix::stream_descriptor> socket_;  // a dup of libssh's socket
  int fd_ = -1;                                           // libssh's socket
  bool kex_done_ = false;
  bool authenticated_ = false;
  bool scheduled_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool closed_ = false;
  std::optional<std::string> box_user_;
  std::vector<std::string> box_names_;
  std::unique_ptr<box::BoxAgent::SessionHold> hold_;
  std::map<Channel*, std::shared_ptr<Channel>> channels_;
  event::AsyncEvent progress_;
  std::function<void()> on_closed_;
};

// A channel of a connection: its libssh channel and callbacks. Lives in the connection's table
// until finish() (both sides closed, or the connection ended).
class Channel : public std::enable_shared_from_this<Channel> {
 public:
  explicit Channel(std::shared_ptr<Connection> connection);
  virtual ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Takes the libssh channel and installs the callbacks.
  void attach(ssh_channel channel);
  ssh_channel channel() const { return channel_; }
  // Removes the callbacks and frees the libssh channel (libssh closes it first if needed).
  void release();
  // The connection ended: stop whatever runs (kill the process, reset the TCP stream).
  virtual void abort() = 0;

 protected:
  // Writes everything to the client as window allows: false once the channel or connection is
  // gone. stderr: the extended data stream.
  asio::awaitable<bool> writeAll(std::string_view data, bool to_stderr = false);
  // EOF, then close (after an exit status, for sessions).
  void sendEofAndClose();
  bool gone() const;

  // Client -> box bytes, bounded: the data callback takes at most kMaxQueued; what it refuses
  // stays in libssh (whose window is then not grown), and is pulled when the queue drains.
  size_t acceptData(const char* data, size_t len);
  asio::awaitable<std::optional<std::string>> nextData();  // nullopt at EOF or close
  void refillFromLibssh();

  std::shared_ptr<Connection> connection_;
  ssh_channel channel_ = nullptr;
  ssh_channel_callbacks_struct callbacks_{};
  std::deque<std::string> queue_;
  size_t queued_ = 0;
  bool refused_ = false;  // the data callback left bytes in libssh
  bool peer_eof_ = false;
  bool peer_closed_ = false;
  bool closing_ = false;  // we sent close
  event::AsyncEvent changed_;

  static constexpr size_t kMaxQueued = size_t{256} << 10;
};

// A "session" channel: a shell, a command or the sftp subsystem, run in the box as an exec.
class SessionChannel final : public Channel {
 public:
  explicit SessionChannel(std::shared_ptr<Connection> connection);
  void install();
  void abort() override;

 private:
  enum class Kind { kShell, kExec, kSftp };
  // Starts what was asked for; false (the request fails) when something already runs.
  bool begin(Kind kind, std::string command);
  asio::awaitable<void> run(Kind kind, std::string command);
  asio::awaitable<void> pumpStdin(std::shared_ptr<guest::ExecSession> exec);
  asio::awaitable<void> finishWith(std::string_view stderr_text, int status);

  static int onData(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr,
                    void* userdata);
  static void onEof(ssh_session, ssh_channel, void* userdata);
  static void onClose(ssh_session, ssh_channel, void* userdata);
  static void onSignal(ssh_session, ssh_channel, const char* signal, void* userdata);
  static int onPty(ssh_session, ssh_channel, const char* term, int width, int height, int pxwidth,
                   int pxheight, void* userdata);
  static int onShell(ssh_session, ssh_channel, void* userdata);
  static int onExec(ssh_session, ssh_channel, const char* command, void* userdata);
  static int onSubsystem(ssh_session, ssh_channel, const char* subsystem, void* userdata);
  static int onEnv(ssh_session, ssh_channel, const char* name, const char* value, void* userdata);
  static int onWindowChange(ssh_session, ssh_channel, int width, int height, int pxwidth,
                            int pxheight, void* userdata);

  bool started_ = false;
  bool pty_ = false;
  std::string term_;
  uint16_t rows_ = 0;
  uint16_t cols_ = 0;
  std::vector<std::string> env_;
  std::shared_ptr<guest::ExecSession> exec_;
};

// A "direct-tcpip" channel: a TCP connection to a port inside the box (ssh -L, IDE servers).
class TcpChannel final : public Channel {
 public:
  TcpChannel(std::shared_ptr<Connection> connection, std::string address, uint16_t port);
  void install();
  void abort() override;

 private:
  asio::awaitable<void> run();
  asio::awaitable<void> toBox(std::shared_ptr<guest::TcpStream> stream);

  static int onData(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr,
                    void* userdata);
  static void onEof(ssh_session, ssh_channel, void* userdata);
  static void onClose(ssh_session, ssh_channel, void* userdata);

  std::string address_;
  uint16_t port_;
  std::shared_ptr<guest::TcpStream> stream_;
};

}  // namespace hutch::ssh
