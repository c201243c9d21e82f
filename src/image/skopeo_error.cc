#include "image/skopeo_error.h"

#include <fmt/format.h>

#include <cctype>
#include <regex>

#include "base/ascii.h"

namespace hutch::image {

namespace {

// The msg="..." of skopeo's last fatal line, unescaped; empty when there is none.
std::string fatalMessage(std::string_view output) {
  constexpr std::string_view kMarker = "level=fatal msg=\"";
  const size_t at = output.rfind(kMarker);
  if (at == std::string_view::npos) return "";
  std::string out;
  for (size_t i = at + kMarker.size(); i < output.size(); ++i) {
    const char c = output[i];
    if (c == '"') break;
    if (c == '\\' && i + 1 < output.size()) {
      out += output[++i];
      continue;
    }
    out += c;
  }
  return out;
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  return std::string(text);
}

}  // namespace

SkopeoFailure classifySkopeoFailure(std::string_view output) {
  SkopeoFailure f;
  f.message = fatalMessage(output);
  if (f.message.empty()) f.message = trimmed(output);
  // skopeo inspect prefixes every registry error with the name it was given: noise here.
  static const std::regex kParsing(R"(^Error parsing image name "[^"]*": )");
  f.message = std::regex_replace(f.message, kParsing, "");
  const std::string text = base::asciiLower(f.message);
  auto says = [&text](std::string_view what) { return text.find(what) != std::string::npos; };
  f.blob = says("reading blob") || says("writing blob") || says("fetching blob");
  // "received unexpected HTTP status: 500 Internal Server Error",
  // "invalid status code from registry 404 (Not Found)".
  static const std::regex kStatus(
      R"((?:status|status code from registry)[: ]+([1-5][0-9][0-9])\b)");
  std::smatch m;
  if (std::regex_search(text, m, kStatus)) f.status = std::stoi(m[1].str());
  using Kind = SkopeoFailure::Kind;
  if (says("context deadline exceeded") || says("i/o timeout") || says("timeout awaiting")) {
    f.kind = Kind::kTimedOut;
  } else if (says("digest did not match") || says("does not match the expected digest") ||
             says("digest mismatch") || says("size mismatch") ||
             says("does not match provided manifest digest")) {
    f.kind = Kind::kDigestMismatch;
  } else if (f.status == 429 || says("toomanyrequests") || says("too many requests")) {
    f.kind = Kind::kRateLimited;
    f.status = 429;
  } else if (f.status == 401 || f.status == 403 || says("unauthorized") ||
             says("authentication required") || says("denied")) {
    f.kind = Kind::kUnauthorized;
    if (f.status == 0) f.status = says("denied") && !says("unauthorized") ? 403 : 401;
  } else if (f.status == 404 || says("manifest unknown") || says("name unknown") ||
             says("blob unknown") || says("not found")) {
    f.kind = Kind::kNotFound;
    f.status = 404;
  } else if (f.status >= 500) {
    f.kind = Kind::kServerError;
  }
  return f;
}

std::string httpStatusText(int status) {
  switch (status) {
    case 401: return "401 Unauthorized";
    case 403: return "403 Forbidden";
    case 404: return "404 Not Found";
    case 429: return "429 Too Many Requests";
    case 500: return "500 Internal Server Error";
    case 502: return "502 Bad Gateway";
    case 503: return "503 Service Unavailable";
    case 504: return "504 Gateway Timeout";
    default: return fmt::format("HTTP {}", status);
  }
}

Error registryPullError(const SkopeoFailure& f, std::string_view registry, std::string_view image,
                        std::chrono::seconds timeout) {
  using Kind = SkopeoFailure::Kind;
  const std::string part = f.blob ? "a layer of " : "";
  switch (f.kind) {
    case Kind::kUnauthorized:
      return Error(
          Errc::kPermissionDenied,
          fmt::format("The registry {} refused {}{} ({}); log in with the credentials "
                      "it needs (hutch registry login {}): {}",
                      registry, part, image, httpStatusText(f.status), registry, f.message));
    case Kind::kNotFound:
      return Error(
          Errc::kNotFound,
          fmt::format("The registry {} has no {}{} ({}); check the name and tag: {}", registry,
                      f.blob ? "blob for " : "image ", image, httpStatusText(404), f.message));
    case Kind::kRateLimited:
      return Error(Errc::kResourceExhausted,
                   fmt::format("The registry {} limits its requests and refused {}{} ({}); try "
                               "again later: {}",
                               registry, part, image, httpStatusText(429), f.message));
    case Kind::kServerError:
      return Error(Errc::kUnavailable,
                   fmt::format("The registry {} failed to serve {}{} ({}); try again later: {}",
                               registry, part, image, httpStatusText(f.status), f.message));
    case Kind::kTimedOut:
      return Error(Errc::kTimeout,
                   fmt::format("Pulling {} from the registry {} timed out: it did not finish "
                               "within {} s (hutchd --image-pull-timeout); nothing was kept: {}",
                               image, registry, timeout.count(), f.message));
    case Kind::kDigestMismatch:
      return Error(Errc::kProtocol,
                   fmt::format("The registry {} sent {}{} with bytes that do not match its "
                               "digest (a corrupted or substituted image); nothing of it was "
                               "kept: {}",
                               registry, f.blob ? "a blob of " : "", image, f.message));
    case Kind::kOther: break;
  }
  return Error(Errc::kUnavailable,
               fmt::format("Cannot get {} from the registry {}: {}", image, registry, f.message));
}

}  // namespace hutch::image
