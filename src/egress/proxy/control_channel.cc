#include "egress/proxy/control_channel.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "egress/proxy/egress_proxy.h"
#include "egress/proxy/log.h"

namespace hutch::egress::proxy {

namespace {

using Json = nlohmann::json;

Result<std::string> idOf(const Json& doc) {
  if (!doc.contains("id") || !doc["id"].is_string() || doc["id"].get<std::string>().empty()) {
    return fail(Errc::kInvalidArgument, "needs \"id\", a non-empty string");
  }
  std::string id = doc["id"].get<std::string>();
  if (id.size() > 128) return fail(Errc::kInvalidArgument, "\"id\" is longer than 128 bytes");
  return id;
}

Result<Policy> policyOf(const Json& doc) {
  if (!doc.contains("policy")) return fail(Errc::kInvalidArgument, "needs \"policy\"");
  auto policy = parsePolicy(doc["policy"]);
  if (!policy) return fail(policy.error().withContext("bad \"policy\""));
  return policy;
}

Result<CaPair> caOf(const Json& doc) {
  if (!doc.contains("ca") || !doc["ca"].is_object() || !doc["ca"].contains("cert") ||
      !doc["ca"].contains("key") || !doc["ca"]["cert"].is_string() ||
      !doc["ca"]["key"].is_string()) {
    return fail(Errc::kInvalidArgument, "needs \"ca\": {\"cert\": PEM, \"key\": PEM}");
  }
  return CaPair{doc["ca"]["cert"].get<std::string>(), doc["ca"]["key"].get<std::string>()};
}

Result<> apply(EgressProxy& proxy, const Json& doc, std::vector<UniqueFd>& fds) {
  if (!doc.is_object()) return fail(Errc::kInvalidArgument, "is not a JSON object");
  if (!doc.contains("op") || !doc["op"].is_string()) {
    return fail(Errc::kInvalidArgument, "needs \"op\": \"box\", \"policy\" or \"remove\"");
  }
  std::string op = doc["op"].get<std::string>();
  HUTCH_TRY(std::string id, idOf(doc));
  std::string where = op + " " + id;
  if (op != "box" && !fds.empty()) {
    return fail(Errc::kInvalidArgument, where + ": only \"box\" messages carry descriptors");
  }
  if (op == "box") {
    BoxConfig config;
    auto policy = policyOf(doc);
    if (!policy) return fail(policy.error().withContext(where));
    config.policy = std::move(*policy);
    auto secrets = parseSecrets(doc.contains("secrets") ? doc["secrets"] : Json::array());
    if (!secrets) return fail(secrets.error().withContext(where));
    config.secrets = std::move(*secrets);
    auto ca = caOf(doc);
    if (!ca) return fail(ca.error().withContext(where));
    config.ca = std::move(*ca);
    std::optional<BoxSockets> sockets;
    if (fds.size() == 3 || fds.size() == 4) {
      sockets = BoxSockets{std::move(fds[0]), std::move(fds[1]), std::move(fds[2]),
                           fds.size() == 4 ? std::move(fds[3]) : UniqueFd()};
    } else if (!fds.empty()) {
      return fail(Errc::kInvalidArgument,
                  where +
                      ": send 3 or 4 descriptors (explicit proxy listener, transparent "
                      "listener, DNS socket, and the NFLOG socket of dropped packets) or none, "
                      "not " +
                      std::to_string(fds.size()));
    }
    auto done = proxy.configureBox(id, std::move(config), std::move(sockets));
    if (!done) return fail(done.error().withContext(where));
    return ok();
  }
  if (op == "policy") {
    auto policy = policyOf(doc);
    if (!policy) return fail(policy.error().withContext(where));
    auto done = proxy.setPolicy(id, std::move(*policy));
    if (!done) return fail(done.error().withContext(where));
    return ok();
  }
  if (op == "remove") {
    auto done = proxy.removeBox(id);
    if (!done) return fail(done.error().withContext(where));
    return ok();
  }
  return fail(Errc::kInvalidArgument,
              "unknown op \"" + op + "\"; use \"box\", \"policy\" or \"remove\"");
}

}  // namespace

ControlChannel::ControlChannel(const asio::any_io_executor& executor, UniqueFd fd)
    : socket_(executor, fd.release()) {}

void ControlChannel::sendLog(const LogEntry& entry) {
  if (outbox_.size() >= kMaxQueuedEvents) {
    if (dropped_++ % 1000 == 0) {
      egressLog().warn("hutchd is not reading the control socket: {} log events dropped", dropped_);
    }
    return;
  }
  send(Json{{"event", "log"}, {"entry", toJson(entry)}});
}

void ControlChannel::sendError(const std::string& message) {
  egressLog().warn("control: {}", message);
  send(Json{{"event", "error"}, {"message", message}});
}

void ControlChannel::send(const Json& event) {
  if (closed_) return;
  outbox_.push_back(event.dump());
  if (!writing_) {
    writing_ = true;
    asio::co_spawn(socket_.get_executor(), flush(), [](const std::exception_ptr&) {});
  }
}

asio::awaitable<void> ControlChannel::flush() {
  while (!outbox_.empty() && !closed_) {
    const std::string& text = outbox_.front();
    ssize_t n =
        ::send(socket_.native_handle(), text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      outbox_.pop_front();
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      egressLog().warn("control: cannot send an event: {}", std::strerror(errno));
      closed_ = true;
      break;
    }
    error_code ec;
    co_await socket_.async_wait(asio::posix::descriptor_base::wait_write,
                                asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  writing_ = false;
}

void ControlChannel::handle(EgressProxy& proxy, std::string_view text, std::vector<UniqueFd> fds) {
  Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded()) {
    sendError("Control message is not JSON; send one JSON object per message");
    return;
  }
  Result<> done = fail(Errc::kInternal, "not applied");
  try {
    done = apply(proxy, doc, fds);
  } catch (const std::exception& e) {  // nlohmann type errors and the like, at the module edge
    done = fail(Errc::kInvalidArgument, std::string("malformed: ") + e.what());
  }
  if (!done) sendError("Control message " + done.error().message());
}

asio::awaitable<void> ControlChannel::run(EgressProxy& proxy) {
  send(Json{{"event", "ready"}});
  std::vector<char> buffer(kMaxMessageBytes + 1);
  for (;;) {
    error_code ec;
    co_await socket_.async_wait(asio::posix::descriptor_base::wait_read,
                                asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    iovec iov{buffer.data(), buffer.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptors)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      egressLog().warn("control: reading failed: {}", std::strerror(errno));
      break;
    }
    std::vector<UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    if (n == 0 && fds.empty()) break;  // hutchd closed the socket
    if ((msg.msg_flags & MSG_TRUNC) != 0 || static_cast<size_t>(n) > kMaxMessageBytes) {
      sendError("Control message is larger than 1 MiB; it was ignored");
      continue;
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      sendError("Control message carried more than " + std::to_string(kMaxDescriptors) +
                " descriptors; it was ignored");
      continue;
    }
    handle(proxy, std::string_view(buffer.data(), static_cast<size_t>(n)), std::move(fds));
  }
  closed_ = true;
}

}  // namespace hutch::egress::proxy
