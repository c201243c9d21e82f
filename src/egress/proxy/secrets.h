// A box's secrets: real credentials that never enter the box. The box holds a placeholder; on an
// intercepted HTTPS connection to a domain the secret is bound to, the proxy puts the real value
// into the request on its way out and takes it out of response headers on the way back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "egress/proxy/asio.h"

namespace hutch::egress::proxy {

struct Secret {
  std::string name;
  std::string value;                 // never logged
  std::vector<std::string> domains;  // policy.h rule syntax: "api.x.com", "*.x.com", "*"
  std::string header;                // "" = replace the placeholder in header values
  std::string format = "{value}";    // the header's value; {value} becomes the real value
  std::string placeholder;           // what the box has instead of the value
  bool operator==(const Secret&) const = default;
};

// {"name":N,"value":V,"domains":[...],"header":H,"format":F,"placeholder":P} (README.md). Errors
// (kInvalidArgument) name the field: missing name or value, no domains, a bad domain pattern, a
// header name that is not a token, CR/LF/NUL in value, format or placeholder, a header without
// {value} in its format, neither a header nor a placeholder, a placeholder equal to the value,
// a domain as broad as "*" or "*.com" (secretDomainProblem).
Result<Secret> parseSecret(const nlohmann::json& doc);
Result<std::vector<Secret>> parseSecrets(const nlohmann::json& doc);  // an array of them

// Whether the secret is bound to `host` (by the same matching as policy rules).
bool bindsHost(const Secret& secret, std::string_view host);

// `text` with every `from` replaced by `to`.
std::string replaceAll(std::string_view text, std::string_view from, std::string_view to);

// Puts the real values into a request bound for an upstream that every secret in `secrets` is
// bound to, each only where its rule says: a secret with a `header` sets that header to its
// format (and touches nothing else); one without replaces its placeholder in header values.
// The request target and body are never changed.
void injectSecrets(http::request_header<>& request, const std::vector<const Secret*>& secrets);

// Replaces every real value of `secrets` found in a response's header values by its placeholder
// (or by "[secret NAME]" when it has none).
void scrubSecrets(http::response_header<>& response, const std::vector<const Secret*>& secrets);

}  // namespace hutch::egress::proxy
