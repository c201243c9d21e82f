// TarFilter: a streaming tar reader and writer for the files API's archives (docs/api.md
// "Files without exec"). Both directions carry input hutchd must not trust — a client's archive
// on its way into a box, a box's archive on its way to a client — so an archive is never relayed
// as it came: it is parsed (ustar, pax and GNU long names, v7), each entry is checked, and only
// what passed is written again as a canonical pax archive that names nothing but the checked
// fields (path, link target, mode, uid, gid, mtime, size). Everything else (sparse maps, ACLs,
// extended attributes, user and group names, device numbers) is dropped or refused, so the
// reader at the other end cannot interpret something this filter did not see.
//
// Push-based, on the event loop: feed() takes bytes as they arrive and appends the output, which
// lags the input by at most one header (file data passes in the same feed() call).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hutch::api {

struct TarFilterOptions {
  // Upload (download false): names are relative to the directory the archive is unpacked in; an
  // absolute name, a ".." component, a hard link outside, a symlink whose target is absolute or
  // climbs above the directory (lexically) and device nodes are refused.
  // Download: every name must be `root` or below it (the one top entry; empty: any name); link
  // targets are the box's content and pass; device nodes are left out.
  bool download = false;
  std::string root;
  // The code of every refusal: kInvalidArgument for a client's archive, kProtocol for a box's.
  Errc error_code = Errc::kInvalidArgument;
  // Appended to messages about the input ("in the uploaded archive").
  std::string where = "in the archive";
};

class TarFilter {
 public:
  explicit TarFilter(TarFilterOptions options);

  // Parses `input` (any amount, any boundary) and appends the checked archive to `out`.
  // After an error, every later call fails with the same error.
  Result<> feed(std::string_view input, std::string& out);
  // The input is complete: the end-of-archive blocks are appended. An error when the input
  // ended inside a header or an entry, or held no archive at all.
  Result<> finish(std::string& out);

  // Entries written so far (pax and GNU long-name headers are not entries).
  uint64_t entries() const { return entries_; }
  // The end-of-archive marker was read (what follows it is ignored).
  bool ended() const { return state_ == State::kEnd; }
  // The name of the entry being read or last read, for messages.
  const std::string& current() const { return name_; }

 private:
  enum class State { kHeader, kExtension, kData, kSkip, kPadding, kEnd, kFailed };

  Result<> feedSome(std::string_view input, std::string& out);
  Result<> header(std::string& out);
  Result<> extension();
  Result<> entry(std::string& out);
  Error refuse(const std::string& message);

  TarFilterOptions options_;
  State state_ = State::kHeader;
  std::string block_;     // a header being collected (512 bytes)
  std::string ext_;       // a pax or GNU long-name payload being collected
  char ext_type_ = 0;     // 'x', 'g', 'L' or 'K'
  uint64_t left_ = 0;     // data (kData, kSkip, kExtension) still to come for the current part
  uint64_t padding_ = 0;  // padding after it
  bool copy_ = false;     // kData: the bytes go to the output
  uint64_t out_padding_ = 0;
  std::optional<std::string> pax_path_, pax_link_, pax_mtime_;
  std::optional<uint64_t> pax_size_, pax_uid_, pax_gid_;
  std::optional<std::string> long_name_, long_link_;
  std::string name_;
  uint64_t entries_ = 0;
  uint64_t input_bytes_ = 0;
  uint64_t output_bytes_ = 0;
  bool seen_header_ = false;
  std::set<std::string, std::less<>> links_;  // symlinks written so far (upload)
  std::optional<Error> error_;
};

// The lexical checks TarFilter uses, exposed for tests.
// "./a//b/" -> "a/b"; "." and "./" -> ""; nullopt for an absolute name or a ".." component.
std::optional<std::string> normalizeEntryName(std::string_view name);
// Whether a symlink at entry `name` (normalized) pointing at `target` stays inside the
// directory it is unpacked in, resolving ".." lexically from the link's own directory; a ".."
// right after one of `links` (earlier symlinks of the same archive) is refused.
bool linkStaysInside(std::string_view name, std::string_view target,
                     const std::set<std::string, std::less<>>* links = nullptr);

}  // namespace hutch::api
