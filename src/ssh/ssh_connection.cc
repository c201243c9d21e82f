// The transport side of one SSH connection: the handshake, authentication, channel opens, and
// the loop that lets libssh run without blocking (ssh_connection.h).
#include "ssh/ssh_connection.h"

#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "ssh/ssh_keys.h"
#include "ssh/ssh_model.h"

namespace hutch::ssh {

namespace {

// Service passes in a row while the socket stays readable, before yielding to the loop.
constexpr int kMaxPassesInARow = 16;
// How long a gateway connection may take to authenticate.
constexpr auto kAuthDeadline = std::chrono::seconds(60);
// Channels open at once on one connection (sshd's MaxSessions is 10 sessions; IDEs open many
// direct-tcpip channels): past it, opens are refused.
constexpr size_t kMaxChannels = 256;

bool readable(int fd) {
  struct pollfd p {
    .fd = fd, .events = POLLIN, .revents = 0
  };
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

}  // namespace

Connection::Connection(asio::any_io_executor executor, box::BoxService& service, Client client,
                       std::optional<Gate> gate)
    : executor_(std::move(executor)),
      service_(service),
      client_(std::move(client)),
      gate_(gate),
      progress_(executor_) {}

Connection::~Connection() {
  close("the connection object went away");
}

Result<> Connection::start(ssh_bind bind, UniqueFd socket) {
  session_ = ssh_new();
  if (session_ == nullptr) return fail(Errc::kInternal, "libssh could not make a session");
  fd_ = socket.get();
  // A second descriptor of the same socket for asio's readiness waits; libssh owns the first.
  int watched = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (watched < 0) return fail(Errc::kInternal, "Cannot duplicate the SSH socket", errno);
  socket_.emplace(executor_, watched);
  if (ssh_bind_accept_fd(bind, session_, socket.release()) != SSH_OK) {
    return fail(Errc::kInternal,
                fmt::format("libssh refused the connection: {}", ssh_get_error(bind)));
  }
  ssh_set_blocking(session_, 0);
  ssh_callbacks_init(&server_callbacks_);
  server_callbacks_.userdata = this;
  server_callbacks_.auth_none_function = &Connection::authNone;
  server_callbacks_.auth_pubkey_function = &Connection::authPubkey;
  server_callbacks_.channel_open_request_session_function = &Connection::openSession;
  ssh_set_server_callbacks(session_, &server_callbacks_);
  // The API path authenticated the client already; the gateway takes public keys only.
  ssh_set_auth_methods(session_, gate_ ? SSH_AUTH_METHOD_PUBLICKEY
                                       : SSH_AUTH_METHOD_NONE | SSH_AUTH_METHOD_PUBLICKEY);
  ssh_set_message_callback(session_, &Connection::onMessage, this);
  if (gate_) {
    auth_deadline_.emplace(executor_, kAuthDeadline);
    auth_deadline_->async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || self->authenticated_) return;
      self->close("no authentication within the deadline");
    });
  }
  poke();
  return ok();
}

void Connection::close(std::string_view why) {
  if (closed_) return;
  closed_ = true;
  spdlog::debug("ssh: box={} connection from {} ends: {}", client_.box, client_.from, why);
  // Channels first: their callbacks point at them.
  auto channels = std::move(channels_);
  channels_.clear();
  for (auto& [raw, channel] : channels) {
    channel->abort();
    channel->release();
  }
  if (socket_) {
    boost::system::error_code ec;
    socket_->close(ec);
  }
  if (event_ != nullptr && session_ != nullptr) ssh_event_remove_session(event_, session_);
  if (event_ != nullptr) ssh_event_free(event_);
  event_ = nullptr;
  if (session_ != nullptr) {
    if (ssh_is_connected(session_) != 0) ssh_disconnect(session_);
    ssh_free(session_);
  }
  session_ = nullptr;
  if (auth_deadline_) auth_deadline_->cancel();
  hold_.reset();
  progress_.notify();
  if (on_closed_) {
    auto f = std::move(on_closed_);
    f();
  }
}

void Connection::poke() {
  if (closed_ || scheduled_) return;
  scheduled_ = true;
  asio::post(executor_, [self = shared_from_this()] {
    self->scheduled_ = false;
    self->pump();
  });
}

void Connection::pump() {
  for (int pass = 0; !closed_; ++pass) {
    pumpOnce();
    if (closed_) return;
    if (!readable(fd_)) break;
    if (pass + 1 == kMaxPassesInARow) {
      poke();  // still more to read: let the rest of the loop run first
      return;
    }
  }
  if (closed_) return;
  progress_.notify();
  arm();
}

void Connection::pumpOnce() {
  if (!kex_done_) {
    const int rc = ssh_handle_key_exchange(session_);
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
      close(fmt::format("key exchange failed: {}", ssh_get_error(session_)));
      return;
    }
    kex_done_ = true;
    event_ = ssh_event_new();
    if (event_ == nullptr || ssh_event_add_session(event_, session_) != SSH_OK) {
      close("libssh could not make an event");
      return;
    }
  }
  const int rc = ssh_event_dopoll(event_, 0);
  if (rc == SSH_ERROR || ssh_is_connected(session_) == 0 ||
      (ssh_get_status(session_) & (SSH_CLOSED | SSH_CLOSED_ERROR)) != 0) {
    close(ssh_get_error(session_));
  }
}

void Connection::arm() {
  if (closed_ || !socket_) return;
  auto self = shared_from_this();
  if (!reading_) {
    reading_ = true;
    socket_->async_wait(asio::posix::stream_descriptor::wait_read,
                        [self](const boost::system::error_code& ec) {
                          self->reading_ = false;
                          if (!ec) self->poke();
                        });
  }
  if (!writing_ && (ssh_get_poll_flags(session_) & SSH_WRITE_PENDING) != 0) {
    writing_ = true;
    socket_->async_wait(asio::posix::stream_descriptor::wait_write,
                        [self](const boost::system::error_code& ec) {
                          self->writing_ = false;
                          if (!ec) self->poke();
                        });
  }
}

asio::awaitable<Result<std::shared_ptr<box::BoxAgent>>> Connection::agent() {
  co_return co_await agentForSsh(service_, client_.box, client_.actor);
}

void Connection::afterAuth(const char* user) {
  if (authenticated_) return;  // SSH authenticates a connection once
  authenticated_ = true;
  std::string name = user != nullptr ? user : "";
  // On the gateway the user name names the box: commands run as the box's default user.
  auto box_user = boxUserOf(name);
  box_user_ = box_user && !gate_ ? *box_user : std::nullopt;
  if (auto box = service_.get(client_.box); box) box_names_ = {box->name, box->id};
  // The session is work for idle pause, and is seen in the events and the audit log.
  auto self = shared_from_this();
  asio::co_spawn(
      executor_,
      [self, name]() -> asio::awaitable<void> {
        auto agent = co_await self->agent();
        if (self->closed_) co_return;
        if (!agent) {
          spdlog::info("ssh: box={} from {}: {}", self->client_.box, self->client_.from,
                       agent.error().describe());
          co_return;
        }
        self->hold_ = (*agent)->openSession(
            "ssh", nlohmann::json{{"user", name}, {"from", self->client_.from}});
      },
      asio::detached);
}

int Connection::authNone(ssh_session /*session*/, const char* user, void* userdata) {
  auto* self = static_cast<Connection*>(userdata);
  if (self->gate_) return SSH_AUTH_DENIED;
  self->afterAuth(user);
  return SSH_AUTH_SUCCESS;
}

int Connection::gatewayAuth(const char* user, ssh_key_struct* pubkey, char signature_state) {
  const auto now = std::chrono::steady_clock::now();
  const std::string& from = client_.from;
  auto fingerprint = fingerprintOf(pubkey);
  const std::string name = user != nullptr ? user : "";
  // As the API's keys (api/auth.h FailureLimiter): a login that succeeds is never refused;
  // every failure is counted and logged, and past the limit the connection is closed at once.
  auto refuse = [&](std::string_view why) {
    gate_->limiter->recordFailure(from, now);
    spdlog::info("ssh: gateway login as '{}' from {} with key {} refused: {}", name, from,
                 fingerprint ? *fingerprint : "?", why);
    if (auto wait = gate_->limiter->refused(from, now); wait) {
      spdlog::warn("ssh: too many failed logins from {}; its connections are closed for {} s", from,
                   *wait);
      asio::post(executor_, [self = shared_from_this()] { self->close("too many failures"); });
    }
    return SSH_AUTH_DENIED;
  };
  if (!fingerprint) return refuse("the key cannot be read");
  // A key offered without a signature is "acceptable" only if it is registered (the client
  // then signs with it).
  if (signature_state == SSH_PUBLICKEY_STATE_NONE) {
    return gate_->keys->known(*fingerprint) ? SSH_AUTH_SUCCESS : refuse("unknown key");
  }
  if (signature_state != SSH_PUBLICKEY_STATE_VALID) return refuse("bad signature");
  auto client = gate_->keys->authorize(name, *fingerprint, from);
  if (!client) return refuse("unknown key, or no such box among the key owner's");
  client_ = std::move(*client);
  spdlog::info("ssh: box={} gateway login from {} (key {})", client_.box, from, *fingerprint);
  afterAuth(user);
  return SSH_AUTH_SUCCESS;
}

int Connection::authPubkey(ssh_session /*session*/, const char* user, ssh_key_struct* pubkey,
                           char signature_state, void* userdata) {
  auto* self = static_cast<Connection*>(userdata);
  if (self->gate_) return self->gatewayAuth(user, pubkey, signature_state);
  // The client was authenticated before SSH began: any key will do. A key offered without its
  // signature is answered "acceptable"; the signed request logs the client in.
  if (signature_state == SSH_PUBLICKEY_STATE_VALID) self->afterAuth(user);
  return SSH_AUTH_SUCCESS;
}

ssh_channel Connection::openSession(ssh_session session, void* userdata) {
  auto* self = static_cast<Connection*>(userdata);
  if (!self->authenticated_ || self->closed_ || self->channels_.size() >= kMaxChannels) {
    return nullptr;
  }
  ssh_channel channel = ssh_channel_new(session);
  if (channel == nullptr) return nullptr;
  auto sc = std::make_shared<SessionChannel>(self->shared_from_this());
  sc->attach(channel);
  sc->install();
  self->channels_[sc.get()] = sc;
  return channel;
}

int Connection::onMessage(ssh_session /*session*/, ssh_message message, void* userdata) {
  auto* self = static_cast<Connection*>(userdata);
  if (ssh_message_type(message) == SSH_REQUEST_CHANNEL_OPEN &&
      ssh_message_subtype(message) == SSH_CHANNEL_DIRECT_TCPIP && self->authenticated_ &&
      !self->closed_ && self->channels_.size() < kMaxChannels) {
    const char* host = ssh_message_channel_request_open_destination(message);
    const int port = ssh_message_channel_request_open_destination_port(message);
    auto address = boxLocalAddress(host != nullptr ? host : "", self->box_names_);
    if (!address || port <= 0 || port > 65535) {
      spdlog::info(
          "ssh: box={} from {}: direct-tcpip to {}:{} refused (only the box's own "
          "addresses)",
          self->client_.box, self->client_.from, host != nullptr ? host : "", port);
      return 1;  // default reply: administratively prohibited
    }
    ssh_channel channel = ssh_message_channel_request_open_reply_accept(message);
    if (channel == nullptr) return 0;
    auto tc = std::make_shared<TcpChannel>(self->shared_from_this(), *address,
                                           static_cast<uint16_t>(port));
    tc->attach(channel);
    tc->install();
    self->channels_[tc.get()] = tc;
    return 0;
  }
  // Everything else (password and other authentications, tcpip-forward, x11, agent forwarding,
  // channel requests no callback took) gets libssh's default answer: a refusal.
  return 1;
}

void Connection::drop(Channel* channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  auto keep = it->second;
  channels_.erase(it);
  keep->release();
  poke();
}

// ---- Channel ----

Channel::Channel(std::shared_ptr<Connection> connection)
    : connection_(std::move(connection)), changed_(connection_->executor()) {}

Channel::~Channel() = default;

void Channel::attach(ssh_channel channel) {
  channel_ = channel;
}

void Channel::release() {
  if (channel_ == nullptr) return;
  ssh_remove_channel_callbacks(channel_, &callbacks_);
  if (!connection_->closed() && ssh_channel_is_closed(channel_) == 0) ssh_channel_close(channel_);
  ssh_channel_free(channel_);
  channel_ = nullptr;
  changed_.notify();
}

bool Channel::gone() const {
  return channel_ == nullptr || connection_->closed() || peer_closed_;
}

asio::awaitable<bool> Channel::writeAll(std::string_view data, bool to_stderr) {
  while (!data.empty()) {
    if (gone()) co_return false;
    const uint32_t window = ssh_channel_window_size(channel_);
    if (window == 0) {
      co_await connection_->progress().wait();
      continue;
    }
    const auto n = static_cast<uint32_t>(std::min<size_t>({data.size(), window, 32768}));
    const int written = to_stderr ? ssh_channel_write_stderr(channel_, data.data(), n)
                                  : ssh_channel_write(channel_, data.data(), n);
    if (written == SSH_ERROR) co_return false;
    connection_->poke();
    data.remove_prefix(static_cast<size_t>(written));
    if (written == 0) co_await connection_->progress().wait();
  }
  co_return true;
}

void Channel::sendEofAndClose() {
  if (gone() || closing_) return;
  closing_ = true;
  ssh_channel_send_eof(channel_);
  ssh_channel_close(channel_);
  connection_->poke();
}

size_t Channel::acceptData(const char* data, size_t len) {
  if (queued_ >= kMaxQueued) {
    refused_ = true;
    return 0;
  }
  const size_t take = std::min(len, kMaxQueued - queued_);
  if (take < len) refused_ = true;
  queue_.emplace_back(data, take);
  queued_ += take;
  changed_.notify();
  return take;
}

void Channel::refillFromLibssh() {
  if (!refused_ || gone()) return;
  refused_ = false;
  std::string buf(32768, '\0');
  while (channel_ != nullptr) {
    if (queued_ >= kMaxQueued) {
      refused_ = true;  // libssh may hold more: the next refill takes it
      break;
    }
    const int n =
        ssh_channel_read_nonblocking(channel_, buf.data(), static_cast<uint32_t>(buf.size()), 0);
    if (n <= 0) break;
    queue_.emplace_back(buf.data(), static_cast<size_t>(n));
    queued_ += static_cast<size_t>(n);
  }
  connection_->poke();  // the window grew: tell the client
}

asio::awaitable<std::optional<std::string>> Channel::nextData() {
  while (true) {
    if (!queue_.empty()) {
      std::string chunk = std::move(queue_.front());
      queue_.pop_front();
      queued_ -= chunk.size();
      refillFromLibssh();
      co_return chunk;
    }
    refillFromLibssh();
    if (!queue_.empty()) continue;
    if (peer_eof_ || gone()) co_return std::nullopt;
    co_await changed_.wait();
  }
}

}  // namespace hutch::ssh
