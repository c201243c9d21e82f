#include "egress/proxy/client_hello.h"

#include <optional>
#include <vector>

namespace hutch::egress::proxy {

namespace {

constexpr uint8_t kHandshakeRecord = 22;
constexpr uint8_t kClientHello = 1;
constexpr uint16_t kServerNameExtension = 0;
constexpr uint8_t kHostNameType = 0;
constexpr size_t kRecordHeader = 5;
constexpr size_t kMaxRecordPayload = 16384 + 2048;  // TLSPlaintext limit plus slack

// Bounds-checked big-endian reader over a span. Every read fails (returns nullopt) rather than
// running past the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}
  size_t left() const { return data_.size() - pos_; }
  std::optional<uint32_t> u8() { return num(1); }
  std::optional<uint32_t> u16() { return num(2); }
  std::optional<uint32_t> u24() { return num(3); }
  std::optional<std::span<const uint8_t>> bytes(size_t n) {
    if (n > left()) return std::nullopt;
    auto out = data_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  bool skip(size_t n) { return bytes(n).has_value(); }

 private:
  std::optional<uint32_t> num(size_t n) {
    if (n > left()) return std::nullopt;
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | data_[pos_ + i];
    pos_ += n;
    return v;
  }
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

HelloResult status(HelloStatus s) {
  HelloResult r;
  r.status = s;
  return r;
}

// Parses a whole ClientHello body (after the 4-byte handshake header).
HelloResult parseClientHelloBody(std::span<const uint8_t> body) {
  Reader r(body);
  auto version = r.u16();
  if (!version || (*version >> 8) != 3) return status(HelloStatus::kMalformed);
  if (!r.skip(32)) return status(HelloStatus::kMalformed);  // random
  auto session_len = r.u8();
  if (!session_len || *session_len > 32 || !r.skip(*session_len)) {
    return status(HelloStatus::kMalformed);
  }
  auto suites_len = r.u16();
  if (!suites_len || *suites_len < 2 || *suites_len % 2 != 0 || !r.skip(*suites_len)) {
    return status(HelloStatus::kMalformed);
  }
  auto compression_len = r.u8();
  if (!compression_len || *compression_len < 1 || !r.skip(*compression_len)) {
    return status(HelloStatus::kMalformed);
  }
  if (r.left() == 0) return status(HelloStatus::kNoSni);  // no extensions at all
  auto extensions_len = r.u16();
  if (!extensions_len || *extensions_len != r.left()) return status(HelloStatus::kMalformed);

  std::optional<std::string> sni;
  bool seen_sni = false;
  while (r.left() > 0) {
    auto type = r.u16();
    auto len = r.u16();
    if (!type || !len) return status(HelloStatus::kMalformed);
    auto ext = r.bytes(*len);
    if (!ext) return status(HelloStatus::kMalformed);
    if (*type != kServerNameExtension) continue;
    if (seen_sni) return status(HelloStatus::kMalformed);  // duplicate extensions are illegal
    seen_sni = true;
    Reader e(*ext);
    auto list_len = e.u16();
    if (!list_len || *list_len != e.left()) return status(HelloStatus::kMalformed);
    while (e.left() > 0) {
      auto name_type = e.u8();
      auto name_len = e.u16();
      if (!name_type || !name_len) return status(HelloStatus::kMalformed);
      auto name = e.bytes(*name_len);
      if (!name) return status(HelloStatus::kMalformed);
      if (*name_type != kHostNameType || sni) continue;  // the first host_name counts
      std::string text(name->begin(), name->end());
      for (char& c : text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      if (!text.empty() && text.back() == '.') text.pop_back();
      if (!isValidHostName(text)) return status(HelloStatus::kMalformed);
      sni = std::move(text);
    }
  }
  if (!sni) return status(HelloStatus::kNoSni);
  HelloResult found = status(HelloStatus::kFound);
  found.sni = std::move(*sni);
  return found;
}

}  // namespace

bool isValidHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok || ++label > 63) return false;
  }
  return label > 0;
}

HelloResult inspectClientHello(std::span<const uint8_t> data) {
  if (data.empty()) {
    HelloResult r;
    r.need = 1;
    return r;
  }
  if (data[0] != kHandshakeRecord) return status(HelloStatus::kNotTls);
  if (data.size() >= 2 && data[1] != 3) return status(HelloStatus::kNotTls);

  // Reassemble the handshake message from as many records as it spans.
  std::vector<uint8_t> handshake;
  size_t pos = 0;
  for (;;) {
    if (data.size() < pos + kRecordHeader) {
      HelloResult r;
      r.need = pos + kRecordHeader;
      return r;
    }
    if (data[pos] != kHandshakeRecord || data[pos + 1] != 3) {
      return status(HelloStatus::kMalformed);
    }
    size_t len = (size_t{data[pos + 3]} << 8) | data[pos + 4];
    if (len == 0 || len > kMaxRecordPayload) return status(HelloStatus::kMalformed);
    if (data.size() < pos + kRecordHeader + len) {
      HelloResult r;
      r.need = pos + kRecordHeader + len;
      return r;
    }
    auto payload = data.subspan(pos + kRecordHeader, len);
    handshake.insert(handshake.end(), payload.begin(), payload.end());
    pos += kRecordHeader + len;
    if (handshake.size() < 4) continue;
    if (handshake[0] != kClientHello) return status(HelloStatus::kMalformed);
    size_t body_len =
        (size_t{handshake[1]} << 16) | (size_t{handshake[2]} << 8) | size_t{handshake[3]};
    if (body_len > kMaxClientHelloBytes) return status(HelloStatus::kMalformed);
    if (handshake.size() < 4 + body_len) continue;
    return parseClientHelloBody(std::span<const uint8_t>(handshake).subspan(4, body_len));
  }
}

HttpStart looksLikeHttpRequest(std::span<const uint8_t> data) {
  constexpr size_t kMaxMethod = 16;
  for (size_t i = 0; i < data.size(); ++i) {
    uint8_t c = data[i];
    if (c == ' ') return i > 0 ? HttpStart::kYes : HttpStart::kNo;
    if (c < 'A' || c > 'Z' || i >= kMaxMethod) return HttpStart::kNo;
  }
  return HttpStart::kNeedMore;
}

}  // namespace hutch::egress::proxy
