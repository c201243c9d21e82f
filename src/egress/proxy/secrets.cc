#include "egress/proxy/secrets.h"

#include <algorithm>
#include <optional>

#include "egress/policy.h"

namespace hutch::egress::proxy {

namespace {

using Json = nlohmann::json;

bool isToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool hasControl(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

Result<std::string> stringField(const Json& doc, const char* key, bool required) {
  if (!doc.contains(key)) {
    if (required) {
      return fail(Errc::kInvalidArgument, std::string("A secret needs \"") + key + "\"");
    }
    return std::string();
  }
  if (!doc[key].is_string()) {
    return fail(Errc::kInvalidArgument,
                std::string("Secret field \"") + key + "\" must be a string");
  }
  return doc[key].get<std::string>();
}

}  // namespace

Result<Secret> parseSecret(const Json& doc) {
  if (!doc.is_object()) return fail(Errc::kInvalidArgument, "A secret must be a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "name" && key != "value" && key != "domains" && key != "header" && key != "format" &&
        key != "placeholder") {
      return fail(Errc::kInvalidArgument,
                  "Unknown secret field \"" + key +
                      "\"; use name, value, domains, header, format, placeholder");
    }
  }
  Secret s;
  HUTCH_TRY(s.name, stringField(doc, "name", true));
  HUTCH_TRY(s.value, stringField(doc, "value", true));
  HUTCH_TRY(s.header, stringField(doc, "header", false));
  HUTCH_TRY(std::string format, stringField(doc, "format", false));
  if (!format.empty()) s.format = std::move(format);
  HUTCH_TRY(s.placeholder, stringField(doc, "placeholder", false));
  std::string where = "Secret \"" + s.name + "\": ";
  if (s.name.empty()) return fail(Errc::kInvalidArgument, "A secret's \"name\" must not be empty");
  if (s.value.empty()) return fail(Errc::kInvalidArgument, where + "\"value\" must not be empty");
  if (hasControl(s.value) || hasControl(s.format) || hasControl(s.placeholder)) {
    return fail(Errc::kInvalidArgument,
                where + "value, format and placeholder must not contain CR, LF or NUL");
  }
  if (!s.header.empty() && !isToken(s.header)) {
    return fail(Errc::kInvalidArgument, where + "\"header\" must be an HTTP header name");
  }
  if (!s.header.empty() && s.format.find("{value}") == std::string::npos) {
    return fail(Errc::kInvalidArgument, where + "\"format\" must contain {value}");
  }
  if (s.header.empty() && s.placeholder.empty()) {
    return fail(Errc::kInvalidArgument,
                where + "give a \"header\" to set or a \"placeholder\" to replace (or both)");
  }
  if (!s.placeholder.empty() && s.value.find(s.placeholder) != std::string::npos) {
    return fail(Errc::kInvalidArgument, where + "the placeholder must not be part of the value");
  }
  if (!doc.contains("domains") || !doc["domains"].is_array() || doc["domains"].empty()) {
    return fail(Errc::kInvalidArgument,
                where + "\"domains\" must be a non-empty array of domain patterns");
  }
  Json rules = Json::array();
  for (const Json& d : doc["domains"]) {
    if (!d.is_string()) {
      return fail(Errc::kInvalidArgument, where + "every entry of \"domains\" must be a string");
    }
    s.domains.push_back(d.get<std::string>());
    rules.push_back({{"domain", d}});
  }
  // The same syntax as policy rules, checked by the policy parser.
  auto checked = parsePolicy(Json{{"allow", rules}, {"deny", Json::array()}});
  if (!checked) return fail(checked.error().withContext(where + "domains"));
  for (const std::string& d : s.domains) {
    if (auto problem = secretDomainProblem(d)) {
      return fail(Errc::kInvalidArgument, where + "domains: " + *problem);
    }
  }
  return s;
}

Result<std::vector<Secret>> parseSecrets(const Json& doc) {
  if (doc.is_null()) return std::vector<Secret>{};
  if (!doc.is_array()) return fail(Errc::kInvalidArgument, "\"secrets\" must be an array");
  std::vector<Secret> out;
  for (const Json& item : doc) {
    HUTCH_TRY(Secret s, parseSecret(item));
    for (const Secret& other : out) {
      if (other.name == s.name) {
        return fail(Errc::kInvalidArgument, "Two secrets are named \"" + s.name + "\"");
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool bindsHost(const Secret& secret, std::string_view host) {
  for (const std::string& pattern : secret.domains) {
    Policy one;
    one.allow.push_back(Rule{pattern, {}});
    if (decide(one, host, 443).allowed) return true;
  }
  return false;
}

std::string replaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  if (from.empty()) return std::string(text);
  size_t pos = 0;
  for (;;) {
    size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

namespace {

// Rewrites every header value through `change` (which returns nullopt for "unchanged"), keeping
// the order of fields that share a name.
template <class Change>
void rewriteValues(http::fields& fields, Change change) {
  std::vector<std::string> names;
  for (const auto& field : fields) {
    std::string_view value(field.value().data(), field.value().size());
    if (!change(value)) continue;
    std::string name(field.name_string());
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const std::string& name : names) {
    std::vector<std::string> values;
    auto [first, last] = fields.equal_range(name);
    for (auto it = first; it != last; ++it) {
      std::string_view value(it->value().data(), it->value().size());
      auto changed = change(value);
      values.push_back(changed ? std::move(*changed) : std::string(value));
    }
    fields.erase(name);
    for (const std::string& value : values) fields.insert(name, value);
  }
}

}  // namespace

void injectSecrets(http::request_header<>& request, const std::vector<const Secret*>& secrets) {
  for (const Secret* s : secrets) {
    if (!s->header.empty()) {
      // The header template is the whole rule: the header is set, nothing else is touched.
      request.set(s->header, replaceAll(s->format, "{value}", s->value));
      continue;
    }
    if (s->placeholder.empty()) continue;
    // The placeholder rule: header values only, never the request target.
    rewriteValues(request, [s](std::string_view value) -> std::optional<std::string> {
      if (value.find(s->placeholder) == std::string_view::npos) return std::nullopt;
      return replaceAll(value, s->placeholder, s->value);
    });
  }
}

void scrubSecrets(http::response_header<>& response, const std::vector<const Secret*>& secrets) {
  for (const Secret* s : secrets) {
    std::string instead = s->placeholder.empty() ? "[secret " + s->name + "]" : s->placeholder;
    rewriteValues(response, [&](std::string_view value) -> std::optional<std::string> {
      if (value.find(s->value) == std::string_view::npos) return std::nullopt;
      return replaceAll(value, s->value, instead);
    });
  }
}

}  // namespace hutch::egress::proxy
