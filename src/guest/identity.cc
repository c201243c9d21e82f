#include "guest/identity.h"

#include <sys/random.h>

#include <cerrno>
#include <string>

#include "base/check.h"
#include "proto/identity.h"

namespace hutch::guest {
namespace {

std::string randomBytes(size_t count) {
  std::string bytes(count, '\0');
  size_t done = 0;
  while (done < count) {
    const ssize_t n = ::getrandom(bytes.data() + done, count - done, 0);
    if (n < 0 && errno == EINTR) continue;
    HUTCH_CHECK(n > 0);  // getrandom does not fail for small requests once the host has booted
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace

std::string hostnameFor(std::string_view box_name) {
  std::string name;
  for (char c : box_name) {
    const bool good = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.';
    if (name.empty() && (c == '-' || c == '.' || !good)) continue;
    name.push_back(good ? c : '-');
  }
  if (name.size() > 64) name.resize(64);
  if (name.empty()) name = "box";
  return name;
}

Identity makeIdentity(std::string_view box_name) {
  Identity identity;
  identity.hostname = hostnameFor(box_name);
  std::string id = randomBytes(16);
  id[6] = static_cast<char>((id[6] & 0x0f) | 0x40);  // version 4
  id[8] = static_cast<char>((id[8] & 0x3f) | 0x80);  // RFC 4122 variant
  identity.machine_id = proto::encodeHex(id);
  identity.seed = proto::encodeHex(randomBytes(48));
  return identity;
}

}  // namespace hutch::guest
