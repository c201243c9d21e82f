// Small whole-file helpers: read, tail, write atomically.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace hutch::sys {

// The whole file (up to `max_bytes`; longer files are an error).
Result<std::string> readFile(const std::filesystem::path& path, size_t max_bytes = 16 << 20);

// The last `max_bytes` of a file, starting at a line boundary when one is in range.
Result<std::string> readTail(const std::filesystem::path& path, size_t max_bytes);

// Writes `content` to a temporary file beside `path`, fsyncs it and renames it over `path`.
Result<> writeFileAtomic(const std::filesystem::path& path, std::string_view content,
                         mode_t mode = 0644);

// Opens `path` for appending (created with `mode` if missing), O_CLOEXEC.
Result<UniqueFd> openForAppend(const std::filesystem::path& path, mode_t mode = 0644);

}  // namespace hutch::sys
