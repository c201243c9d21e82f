#include "egress/policy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hutch::egress {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

Policy parse(std::string_view text) {
  auto p = parsePolicyText(text, "/nonexistent/etc/apt");
  EXPECT_TRUE(p) << p.error().message();
  return p ? *p : Policy{};
}

// The error message of parsing `text`, which must fail with kInvalidArgument.
std::string parseError(std::string_view text) {
  auto p = parsePolicyText(text, "/nonexistent/etc/apt");
  EXPECT_FALSE(p) << "parsed: " << text;
  if (p) return "";
  EXPECT_EQ(p.error().code(), Errc::kInvalidArgument) << p.error().message();
  return p.error().message();
}

// A fake etc/apt tree in a temporary directory.
class AptTree {
 public:
  AptTree() {
    std::string tmpl = (fs::temp_directory_path() / "hutch-policy-test-XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
    fs::create_directories(dir() / "sources.list.d");
  }
  ~AptTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path dir() const { return root_ / "etc" / "apt"; }
  void write(const fs::path& relative, std::string_view text) const {
    std::ofstream(dir() / relative) << text;
  }

 private:
  fs::path root_;
};

std::vector<std::string> domains(const std::vector<Rule>& rules) {
  std::vector<std::string> out;
  out.reserve(rules.size());
  for (const auto& r : rules) out.push_back(r.domain);
  return out;
}

// --- parsing -----------------------------------------------------------------------------

TEST(PolicyParse, RulesPortsAndRoundTrip) {
  Policy p = parse(R"({"allow": [{"domain": "API.Example.com.", "ports": [443, 8443]},
                                 {"domain": "*.debian.example"}, {"domain": "*"}],
                       "deny": [{"domain": "evil.example.com", "ports": [22]}]})");
  Policy want{{Rule{"api.example.com", {443, 8443}}, Rule{"*.debian.example", {}}, Rule{"*", {}}},
              {Rule{"evil.example.com", {22}}}};
  EXPECT_EQ(p, want);
  Json j = toJson(p);
  EXPECT_EQ(j["allow"][0], Json::parse(R"({"domain": "api.example.com", "ports": [443, 8443]})"));
  EXPECT_FALSE(j["allow"][1].contains("ports"));
  auto again = parsePolicy(j);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, p);
}

TEST(PolicyParse, EmptyDocumentAndEmptyLists) {
  EXPECT_EQ(parse("{}"), Policy{});
  EXPECT_EQ(parse(R"( {"allow": [], "deny": []} )"), Policy{});
  EXPECT_EQ(toJson(Policy{}), Json::parse(R"({"allow": [], "deny": []})"));
}

TEST(PolicyParse, DuplicatePortsAreKeptOnce) {
  EXPECT_EQ(parse(R"({"allow": [{"domain": "a.example", "ports": [443, 443]}]})").allow[0].ports,
            (std::vector<uint16_t>{443}));
}

TEST(PolicyParse, NotAnObject) {
  auto p = parsePolicy(Json::array());
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(p.error().message().find("JSON object"), std::string::npos);
}

TEST(PolicyParse, UnknownKeys) {
  EXPECT_NE(parseError(R"({"allow": [], "alow": []})").find("Unknown key \"alow\""),
            std::string::npos);
  std::string m = parseError(R"({"allow": [{"domain": "a.example", "port": 443}]})");
  EXPECT_NE(m.find("allow[0] has unknown key \"port\""), std::string::npos) << m;
}

TEST(PolicyParse, BadShapes) {
  EXPECT_NE(parseError(R"({"allow": {"domain": "a.example"}})").find("\"allow\" must be a list"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"deny": ["a.example"]})").find("deny[0] must be an object"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"allow": [{"ports": [1]}]})").find("allow[0].domain is missing"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"allow": [{"domain": 7}]})").find("allow[0].domain must be a string"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"presets": "none"})").find("\"presets\" must be a list"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"presets": [1]})").find("presets[0] must be a preset name"),
            std::string::npos);
}

TEST(PolicyParse, BadDomains) {
  struct Case {
    const char* domain;
    const char* says;
  };
  for (const Case& c : {
           Case{"", "it is empty"},
           Case{".", "it is empty"},
           Case{"a..b", "empty label"},
           Case{".a.example", "empty label"},
           Case{"*x.com", "'*' is only accepted"},
           Case{"a.*.com", "'*' is only accepted"},
           Case{"*.", "it is empty"},
           Case{"**", "'*' is only accepted"},
           Case{"a b.example", "contains ' '"},
           Case{"a/b.example", "contains '/'"},
           Case{"-a.example", "starts or ends with '-'"},
           Case{"a-.example", "starts or ends with '-'"},
           Case{"a.example:443", "contains ':'"},
           Case{"1.2.3.4", "is an IP address"},
           Case{"*.10.0.0.1", "is an IP address"},
           Case{"127.1", "is an IP address"},
           Case{"::1", "is an IP address"},
           Case{"2001:db8::1", "is an IP address"},
           Case{"[::1]", "is an IP address"},
           Case{"example.123", "is an IP address"},
       }) {
    Json doc = {{"allow", {{{"domain", c.domain}}}}};
    auto p = parsePolicy(doc, "/nonexistent");
    ASSERT_FALSE(p) << c.domain;
    EXPECT_EQ(p.error().code(), Errc::kInvalidArgument);
    EXPECT_NE(p.error().message().find("allow[0].domain"), std::string::npos)
        << p.error().message();
    EXPECT_NE(p.error().message().find(c.says), std::string::npos)
        << c.domain << ": " << p.error().message();
  }
  std::string label(64, 'a');
  EXPECT_NE(
      parseError(R"({"allow": [{"domain": ")" + label + R"(.example"}]})").find("longer than 63"),
      std::string::npos);
  std::string name;
  for (int i = 0; i < 50; ++i) name += "abcd.";
  name += "example";
  EXPECT_NE(parseError(R"({"deny": [{"domain": ")" + name + R"("}]})").find("longer than 253"),
            std::string::npos);
}

TEST(PolicyParse, GoodDomains) {
  for (const char* d : {"a", "example.com", "xn--bcher-kva.example", "_dmarc.example.com",
                        "*.example.com", "*", "1e100.example", "a-b.c-d.example", "123.example"}) {
    Json doc = {{"allow", {{{"domain", d}}}}};
    EXPECT_TRUE(parsePolicy(doc, "/nonexistent")) << d;
  }
}

TEST(PolicyParse, BadPorts) {
  for (const char* ports :
       {"0", "65536", "-1", "443.5", "\"443\"", "99999999999999999999", "null", "true"}) {
    std::string m = parseError(
        std::string(R"({"allow": [{"domain": "a.example", "ports": [443, )") + ports + "]}]}");
    EXPECT_NE(m.find("allow[0].ports[1]"), std::string::npos) << m;
    EXPECT_NE(m.find("1..65535"), std::string::npos) << m;
  }
  for (const char* ports : {"[]", "443", "{}"}) {
    std::string m =
        parseError(std::string(R"({"deny": [{"domain": "a.example", "ports": )") + ports + "}]}");
    EXPECT_NE(m.find("deny[0].ports must be a non-empty list"), std::string::npos) << m;
  }
  EXPECT_EQ(parse(R"({"allow": [{"domain": "a.example", "ports": [1, 65535]}]})").allow[0].ports,
            (std::vector<uint16_t>{1, 65535}));
}

TEST(PolicyParse, WholeMessages) {
  EXPECT_EQ(parseError(R"({"allow": [{"domain": "a.example", "ports": [0]}]})"),
            "Invalid network policy: allow[0].ports[0] is 0: ports are whole numbers 1..65535");
  EXPECT_EQ(parseError(R"({"deny": [{"domain": "10.0.0.1"}]})"),
            "Invalid network policy: deny[0].domain \"10.0.0.1\" is an IP address; rules name "
            "hosts, never addresses: a DNS name such as \"api.example.com\", \"*.example.com\" for "
            "every name below example.com, or \"*\" for every name");
}

TEST(PolicyParse, AllowPrivateTakesPrivateNetworksOnly) {
  Policy p = parse(R"({"allow": [{"domain": "mirror.lan.example"}],
                       "allow_private": ["192.168.1.0/24", "10.9.8.7", "fd12:3456::/48",
                                         "192.168.1.0/24"]})");
  ASSERT_EQ(p.allow_private.size(), 3u) << "duplicates are kept once";
  EXPECT_EQ(p.allow_private[0].text(), "192.168.1.0/24");
  EXPECT_EQ(p.allow_private[1].text(), "10.9.8.7/32");
  EXPECT_EQ(p.allow_private[2].text(), "fd12:3456::/48");
  Json j = toJson(p);
  EXPECT_EQ(j["allow_private"], Json::parse(R"(["192.168.1.0/24", "10.9.8.7/32",
                                                "fd12:3456::/48"])"));
  auto again = parsePolicy(j);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, p);
  EXPECT_FALSE(toJson(Policy{}).contains("allow_private")) << "left out when empty";

  std::string m = parseError(R"({"allow_private": ["8.8.8.0/24"]})");
  EXPECT_NE(m.find("allow_private[0] 8.8.8.0/24 is not inside a private range (10.0.0.0/8, "
                   "100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16, fc00::/7)"),
            std::string::npos)
      << m;
  for (const char* bad : {"127.0.0.0/8", "169.254.169.254", "169.254.0.0/16", "0.0.0.0/0",
                          "10.0.0.0/7", "fe80::/10", "::1"}) {
    EXPECT_NE(parseError(fmt::format(R"({{"allow_private": ["{}"]}})", bad))
                  .find("is not inside a private range"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(parseError(R"({"allow_private": ["192.168.1.1/24"]})").find("write 192.168.1.0/24"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"allow_private": "10.0.0.0/8"})").find("must be a list"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"allow_private": [10]})").find("allow_private[0] must be a string"),
            std::string::npos);
}

TEST(PolicyParse, Text) {
  EXPECT_EQ(parse("none"), Policy{});
  EXPECT_EQ(parse("  allow-all\n"), (Policy{{Rule{"*", {}}}, {}}));
  EXPECT_NE(parseError("allow-some").find("Unknown network policy \"allow-some\""),
            std::string::npos);
  EXPECT_NE(parseError("").find("empty"), std::string::npos);
  EXPECT_NE(parseError("{\"allow\": [").find("not valid JSON"), std::string::npos);
}

TEST(PolicyParse, PresetsInDocument) {
  Policy p = parse(R"({"allow": [{"domain": "a.example"}], "presets": ["allow-all", "none"]})");
  EXPECT_EQ(domains(p.allow), (std::vector<std::string>{"a.example", "*"}));
  EXPECT_NE(parseError(R"({"presets": ["every"]})").find("presets[0]: Unknown preset \"every\""),
            std::string::npos);
  // The apt tree is missing: the error says where it looked.
  auto missing = parsePolicyText(R"({"presets": ["debian-mirrors"]})", "/nonexistent/etc/apt");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("presets[0]"), std::string::npos);
  EXPECT_NE(missing.error().message().find("/nonexistent/etc/apt/sources.list"), std::string::npos);
}

// --- presets -----------------------------------------------------------------------------

TEST(PolicyPreset, NoneAndAllowAll) {
  EXPECT_EQ(*preset("none"), Policy{});
  EXPECT_EQ(*preset("allow-all"), (Policy{{Rule{"*", {}}}, {}}));
  auto bad = preset("debian");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("none, allow-all, debian-mirrors"), std::string::npos);
}

TEST(PolicyPreset, DebianMirrorsOneLine) {
  AptTree apt;
  apt.write("sources.list",
            "# deb http://commented.example.test/debian bookworm main\n"
            "deb http://mirror.example.test/debian bookworm main contrib\n"
            "deb-src http://Mirror.Example.Test/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] https://repo.example.test/apt "
            "stable main # trailing comment\n"
            "deb [ arch=amd64 ] http://spaced.example.test/debian stable main\n"
            "   deb    http://user:secret@auth.example.test:8080/debian stable main\n"
            "deb file:/srv/local-repo ./\n"
            "deb cdrom:[Debian GNU/Linux 12]/ bookworm main\n"
            "deb http://10.1.2.3/debian stable main\n"
            "rpm http://not-apt.example.test/ stable main\n"
            "\n");
  apt.write("sources.list.d/extra.list", "deb https://extra.example.test/debian stable main\n");
  apt.write("sources.list.d/ignored.list.disabled",
            "deb https://disabled.example.test/debian stable main\n");
  auto p = preset("debian-mirrors", apt.dir());
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->allow, (std::vector<Rule>{
                          Rule{"mirror.example.test", {80, 443}},
                          Rule{"repo.example.test", {80, 443}},
                          Rule{"spaced.example.test", {80, 443}},
                          Rule{"auth.example.test", {8080}},
                          Rule{"extra.example.test", {80, 443}},
                      }));
  EXPECT_TRUE(p->deny.empty());
}

TEST(PolicyPreset, DebianMirrorsDeb822) {
  AptTree apt;
  apt.write("sources.list.d/main.sources",
            "# a comment before the first stanza\n"
            "Types: deb deb-src\n"
            "URIs: http://deb.example.test/debian\n"
            "Suites: bookworm bookworm-updates\n"
            "Components: main\n"
            "Signed-By: /usr/share/keyrings/example.gpg\n"
            "\n"
            "Types: deb\n"
            "# a comment inside a stanza\n"
            "URIs: http://sec.example.test:8081/debian-security\n"
            "  https://second.example.test/debian-security\n"
            "Suites: bookworm-security\n"
            "Components: main\n"
            "\n"
            "Types: deb\n"
            "Enabled: no\n"
            "URIs: http://off.example.test/debian\n"
            "Suites: bookworm\n"
            "\n"
            "Types: deb\n"
            "uris: file:///srv/repo http://lower.example.test/debian\n"
            "enabled: yes\n");
  auto p = preset("debian-mirrors", apt.dir());
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->allow, (std::vector<Rule>{
                          Rule{"deb.example.test", {80, 443}},
                          Rule{"sec.example.test", {8081}},
                          Rule{"second.example.test", {80, 443}},
                          Rule{"lower.example.test", {80, 443}},
                      }));
}

TEST(PolicyPreset, DebianMirrorsMergesPortsOfOneHost) {
  AptTree apt;
  apt.write("sources.list", "deb http://mirror.example.test:8080/debian stable main\n");
  apt.write("sources.list.d/a.sources", "Types: deb\nURIs: http://mirror.example.test/debian\n");
  auto p = preset("debian-mirrors", apt.dir());
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->allow, (std::vector<Rule>{Rule{"mirror.example.test", {80, 443, 8080}}}));
}

TEST(PolicyPreset, DebianMirrorsNothingFound) {
  AptTree apt;
  apt.write("sources.list", "# nothing here\n");
  apt.write("sources.list.d/off.sources",
            "Types: deb\nURIs: http://off.example.test/debian\nEnabled: no\n");
  auto p = preset("debian-mirrors", apt.dir());
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code(), Errc::kNotFound);
  EXPECT_NE(p.error().message().find((apt.dir() / "sources.list").string()), std::string::npos);
  EXPECT_NE(p.error().message().find("*.sources"), std::string::npos);

  auto missing = preset("debian-mirrors", apt.dir() / "missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kNotFound);
  EXPECT_NE(missing.error().message().find((apt.dir() / "missing").string()), std::string::npos);
}

TEST(PolicyPreset, DebianMirrorsThroughText) {
  AptTree apt;
  apt.write("sources.list", "deb http://mirror.example.test/debian stable main\n");
  auto p = parsePolicyText("debian-mirrors", apt.dir());
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_TRUE(decide(*p, "mirror.example.test", 80).allowed);
  auto doc = parsePolicyText(
      R"({"presets": ["debian-mirrors"], "deny": [{"domain": "mirror.example.test"}]})", apt.dir());
  ASSERT_TRUE(doc) << doc.error().message();
  EXPECT_FALSE(decide(*doc, "mirror.example.test", 80).allowed);
}

// --- decisions ---------------------------------------------------------------------------

TEST(PolicyDecide, Exact) {
  Policy p{{Rule{"api.example.com", {}}}, {}};
  EXPECT_TRUE(decide(p, "api.example.com", 443).allowed);
  EXPECT_EQ(decide(p, "api.example.com", 443).reason, "allowed by api.example.com");
  EXPECT_TRUE(decide(p, "API.EXAMPLE.COM.", 80).allowed);
  Decision d = decide(p, "x.api.example.com", 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "no allow rule matches");
  EXPECT_FALSE(decide(p, "example.com", 443).allowed);
}

TEST(PolicyDecide, Wildcard) {
  Policy p{{Rule{"*.example.com", {}}}, {}};
  EXPECT_TRUE(decide(p, "a.example.com", 443).allowed);
  EXPECT_TRUE(decide(p, "a.b.example.com", 443).allowed);
  EXPECT_TRUE(decide(p, "A.Example.Com.", 443).allowed);
  EXPECT_EQ(decide(p, "a.example.com", 443).reason, "allowed by *.example.com");
  EXPECT_FALSE(decide(p, "example.com", 443).allowed);
  EXPECT_FALSE(decide(p, "badexample.com", 443).allowed);
  EXPECT_FALSE(decide(p, "example.com.evil", 443).allowed);
}

TEST(PolicyDecide, Star) {
  Policy p{{Rule{"*", {}}}, {}};
  EXPECT_TRUE(decide(p, "anything.example", 1).allowed);
  EXPECT_TRUE(decide(p, "localhost", 65535).allowed);
  EXPECT_EQ(decide(p, "x", 1).reason, "allowed by *");
}

TEST(PolicyDecide, Ports) {
  Policy p{{Rule{"api.example.com", {443, 8443}}}, {}};
  EXPECT_TRUE(decide(p, "api.example.com", 443).allowed);
  EXPECT_EQ(decide(p, "api.example.com", 8443).reason, "allowed by api.example.com:8443");
  EXPECT_FALSE(decide(p, "api.example.com", 80).allowed);
  EXPECT_EQ(decide(p, "api.example.com", 80).reason, "no allow rule matches");
}

TEST(PolicyDecide, DenyWins) {
  Policy p{{Rule{"*", {}}, Rule{"evil.example.com", {}}},
           {Rule{"*.evil.com", {}}, Rule{"evil.example.com", {}}}};
  Decision d = decide(p, "x.evil.com", 443);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "denied by *.evil.com");
  EXPECT_EQ(decide(p, "evil.example.com", 443).reason, "denied by evil.example.com");
  EXPECT_TRUE(decide(p, "evil.com", 443).allowed);
}

TEST(PolicyDecide, DenyWithPortsOnlyDeniesThosePorts) {
  Policy p{{Rule{"*.example.com", {}}}, {Rule{"ssh.example.com", {22}}}};
  Decision d = decide(p, "ssh.example.com", 22);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "denied by ssh.example.com:22");
  EXPECT_TRUE(decide(p, "ssh.example.com", 443).allowed);
}

TEST(PolicyDecide, RawIpAlwaysDenied) {
  Policy p{{Rule{"*", {}}}, {}};
  for (const char* host : {"1.2.3.4", "127.0.0.1", "127.1", "0x7f000001", "10.0.2.2.", "::1",
                           "[::1]", "2001:db8::1", "fe80::1%eth0", "::ffff:1.2.3.4"}) {
    Decision d = decide(p, host, 443);
    EXPECT_FALSE(d.allowed) << host;
    EXPECT_EQ(d.reason, "raw IP address") << host;
    EXPECT_EQ(decideName(p, host).reason, "raw IP address") << host;
  }
}

TEST(PolicyDecide, InvalidNamesDenied) {
  Policy p{{Rule{"*", {}}}, {}};
  for (const char* host : {"", ".", "a..b", "a b", "a/b", "x.example.com:443", "*.example"}) {
    Decision d = decide(p, host, 443);
    EXPECT_FALSE(d.allowed) << host;
    EXPECT_EQ(d.reason, "invalid host name") << host;
  }
}

TEST(PolicyDecide, Names) {
  Policy p{{Rule{"api.example.com", {443}}, Rule{"*.example.org", {}}},
           {Rule{"bad.example.org", {}}, Rule{"ssh.example.org", {22}}}};
  Decision d = decideName(p, "api.example.com");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason, "allowed by api.example.com");
  EXPECT_TRUE(decideName(p, "API.example.com.").allowed);
  EXPECT_TRUE(decideName(p, "ssh.example.org").allowed);  // a deny with ports does not hide it
  d = decideName(p, "bad.example.org");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "denied by bad.example.org");
  d = decideName(p, "other.example");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "no allow rule matches");
  EXPECT_FALSE(decideName(Policy{}, "api.example.com").allowed);
}

TEST(PolicyDecide, HandBuiltRulesCompareCaseInsensitively) {
  Policy p{{Rule{"API.Example.COM.", {}}}, {Rule{"*.Evil.Example.", {}}}};
  EXPECT_TRUE(decide(p, "api.example.com", 443).allowed);
  EXPECT_FALSE(decideName(Policy{{Rule{"*", {}}}, p.deny}, "x.evil.example").allowed);
}

// Found by fuzz/egress_policy_fuzz.cc: nlohmann throws out_of_range, not parse_error, for a
// number beyond a double; it escaped parsePolicyText.
TEST(PolicyTest, ANumberTooLargeIsInvalidJsonNotAnException) {
  auto p = parsePolicyText(R"({"allow": [], "x": 6.5e2222222})", "/nonexistent/etc/apt");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code(), Errc::kInvalidArgument);
  EXPECT_NE(p.error().message().find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace hutch::egress
