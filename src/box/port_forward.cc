#include "box/port_forward.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace hutch::box {

namespace {

constexpr std::string_view kSyntax =
    "use HOSTPORT:BOXPORT or ADDR:HOSTPORT:BOXPORT (e.g. 8080:80 or 0.0.0.0:8080:80)";

Result<uint16_t> parsePort(std::string_view text, std::string_view spec, std::string_view what) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value == 0 ||
      value > 65535) {
    return fail(
        Errc::kInvalidArgument,
        fmt::format("Invalid {} '{}' in '{}': a port is 1-65535; {}", what, text, spec, kSyntax));
  }
  return static_cast<uint16_t>(value);
}

bool isWildcard(const std::string& address) {
  return address == "0.0.0.0" || address == "::";
}

}  // namespace

Result<PortForward> parsePortSpec(std::string_view text) {
  std::string_view rest = text;
  if (auto slash = rest.rfind('/'); slash != std::string_view::npos) {
    std::string_view proto = rest.substr(slash + 1);
    if (proto != "tcp") {
      return fail(Errc::kUnsupported,
                  fmt::format("Only TCP ports can be published, not '{}' ('{}')", proto, text));
    }
    rest = rest.substr(0, slash);
  }
  PortForward forward;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return fail(Errc::kInvalidArgument,
                  fmt::format("Invalid port mapping '{}': {}", text, kSyntax));
    }
    forward.host_address = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 2);
  } else if (std::count(rest.begin(), rest.end(), ':') == 2) {
    size_t colon = rest.find(':');
    forward.host_address = std::string(rest.substr(0, colon));
    rest = rest.substr(colon + 1);
  }
  size_t colon = rest.find(':');
  if (colon == std::string_view::npos || rest.find(':', colon + 1) != std::string_view::npos) {
    return fail(Errc::kInvalidArgument,
                fmt::format("Invalid port mapping '{}': {}", text, kSyntax));
  }
  HUTCH_TRY(forward.host_port, parsePort(rest.substr(0, colon), text, "host port"));
  HUTCH_TRY(forward.box_port, parsePort(rest.substr(colon + 1), text, "box port"));
  if (forward.host_address.empty()) forward.host_address = std::string(kDefaultPortAddress);
  HUTCH_TRY_VOID(validatePortForward(forward));
  return forward;
}

Result<> validatePortForward(PortForward& forward) {
  if (forward.host_port == 0 || forward.box_port == 0) {
    return fail(Errc::kInvalidArgument, "Ports are 1-65535 (host_port and box_port)");
  }
  if (forward.host_address.empty()) forward.host_address = std::string(kDefaultPortAddress);
  if (forward.host_address == "localhost") forward.host_address = "127.0.0.1";
  std::array<unsigned char, 16> raw{};
  std::array<char, INET6_ADDRSTRLEN> text{};
  if (::inet_pton(AF_INET, forward.host_address.c_str(), raw.data()) == 1) {
    ::inet_ntop(AF_INET, raw.data(), text.data(), text.size());
  } else if (::inet_pton(AF_INET6, forward.host_address.c_str(), raw.data()) == 1) {
    ::inet_ntop(AF_INET6, raw.data(), text.data(), text.size());
  } else {
    return fail(Errc::kInvalidArgument,
                fmt::format("'{}' is not an IP address: publish on an IPv4 or IPv6 literal such "
                            "as 127.0.0.1 (the default) or 0.0.0.0",
                            forward.host_address));
  }
  forward.host_address = text.data();
  return ok();
}

std::string hostEndpoint(const PortForward& forward) {
  if (forward.host_address.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", forward.host_address, forward.host_port);
  }
  return fmt::format("{}:{}", forward.host_address, forward.host_port);
}

bool sameHostPort(const PortForward& a, const PortForward& b) {
  if (a.host_port != b.host_port) return false;
  return a.host_address == b.host_address || isWildcard(a.host_address) ||
         isWildcard(b.host_address);
}

}  // namespace hutch::box
