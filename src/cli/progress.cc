#include "cli/progress.h"

#include <fmt/format.h>

#include <array>

namespace hutch::cli {

std::string formatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits{"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  auto value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

namespace {

std::string rate(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  return formatBytes(static_cast<uint64_t>(static_cast<double>(bytes) / seconds)) + "/s";
}

}  // namespace

std::string progressLine(const std::string& label, uint64_t bytes, double seconds) {
  return fmt::format("{}  {}  {}", label, formatBytes(bytes), rate(bytes, seconds));
}

std::string progressSummary(uint64_t bytes, double seconds) {
  return fmt::format("Copied {} in {:.1f} s ({})", formatBytes(bytes), seconds,
                     rate(bytes, seconds));
}

Progress::Progress(std::FILE* out, std::string label) : out_(out), label_(std::move(label)) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void Progress::add(uint64_t bytes) {
  bytes_ += bytes;
  if (out_ == nullptr) return;
  auto now = Clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  std::string line = progressLine(label_, bytes_, seconds());
  // Pad with spaces over a longer previous line: no terminal escapes, so a log stays readable.
  size_t width = line.size();
  if (width < drawn_width_) line.append(drawn_width_ - width, ' ');
  drawn_width_ = width;
  fmt::print(out_, "\r{}", line);
  std::fflush(out_);
}

void Progress::clear() {
  if (out_ != nullptr && drawn_width_ > 0) {
    fmt::print(out_, "\r{}\r", std::string(drawn_width_, ' '));
    drawn_width_ = 0;
  }
}

void Progress::note(const std::string& message) {
  clear();
  fmt::print(stderr, "{}\n", message);
}

void Progress::finish() {
  if (out_ == nullptr) return;
  clear();
  fmt::print(out_, "{}\n", progressSummary(bytes_, seconds()));
  std::fflush(out_);
}

}  // namespace hutch::cli
