#include "ssh/ssh_server.h"

#include <fmt/format.h>
#include <libssh/libssh.h>
#include <libssh/server.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/http_server.h"
#include "base/check.h"
#include "ssh/ssh_connection.h"

namespace hutch::ssh {

asio::awaitable<Result<std::shared_ptr<box::BoxAgent>>> agentForSsh(box::BoxService& service,
                                                                    const std::string& box,
                                                                    const observe::Actor& actor) {
  if (auto b = service.get(box); b) {
    const bool stopped = b->state == box::BoxState::kStopped;
    const bool suspended =
        b->state == box::BoxState::kSuspended && service.suspendedBy(b->id) != "idle";
    if (stopped || suspended) HUTCH_CO_TRY_VOID(co_await service.start(box));
  }
  co_return co_await service.agentFor(box, actor);
}

SshServer::SshServer(asio::any_io_executor executor, box::BoxService& service, HostKey host_key)
    : executor_(std::move(executor)), service_(service), host_key_(std::move(host_key)) {}

Result<std::unique_ptr<SshServer>> SshServer::make(asio::any_io_executor executor,
                                                   box::BoxService& service, HostKey host_key) {
  ssh_init();
  std::unique_ptr<SshServer> server(
      new SshServer(std::move(executor), service, std::move(host_key)));
  server->bind_ = ssh_bind_new();
  if (server->bind_ == nullptr) return fail(Errc::kInternal, "libssh could not make a server");
  // Only what is set here: no /etc/libssh/libssh_server.config.
  bool process_config = false;
  ssh_bind_options_set(server->bind_, SSH_BIND_OPTIONS_PROCESS_CONFIG, &process_config);
  // The bind takes the key it is given (and frees it): give it a copy of ours.
  ssh_key copy = ssh_key_dup(server->host_key_.key());
  if (copy == nullptr ||
      ssh_bind_options_set(server->bind_, SSH_BIND_OPTIONS_IMPORT_KEY, copy) != SSH_OK) {
    if (copy != nullptr) ssh_key_free(copy);
    return fail(Errc::kInternal,
                fmt::format("libssh did not take the host key: {}", ssh_get_error(server->bind_)));
  }
  return server;
}

SshServer::~SshServer() {
  stop();
  if (bind_ != nullptr) ssh_bind_free(bind_);
}

void SshServer::serveWithKeys(UniqueFd socket, std::string from) {
  HUTCH_CHECK(keys_ != nullptr && limiter_ != nullptr);
  auto connection = std::make_shared<Connection>(executor_, service_, Client{.from = from},
                                                 Connection::Gate{keys_, limiter_});
  auto started = connection->start(bind_, std::move(socket));
  if (!started) {
    spdlog::warn("ssh: connection from {}: {}", from, started.error().describe());
    connection->close(started.error().message());
    return;
  }
  const uint64_t id = next_id_++;
  (*connections_)[id] = connection;
  connection->onClosed([table = connections_, id] { table->erase(id); });
  spdlog::debug("ssh: gateway connection from {}", from);
}

void SshServer::servePreauthenticated(UniqueFd socket, Client client) {
  auto connection = std::make_shared<Connection>(executor_, service_, client);
  auto started = connection->start(bind_, std::move(socket));
  if (!started) {
    spdlog::warn("ssh: box={} from {}: {}", client.box, client.from, started.error().describe());
    connection->close(started.error().message());
    return;
  }
  const uint64_t id = next_id_++;
  (*connections_)[id] = connection;
  connection->onClosed([table = connections_, id] { table->erase(id); });
  spdlog::info("ssh: box={} connection from {} (key {})", client.box, client.from,
               client.actor.key_name.empty() ? "host" : client.actor.key_name);
}

Result<std::string> SshServer::listenTcp(const std::string& address) {
  HUTCH_CHECK(keys_ != nullptr && limiter_ != nullptr);
  HUTCH_TRY(auto endpoint, api::parseListenAddress(address));
  auto acceptor = std::make_unique<asio::ip::tcp::acceptor>(executor_);
  boost::system::error_code ec;
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(Errc::kUnavailable, "Cannot listen: " + ec.message());
  const auto bound = acceptor->local_endpoint(ec);
  const std::string where = bound.address().is_v6()
                                ? fmt::format("[{}]:{}", bound.address().to_string(), bound.port())
                                : fmt::format("{}:{}", bound.address().to_string(), bound.port());
  asio::co_spawn(
      executor_,
      [this, acceptor = acceptor.get()]() -> asio::awaitable<void> {
        while (true) {
          boost::system::error_code ec;
          auto socket =
              co_await acceptor->async_accept(asio::redirect_error(asio::use_awaitable, ec));
          if (ec == asio::error::operation_aborted || !acceptor->is_open()) co_return;
          if (ec) {
            // EMFILE and the like: wait a little rather than spin, then take the next one.
            asio::steady_timer pause(co_await asio::this_coro::executor,
                                     std::chrono::milliseconds(100));
            co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
          }
          std::string from = socket.remote_endpoint(ec).address().to_string();
          serveWithKeys(UniqueFd(socket.release()), std::move(from));
        }
      },
      asio::detached);
  acceptors_.push_back(std::move(acceptor));
  return where;
}

void SshServer::stop() {
  for (auto& acceptor : acceptors_) {
    boost::system::error_code ignored;
    acceptor->close(ignored);
  }
  auto table = *connections_;
  for (auto& [id, weak] : table) {
    if (auto c = weak.lock()) c->close("hutchd is stopping");
  }
}

void SshServer::closeSessionsOf(const std::string& key_id) {
  auto table = *connections_;
  for (auto& [id, weak] : table) {
    auto c = weak.lock();
    if (c && !key_id.empty() && c->client().actor.key_id == key_id) c->close("its key was removed");
  }
}

}  // namespace hutch::ssh
