// SshServer: SSH into boxes, ended in hutchd (docs/ssh.md). One more face beside the HTTP API,
// the E2B façade and MCP: libssh's server API speaks the protocol, and what a client asks for
// in a box is done through BoxService::agentFor and its BoxAgent, exactly as the API's exec and
// published ports do (a session channel is an exec, a direct-tcpip channel the agent's TCP
// relay). No sshd and no key live in any box; hutchd has one host key (host_key.h).
//
// Threading: everything runs on the daemon's event loop. Each connection is driven by libssh in
// non-blocking mode: its socket is watched with asio, and libssh is polled with a zero timeout
// when it is readable (or writable while libssh has output pending), so nothing blocks and no
// lock is needed.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/auth.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "box/box_service.h"
#include "observe/audit_log.h"
#include "ssh/host_key.h"

struct ssh_bind_struct;

namespace hutch::ssh {

namespace asio = boost::asio;

class Connection;

// Who an SSH connection comes from, known before the SSH handshake (the API authenticated the
// request that became the connection, and resolved the box among those the caller may see).
struct Client {
  std::string box;  // the box's id
  observe::Actor actor;
  std::string from;  // the client's address as the API saw it ("unix", "127.0.0.1")
};

// The box's agent for SSH: a stopped box, or one suspended on request, is started (SSH wakes
// boxes, docs/ssh.md); BoxService::agentFor wakes a paused one and one suspended for being idle.
asio::awaitable<Result<std::shared_ptr<box::BoxAgent>>> agentForSsh(box::BoxService& service,
                                                                    const std::string& box,
                                                                    const observe::Actor& actor);

class SshKeys;

class SshServer {
 public:
  // kInternal when libssh cannot be set up with the key.
  static Result<std::unique_ptr<SshServer>> make(asio::any_io_executor executor,
                                                 box::BoxService& service, HostKey host_key);
  ~SshServer();
  SshServer(const SshServer&) = delete;
  SshServer& operator=(const SshServer&) = delete;

  const HostKey& hostKey() const { return host_key_; }

  // Serves one SSH connection on `socket` (a connected stream socket, taken over) for a client
  // already authenticated as `client`: SSH authentication is then a formality (method "none",
  // or any public key, is accepted; never a password). The SSH user name picks the user in the
  // box (ssh_model.h boxUserOf). Returns at once; the connection lives until either side ends
  // it or stop().
  void servePreauthenticated(UniqueFd socket, Client client);

  // The TCP gateway (hutchd --listen-ssh): public-key authentication against `keys`, the user
  // name naming the box among the key owner's boxes (SshKeys::authorize). Method "none" and
  // passwords are refused; failed authentications are logged and rate limited per address
  // (`limiter`); a connection that has not authenticated within a minute is closed. Both must
  // outlive the server.
  void setGateway(SshKeys* keys, api::FailureLimiter* limiter) {
    keys_ = keys;
    limiter_ = limiter;
  }
  // Serves one TCP connection of the gateway (`from`: the client's address). Needs setGateway.
  void serveWithKeys(UniqueFd socket, std::string from);
  // Listens on "ADDR:PORT" (port 0 picks one) and serves every connection with serveWithKeys
  // until stop(). Returns the bound endpoint as "ADDR:PORT". Needs setGateway.
  Result<std::string> listenTcp(const std::string& address);

  // Connections open now.
  size_t connectionCount() const { return connections_->size(); }
  // Ends every connection (their commands are killed, as when a client goes away).
  void stop();
  // Ends the connections made with API key `key_id` (a removed key): the gateway's, whose SSH
  // keys it owned. The API path's end with their HTTP connections (HttpServer::closeSessionsOf).
  void closeSessionsOf(const std::string& key_id);

 private:
  SshServer(asio::any_io_executor executor, box::BoxService& service, HostKey host_key);

  asio::any_io_executor executor_;
  box::BoxService& service_;
  HostKey host_key_;
  ssh_bind_struct* bind_ = nullptr;
  std::vector<std::unique_ptr<asio::ip::tcp::acceptor>> acceptors_;
  SshKeys* keys_ = nullptr;
  api::FailureLimiter* limiter_ = nullptr;
  uint64_t next_id_ = 1;
  // Shared with the connections, which leave it when they end (possibly after the server).
  std::shared_ptr<std::map<uint64_t, std::weak_ptr<Connection>>> connections_ =
      std::make_shared<std::map<uint64_t, std::weak_ptr<Connection>>>();
};

}  // namespace hutch::ssh
