// A box's egress policy as a client sends it (PUT /v1/boxes/{box}/policy, --network-policy):
// parsePolicyText, then a policy that parses is written back with toJson and must parse again to
// the same policy; decisions over a few names and the last input line as a name.
#include <cstdlib>

#include "egress/policy.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hutch::egress;
  hutch::fuzz::FuzzInput input(data, size);
  std::string_view text = input.rest();
  // No apt sources: the debian-mirrors preset reads the host's, not the input.
  auto policy = parsePolicyText(text, "/nonexistent/etc/apt");
  if (!policy) return 0;
  auto again = parsePolicy(toJson(*policy), "/nonexistent/etc/apt");
  if (!again || !(*again == *policy)) std::abort();
  std::string_view name = text.substr(text.find_last_of('\n') + 1);
  for (std::string_view host :
       {std::string_view("api.example.com"), std::string_view("Example.COM."),
        std::string_view("10.0.0.1"), std::string_view(""), name}) {
    (void)decide(*policy, host, 443);
    (void)decideName(*policy, host);
  }
  for (const Rule& rule : policy->allow) (void)secretDomainProblem(rule.domain);
  return 0;
}
