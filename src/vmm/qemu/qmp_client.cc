#include "vmm/qemu/qmp_client.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>

namespace hutch::vmm::qemu {

namespace {

constexpr size_t kMaxMessageBytes = 64 << 20;

using boost::system::error_code;

Errc errcForQmpClass(std::string_view cls) {
  if (cls == "CommandNotFound") return Errc::kUnsupported;
  if (cls == "DeviceNotFound") return Errc::kNotFound;
  return Errc::kFailedPrecondition;  // GenericError, DeviceNotActive, KVMMissingCap...
}

std::string millis(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

}  // namespace

struct QmpClient::Pending {
  Pending(const asio::any_io_executor& ex, Clock::time_point deadline, std::string cmd)
      : timer(ex, deadline), command(std::move(cmd)) {}
  asio::steady_timer timer;
  std::string command;
  std::optional<Result<Json>> result;
};

QmpClient::QmpClient(asio::local::stream_protocol::socket socket) : socket_(std::move(socket)) {}

QmpClient::~QmpClient() {
  error_code ignored;
  socket_.close(ignored);
}

asio::awaitable<Result<std::shared_ptr<QmpClient>>> QmpClient::connect(
    std::filesystem::path socket_path, std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  asio::local::stream_protocol::socket socket(ex);
  error_code ec;
  co_await socket.async_connect(asio::local::stream_protocol::endpoint(socket_path.string()),
                                asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    co_return fail(Errc::kUnavailable, "Cannot connect to QMP at " + socket_path.string(),
                   ec.value());
  }
  co_return co_await handshake(std::move(socket), timeout);
}

asio::awaitable<Result<std::shared_ptr<QmpClient>>> QmpClient::handshake(
    asio::local::stream_protocol::socket socket, std::chrono::milliseconds timeout) {
  std::shared_ptr<QmpClient> client(new QmpClient(std::move(socket)));
  auto negotiated = co_await client->negotiate(timeout);
  if (!negotiated) {
    client->close();
    co_return fail(negotiated.error());
  }
  co_return client;
}

asio::awaitable<Result<>> QmpClient::negotiate(std::chrono::milliseconds timeout) {
  // The greeting comes unasked; read it before the reader loop starts.
  asio::steady_timer timer(socket_.get_executor(), timeout);
  bool timed_out = false;
  timer.async_wait([this, &timed_out](error_code ec) {
    if (ec) return;
    timed_out = true;
    error_code ignored;
    socket_.cancel(ignored);
  });
  error_code ec;
  size_t n =
      co_await asio::async_read_until(socket_, asio::dynamic_buffer(read_buffer_, kMaxMessageBytes),
                                      '\n', asio::redirect_error(asio::use_awaitable, ec));
  timer.cancel();
  if (timed_out) {
    co_return fail(Errc::kTimeout, "QEMU sent no QMP greeting within " + millis(timeout));
  }
  if (ec)
    co_return fail(Errc::kUnavailable, "QMP connection closed before the greeting", ec.value());
  Json greeting = Json::parse(read_buffer_.substr(0, n), nullptr, false);
  read_buffer_.erase(0, n);
  if (greeting.is_discarded() || !greeting.is_object() || !greeting.contains("QMP")) {
    co_return fail(Errc::kProtocol, "The QMP peer did not start with a QMP greeting");
  }
  greeting_ = greeting["QMP"];

  asio::co_spawn(socket_.get_executor(), readLoop(), asio::detached);
  auto caps = co_await execute("qmp_capabilities", nullptr, timeout);
  if (!caps) co_return fail(caps.error().withContext("QMP capabilities negotiation failed"));
  co_return ok();
}

std::string QmpClient::qemuVersion() const {
  const Json* v = &greeting_;
  for (const char* key : {"version", "qemu"}) {
    if (!v->is_object() || !v->contains(key)) return "";
    v = &(*v)[key];
  }
  auto part = [&](const char* key) {
    return v->contains(key) && (*v)[key].is_number_integer()
               ? std::to_string((*v)[key].get<int64_t>())
               : std::string("?");
  };
  return part("major") + "." + part("minor") + "." + part("micro");
}

asio::awaitable<Result<Json>> QmpClient::execute(std::string command, Json arguments,
                                                 std::chrono::milliseconds timeout) {
  co_return co_await send(std::move(command), std::move(arguments), -1, timeout);
}

asio::awaitable<Result<Json>> QmpClient::executeWithFd(std::string command, Json arguments, int fd,
                                                       std::chrono::milliseconds timeout) {
  if (fd < 0) co_return fail(Errc::kInvalidArgument, "No descriptor to send with " + command);
  co_return co_await send(std::move(command), std::move(arguments), fd, timeout);
}

asio::awaitable<Result<Json>> QmpClient::send(std::string command, Json arguments, int fd,
                                              std::chrono::milliseconds timeout) {
  if (!connected_) {
    co_return fail(
        Errc::kUnavailable,
        "Cannot send '" + command + "': the QMP connection is closed (" + lost_reason_ + ")");
  }
  auto self = shared_from_this();
  uint64_t id = next_id_++;
  auto pending = std::make_shared<Pending>(socket_.get_executor(), Clock::now() + timeout, command);
  pending_[id] = pending;
  Json message = {{"execute", command}, {"id", id}};
  if (!arguments.is_null()) message["arguments"] = std::move(arguments);
  outbox_.push_back(Outgoing{message.dump() + "\n", fd});
  if (!writing_) co_await flushWrites();

  while (!pending->result) {
    error_code ec;
    co_await pending->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec && !pending->result) {
      pending_.erase(id);
      co_return fail(Errc::kTimeout,
                     "QEMU did not answer '" + command + "' within " + millis(timeout));
    }
  }
  pending_.erase(id);
  co_return std::move(*pending->result);
}

asio::awaitable<void> QmpClient::flushWrites() {
  writing_ = true;
  while (!outbox_.empty() && connected_) {
    error_code ec;
    size_t skip = 0;
    if (outbox_.front().fd >= 0) {
      auto sent = co_await sendWithFd(outbox_.front().text, outbox_.front().fd);
      if (!sent) {
        connectionLost("passing a descriptor to QMP failed: " + sent.error().describe());
        break;
      }
      skip = *sent;
    }
    const std::string& text = outbox_.front().text;
    if (skip < text.size()) {
      co_await asio::async_write(socket_, asio::buffer(text.data() + skip, text.size() - skip),
                                 asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec) {
      connectionLost("writing to QMP failed: " + ec.message());
      break;
    }
    outbox_.pop_front();
  }
  writing_ = false;
}

asio::awaitable<Result<size_t>> QmpClient::sendWithFd(const std::string& text, int fd) {
  for (;;) {
    iovec iov{const_cast<char*>(text.data()), text.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
    ssize_t n = ::sendmsg(socket_.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) co_return static_cast<size_t>(n);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      co_return fail(sysError("sendmsg on the QMP socket", errno));
    }
    error_code ec;
    co_await socket_.async_wait(asio::socket_base::wait_write,
                                asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return fail(Errc::kUnavailable, "QMP socket: " + ec.message());
  }
}

asio::awaitable<void> QmpClient::readLoop() {
  auto self = shared_from_this();
  while (connected_) {
    error_code ec;
    size_t n = co_await asio::async_read_until(socket_,
                                               asio::dynamic_buffer(read_buffer_, kMaxMessageBytes),
                                               '\n', asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      connectionLost(ec == asio::error::eof ? "QEMU closed the QMP connection"
                                            : "reading from QMP failed: " + ec.message());
      co_return;
    }
    Json message = Json::parse(read_buffer_.substr(0, n), nullptr, false);
    read_buffer_.erase(0, n);
    if (message.is_discarded() || !message.is_object()) {
      connectionLost("QEMU sent a QMP message that is not a JSON object");
      co_return;
    }
    dispatch(message);
  }
}

void QmpClient::dispatch(const Json& message) {
  if (message.contains("event")) {
    QmpEvent event;
    event.name = message["event"].is_string() ? message["event"].get<std::string>() : "";
    event.data = message.value("data", Json());
    event.seq = ++event_seq_;
    events_.push_back(event);
    while (events_.size() > kMaxEventsKept) events_.pop_front();
    if (event_handler_) event_handler_(event);
    wakeWaiters();
    return;
  }
  if (!message.contains("id") || !message["id"].is_number_unsigned()) return;  // not ours
  auto it = pending_.find(message["id"].get<uint64_t>());
  if (it == pending_.end()) return;  // timed out already
  std::shared_ptr<Pending> pending = it->second;
  pending_.erase(it);
  if (message.contains("return")) {
    pending->result = Result<Json>(message["return"]);
  } else if (message.contains("error") && message["error"].is_object()) {
    const Json& error = message["error"];
    std::string cls = error.value("class", "GenericError");
    std::string desc = error.value("desc", "no description");
    pending->result =
        fail(errcForQmpClass(cls), "QEMU refused '" + pending->command + "': " + desc);
  } else {
    pending->result = fail(Errc::kProtocol,
                           "QMP answer to '" + pending->command + "' has neither return nor error");
  }
  pending->timer.cancel();
}

void QmpClient::connectionLost(const std::string& why) {
  if (!connected_) return;
  connected_ = false;
  lost_reason_ = why;
  error_code ignored;
  socket_.close(ignored);
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [id, p] : pending) {
    p->result = fail(Errc::kUnavailable,
                     "Lost the QMP connection while waiting for '" + p->command + "': " + why);
    p->timer.cancel();
  }
  outbox_.clear();
  wakeWaiters();
}

void QmpClient::close() {
  connectionLost("closed by hutch");
}

void QmpClient::setEventHandler(std::function<void(const QmpEvent&)> handler) {
  event_handler_ = std::move(handler);
}

void QmpClient::wakeWaiters() {
  for (asio::steady_timer* timer : event_waiters_) timer->cancel();
}

asio::awaitable<Result<QmpEvent>> QmpClient::waitEvent(std::string name, uint64_t after_seq,
                                                       std::chrono::milliseconds timeout) {
  auto self = shared_from_this();
  auto deadline = Clock::now() + timeout;
  for (;;) {
    for (const QmpEvent& event : events_) {
      if (event.seq > after_seq && event.name == name) co_return event;
    }
    if (!connected_) {
      co_return fail(Errc::kUnavailable,
                     "QMP connection lost while waiting for event " + name + ": " + lost_reason_);
    }
    if (Clock::now() >= deadline) {
      co_return fail(Errc::kTimeout, "QEMU sent no " + name + " event within " + millis(timeout));
    }
    asio::steady_timer timer(socket_.get_executor(), deadline);
    event_waiters_.push_back(&timer);
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    event_waiters_.erase(std::find(event_waiters_.begin(), event_waiters_.end(), &timer));
  }
}

}  // namespace hutch::vmm::qemu
