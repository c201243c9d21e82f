// The first bytes a box sends on an intercepted connection (client_hello.cc): a TLS ClientHello
// and its server name, or the start of an HTTP request; the name found must be one the proxy
// accepts as a host name. The input is also inspected as it grows, as the proxy reads it.
#include <cstdlib>

#include "egress/proxy/client_hello.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hutch::egress::proxy;
  std::span<const uint8_t> bytes(data, size);
  HelloResult all = inspectClientHello(bytes);
  if (all.status == HelloStatus::kFound && !isValidHostName(all.sni)) std::abort();
  if (all.status == HelloStatus::kNeedMore && all.need <= size) std::abort();
  // As the proxy reads: ask again once `need` bytes are there.
  size_t have = std::min<size_t>(size, 5);
  while (true) {
    HelloResult r = inspectClientHello(bytes.first(have));
    if (r.status != HelloStatus::kNeedMore) {
      if (r.status != all.status || r.sni != all.sni) std::abort();
      break;
    }
    if (r.need <= have) std::abort();
    if (r.need > size) break;
    have = r.need;
  }
  (void)looksLikeHttpRequest(bytes);
  (void)isValidHostName(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
