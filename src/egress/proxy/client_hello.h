// Recognising what a box sends first on an intercepted TCP connection: a TLS ClientHello (and
// the name in its server_name extension) or an HTTP/1.x request line. Pure functions over the
// bytes read so far, bounded, no allocation beyond the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hutch::egress::proxy {

// The largest ClientHello handshake message accepted (real ones are under 2 KiB; post-quantum
// key shares push them to ~1.8 KiB). Records of it may be fragmented.
inline constexpr size_t kMaxClientHelloBytes = 64 * 1024;

enum class HelloStatus {
  kNeedMore,   // a TLS record start; read until `need` bytes are there and ask again
  kNotTls,     // not a TLS handshake record
  kMalformed,  // TLS record framing or a ClientHello that breaks the format or the bounds
  kNoSni,      // a complete ClientHello without a usable server_name (host_name) entry
  kFound,      // a complete ClientHello naming `sni`
};

struct HelloResult {
  HelloStatus status = HelloStatus::kNeedMore;
  std::string sni;  // lower case, no trailing dot (kFound only)
  size_t need = 0;  // total bytes needed before asking again (kNeedMore only)
};

// Looks at the first bytes a client sent. kFound only when the whole ClientHello is present.
HelloResult inspectClientHello(std::span<const uint8_t> data);

enum class HttpStart { kNeedMore, kYes, kNo };
// Whether the bytes start like an HTTP/1.x request line: an upper-case method token (at most
// 16 letters) followed by a space.
HttpStart looksLikeHttpRequest(std::span<const uint8_t> data);

// Whether `name` is a syntactically valid DNS host name (letters, digits, '-', '_', dots
// between non-empty labels of at most 63 bytes, at most 253 bytes in all).
bool isValidHostName(std::string_view name);

}  // namespace hutch::egress::proxy
