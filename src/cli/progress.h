// A byte counter for long transfers: one line on stderr, updated in place with the bytes so far
// and the rate, then a summary line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace hutch::cli {

// "0 B", "812 B", "1.5 KiB", "23.4 MiB", "1.2 GiB".
std::string formatBytes(uint64_t bytes);
// "<label>  23.4 MiB  11.7 MiB/s" (the average rate since the start).
std::string progressLine(const std::string& label, uint64_t bytes, double seconds);
// "Copied 23.4 MiB in 2.0 s (11.7 MiB/s)".
std::string progressSummary(uint64_t bytes, double seconds);

class Progress {
 public:
  // Draws nothing when `out` is null (notes still go to stderr).
  Progress(std::FILE* out, std::string label);

  // Counts bytes; redraws the line at most every 200 ms. Call from one thread at a time.
  void add(uint64_t bytes);
  // Prints a message on a line of its own; the progress line is redrawn after it.
  void note(const std::string& message);
  // Clears the line and prints the summary.
  void finish();
  // Blanks the progress line, if one is drawn.
  void clear();

  uint64_t bytes() const { return bytes_; }
  double seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  std::string label_;
  uint64_t bytes_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_ = start_;  // the first line after 200 ms: a rate worth showing
  size_t drawn_width_ = 0;                // characters of the last line drawn, to blank it
};

}  // namespace hutch::cli
