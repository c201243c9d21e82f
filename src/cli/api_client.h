// The CLI's side of the API: blocking HTTP/1.1 to hutchd (Boost.Beast) over its unix socket, or
// over TCP to a remote hutchd: HTTPS (its certificate checked against a CA file or pinned by
// fingerprint) or plain HTTP on loopback, with an API key.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>  // boost 1.74 string_view needs it before beast
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::cli {

using nlohmann::json;

// Where hutchd is and how to prove who we are.
struct Endpoint {
  enum class Kind { kUnix, kHttp, kHttps };
  Kind kind = Kind::kUnix;
  std::string socket_path;  // kUnix
  std::string host;         // kHttp, kHttps: a name or an IP literal
  uint16_t port = 0;
  std::string api_key;      // sent as "Authorization: Bearer KEY" on TCP
  std::string ca_cert;      // a PEM file the server's certificate must chain to
  std::string fingerprint;  // or: the SHA-256 the server's certificate must have (pinning)

  // "unix:/run/hutch/hutchd.sock", "https://host:8443".
  std::string describe() const;
};

// The endpoint the flags and the environment name: --host (HUTCH_HOST) "https://HOST:PORT" or
// "http://127.0.0.1:PORT" with HUTCH_API_KEY, --ca-cert (HUTCH_CA_CERT), --fingerprint
// (HUTCH_FINGERPRINT); else the unix socket (--socket, HUTCH_SOCKET, /run/hutch/hutchd.sock).
// Empty arguments fall back to the environment.
Result<Endpoint> resolveEndpoint(const std::string& host, const std::string& socket,
                                 const std::string& ca_cert, const std::string& fingerprint);

// A connection taken over by an upgraded exec stream: a socket descriptor and any frame bytes
// that arrived together with the 101 response. Over TLS the descriptor is one end of a socket
// pair that `relay` pumps to and from the TLS connection; dropping the stream stops the relay.
struct UpgradedStream {
  UniqueFd fd;
  std::string leftover;
  std::shared_ptr<void> relay;
};

// An answer as it came: for protocols carried over hutchd's HTTP (MCP, `hutch mcp`), whose
// statuses and headers are theirs to read.
struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lowercase
  std::string body;
};

class ApiClient {
 public:
  explicit ApiClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}

  // Sends a request and parses the JSON answer. Non-2xx answers become the Error they carry.
  Result<json> call(boost::beast::http::verb method, const std::string& target,
                    const std::optional<json>& body = std::nullopt) const;
  // GET returning the body as text (console logs).
  Result<std::string> getText(const std::string& target) const;
  // POST with "Upgrade: hutch-exec"; on 101 returns the raw stream.
  Result<UpgradedStream> upgrade(const std::string& target, const json& body) const;
  // The same for another method and protocol (GET with "Upgrade: ssh" for hutch ssh-proxy),
  // without a body when `body` is empty.
  Result<UpgradedStream> upgradeTo(boost::beast::http::verb method, const std::string& target,
                                   const std::string& protocol,
                                   const std::optional<json>& body) const;
  // A request asking for NDJSON (Accept: application/x-ndjson): every line as it arrives goes
  // to on_line as parsed JSON (blank lines, keep-alives, are skipped). Non-2xx answers become
  // their Error.
  Result<> streamLines(boost::beast::http::verb method, const std::string& target,
                       const std::optional<json>& body,
                       const std::function<void(const json&)>& on_line) const;
  // The same with a body read from `body` until its end and sent as it is read (chunked), once
  // hutchd said it takes it (Expect: 100-continue: a refusal comes before the upload).
  // `on_sent` (may be empty) gets the bytes sent so far, after each piece.
  Result<> uploadLines(boost::beast::http::verb method, const std::string& target,
                       const std::string& content_type, int body,
                       const std::function<void(const json&)>& on_line,
                       const std::function<void(uint64_t)>& on_sent = {}) const;

  // Sends a request with these headers and body and returns the answer whatever its status;
  // an error only when hutchd cannot be reached or breaks off. Safe to call from many threads.
  Result<RawResponse> exchange(boost::beast::http::verb method, const std::string& target,
                               const std::map<std::string, std::string>& headers,
                               std::string body) const;

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  Endpoint endpoint_;
};

// Where hutchd listens: $HUTCH_SOCKET, else /run/hutch/hutchd.sock.
std::string defaultSocketPath();

}  // namespace hutch::cli
