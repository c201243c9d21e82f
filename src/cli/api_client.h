// The CLI's side of the API: blocking HTTP/1.1 over hutchd's unix socket (Boost.Beast).
#pragma once

#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>  // boost 1.74 string_view needs it before beast
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::cli {

using nlohmann::json;

// A connection taken over by an upgraded exec stream: the socket and any frame bytes that
// arrived together with the 101 response.
struct UpgradedStream {
  UniqueFd fd;
  std::string leftover;
};

class ApiClient {
 public:
  explicit ApiClient(std::string socket_path) : socket_path_(std::move(socket_path)) {}

  // Sends a request and parses the JSON answer. Non-2xx answers become the Error they carry.
  Result<json> call(boost::beast::http::verb method, const std::string& target,
                    const std::optional<json>& body = std::nullopt) const;
  // GET returning the body as text (console logs).
  Result<std::string> getText(const std::string& target) const;
  // POST with "Upgrade: hutch-exec"; on 101 returns the raw stream.
  Result<UpgradedStream> upgrade(const std::string& target, const json& body) const;

  const std::string& socketPath() const { return socket_path_; }

 private:
  std::string socket_path_;
};

// Where hutchd listens: $HUTCH_SOCKET, else /run/hutch/hutchd.sock.
std::string defaultSocketPath();

}  // namespace hutch::cli
