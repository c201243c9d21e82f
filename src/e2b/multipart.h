// A streaming reader of multipart/form-data bodies (RFC 7578): E2B's SDKs upload files as parts
// whose filename is the destination path. Fed the body as it arrives, it hands out each part's
// start (with its name and filename), its content in pieces, and its end, never holding more
// than a piece of the body.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::e2b {

// The boundary of a "multipart/form-data; boundary=..." Content-Type (quoted or not).
Result<std::string> multipartBoundary(std::string_view content_type);

class MultipartReader {
 public:
  struct Event {
    enum Kind {
      kNeedMore,   // feed() more of the body
      kPartStart,  // name and filename are set
      kData,       // a piece of the current part's content
      kPartEnd,
      kEnd,  // the closing boundary: nothing after it matters
    };
    Kind kind = kNeedMore;
    std::string name;
    std::string filename;
    std::string data;
  };

  explicit MultipartReader(const std::string& boundary);
  void feed(std::string_view bytes);
  // kInvalidArgument for a body that breaks the format (headers too long, no CRLF after a
  // boundary, no Content-Disposition).
  Result<Event> next();

 private:
  enum class State { kPreamble, kAfterDelimiter, kHeaders, kBody, kDone };
  static constexpr size_t kMaxHeaders = 16 << 10;
  void compact();

  std::string delimiter_;       // "--" boundary
  std::string body_delimiter_;  // CRLF "--" boundary
  std::string buffer_;
  size_t pos_ = 0;
  State state_ = State::kPreamble;
  bool part_end_pending_ = false;
};

}  // namespace hutch::e2b
