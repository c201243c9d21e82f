#include "e2b/multipart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace hutch::e2b {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of parameter `key` in "form-data; name=\"file\"; filename=\"/a b\"" (quoted strings
// with backslash escapes, or tokens).
std::string parameter(std::string_view header, std::string_view key) {
  size_t i = 0;
  while (i < header.size()) {
    size_t semi = header.find(';', i);
    if (semi == std::string_view::npos) break;
    i = semi + 1;
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
    size_t eq = header.find('=', i);
    if (eq == std::string_view::npos) break;
    std::string name = lower(trim(header.substr(i, eq - i)));
    size_t v = eq + 1;
    std::string value;
    if (v < header.size() && header[v] == '"') {
      ++v;
      while (v < header.size() && header[v] != '"') {
        if (header[v] == '\\' && v + 1 < header.size()) ++v;
        value += header[v++];
      }
      i = v + 1;
    } else {
      size_t end = header.find(';', v);
      if (end == std::string_view::npos) end = header.size();
      value = std::string(trim(header.substr(v, end - v)));
      i = end;
    }
    if (name == key) return value;
  }
  return {};
}

}  // namespace

Result<std::string> multipartBoundary(std::string_view content_type) {
  std::string boundary = parameter(content_type, "boundary");
  if (boundary.empty() || boundary.size() > 200) {
    return fail(Errc::kInvalidArgument,
                "A multipart upload needs Content-Type: multipart/form-data; boundary=...");
  }
  return boundary;
}

MultipartReader::MultipartReader(const std::string& boundary)
    : delimiter_("--" + boundary), body_delimiter_("\r\n--" + boundary) {}

void MultipartReader::feed(std::string_view bytes) {
  compact();
  buffer_.append(bytes);
}

void MultipartReader::compact() {
  if (pos_ == 0) return;
  buffer_.erase(0, pos_);
  pos_ = 0;
}

Result<MultipartReader::Event> MultipartReader::next() {
  Event event;
  if (part_end_pending_) {
    part_end_pending_ = false;
    event.kind = Event::kPartEnd;
    return event;
  }
  switch (state_) {
    case State::kPreamble: {
      size_t found = buffer_.find(delimiter_, pos_);
      if (found == std::string::npos) {
        // Keep what could be the start of the delimiter.
        if (buffer_.size() - pos_ >= delimiter_.size())
          pos_ = buffer_.size() - delimiter_.size() + 1;
        return event;
      }
      pos_ = found + delimiter_.size();
      state_ = State::kAfterDelimiter;
      return next();
    }
    case State::kAfterDelimiter: {
      if (buffer_.size() - pos_ < 2) return event;
      std::string_view two(buffer_.data() + pos_, 2);
      if (two == "--") {
        state_ = State::kDone;
        event.kind = Event::kEnd;
        return event;
      }
      // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
      size_t eol = buffer_.find("\r\n", pos_);
      if (eol == std::string::npos) {
        if (buffer_.size() - pos_ > 256) {
          return fail(Errc::kInvalidArgument, "A multipart boundary is not followed by CRLF");
        }
        return event;
      }
      if (!trim(std::string_view(buffer_).substr(pos_, eol - pos_)).empty()) {
        return fail(Errc::kInvalidArgument, "A multipart boundary is not followed by CRLF");
      }
      pos_ = eol + 2;
      state_ = State::kHeaders;
      return next();
    }
    case State::kHeaders: {
      size_t end;
      if (buffer_.compare(pos_, 2, "\r\n") == 0) {
        end = pos_;  // no headers at all
      } else {
        end = buffer_.find("\r\n\r\n", pos_);
        if (end == std::string::npos) {
          if (buffer_.size() - pos_ > kMaxHeaders) {
            return fail(Errc::kInvalidArgument,
                        fmt::format("A multipart part's headers exceed {} KiB", kMaxHeaders >> 10));
          }
          return event;
        }
        end += 2;  // the last header's CRLF
      }
      std::string_view headers(buffer_.data() + pos_, end - pos_);
      size_t line_start = 0;
      while (line_start < headers.size()) {
        size_t eol = headers.find("\r\n", line_start);
        if (eol == std::string_view::npos) eol = headers.size();
        std::string_view line = headers.substr(line_start, eol - line_start);
        size_t colon = line.find(':');
        if (colon != std::string_view::npos &&
            lower(trim(line.substr(0, colon))) == "content-disposition") {
          std::string_view value = line.substr(colon + 1);
          event.name = parameter(value, "name");
          event.filename = parameter(value, "filename");
        }
        line_start = eol + 2;
      }
      pos_ = end + 2;
      state_ = State::kBody;
      event.kind = Event::kPartStart;
      return event;
    }
    case State::kBody: {
      size_t found = buffer_.find(body_delimiter_, pos_);
      if (found != std::string::npos) {
        event.data = buffer_.substr(pos_, found - pos_);
        pos_ = found + body_delimiter_.size();
        state_ = State::kAfterDelimiter;
        if (event.data.empty()) {
          event.kind = Event::kPartEnd;
        } else {
          event.kind = Event::kData;
          part_end_pending_ = true;
        }
        return event;
      }
      // Everything but a possible start of the delimiter is content.
      size_t keep = body_delimiter_.size() - 1;
      if (buffer_.size() - pos_ > keep) {
        size_t n = buffer_.size() - pos_ - keep;
        event.data = buffer_.substr(pos_, n);
        pos_ += n;
        event.kind = Event::kData;
      }
      return event;
    }
    case State::kDone: event.kind = Event::kEnd; return event;
  }
  return event;
}

}  // namespace hutch::e2b
