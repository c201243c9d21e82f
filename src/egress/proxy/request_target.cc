#include "egress/proxy/request_target.h"

namespace hutch::egress::proxy {

std::string canonicalName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

std::string normaliseHost(std::string_view host_port) {
  std::string_view host = host_port;
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    host = host.substr(0, close == std::string_view::npos ? host.size() : close + 1);
  } else if (size_t colon = host.rfind(':');
             colon != std::string_view::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  std::string out(host);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

bool hostMatches(std::string_view host_header, std::string_view sni) {
  return !host_header.empty() && normaliseHost(host_header) == normaliseHost(sni);
}

std::optional<HostPort> parseAuthority(std::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return std::nullopt;
  }
  std::string_view port_text = text.substr(colon + 1);
  if (port_text.size() > 5) return std::nullopt;
  uint32_t port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) return std::nullopt;
  return HostPort{normaliseHost(text.substr(0, colon)), static_cast<uint16_t>(port)};
}

std::variant<AbsoluteUri, std::string> parseAbsoluteUri(std::string_view target) {
  auto startsWith = [&](std::string_view prefix) {
    if (target.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
      char c = target[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != prefix[i]) return false;
    }
    return true;
  };
  if (startsWith("https://")) {
    return std::string("send https:// requests through CONNECT (HTTPS_PROXY)");
  }
  if (!startsWith("http://")) {
    return std::string(
        "this is the box's HTTP proxy: send absolute-URI requests (GET http://host/path) or "
        "CONNECT host:port");
  }
  std::string_view rest = target.substr(7);
  size_t end = rest.find_first_of("/?#");
  AbsoluteUri uri;
  std::string_view authority = rest.substr(0, end);
  if (authority.empty() || authority.find('@') != std::string_view::npos) {
    return std::string("the request URI needs a host and no user name");
  }
  uri.authority = std::string(authority);
  std::string_view path = end == std::string_view::npos ? "" : rest.substr(end);
  if (size_t hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  uri.path = path.empty() || path.front() != '/' ? "/" + std::string(path) : std::string(path);
  std::string_view host = authority;
  if (size_t colon = authority.rfind(':');
      colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    std::string_view port_text = authority.substr(colon + 1);
    uint32_t port = 0;
    if (port_text.empty() || port_text.size() > 5) return std::string("bad port in the URI");
    for (char c : port_text) {
      if (c < '0' || c > '9') return std::string("bad port in the URI");
      port = port * 10 + static_cast<uint32_t>(c - '0');
    }
    if (port == 0 || port > 65535) return std::string("bad port in the URI");
    uri.port = static_cast<uint16_t>(port);
    host = authority.substr(0, colon);
  }
  uri.host = normaliseHost(host);
  return uri;
}

}  // namespace hutch::egress::proxy
