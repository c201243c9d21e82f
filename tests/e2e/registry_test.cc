// npm and pip in boxes made from the node and python templates (images/node, images/python)
// through the wall, against a stand-in registry on the test's own internet
// (standin_internet.h): registry.example.test:8081 serves an npm package and a simple index with
// one wheel, and hutchd's environment points the host's npm and pip at it (npm_config_registry,
// PIP_INDEX_URL), as any host's configuration may. A box whose policy has the npm or pypi preset
// is told of that registry (/etc/npmrc, /etc/pip.conf, written by hutchd) and installs from it;
// without the preset the install fails and nothing of the registry is written in the box.
// Needs HUTCH_TEST_NODE_IMAGE and HUTCH_TEST_PYTHON_IMAGE (scripts/test.sh builds both).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "harness.h"
#include "standin_internet.h"

namespace hutch::e2e {
namespace {

namespace fs = std::filesystem;

constexpr uint16_t kRegistryPort = 8081;
constexpr const char* kRegistry = "http://registry.example.test:8081/";

// The registry's files: an npm package document and its tarball, and a PEP 503 simple index
// with one pure-Python wheel, made with the host's tar and python3.
void makeRegistry(const fs::path& dir) {
  fs::create_directories(dir);
  std::string script = R"sh(set -e
cd "$1"
mkdir -p pkg/package hutch-hello/- simple/hutch-hello files
printf '{"name":"hutch-hello","version":"1.0.0","main":"index.js"}\n' > pkg/package/package.json
printf 'module.exports = "hello from the stand-in registry";\n' > pkg/package/index.js
tar -C pkg -czf hutch-hello/-/hutch-hello-1.0.0.tgz package
sha=$(sha1sum hutch-hello/-/hutch-hello-1.0.0.tgz | cut -d' ' -f1)
cat > hutch-hello/index.html <<EOF
{"name":"hutch-hello","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"hutch-hello",
"version":"1.0.0","main":"index.js","dist":{"shasum":"$sha",
"tarball":"$2hutch-hello/-/hutch-hello-1.0.0.tgz"}}}}
EOF
mkdir -p agent/package hutch-fake-agent/-
printf '{"name":"hutch-fake-agent","version":"1.0.0","bin":{"fake-agent":"cli.js"}}\n' \
  > agent/package/package.json
cat > agent/package/cli.js <<'EOF'
#!/usr/bin/env node
const https = require("https");
if (process.argv[2] === "--version") {
  console.log("fake-agent 1.0.0");
  process.exit(0);
}
const key = process.env.FAKE_API_KEY || "";
console.log(`key: ${key.startsWith("hutch-secret-FAKE_API_KEY-") ? "a placeholder" : "other"}`);
console.log(`cwd: ${process.cwd()}`);
const get = (host, path) => new Promise((resolve) => {
  const req = https.get({ host, path, headers: { Authorization: `Bearer ${key}` } }, (res) => {
    let body = "";
    res.on("data", (d) => (body += d));
    res.on("end", () => resolve(body.trim()));
  });
  req.on("error", (e) => resolve(`refused (${e.code})`));
});
(async () => {
  console.log(`provider: ${await get("api.example.test", "/auth")}`);
  console.log(`elsewhere: ${(await get("other.example.test", "/")).split(" (")[0]}`);
})();
EOF
tar -C agent -czf hutch-fake-agent/-/hutch-fake-agent-1.0.0.tgz package
sha=$(sha1sum hutch-fake-agent/-/hutch-fake-agent-1.0.0.tgz | cut -d' ' -f1)
cat > hutch-fake-agent/index.html <<EOF
{"name":"hutch-fake-agent","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{
"name":"hutch-fake-agent","version":"1.0.0","bin":{"fake-agent":"cli.js"},"dist":{"shasum":"$sha",
"tarball":"$2hutch-fake-agent/-/hutch-fake-agent-1.0.0.tgz"}}}}
EOF
python3 - <<'EOF'
import base64, hashlib, zipfile
files = {
    "hutch_hello.py": "GREETING = 'hello from the stand-in index'\n",
    "hutch_hello-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hutch-hello\nVersion: 1.0\n",
    "hutch_hello-1.0.dist-info/WHEEL":
        "Wheel-Version: 1.0\nGenerator: hutch-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
    record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
record.append("hutch_hello-1.0.dist-info/RECORD,,")
files["hutch_hello-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
wheel = "files/hutch_hello-1.0-py3-none-any.whl"
with zipfile.ZipFile(wheel, "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
sha = hashlib.sha256(open(wheel, "rb").read()).hexdigest()
with open("simple/hutch-hello/index.html", "w") as f:
    f.write(f'<html><body><a href="/{wheel}#sha256={sha}">{wheel[6:]}</a></body></html>\n')
EOF
)sh";
  auto made = shell("sh -c " + e2e::quoted(script) + " sh " + e2e::quoted(dir.string()) + " " +
                    e2e::quoted(kRegistry));
  ASSERT_EQ(made.exit_code, 0) << made.err;
}

class RegistryTest : public NetworkTest {
 protected:
  void SetUp() override {
    for (const char* variable : {"HUTCH_TEST_NODE_IMAGE", "HUTCH_TEST_PYTHON_IMAGE"}) {
      if (std::getenv(variable) == nullptr) {
        GTEST_SKIP() << variable << " is not set: build the node and python templates "
                     << "(scripts/build-image.sh --recipe images/node; scripts/test.sh does)";
      }
    }
    if (std::system("command -v npm >/dev/null") != 0) GTEST_SKIP() << "no npm on this host";
    // The new hutchd asks the host's npm and pip, which read these.
    ::setenv("npm_config_registry", kRegistry, 1);
    ::setenv("PIP_INDEX_URL", (std::string(kRegistry) + "simple/").c_str(), 1);
    // The host's npm trusts a CA of its own (a TLS-inspecting proxy's, say): the test internet's.
    host_ca_ = fs::temp_directory_path() / ("hutch-registry-ca-" + std::to_string(::getpid()));
    ::setenv("npm_config_cafile", host_ca_.c_str(), 1);
    NetworkTest::SetUp();
    ::unsetenv("npm_config_registry");
    ::unsetenv("PIP_INDEX_URL");
    ::unsetenv("npm_config_cafile");
    fs::copy_file(world_->caFile(), host_ca_, fs::copy_options::overwrite_existing);
    makeRegistry(world_->dir() / "registry");
    registry_ = std::make_unique<Server>(world_->inetNs(), kInetAddress, kRegistryPort, nullptr,
                                         world_->dir() / "registry");
  }
  void TearDown() override {
    registry_.reset();
    NetworkTest::TearDown();
    std::error_code ec;
    fs::remove(host_ca_, ec);
  }

  std::unique_ptr<Server> registry_;
  fs::path host_ca_;
};

TEST_F(RegistryTest, NpmInANodeBoxInstallsFromTheRegistryThePresetAllows) {
  ASSERT_EQ(
      d().hutch({"run", "--name", "n", "--template", "node", "--network-policy", "npm"}).exit_code,
      0);
  auto npmrc = inBox("n", "cat /etc/npmrc");
  ASSERT_EQ(npmrc.exit_code, 0) << npmrc.err;
  EXPECT_NE(npmrc.out.find(std::string("\nregistry=") + kRegistry + "\n"), std::string::npos)
      << npmrc.out;
  // The CA bundle the host's npm is configured with, for the box's npm too.
  EXPECT_NE(npmrc.out.find("\ncafile=/etc/hutch/registry-ca.pem\n"), std::string::npos)
      << npmrc.out;
  // (With the host pip's own bundle after it, on a host whose pip has one.)
  EXPECT_TRUE(
      inBox("n", "cat /etc/hutch/registry-ca.pem").out.starts_with(readFile(world_->caFile())))
      << "the box's registry CA bundle does not hold the host npm's cafile";
  auto installed = inBox("n",
                         "mkdir -p /tmp/app && cd /tmp/app && npm install --no-audit --no-fund "
                         "--fetch-retries=0 hutch-hello >/dev/null && "
                         "node -e 'console.log(require(\"hutch-hello\"))'");
  EXPECT_EQ(installed.exit_code, 0) << installed.out << installed.err;
  EXPECT_EQ(installed.out, "hello from the stand-in registry\n");
  bool fetched_tarball = false;
  for (const std::string& head : registry_->heads()) {
    fetched_tarball = fetched_tarball || head.starts_with("GET /hutch-hello/-/");
  }
  EXPECT_TRUE(fetched_tarball) << "the package came from the stand-in registry";

  // A box's own npmrc (no hutch mark on its first line) is never overwritten.
  ASSERT_EQ(
      inBox("n", "sudo sh -c 'echo registry=http://mine.example.test/ > /etc/npmrc'").exit_code, 0);
  ASSERT_EQ(d().hutch({"policy", "set", "n", "npm"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"stop", "--shutdown", "n"}).exit_code, 0);
  ASSERT_EQ(d().hutch({"start", "n"}).exit_code, 0);
  EXPECT_EQ(inBox("n", "cat /etc/npmrc").out, "registry=http://mine.example.test/\n");
}

TEST_F(RegistryTest, PipInAPythonBoxInstallsWithThePresetAndFailsWithoutIt) {
  ASSERT_EQ(d().hutch({"run", "--name", "py", "--template", "python", "--network-policy", "pypi"})
                .exit_code,
            0);
  auto conf = inBox("py", "cat /etc/pip.conf");
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  EXPECT_NE(conf.out.find(std::string("\nindex-url = ") + kRegistry + "simple/\n"),
            std::string::npos)
      << conf.out;
  const std::string install =
      "python3 -m venv /tmp/v && /tmp/v/bin/pip install --disable-pip-version-check --retries 0 "
      "--timeout 20 hutch-hello >/dev/null && /tmp/v/bin/python -c "
      "'import hutch_hello; print(hutch_hello.GREETING)'";
  auto installed = inBox("py", install);
  EXPECT_EQ(installed.exit_code, 0) << installed.out << installed.err;
  EXPECT_EQ(installed.out, "hello from the stand-in index\n");

  // Without the preset: the file hutch wrote goes at once, and an install fails (the wall
  // refuses the index pip falls back to) instead of reaching anything.
  ASSERT_EQ(d().hutch({"policy", "set", "py", "none"}).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return inBox("py", "test -e /etc/pip.conf").exit_code == 1; }))
      << inBox("py", "cat /etc/pip.conf").out;
  auto refused = inBox("py", "rm -rf /tmp/v && " + install);
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_EQ(refused.out, "");
}

TEST_F(RegistryTest, ABoxWithoutThePresetsGetsNoRegistryConfiguration) {
  ASSERT_EQ(d().hutch({"run", "--name", "plain", "--template", "node"}).exit_code, 0);
  EXPECT_EQ(inBox("plain", "test -e /etc/npmrc || test -e /etc/pip.conf").exit_code, 1);
  auto refused = inBox("plain",
                       "mkdir -p /tmp/app && cd /tmp/app && npm install --no-audit --no-fund "
                       "--fetch-retries=0 --registry " +
                           std::string(kRegistry) + " hutch-hello");
  EXPECT_NE(refused.exit_code, 0) << "the registry is not allowed: " << refused.out;
  for (const std::string& head : registry_->heads()) {
    ADD_FAILURE() << "the registry was reached without the preset: " << head;
  }
}

// hutch run --agent with a preset of the user's (a test agent from the stand-in registry): the
// agent is installed once into a template, starts in the shared workspace, reaches its provider
// with the real key while its environment holds a placeholder, and nothing else.
TEST_F(RegistryTest, AnAgentIsInstalledOnceAndItsKeyIsSwappedInOnTheWire) {
  fs::path agents = world_->dir() / "agents";
  fs::create_directories(agents);
  std::ofstream(agents / "fake.json") << R"({"name": "fake", "description": "a test agent",
    "install": ["npm", "install", "-g", "--no-audit", "--no-fund", "--fetch-retries=0",
                "hutch-fake-agent"],
    "command": ["fake-agent"], "version": ["fake-agent", "--version"],
    "network": {"presets": ["npm"], "allow": [{"domain": "api.example.test", "ports": [443]}]},
    "secrets": [{"name": "FAKE_API_KEY", "domain": "api.example.test",
                 "header": "Authorization", "format": "Bearer {value}"}]})";
  ::setenv("HUTCH_AGENTS_DIR", agents.c_str(), 1);
  struct Unset {
    ~Unset() { ::unsetenv("HUTCH_AGENTS_DIR"); }
  } unset;

  auto listed = d().hutch({"--json", "agent", "ls"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  bool found = false;
  for (const auto& a : nlohmann::json::parse(listed.out)) {
    if (a["name"] == "fake") {
      found = true;
      EXPECT_FALSE(a["template_built"].get<bool>());
      EXPECT_EQ(a["source"], (agents / "fake.json").string());
    }
  }
  EXPECT_TRUE(found) << listed.out;

  // Without its key on the host: refused before anything is made, saying how to set it.
  auto keyless = d().hutch({"run", "--agent", "fake"});
  EXPECT_EQ(keyless.exit_code, 65) << keyless.err;
  EXPECT_NE(keyless.err.find("hutch secret set FAKE_API_KEY --domain api.example.test"),
            std::string::npos)
      << keyless.err;
  EXPECT_EQ(nlohmann::json::parse(d().hutch({"--json", "ls"}).out), nlohmann::json::array());
  auto unknown = d().hutch({"run", "--agent", "nosuch"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("claude"), std::string::npos) << "names the presets: " << unknown.err;

  ASSERT_EQ(d().hutch({"secret", "set", "--domain", "api.example.test", "--header", "Authorization",
                       "--format", "Bearer {value}", "FAKE_API_KEY"},
                      std::string(kRealKey) + "\n", true)
                .exit_code,
            0);
  fs::path workspace = world_->dir() / "workspace";
  fs::create_directories(workspace);
  ASSERT_EQ(::chown(workspace.c_str(), 1000, 1000), 0);  // a share belongs to an ordinary user
  auto first =
      d().hutch({"run", "--agent", "fake", "--name", "a1", "--workspace", workspace.string()});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.err.find("Installing fake into template agent-fake-"), std::string::npos)
      << first.err;
  EXPECT_NE(first.out.find("fake-agent 1.0.0\n"), std::string::npos) << "its version, once";
  EXPECT_NE(first.out.find("key: a placeholder\ncwd: /workspace\nprovider: authorized\n"
                           "elsewhere: refused\n"),
            std::string::npos)
      << first.out;
  bool upstream_saw_key = false;
  for (const auto& head : world_->https().heads()) {
    upstream_saw_key = upstream_saw_key || head.find(kRealKey) != std::string::npos;
  }
  EXPECT_TRUE(upstream_saw_key);
  EXPECT_TRUE(logged(policyLog("a1"), "other.example.test", "deny"))
      << "the refusal is in the box's policy log: " << policyLog("a1").dump(1);
  EXPECT_EQ(
      inBox("a1", "printenv FAKE_API_KEY; cat /proc/*/environ 2>/dev/null").out.find(kRealKey),
      std::string::npos);

  // Nor are its disk and memory, read from the host: a box of the agent (no share, so it can be
  // suspended) makes its request, then its whole RAM and device state go to its suspend files.
  // The placeholder, put in its RAM (tmpfs) and on its disk, is found there: the search reads
  // those bytes. The real key is in none of them.
  ASSERT_EQ(d().hutch({"run", "--agent", "fake", "--name", "a3", "-d"}).exit_code, 0);
  auto asked = inBox("a3", "fake-agent");
  EXPECT_NE(asked.out.find("provider: authorized"), std::string::npos) << asked.out;
  ASSERT_EQ(inBox("a3", "printenv FAKE_API_KEY > /dev/shm/k && printenv FAKE_API_KEY > ~/k && sync")
                .exit_code,
            0);
  const std::string placeholder = inBox("a3", "printenv FAKE_API_KEY").out;
  ASSERT_NE(placeholder.find("hutch-secret-FAKE_API_KEY-"), std::string::npos) << placeholder;
  const std::string box_dir = (d().stateDir() / "boxes" / d().inspect("a3")["id"]).string();
  ASSERT_EQ(d().hutch({"stop", "a3"}).exit_code, 0);
  ASSERT_EQ(d().inspect("a3")["state"], "suspended");
  std::string suspend_dir;
  for (const auto& entry : fs::directory_iterator(d().stateDir() / "snapshots")) {
    auto manifest = nlohmann::json::parse(readFile(entry.path() / "manifest.json"), nullptr, false);
    if (manifest.is_object() && manifest["kind"] == "suspend") suspend_dir = entry.path().string();
  }
  ASSERT_FALSE(suspend_dir.empty()) << "no suspend files";
  auto holding = [&](const std::string& text, const std::string& dir) {
    return shell("grep -rlaF -- " + quoted(text) + " " + quoted(dir)).out;
  };
  const std::string shown = placeholder.substr(0, placeholder.find('\n'));
  EXPECT_NE(holding(shown, suspend_dir), "") << "the placeholder was not found in its RAM";
  EXPECT_NE(holding(shown, box_dir), "") << "the placeholder was not found on its disk";
  EXPECT_EQ(holding(kRealKey, suspend_dir), "") << "the real key is in the box's memory";
  EXPECT_EQ(holding(kRealKey, box_dir), "") << "the real key is on the box's disk";
  EXPECT_EQ(d().hutch({"rm", "-f", "a3"}).exit_code, 0);

  // The next run starts from the agent's template: nothing is installed again.
  auto second = d().hutch({"run", "--agent", "fake", "--name", "a2", "--rm", "--", "--version"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "fake-agent 1.0.0\n");
  EXPECT_EQ(second.err.find("Installing"), std::string::npos) << second.err;
  listed = d().hutch({"--json", "agent", "ls"});
  for (const auto& a : nlohmann::json::parse(listed.out)) {
    if (a["name"] == "fake") {
      EXPECT_TRUE(a["template_built"].get<bool>());
    }
  }
  EXPECT_EQ(d().hutch({"run", "--agent", "fake", "--template", "base"}).exit_code, 64);
}

}  // namespace
}  // namespace hutch::e2e
