// Archives through hutchd's tar filter (tar_filter.cc): a box's archive on its way to a client
// (download, kProtocol) or a client's on its way into a box (upload). The first byte picks the
// direction and the root, the second how the bytes are split. An archive the filter passes is
// canonical: filtered again with the same options it comes out the same.
#include <cstdlib>
#include <string>

#include "api/tar_filter.h"
#include "fuzz_input.h"

namespace {

using hutch::api::TarFilter;
using hutch::api::TarFilterOptions;

// The filtered archive, or nullopt when the filter refused it.
std::optional<std::string> filter(const TarFilterOptions& options, std::string_view input,
                                  size_t chunk) {
  TarFilter f(options);
  std::string out;
  for (size_t offset = 0; offset < input.size(); offset += chunk) {
    if (!f.feed(input.substr(offset, chunk), out)) {
      if (f.feed("", out)) std::abort();  // failed stays failed
      return std::nullopt;
    }
  }
  if (!f.finish(out)) return std::nullopt;
  if (out.size() % 512 != 0) std::abort();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hutch::fuzz::FuzzInput input(data, size);
  uint8_t mode = input.byte();
  size_t chunk = input.byte() % 700 + 1;
  std::string_view archive = input.rest();
  TarFilterOptions options;
  options.download = (mode & 1) != 0;
  if (options.download) {
    options.error_code = hutch::Errc::kProtocol;
    options.root = (mode & 2) != 0 ? "home/hutch/src" : "";
  }
  auto once = filter(options, archive, chunk);
  if (!once) return 0;
  auto twice = filter(options, *once, 4096);
  if (!twice || *twice != *once) std::abort();
  return 0;
}
