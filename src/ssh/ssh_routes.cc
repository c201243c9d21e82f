// The upgrade from an API request to an SSH stream: the caller is authenticated and the box
// resolved among those it may see (the server's chain, as for every box route), then the
// connection's bytes are relayed to one end of a socket pair whose other end libssh serves.
#include "ssh/ssh_routes.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/write.hpp>

namespace hutch::ssh {

namespace {

using asio::awaitable;
using Reply = std::optional<api::Response>;
using UnixSocket = asio::local::stream_protocol::socket;
namespace http = api::http;
namespace beast = api::beast;

// Client -> libssh: the bytes read past the request first, then the connection's.
awaitable<void> toLocal(std::shared_ptr<api::Connection> c, std::shared_ptr<UnixSocket> local) {
  boost::system::error_code ec;
  if (c->buffer.size() > 0) {
    co_await asio::async_write(*local, c->buffer.data(),
                               asio::redirect_error(asio::use_awaitable, ec));
    c->buffer.consume(c->buffer.size());
  }
  std::string buf(size_t{64} << 10, '\0');
  while (!ec) {
    const size_t n = co_await c->stream.async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(*local, asio::buffer(buf.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  local->shutdown(asio::socket_base::shutdown_send, ec);
}

// libssh -> client, until libssh closes its end.
awaitable<void> fromLocal(std::shared_ptr<api::Connection> c, std::shared_ptr<UnixSocket> local) {
  boost::system::error_code ec;
  std::string buf(size_t{64} << 10, '\0');
  while (true) {
    const size_t n = co_await local->async_read_some(asio::buffer(buf),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(c->stream, asio::buffer(buf.data(), n),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  c->stream.shutdownSend();
}

awaitable<Reply> upgradeToSsh(SshServer& server, box::BoxService& service,
                              api::RequestContext& ctx) {
  auto upgrade = ctx.request[http::field::upgrade];
  // An upgrade request names "upgrade" among its Connection options (RFC 9110 7.6.1).
  const http::token_list connection(ctx.request[http::field::connection]);
  const bool upgrades = std::any_of(connection.begin(), connection.end(),
                                    [](auto token) { return beast::iequals(token, "upgrade"); });
  if (!upgrades || !beast::iequals(upgrade, beast::string_view(kUpgradeProtocol.data(),
                                                               kUpgradeProtocol.size()))) {
    co_return api::errorResponse(Error(
        Errc::kInvalidArgument,
        "This endpoint upgrades to an SSH stream: send 'Connection: Upgrade' and 'Upgrade: ssh' "
        "(hutch ssh-proxy does; see docs/ssh.md)"));
  }
  const std::string& box = ctx.params.find("box")->second;
  Client client{.box = box, .actor = ctx.principal.actor(), .from = ctx.connection->peer};
  // Errors that can be told before the upgrade are ordinary answers: the box is woken, or
  // started, now (the SSH client waits for its banner meanwhile).
  if (auto agent = co_await agentForSsh(service, box, client.actor); !agent) {
    co_return api::errorResponse(agent.error());
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    co_return api::errorResponse(Error(Errc::kInternal, "Cannot make a socket pair", errno));
  }
  UniqueFd theirs(pair[1]);
  std::shared_ptr<api::Connection> c = ctx.connection;
  auto local = std::make_shared<UnixSocket>(c->stream.get_executor());
  local->assign(asio::local::stream_protocol(), pair[0]);

  api::Response res{http::status::switching_protocols, 11};
  res.set(http::field::connection, "Upgrade");
  res.set(http::field::upgrade, std::string(kUpgradeProtocol));
  boost::system::error_code ec;
  co_await http::async_write(c->stream, res, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return std::nullopt;
  server.servePreauthenticated(std::move(theirs), std::move(client));
  asio::co_spawn(c->stream.get_executor(), toLocal(c, local), asio::detached);
  co_await fromLocal(c, local);
  local->close(ec);
  co_return std::nullopt;
}

awaitable<Reply> hostKey(SshServer& server) {
  nlohmann::json body{{"public_key", server.hostKey().publicKey()},
                      {"fingerprint", server.hostKey().fingerprint()}};
  co_return api::jsonResponse(http::status::ok, body);
}

awaitable<Reply> addKey(SshKeys& keys, api::RequestContext& ctx) {
  auto body = nlohmann::json::parse(ctx.request.body(), nullptr, false);
  if (!body.is_object() || !body.contains("name") || !body["name"].is_string() ||
      !body.contains("public_key") || !body["public_key"].is_string() || body.size() != 2) {
    co_return api::errorResponse(
        Error(Errc::kInvalidArgument,
              "An SSH key is {\"name\": NAME, \"public_key\": \"ssh-ed25519 AAAA...\"}"));
  }
  auto added = keys.add(ctx.principal, body["name"].get<std::string>(),
                        body["public_key"].get<std::string>());
  if (!added) co_return api::errorResponse(added.error());
  co_return api::jsonResponse(http::status::created, toJson(*added));
}

awaitable<Reply> listKeys(SshKeys& keys, api::RequestContext& ctx) {
  auto listed = keys.list(ctx.principal);
  if (!listed) co_return api::errorResponse(listed.error());
  nlohmann::json items = nlohmann::json::array();
  for (const auto& k : *listed) items.push_back(toJson(k));
  co_return api::jsonResponse(http::status::ok, nlohmann::json{{"keys", items}});
}

awaitable<Reply> removeKey(SshKeys& keys, api::RequestContext& ctx) {
  const std::string& name = ctx.params.find("name")->second;
  auto removed = keys.remove(ctx.principal, name);
  if (!removed) co_return api::errorResponse(removed.error());
  co_return api::jsonResponse(http::status::ok, nlohmann::json{{"removed", name}});
}

}  // namespace

nlohmann::json toJson(const storage::SshKey& key) {
  return nlohmann::json{{"name", key.name},
                        {"public_key", key.public_key},
                        {"fingerprint", key.fingerprint},
                        {"created_at", key.created_at}};
}

void registerSshKeyRoutes(api::ApiRouter& router, SshKeys& keys) {
  using http::verb;
  router.add(verb::post, "/v1/ssh/keys",
             [&keys](api::RequestContext& ctx) { return addKey(keys, ctx); });
  router.add(verb::get, "/v1/ssh/keys",
             [&keys](api::RequestContext& ctx) { return listKeys(keys, ctx); });
  router.add(verb::delete_, "/v1/ssh/keys/{name}",
             [&keys](api::RequestContext& ctx) { return removeKey(keys, ctx); });
}

void registerSshRoutes(api::ApiRouter& router, SshServer& server, box::BoxService& service) {
  using http::verb;
  router.add(verb::get, "/v1/boxes/{box}/ssh", [&server, &service](api::RequestContext& ctx) {
    return upgradeToSsh(server, service, ctx);
  });
  router.add(verb::get, "/v1/ssh/host-key",
             [&server](api::RequestContext&) { return hostKey(server); });
}

}  // namespace hutch::ssh
