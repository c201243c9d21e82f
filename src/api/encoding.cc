#include "api/encoding.h"

#include <openssl/evp.h>

namespace hutch::api {

bool isValidUtf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

std::string hexEncode(const unsigned char* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 0xf];
  }
  return out;
}

std::string base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  // EVP_EncodeBlock works on ints; feed it in slices that keep the length in range.
  constexpr size_t kSlice = size_t{3} << 20;
  size_t written = 0;
  for (size_t off = 0; off < bytes.size(); off += kSlice) {
    size_t len = std::min(kSlice, bytes.size() - off);
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + written),
                            reinterpret_cast<const unsigned char*>(bytes.data() + off),
                            static_cast<int>(len));
    written += static_cast<size_t>(n);
  }
  out.resize(written);
  return out;
}

Result<std::string> base64Decode(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return fail(Errc::kInvalidArgument,
                std::string(what) + " is not base64 (RFC 4648 with '=' padding)");
  };
  if (text.size() % 4 != 0) return bad();
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/';
    bool pad = c == '=' && i >= text.size() - 2 && (i == text.size() - 1 || text.back() == '=');
    if (!alpha && !pad) return bad();
  }
  std::string out(3 * (text.size() / 4), '\0');
  constexpr size_t kSlice = size_t{4} << 20;
  size_t written = 0;
  for (size_t off = 0; off < text.size(); off += kSlice) {
    size_t len = std::min(kSlice, text.size() - off);
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data() + written),
                            reinterpret_cast<const unsigned char*>(text.data() + off),
                            static_cast<int>(len));
    if (n < 0) return bad();
    written += static_cast<size_t>(n);
  }
  // EVP_DecodeBlock counts padding as zero bytes: take them off again.
  size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  out.resize(written - padding);
  return out;
}

}  // namespace hutch::api
