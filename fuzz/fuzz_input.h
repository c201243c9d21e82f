// Helpers shared by the fuzz targets: reading a fuzzer's bytes as choices and pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace hutch::fuzz {

// Consumes the input from the front: a byte for a choice, the rest as text.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // The next byte, or 0 when there is none.
  uint8_t byte() {
    if (size_ == 0) return 0;
    uint8_t b = *data_;
    ++data_;
    --size_;
    return b;
  }
  // At most `n` bytes.
  std::string_view take(size_t n) {
    n = std::min(n, size_);
    std::string_view out(reinterpret_cast<const char*>(data_), n);
    data_ += n;
    size_ -= n;
    return out;
  }
  std::string_view rest() { return take(size_); }
  std::span<const uint8_t> restBytes() {
    std::span<const uint8_t> out(data_, size_);
    data_ += size_;
    size_ = 0;
    return out;
  }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace hutch::fuzz
