#include "e2b/gunzip.h"

#include <zlib.h>

namespace hutch::e2b {

struct Gunzip::State {
  z_stream z{};
  bool ready = false;   // inflateInit2 succeeded
  bool member = false;  // inside a member (its header seen, its end not yet)
};

namespace {

Error notGzip(std::string_view why) {
  return Error(Errc::kInvalidArgument,
               std::string("The body is not valid gzip (") + std::string(why) +
                   "); send the file as it is, or gzip it whole with Content-Encoding: gzip");
}

}  // namespace

Gunzip::Gunzip() : state_(std::make_unique<State>()) {
  // 16 + MAX_WBITS: a gzip header and trailer, not zlib's.
  state_->ready = inflateInit2(&state_->z, 16 + MAX_WBITS) == Z_OK;
}

Gunzip::~Gunzip() {
  if (state_->ready) inflateEnd(&state_->z);
}

Result<std::string> Gunzip::feed(std::string_view input) {
  if (!state_->ready) return fail(Errc::kInternal, "Cannot start zlib's inflate");
  z_stream& z = state_->z;
  std::string out;
  char buffer[64 * 1024];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  z.avail_in = static_cast<uInt>(input.size());
  if (input.empty()) return out;
  state_->member = true;
  // Until the input is used up and inflate has nothing more to give for it (a full buffer may
  // leave output behind).
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    const int r = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
    if (r == Z_STREAM_END) {
      // One member ended; another may follow.
      state_->member = z.avail_in > 0;
      if (inflateReset(&z) != Z_OK) return fail(notGzip("cannot start the next member"));
      continue;
    }
    if (r == Z_BUF_ERROR) break;  // no progress: it needs more input
    if (r != Z_OK) return fail(notGzip(z.msg != nullptr ? z.msg : "inflate failed"));
  } while (z.avail_in > 0 || z.avail_out == 0);
  return out;
}

Result<> Gunzip::finish() {
  if (state_->member) return fail(notGzip("it ends before its last member does"));
  return ok();
}

}  // namespace hutch::e2b
