// A gzip stream (RFC 1952) inflated piece by piece: the body of an upload sent with
// Content-Encoding: gzip (E2B's files.write(..., {gzip: true})), which envd stores inflated.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::e2b {

class Gunzip {
 public:
  Gunzip();
  ~Gunzip();
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;

  // What `input`, the next bytes of the stream, inflates to (maybe nothing yet). Concatenated
  // gzip members are one stream, as gunzip takes them. kInvalidArgument for bytes that are not
  // gzip or fail its checksum, or that follow the end of the stream.
  Result<std::string> feed(std::string_view input);
  // At the end of the input: kInvalidArgument when the stream stopped midway.
  Result<> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hutch::e2b
