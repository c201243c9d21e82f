// What hutch itself parses of SSH (ssh/ssh_model.h): the ProxyCommand's box reference (%h), the
// SSH user name, env requests and direct-tcpip destinations. The SSH protocol is libssh's.
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "ssh/ssh_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hutch::ssh;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto box = parseBoxHost(text); box) {
    // A box name never keeps the suffix or starts with a character the CLI would take for an
    // option, and is never empty.
    if (box->empty() || box->front() == '-' || box->front() == '.') std::abort();
    if (parseBoxHost(*box + ".hutch").value_or("") != *box) std::abort();
  }
  (void)boxUserOf(text);
  const size_t eq = text.find('=');
  if (eq != std::string_view::npos) (void)envAllowed(text.substr(0, eq), text.substr(eq + 1));
  if (auto address = boxLocalAddress(text, {"dev", "0123456789ab"}); address) {
    if (*address != "::1" && !address->starts_with("127.")) std::abort();
  }
  (void)signalNumber(text);
  return 0;
}
