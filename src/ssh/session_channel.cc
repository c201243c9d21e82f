// "session" channels: pty-req, window-change, env, shell, exec, subsystem sftp and signal,
// mapped onto an exec in the box with the API's defaults (docs/ssh.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <csignal>

#include "api/handlers.h"
#include "ssh/ssh_connection.h"
#include "ssh/ssh_model.h"

namespace hutch::ssh {

namespace {

uint16_t cells(int n) {
  return static_cast<uint16_t>(std::clamp(n, 0, 10000));
}

SessionChannel* self(void* userdata) {
  return static_cast<SessionChannel*>(userdata);
}

}  // namespace

SessionChannel::SessionChannel(std::shared_ptr<Connection> connection)
    : Channel(std::move(connection)) {}

void SessionChannel::install() {
  ssh_callbacks_init(&callbacks_);
  callbacks_.userdata = this;
  callbacks_.channel_data_function = &SessionChannel::onData;
  callbacks_.channel_eof_function = &SessionChannel::onEof;
  callbacks_.channel_close_function = &SessionChannel::onClose;
  callbacks_.channel_signal_function = &SessionChannel::onSignal;
  callbacks_.channel_pty_request_function = &SessionChannel::onPty;
  callbacks_.channel_shell_request_function = &SessionChannel::onShell;
  callbacks_.channel_exec_request_function = &SessionChannel::onExec;
  callbacks_.channel_subsystem_request_function = &SessionChannel::onSubsystem;
  callbacks_.channel_env_request_function = &SessionChannel::onEnv;
  callbacks_.channel_pty_window_change_function = &SessionChannel::onWindowChange;
  ssh_set_channel_callbacks(channel_, &callbacks_);
}

void SessionChannel::abort() {
  if (exec_ && !exec_->finished()) {
    exec_->abandon(Error(Errc::kCancelled, "The SSH connection ended"));
  }
  changed_.notify();
}

int SessionChannel::onData(ssh_session /*s*/, ssh_channel /*c*/, void* data, uint32_t len,
                           int is_stderr, void* userdata) {
  if (is_stderr != 0) return static_cast<int>(len);  // a client's stderr means nothing here
  return static_cast<int>(self(userdata)->acceptData(static_cast<const char*>(data), len));
}

void SessionChannel::onEof(ssh_session /*s*/, ssh_channel /*c*/, void* userdata) {
  self(userdata)->peer_eof_ = true;
  self(userdata)->changed_.notify();
}

void SessionChannel::onClose(ssh_session /*s*/, ssh_channel /*c*/, void* userdata) {
  SessionChannel* channel = self(userdata);
  channel->peer_closed_ = true;
  channel->peer_eof_ = true;
  // The client is gone while the command runs: kill it, as a hang-up would.
  if (channel->exec_ && !channel->exec_->finished()) {
    channel->exec_->abandon(Error(Errc::kCancelled, "The SSH client closed the channel"));
  }
  channel->changed_.notify();
  if (!channel->started_) {
    // Nothing will end this channel otherwise.
    auto connection = channel->connection_;
    asio::post(connection->executor(), [connection, channel] { connection->drop(channel); });
  }
}

void SessionChannel::onSignal(ssh_session /*s*/, ssh_channel /*c*/, const char* signal,
                              void* userdata) {
  SessionChannel* channel = self(userdata);
  auto signo = signalNumber(signal != nullptr ? signal : "");
  if (signo && channel->exec_ && !channel->exec_->finished()) (void)channel->exec_->signal(*signo);
}

int SessionChannel::onPty(ssh_session /*s*/, ssh_channel /*c*/, const char* term, int width,
                          int height, int /*pxwidth*/, int /*pxheight*/, void* userdata) {
  SessionChannel* channel = self(userdata);
  if (channel->started_) return -1;
  channel->pty_ = true;
  channel->term_ = term != nullptr ? term : "";
  channel->cols_ = cells(width);
  channel->rows_ = cells(height);
  return 0;
}

int SessionChannel::onWindowChange(ssh_session /*s*/, ssh_channel /*c*/, int width, int height,
                                   int /*pxwidth*/, int /*pxheight*/, void* userdata) {
  SessionChannel* channel = self(userdata);
  channel->cols_ = cells(width);
  channel->rows_ = cells(height);
  if (channel->exec_ && channel->exec_->tty() && !channel->exec_->finished()) {
    (void)channel->exec_->resize(channel->rows_, channel->cols_);
  }
  return 0;
}

int SessionChannel::onEnv(ssh_session /*s*/, ssh_channel /*c*/, const char* name, const char* value,
                          void* userdata) {
  SessionChannel* channel = self(userdata);
  std::string_view n = name != nullptr ? name : "";
  std::string_view v = value != nullptr ? value : "";
  if (channel->started_ || !envAllowed(n, v)) return -1;
  channel->env_.push_back(fmt::format("{}={}", n, v));
  return 0;
}

int SessionChannel::onShell(ssh_session /*s*/, ssh_channel /*c*/, void* userdata) {
  return self(userdata)->begin(Kind::kShell, {}) ? 0 : -1;
}

int SessionChannel::onExec(ssh_session /*s*/, ssh_channel /*c*/, const char* command,
                           void* userdata) {
  return self(userdata)->begin(Kind::kExec, command != nullptr ? command : "") ? 0 : -1;
}

int SessionChannel::onSubsystem(ssh_session /*s*/, ssh_channel /*c*/, const char* subsystem,
                                void* userdata) {
  if (subsystem == nullptr || std::string_view(subsystem) != "sftp") return -1;
  return self(userdata)->begin(Kind::kSftp, {}) ? 0 : -1;
}

bool SessionChannel::begin(Kind kind, std::string command) {
  if (started_ || gone()) return false;
  started_ = true;
  auto me = std::static_pointer_cast<SessionChannel>(shared_from_this());
  asio::co_spawn(connection_->executor(), me->run(kind, std::move(command)), asio::detached);
  return true;
}

asio::awaitable<void> SessionChannel::finishWith(std::string_view stderr_text, int status) {
  auto keep = shared_from_this();
  if (!stderr_text.empty()) co_await writeAll(stderr_text, true);
  if (!gone()) ssh_channel_request_send_exit_status(channel_, status);
  sendEofAndClose();
  connection_->drop(this);
}

asio::awaitable<void> SessionChannel::run(Kind kind, std::string command) {
  auto keep = shared_from_this();
  auto agent = co_await connection_->agent();
  if (gone()) {
    connection_->drop(this);
    co_return;
  }
  if (!agent) {
    co_await finishWith(fmt::format("hutch: {}\r\n", agent.error().message()), 255);
    co_return;
  }
  box::BoxService& service = connection_->service();
  const std::string& box_id = connection_->client().box;
  // The request as the API's exec makes it: the box's default user and working directory, the
  // box's environment under what the client set.
  proto::ExecRequest request;
  auto defaults = service.execDefaults(box_id);
  request.user = connection_->boxUser().value_or(defaults.user);
  request.cwd = defaults.cwd;
  request.env = env_;
  if (pty_ && !term_.empty()) request.env.push_back("TERM=" + term_);
  request.pipe_stdin = true;
  request.tty = pty_;
  if (pty_) {
    request.rows = rows_;
    request.cols = cols_;
  }
  switch (kind) {
    case Kind::kShell: request.login_shell = true; break;
    case Kind::kExec: request.argv = execArgv(command); break;
    case Kind::kSftp: request.argv = {std::string(kSftpServer)}; break;
  }
  api::addBoxEnvironment((*agent)->box(), request);
  const uint16_t asked_rows = request.rows;
  const uint16_t asked_cols = request.cols;
  if (auto valid = proto::validate(request); !valid) {
    co_await finishWith(fmt::format("hutch: {}\r\n", valid.error().message()), 255);
    co_return;
  }
  auto started = co_await (*agent)->exec(std::move(request));
  if (gone()) {
    if (started) (*started)->abandon(Error(Errc::kCancelled, "The SSH client went away"));
    connection_->drop(this);
    co_return;
  }
  if (!started) {
    const bool missing = started.error().code() == Errc::kNotFound;
    std::string message = started.error().message();
    if (kind == Kind::kSftp && missing) {
      message = fmt::format(
          "{} is not in this box: install Debian's openssh-sftp-server in it "
          "(apt-get install openssh-sftp-server) for sftp and scp",
          kSftpServer);
    }
    co_await finishWith(fmt::format("hutch: {}\n", message), missing ? 127 : 126);
    co_return;
  }
  exec_ = *started;
  if (exec_->tty() && (rows_ != asked_rows || cols_ != asked_cols)) {
    (void)exec_->resize(rows_, cols_);  // a window-change that came while it started
  }
  asio::co_spawn(connection_->executor(), pumpStdin(exec_), asio::detached);
  // Box -> client. Pulling the next event is what grants the agent more window: a client that
  // reads slowly slows the command down.
  std::optional<proto::ExitStatus> status;
  while (true) {
    auto event = co_await exec_->next();
    if (!event) {
      if (!gone()) {
        co_await writeAll(fmt::format("hutch: {}\r\n", event.error().message()), true);
      }
      break;
    }
    if (event->kind == guest::ExecEvent::Kind::kExit) {
      status = event->exit_status;
      break;
    }
    if (!co_await writeAll(event->data, event->kind == guest::ExecEvent::Kind::kStderr)) {
      exec_->abandon(Error(Errc::kCancelled, "The SSH client went away"));
      break;
    }
  }
  if (!gone()) {
    if (status && status->signal) {
      ssh_channel_request_send_exit_signal(channel_, signalName(*status->signal).c_str(), 0, "",
                                           "");
    } else {
      ssh_channel_request_send_exit_status(channel_, status && status->code ? *status->code : 255);
    }
    sendEofAndClose();
  }
  changed_.notify();
  connection_->drop(this);
}

asio::awaitable<void> SessionChannel::pumpStdin(std::shared_ptr<guest::ExecSession> exec) {
  auto keep = shared_from_this();
  while (!exec->finished()) {
    auto chunk = co_await nextData();
    if (!chunk) break;
    if (!co_await exec->writeStdin(*chunk)) co_return;  // the command closed stdin or ended
  }
  if (peer_eof_ && !exec->finished()) (void)exec->closeStdin();
}

}  // namespace hutch::ssh
