#include "image/reference.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include "image/digest.h"

namespace hutch::image {

namespace {

constexpr size_t kMaxNameLength = 255;

bool isLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool isAlnum(char c) {
  return isLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}
bool isWord(char c) {
  return isAlnum(c) || c == '_';
}

// [a-z0-9]+ ((?:[._]|__|[-]+) [a-z0-9]+)*
bool validPathComponent(std::string_view c) {
  if (c.empty() || !isLowerAlnum(c.front()) || !isLowerAlnum(c.back())) return false;
  size_t i = 0;
  while (i < c.size()) {
    if (isLowerAlnum(c[i])) {
      ++i;
      continue;
    }
    // A separator: ".", "_", "__" or a run of '-', always followed by an alphanumeric.
    size_t start = i;
    if (c[i] == '-') {
      while (i < c.size() && c[i] == '-') ++i;
    } else if (c[i] == '.') {
      ++i;
    } else if (c[i] == '_') {
      ++i;
      if (i < c.size() && c[i] == '_') ++i;
    } else {
      return false;
    }
    if (i == start || i >= c.size() || !isLowerAlnum(c[i])) return false;
  }
  return true;
}

// host ("a.b-c.d", labels of [A-Za-z0-9-] not starting or ending with '-') or "[v6]", then
// an optional ":port".
bool validRegistry(std::string_view r) {
  std::string_view host = r;
  std::string_view port;
  if (r.starts_with('[')) {
    size_t close = r.find(']');
    if (close == std::string_view::npos) return false;
    std::string addr(r.substr(1, close - 1));
    in6_addr a6{};
    if (::inet_pton(AF_INET6, addr.c_str(), &a6) != 1) return false;
    host = {};
    std::string_view rest = r.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
      if (port.empty()) return false;
    }
  } else {
    size_t colon = r.find(':');
    if (colon != std::string_view::npos) {
      host = r.substr(0, colon);
      port = r.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty()) return false;
    size_t start = 0;
    while (start <= host.size()) {
      size_t dot = host.find('.', start);
      std::string_view label =
          host.substr(start, dot == std::string_view::npos ? dot : dot - start);
      if (label.empty() || label.front() == '-' || label.back() == '-') return false;
      for (char c : label) {
        if (!isAlnum(c) && c != '-') return false;
      }
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
  }
  if (port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool validTag(std::string_view t) {
  if (t.empty() || t.size() > 128 || !isWord(t.front())) return false;
  for (char c : t) {
    if (!isWord(c) && c != '.' && c != '-') return false;
  }
  return true;
}

Error invalid(std::string_view text, std::string_view what) {
  return Error(Errc::kInvalidArgument,
               fmt::format("'{}' is not a valid image reference: {}", text.substr(0, 300), what));
}

}  // namespace

std::string Reference::str() const {
  std::string out = registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

std::string Reference::transport() const {
  return "docker://" + str();
}

Result<Reference> parseReference(std::string_view text) {
  if (text.empty()) return fail(invalid(text, "it is empty; give a name such as python:3.12"));
  Reference ref;
  std::string_view name = text;
  if (size_t at = name.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(name.substr(at + 1));
    name = name.substr(0, at);
    if (!isValidDigest(ref.digest)) {
      return fail(invalid(text,
                          "the digest after '@' must be sha256:<64 lowercase hex digits> "
                          "(other digest algorithms are not supported)"));
    }
  }
  // The tag is after the last ':' that follows the last '/' (a registry port comes before one).
  size_t slash = name.rfind('/');
  size_t colon = name.rfind(':');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
    ref.tag = std::string(name.substr(colon + 1));
    name = name.substr(0, colon);
    if (!validTag(ref.tag)) {
      return fail(invalid(text,
                          "a tag is 1 to 128 letters, digits, '_', '.' or '-', not starting "
                          "with '.' or '-'"));
    }
  }
  if (name.empty()) return fail(invalid(text, "it has no repository name"));
  std::string_view remainder = name;
  ref.registry = "docker.io";
  if (size_t first = name.find('/'); first != std::string_view::npos) {
    std::string_view head = name.substr(0, first);
    bool upper = false;
    for (char c : head) upper = upper || (c >= 'A' && c <= 'Z');
    if (head.find_first_of(".:") != std::string_view::npos || head == "localhost" || upper) {
      if (!validRegistry(head)) {
        return fail(invalid(text, fmt::format("'{}' is not a registry host[:port]", head)));
      }
      ref.registry = std::string(head);
      remainder = name.substr(first + 1);
    }
  }
  if (ref.registry == "index.docker.io") ref.registry = "docker.io";
  ref.repository = std::string(remainder);
  if (ref.registry == "docker.io" && ref.repository.find('/') == std::string::npos) {
    ref.repository = "library/" + ref.repository;
  }
  size_t start = 0;
  while (true) {
    size_t end = ref.repository.find('/', start);
    std::string_view component = std::string_view(ref.repository).substr(start, end - start);
    if (!validPathComponent(component)) {
      return fail(invalid(
          text, fmt::format("the repository component '{}' must be lowercase letters and digits, "
                            "separated by '.', '_', '__' or dashes",
                            component.substr(0, 100))));
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (ref.registry.size() + 1 + ref.repository.size() > kMaxNameLength) {
    return fail(invalid(text, "the name is longer than 255 characters"));
  }
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

bool isLoopbackRegistry(const Reference& ref) {
  std::string_view host = ref.registry;
  if (host.starts_with('[')) {
    size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    std::string addr(host.substr(1, close - 1));
    in6_addr a6{};
    return ::inet_pton(AF_INET6, addr.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
  }
  host = host.substr(0, host.find(':'));
  if (host == "localhost") return true;
  in_addr a4{};
  std::string h(host);
  // inet_pton takes only dotted quads, so "127.1" or "0x7f.1" are not loopback here.
  return ::inet_pton(AF_INET, h.c_str(), &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

}  // namespace hutch::image
