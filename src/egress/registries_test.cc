#include "egress/registries.h"

#include <gtest/gtest.h>

#include "egress/policy.h"

namespace hutch::egress {
namespace {

// A probe whose commands answer from a table (argv joined by spaces -> output, or a failure).
RegistryProbe fake(std::map<std::string, std::string> outputs,
                   std::map<std::string, std::string> env = {}) {
  RegistryProbe probe;
  probe.env = std::move(env);
  probe.run =
      [outputs = std::move(outputs)](const std::vector<std::string>& argv) -> Result<std::string> {
    std::string key;
    for (const std::string& a : argv) key += (key.empty() ? "" : " ") + a;
    if (key.rfind("python3 -c ", 0) == 0) key = "python3 -c";
    auto it = outputs.find(key);
    if (it == outputs.end()) return fail(Errc::kInternal, key + " exited with status 127");
    return it->second;
  };
  return probe;
}

TEST(RegistryUrlTest, HostAndPortOfHttpUrlsOnly) {
  EXPECT_EQ(*parseRegistryUrl("https://registry.example.org/"),
            (Registry{"https://registry.example.org/", "registry.example.org", 443}));
  EXPECT_EQ(parseRegistryUrl("http://Mirror.Example.ORG:8080/npm/")->host, "mirror.example.org");
  EXPECT_EQ(parseRegistryUrl("http://mirror.example.org:8080/npm/")->port, 8080);
  EXPECT_EQ(parseRegistryUrl("https://user:secret@pypi.example.org/simple")->host,
            "pypi.example.org");
  EXPECT_EQ(parseRegistryUrl("http://mirror.example.org")->port, 80);
  EXPECT_FALSE(parseRegistryUrl("/srv/wheels"));
  EXPECT_FALSE(parseRegistryUrl("file:///srv/wheels"));
  EXPECT_FALSE(parseRegistryUrl("https://"));
  EXPECT_FALSE(parseRegistryUrl("https://host.example.org:99999/"));
  EXPECT_FALSE(parseRegistryUrl("https://host.example.org:/"));
}

TEST(NpmRegistriesTest, TheRegistryAndScopedOnesAsNpmResolvesThem) {
  auto probe = fake({{"npm config list --json",
                      "npm warn config something\n"
                      "{\"registry\": \"https://npm.example.org/\", \"@corp:registry\": "
                      "\"https://npm.corp.example:4873/\", \"fund\": false, \"cafile\": \"/x\"}"}});
  auto found = npmRegistries(probe);
  ASSERT_TRUE(found) << found.error().describe();
  ASSERT_EQ(found->size(), 2U);
  EXPECT_EQ((*found)[0].host, "npm.corp.example");
  EXPECT_EQ((*found)[0].port, 4873);
  EXPECT_EQ((*found)[1].host, "npm.example.org");
  EXPECT_EQ((*found)[1].port, 443);
  EXPECT_EQ((*found)[0].key, "@corp:registry");
  EXPECT_EQ((*found)[1].key, "registry");
}

TEST(NpmRegistriesTest, NoNpmOrNoRegistryIsAClearError) {
  auto missing = npmRegistries(fake({}));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), Errc::kFailedPrecondition);
  EXPECT_NE(missing.error().message().find("install npm on the host"), std::string::npos);
  auto garbage = npmRegistries(fake({{"npm config list --json", "not json"}}));
  ASSERT_FALSE(garbage);
  auto none = npmRegistries(fake({{"npm config list --json", "{\"registry\": \"/local\"}"}}));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("names no http(s) registry"), std::string::npos);
}

TEST(PypiRegistriesTest, PipsBuiltInIndexAndItsFilesDomainWhenNothingIsConfigured) {
  auto probe = fake({{"python3 -m pip config list", "global.cert='/etc/ssl/certs/x.crt'\n"},
                     {"python3 -c", "https://pypi.example.org/\nfiles.example.org\n"}});
  auto found = pypiRegistries(probe);
  ASSERT_TRUE(found) << found.error().describe();
  ASSERT_EQ(found->size(), 2U);
  EXPECT_EQ((*found)[0].host, "pypi.example.org");
  EXPECT_EQ((*found)[1].host, "files.example.org");
}

TEST(PypiRegistriesTest, ConfiguredIndexesFromFilesAndEnvironment) {
  // The environment wins over the files, as in pip; find-links paths are not registries.
  auto probe = fake({{"python3 -m pip config list",
                      "global.index-url='https://mirror.example.org/pypi/simple'\n"
                      ":env:.find-links='/srv/wheels https://wheels.example.org/'\n"
                      "global.extra-index-url='https://extra.example.org/simple'\n"}},
                    {{"PIP_EXTRA_INDEX_URL", "http://extra2.example.org:8081/simple"}});
  auto found = pypiRegistries(probe);
  ASSERT_TRUE(found) << found.error().describe();
  ASSERT_EQ(found->size(), 3U);
  EXPECT_EQ((*found)[0].host, "mirror.example.org");
  EXPECT_EQ((*found)[1].host, "extra2.example.org");
  EXPECT_EQ((*found)[1].port, 8081);
  EXPECT_EQ((*found)[2].host, "wheels.example.org");
  // No pip at all, nothing configured: say what to do.
  auto missing = pypiRegistries(fake({}));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("PIP_INDEX_URL"), std::string::npos);
}

TEST(BoxRegistryFilesTest, TheHostsRegistriesThePolicyAllowsWithoutCredentials) {
  std::vector<Registry> npm = {
      {"https://bot:s3cret@npm.example.org/", "npm.example.org", 443, "registry"},
      {"https://npm.corp.example:4873/", "npm.corp.example", 4873, "@corp:registry"},
      {"https://npm.other.example/", "npm.other.example", 443, "@other:registry"}};
  std::vector<Registry> pypi = {
      {"https://mirror.example.org/simple", "mirror.example.org", 443, "index-url"},
      {"https://a.example.org/simple", "a.example.org", 443, "extra-index-url"},
      {"https://b.example.org/simple", "b.example.org", 443, "extra-index-url"}};
  auto files =
      boxRegistryFiles(npm, pypi, [](const Registry& r) { return r.host != "npm.other.example"; });
  EXPECT_TRUE(files.npmrc.starts_with(kBoxRegistryMark)) << files.npmrc;
  EXPECT_NE(files.npmrc.find("\nregistry=https://npm.example.org/\n"), std::string::npos)
      << files.npmrc;
  EXPECT_NE(files.npmrc.find("\n@corp:registry=https://npm.corp.example:4873/\n"),
            std::string::npos);
  EXPECT_EQ(files.npmrc.find("s3cret"), std::string::npos) << "credentials stay on the host";
  EXPECT_EQ(files.npmrc.find("npm.other.example"), std::string::npos) << "not allowed";
  EXPECT_TRUE(files.pip_conf.starts_with(kBoxRegistryMark));
  EXPECT_NE(files.pip_conf.find("[global]\n"), std::string::npos);
  EXPECT_NE(files.pip_conf.find("\nindex-url = https://mirror.example.org/simple\n"),
            std::string::npos)
      << files.pip_conf;
  EXPECT_NE(files.pip_conf.find(
                "\nextra-index-url = https://a.example.org/simple https://b.example.org/simple\n"),
            std::string::npos)
      << files.pip_conf;

  EXPECT_EQ(files.pip_conf.find("trusted-host"), std::string::npos) << "HTTPS needs no trust";
  std::vector<Registry> plain = {
      {"http://plain.example.org:8081/simple/", "plain.example.org", 8081, "index-url"}};
  EXPECT_NE(boxRegistryFiles({}, plain, [](const Registry&) { return true; })
                .pip_conf.find("\ntrusted-host = plain.example.org\n"),
            std::string::npos)
      << "pip ignores a plain-HTTP index whose host is not trusted";

  // Nothing allowed, or pip's built-in index (the box's pip has the same): nothing to write.
  auto none = boxRegistryFiles(npm, pypi, [](const Registry&) { return false; });
  EXPECT_EQ(none.npmrc, "");
  EXPECT_EQ(none.pip_conf, "");
  std::vector<Registry> builtin = {{"https://pypi.example.org/", "pypi.example.org", 443, ""}};
  EXPECT_EQ(boxRegistryFiles({}, builtin, [](const Registry&) { return true; }).pip_conf, "");
}

TEST(BoxRegistryFilesTest, TheHostsRegistryCaGoesWithTheFilesThatUseIt) {
  std::vector<Registry> npm = {{"https://npm.example.org/", "npm.example.org", 443, "registry"}};
  std::vector<Registry> pypi = {
      {"https://pypi.example.org/simple", "pypi.example.org", 443, "index-url"}};
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  auto files = boxRegistryFiles(
      npm, pypi, [](const Registry&) { return true; }, pem);
  EXPECT_NE(files.npmrc.find("\ncafile=/etc/hutch/registry-ca.pem\n"), std::string::npos)
      << files.npmrc;
  EXPECT_NE(files.pip_conf.find("\ncert = /etc/hutch/registry-ca.pem\n"), std::string::npos)
      << files.pip_conf;
  EXPECT_EQ(files.ca_pem, pem);
  // Nothing allowed: no files, and no bundle either.
  auto none = boxRegistryFiles(
      npm, pypi, [](const Registry&) { return false; }, pem);
  EXPECT_EQ(none.ca_pem, "");
  EXPECT_EQ(none.npmrc, "");
  // The host's pip on PyPI's own index (nothing to tell the box) through a proxy of its own
  // CA: pip.conf carries only the cert.
  std::vector<Registry> builtin = {
      {"https://pypi.org/simple", "pypi.org", 443, ""},
      {"https://files.pythonhosted.org", "files.pythonhosted.org", 443, ""}};
  auto pypi_ca = boxRegistryFiles(
      {}, builtin, [](const Registry&) { return true; }, pem);
  EXPECT_NE(pypi_ca.pip_conf.find("[global]\ncert = /etc/hutch/registry-ca.pem\n"),
            std::string::npos)
      << pypi_ca.pip_conf;
  EXPECT_EQ(pypi_ca.ca_pem, pem);
  EXPECT_EQ(boxRegistryFiles({}, builtin, [](const Registry&) { return true; }).pip_conf, "");
}

TEST(BoxRegistryFilesTest, TheCaFilesAreWhatTheHostsNpmAndPipAreConfiguredWith) {
  auto both = registryCaFiles(fake(
      {{"npm config get cafile", "/etc/ssl/corp.pem\n"},
       {"python3 -m pip config list", "global.cert='/etc/ssl/pip.pem'\nglobal.timeout='60'\n"}}));
  EXPECT_EQ(both, (std::vector<std::string>{"/etc/ssl/corp.pem", "/etc/ssl/pip.pem"}));
  auto same = registryCaFiles(
      fake({{"npm config get cafile", "/etc/ssl/one.pem\n"}}, {{"PIP_CERT", "/etc/ssl/one.pem"}}));
  EXPECT_EQ(same, std::vector<std::string>{"/etc/ssl/one.pem"}) << "each file once";
  EXPECT_TRUE(registryCaFiles(fake({{"npm config get cafile", "null\n"}})).empty());
  EXPECT_TRUE(registryCaFiles(fake({})).empty()) << "no npm, no pip: nothing";
}

TEST(RegistryPresetTest, PresetNamesAreKnownToThePolicyParser) {
  // Whatever this host has, "npm" is a preset (its rules or why it has none), not an unknown.
  auto parsed = parsePolicyText("npm");
  if (!parsed) {
    EXPECT_EQ(parsed.error().message().find("Unknown"), std::string::npos);
  }
  auto in_doc = parsePolicyText(R"({"presets": ["pypi"]})");
  if (!in_doc) {
    EXPECT_EQ(in_doc.error().message().find("Unknown"), std::string::npos);
  }
  EXPECT_NE(parsePolicyText("npmjs").error().message().find("npm, pypi"), std::string::npos);
}

}  // namespace
}  // namespace hutch::egress
