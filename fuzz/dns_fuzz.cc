// A box's DNS query, as hutch-egress's resolver reads it from the box (dns.cc): the header and
// first question parsed, the REFUSED reply built from it, the name decided on by a policy.
#include <cstdlib>

#include "egress/dns.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hutch::egress;
  static const Policy policy = [] {
    auto p = parsePolicyText(R"({"allow":[{"domain":"*.example.com"},{"domain":"debian.org"}],
                                 "deny":[{"domain":"evil.example.com"}]})");
    if (!p) std::abort();
    return *p;
  }();
  std::span<const uint8_t> packet(data, size);
  auto query = parseDnsQuery(packet);
  if (!query) return 0;
  if (query->question_end > packet.size() || query->question_end < kDnsHeaderBytes) std::abort();
  (void)decideName(policy, query->name);
  std::vector<uint8_t> reply = buildDnsReply(packet, *query, kDnsRefused);
  if (reply.size() != query->question_end) std::abort();
  return 0;
}
