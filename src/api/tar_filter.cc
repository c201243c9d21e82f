#include "api/tar_filter.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <vector>

namespace hutch::api {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kRecord = 10240;  // tar's default record: the output is padded to it
constexpr size_t kMaxExtension = size_t{1} << 20;
constexpr size_t kMaxName = 4095;
constexpr uint64_t kMaxOctal11 = 077777777777;  // what 11 octal digits hold (size, mtime)
constexpr uint64_t kMaxOctal7 = 07777777;       // uid, gid

// Header fields: offset, length.
struct Field {
  size_t offset;
  size_t length;
};
constexpr Field kName{0, 100};
constexpr Field kMode{100, 8};
constexpr Field kUid{108, 8};
constexpr Field kGid{116, 8};
constexpr Field kSize{124, 12};
constexpr Field kMtime{136, 12};
constexpr Field kChecksum{148, 8};
constexpr size_t kTypeflag = 156;
constexpr Field kLinkname{157, 100};
constexpr Field kMagic{257, 8};  // magic and version
constexpr Field kPrefix{345, 155};

std::string_view field(std::string_view block, Field f) {
  std::string_view v = block.substr(f.offset, f.length);
  size_t nul = v.find('\0');
  return nul == std::string_view::npos ? v : v.substr(0, nul);
}

// Octal (leading spaces, ended by a space or NUL) or GNU's base-256 (first byte's high bit).
std::optional<uint64_t> number(std::string_view block, Field f) {
  std::string_view raw = block.substr(f.offset, f.length);
  auto first = static_cast<unsigned char>(raw[0]);
  if ((first & 0x80) != 0) {
    if (first != 0x80) return std::nullopt;  // negative, or too large for 64 bits
    uint64_t value = 0;
    for (size_t i = 1; i < raw.size(); ++i) {
      if (value >> 56 != 0) return std::nullopt;
      value = (value << 8) | static_cast<unsigned char>(raw[i]);
    }
    return value;
  }
  size_t i = 0;
  while (i < raw.size() && raw[i] == ' ') ++i;
  uint64_t value = 0;
  for (; i < raw.size() && raw[i] != ' ' && raw[i] != '\0'; ++i) {
    if (raw[i] < '0' || raw[i] > '7' || value >> 60 != 0) return std::nullopt;
    value = value * 8 + static_cast<uint64_t>(raw[i] - '0');
  }
  for (; i < raw.size(); ++i) {
    if (raw[i] != ' ' && raw[i] != '\0') return std::nullopt;
  }
  return value;
}

bool checksumOk(std::string_view block) {
  auto stored = number(block, kChecksum);
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    bool in_field = i >= kChecksum.offset && i < kChecksum.offset + kChecksum.length;
    unsigned char c = in_field ? ' ' : static_cast<unsigned char>(block[i]);
    unsigned_sum += c;
    signed_sum += static_cast<signed char>(c);
  }
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

std::optional<uint64_t> decimal(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// A pax mtime: "1764400000" or "1764400000.123456789" (not negative: refused).
bool validMtime(std::string_view text) {
  size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  if (!decimal(whole)) return false;
  if (dot == std::string_view::npos) return true;
  std::string_view fraction = text.substr(dot + 1);
  return !fraction.empty() && fraction.size() <= 9 &&
         std::all_of(fraction.begin(), fraction.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void putOctal(std::string& block, Field f, uint64_t value) {
  // length-1 digits, then NUL.
  std::string digits = fmt::format("{:0{}o}", value, f.length - 1);
  std::copy(digits.begin(), digits.end(), block.begin() + static_cast<ptrdiff_t>(f.offset));
  block[f.offset + f.length - 1] = '\0';
}

void putText(std::string& block, Field f, std::string_view text) {
  text = text.substr(0, f.length);
  std::copy(text.begin(), text.end(), block.begin() + static_cast<ptrdiff_t>(f.offset));
}

std::string paxRecord(std::string_view key, std::string_view value) {
  // "LEN key=value\n", LEN counting itself.
  size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t length = body + 1;
  while (std::to_string(length).size() + body != length)
    length = std::to_string(length).size() + body;
  return fmt::format("{} {}={}\n", length, key, value);
}

struct OutEntry {
  std::string name;
  std::string link;
  char type = '0';
  uint32_t mode = 0;
  uint64_t uid = 0;
  uint64_t gid = 0;
  uint64_t size = 0;
  std::string mtime;  // decimal seconds, maybe with a fraction
};

std::string ustarHeader(std::string_view name, std::string_view link, char type, uint32_t mode,
                        uint64_t uid, uint64_t gid, uint64_t size, uint64_t mtime) {
  std::string block(kBlock, '\0');
  putText(block, kName, name);
  putOctal(block, kMode, mode);
  putOctal(block, kUid, std::min(uid, kMaxOctal7));
  putOctal(block, kGid, std::min(gid, kMaxOctal7));
  putOctal(block, kSize, size);
  putOctal(block, kMtime, std::min(mtime, kMaxOctal11));
  block[kTypeflag] = type;
  putText(block, kLinkname, link);
  putText(block, kMagic,
          std::string_view("ustar\0"
                           "00",
                           8));
  std::fill_n(block.begin() + static_cast<ptrdiff_t>(kChecksum.offset), kChecksum.length, ' ');
  unsigned sum = 0;
  for (char c : block) sum += static_cast<unsigned char>(c);
  std::string digits = fmt::format("{:06o}", sum);
  std::copy(digits.begin(), digits.end(), block.begin() + static_cast<ptrdiff_t>(kChecksum.offset));
  block[kChecksum.offset + 6] = '\0';
  block[kChecksum.offset + 7] = ' ';
  return block;
}

void pad(std::string& out, uint64_t size) {
  out.append(static_cast<size_t>((kBlock - size % kBlock) % kBlock), '\0');
}

void writeEntry(const OutEntry& e, std::string& out) {
  std::string pax;
  if (e.name.size() > kName.length) pax += paxRecord("path", e.name);
  if (e.link.size() > kLinkname.length) pax += paxRecord("linkpath", e.link);
  if (e.size > kMaxOctal11) pax += paxRecord("size", std::to_string(e.size));
  if (e.uid > kMaxOctal7) pax += paxRecord("uid", std::to_string(e.uid));
  if (e.gid > kMaxOctal7) pax += paxRecord("gid", std::to_string(e.gid));
  uint64_t mtime = decimal(e.mtime.substr(0, e.mtime.find('.'))).value_or(0);
  if (e.mtime.find('.') != std::string::npos || mtime > kMaxOctal11) {
    pax += paxRecord("mtime", e.mtime);
  }
  if (!pax.empty()) {
    out += ustarHeader("PaxHeaders/" + e.name.substr(0, 80), "", 'x', 0644, 0, 0, pax.size(),
                       std::min(mtime, kMaxOctal11));
    out += pax;
    pad(out, pax.size());
  }
  out += ustarHeader(e.name, e.link, e.type, e.mode, e.uid, e.gid, std::min(e.size, kMaxOctal11),
                     mtime);
}

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

std::optional<std::string> normalizeEntryName(std::string_view name) {
  if (name.starts_with('/')) return std::nullopt;
  std::string out;
  for (std::string_view part : components(name)) {
    if (part == ".") continue;
    if (part == "..") return std::nullopt;
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

bool linkStaysInside(std::string_view name, std::string_view target,
                     const std::set<std::string, std::less<>>* links) {
  if (target.empty() || target.starts_with('/')) return false;
  std::vector<std::string_view> stack = components(name);
  if (!stack.empty()) stack.pop_back();  // the link's own directory
  auto joined = [&] {
    std::string path;
    for (std::string_view part : stack) {
      if (!path.empty()) path += '/';
      path += part;
    }
    return path;
  };
  for (std::string_view part : components(target)) {
    if (part == ".") continue;
    if (part == "..") {
      if (stack.empty()) return false;
      // ".." after another link of the archive is where that link points, not what the name
      // says: lexical resolution would be fooled ("a" -> ".", "b" -> "a/..").
      if (links != nullptr && links->contains(joined())) return false;
      stack.pop_back();
    } else {
      stack.push_back(part);
    }
  }
  return true;
}

TarFilter::TarFilter(TarFilterOptions options) : options_(std::move(options)) {}

Error TarFilter::refuse(const std::string& message) {
  error_ = Error(options_.error_code, message);
  state_ = State::kFailed;
  return *error_;
}

Result<> TarFilter::feed(std::string_view input, std::string& out) {
  const size_t before = out.size();
  Result<> fed = feedSome(input, out);
  output_bytes_ += out.size() - before;
  return fed;
}

Result<> TarFilter::feedSome(std::string_view input, std::string& out) {
  if (error_) return fail(*error_);
  input_bytes_ += input.size();
  while (!input.empty()) {
    switch (state_) {
      case State::kEnd: return ok();  // what follows the end (record padding) is ignored
      case State::kFailed: return fail(*error_);
      case State::kHeader: {
        size_t take = std::min(input.size(), kBlock - block_.size());
        block_.append(input.substr(0, take));
        input.remove_prefix(take);
        if (block_.size() == kBlock) {
          HUTCH_TRY_VOID(header(out));
          block_.clear();
        }
        break;
      }
      case State::kExtension: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(input.size(), left_));
        ext_.append(input.substr(0, take));
        input.remove_prefix(take);
        left_ -= take;
        if (left_ == 0) {
          HUTCH_TRY_VOID(extension());
          state_ = padding_ > 0 ? State::kPadding : State::kHeader;
        }
        break;
      }
      case State::kData:
      case State::kSkip: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(input.size(), left_));
        if (state_ == State::kData) out.append(input.substr(0, take));
        input.remove_prefix(take);
        left_ -= take;
        if (left_ == 0) {
          if (state_ == State::kData) out.append(static_cast<size_t>(out_padding_), '\0');
          state_ = padding_ > 0 ? State::kPadding : State::kHeader;
        }
        break;
      }
      case State::kPadding: {
        size_t take = static_cast<size_t>(std::min<uint64_t>(input.size(), padding_));
        input.remove_prefix(take);
        padding_ -= take;
        if (padding_ == 0) state_ = State::kHeader;
        break;
      }
    }
  }
  return ok();
}

Result<> TarFilter::header(std::string& out) {
  std::string_view block(block_);
  if (std::all_of(block.begin(), block.end(), [](char c) { return c == '\0'; })) {
    state_ = State::kEnd;
    return ok();
  }
  if (!checksumOk(block)) {
    if (!seen_header_) {
      return fail(
          refuse(fmt::format("The data {} is not a tar archive (its first header is not "
                             "a tar header); send a tar archive (application/x-tar)",
                             options_.where)));
    }
    return fail(
        refuse(fmt::format("Bad tar header {} after entry '{}' (checksum mismatch): the "
                           "archive is damaged",
                           options_.where, name_)));
  }
  seen_header_ = true;
  auto size = number(block, kSize);
  if (!size) return fail(refuse(fmt::format("Bad size field in a tar header {}", options_.where)));
  const char type = block[kTypeflag];
  padding_ = (kBlock - *size % kBlock) % kBlock;
  if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
    if (*size > kMaxExtension) {
      return fail(
          refuse(fmt::format("An extended tar header {} is larger than 1 MiB", options_.where)));
    }
    ext_.clear();
    ext_type_ = type;
    left_ = *size;
    if (left_ == 0) {
      HUTCH_TRY_VOID(extension());
      state_ = State::kHeader;
    } else {
      state_ = State::kExtension;
    }
    return ok();
  }
  return entry(out);
}

Result<> TarFilter::extension() {
  if (ext_type_ == 'L' || ext_type_ == 'K') {
    std::string value = ext_.substr(0, ext_.find('\0'));
    (ext_type_ == 'L' ? long_name_ : long_link_) = std::move(value);
    return ok();
  }
  const bool global = ext_type_ == 'g';
  std::string_view rest(ext_);
  while (!rest.empty()) {
    size_t space = rest.find(' ');
    auto length = space == std::string_view::npos ? std::nullopt : decimal(rest.substr(0, space));
    if (!length || *length <= space + 1 || *length > rest.size() || rest[*length - 1] != '\n') {
      return fail(refuse(fmt::format("A malformed pax header {}", options_.where)));
    }
    std::string_view record = rest.substr(space + 1, *length - space - 2);
    rest.remove_prefix(*length);
    size_t eq = record.find('=');
    if (eq == std::string_view::npos) {
      return fail(refuse(fmt::format("A malformed pax record {}", options_.where)));
    }
    std::string_view key = record.substr(0, eq);
    std::string value(record.substr(eq + 1));
    if (key.starts_with("GNU.sparse.")) {
      return fail(
          refuse(fmt::format("A sparse file {} is not supported; archive it without "
                             "--sparse",
                             options_.where)));
    }
    if (global) continue;  // global records (rare) change nothing this filter writes
    auto numeric = [&](std::optional<uint64_t>& into) -> Result<> {
      auto n = decimal(value);
      if (!n) {
        return fail(refuse(fmt::format("Bad pax value {}='{}' {}", key, value, options_.where)));
      }
      into = n;
      return ok();
    };
    if (key == "path") {
      pax_path_ = value;
    } else if (key == "linkpath") {
      pax_link_ = value;
    } else if (key == "size") {
      HUTCH_TRY_VOID(numeric(pax_size_));
    } else if (key == "uid") {
      HUTCH_TRY_VOID(numeric(pax_uid_));
    } else if (key == "gid") {
      HUTCH_TRY_VOID(numeric(pax_gid_));
    } else if (key == "mtime") {
      if (!validMtime(value)) {
        return fail(refuse(fmt::format("Bad pax mtime '{}' {}", value, options_.where)));
      }
      pax_mtime_ = value;
    }
    // Other keys (atime, ctime, uname, gname, SCHILY.*, LIBARCHIVE.*) are dropped.
  }
  return ok();
}

Result<> TarFilter::entry(std::string& out) {
  std::string_view block(block_);
  const char type = block[kTypeflag];
  const bool posix = block.substr(kMagic.offset, 6) == std::string_view("ustar\0", 6);
  std::string raw_name;
  if (pax_path_) {
    raw_name = *pax_path_;
  } else if (long_name_) {
    raw_name = *long_name_;
  } else {
    raw_name = std::string(field(block, kName));
    std::string_view prefix = posix ? field(block, kPrefix) : std::string_view();
    if (!prefix.empty()) raw_name = std::string(prefix) + "/" + raw_name;
  }
  std::string raw_link = pax_link_    ? *pax_link_
                         : long_link_ ? *long_link_
                                      : std::string(field(block, kLinkname));
  uint64_t size = pax_size_ ? *pax_size_ : *number(block, kSize);
  auto mode = number(block, kMode);
  auto uid = pax_uid_ ? pax_uid_ : number(block, kUid);
  auto gid = pax_gid_ ? pax_gid_ : number(block, kGid);
  auto mtime = number(block, kMtime);
  std::string mtime_text = pax_mtime_ ? *pax_mtime_ : mtime ? std::to_string(*mtime) : "0";
  pax_path_.reset();
  pax_link_.reset();
  pax_size_.reset();
  pax_uid_.reset();
  pax_gid_.reset();
  pax_mtime_.reset();
  long_name_.reset();
  long_link_.reset();
  name_ = raw_name;
  padding_ = (kBlock - size % kBlock) % kBlock;

  if (!mode || !uid || !gid) {
    return fail(refuse(
        fmt::format("Bad numeric field in the header of '{}' {}", raw_name, options_.where)));
  }
  if (raw_name.size() > kMaxName || raw_link.size() > kMaxName ||
      raw_name.find('\0') != std::string::npos || raw_link.find('\0') != std::string::npos) {
    return fail(refuse(fmt::format("An entry name or link {} is longer than {} bytes or has a NUL",
                                   options_.where, kMaxName)));
  }
  auto name = normalizeEntryName(raw_name);
  if (!name) {
    return fail(
        refuse(fmt::format("The entry '{}' {} is absolute or has a '..' component; names "
                           "must be relative to the directory they are unpacked in",
                           raw_name, options_.where)));
  }
  const bool download = options_.download;
  auto inside_root = [&](const std::string& n) {
    return !download || options_.root.empty() || n == options_.root ||
           n.starts_with(options_.root + "/");
  };
  if (!inside_root(*name)) {
    return fail(refuse(fmt::format("The entry '{}' {} is not below '{}'", raw_name, options_.where,
                                   options_.root)));
  }

  OutEntry e;
  e.name = *name;
  e.mode = static_cast<uint32_t>(*mode & 07777);
  e.uid = *uid;
  e.gid = *gid;
  e.mtime = mtime_text;
  bool data = false;
  bool skip = false;
  // Old (v7) archives mark a directory by its name's trailing slash alone.
  const char kind = (type == '0' || type == '\0') && raw_name.ends_with('/') ? '5' : type;
  switch (kind) {
    case '0':
    case '\0':
    case '7':
      e.type = '0';
      e.size = size;
      data = true;
      break;
    case '5': e.type = '5'; break;
    case '6': e.type = '6'; break;
    case '1': {
      e.type = '1';
      auto target = normalizeEntryName(raw_link);
      if (!target || target->empty() || !inside_root(*target)) {
        return fail(
            refuse(fmt::format("The hard link '{}' {} points at '{}', outside the "
                               "archive's directory",
                               raw_name, options_.where, raw_link)));
      }
      e.link = *target;
      break;
    }
    case '2':
      e.type = '2';
      if (raw_link.empty()) {
        return fail(
            refuse(fmt::format("The symlink '{}' {} has no target", raw_name, options_.where)));
      }
      if (!download && !linkStaysInside(*name, raw_link, &links_)) {
        return fail(
            refuse(fmt::format("The symlink '{}' {} points at '{}', outside the directory "
                               "it is unpacked in; only relative links that stay inside "
                               "are accepted",
                               raw_name, options_.where, raw_link)));
      }
      e.link = raw_link;
      links_.insert(*name);
      break;
    case '3':
    case '4':
      if (!download) {
        return fail(
            refuse(fmt::format("The entry '{}' {} is a device node, which cannot be "
                               "unpacked in a box this way",
                               raw_name, options_.where)));
      }
      skip = true;
      break;
    case 'V':  // a volume label: not a file
      skip = true;
      break;
    case 'S':
      return fail(
          refuse(fmt::format("The entry '{}' {} is a sparse file, which is not supported; "
                             "archive it without --sparse",
                             raw_name, options_.where)));
    default:
      return fail(
          refuse(fmt::format("The entry '{}' {} has tar type '{}', which is not "
                             "supported (files, directories, symlinks, hard links and "
                             "FIFOs are)",
                             raw_name, options_.where, type)));
  }
  if (e.name.empty() && e.type != '5') {
    return fail(
        refuse(fmt::format("An entry {} that is not a directory has no name", options_.where)));
  }
  if (!skip) {
    if (e.type == '5') e.name = e.name.empty() ? "./" : e.name + "/";
    writeEntry(e, out);
    ++entries_;
  }
  left_ = size;
  copy_ = data && !skip;
  out_padding_ = copy_ ? (kBlock - size % kBlock) % kBlock : 0;
  if (size == 0) {
    state_ = State::kHeader;
  } else {
    state_ = copy_ ? State::kData : State::kSkip;
  }
  return ok();
}

Result<> TarFilter::finish(std::string& out) {
  if (error_) return fail(*error_);
  if (state_ != State::kEnd) {
    if (input_bytes_ == 0) {
      return fail(refuse(fmt::format("The data {} is empty; send a tar archive", options_.where)));
    }
    if (state_ != State::kHeader || !block_.empty()) {
      return fail(refuse(
          fmt::format("The archive {} ends in the middle of {}", options_.where,
                      name_.empty() ? std::string("its first header") : "entry '" + name_ + "'")));
    }
  }
  // Two zero blocks, then zeros up to a whole record (some readers read whole records).
  uint64_t total = output_bytes_ + 2 * kBlock;
  out.append(static_cast<size_t>(2 * kBlock + (kRecord - total % kRecord) % kRecord), '\0');
  return ok();
}

}  // namespace hutch::api
