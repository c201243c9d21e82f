// What hutchd sets up inside a running box for its network (BoxService, box_service.h): the CA
// of the box's egress proxy in its trust store while it has host secrets (and out of it again
// before its disk becomes a template), npm's and pip's registry files for the registries its
// policy allows; and runAsRoot, which runs those scripts through the box's agent.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cctype>

#include "box/box_service.h"
#include "box/network_service.h"
#include "egress/registries.h"

namespace hutch::box {

namespace {

// Puts $HUTCH_CA into the guest's trust store: the file update-ca-certificates keeps, and the
// bundle OpenSSL, curl, git, pip and npm read (appended once).
constexpr const char* kInstallCa = R"sh(set -e
dir=/usr/local/share/ca-certificates
mkdir -p "$dir" /etc/ssl/certs
printf '%s\n' "$HUTCH_CA" > "$dir/hutch-box-ca.crt"
bundle=/etc/ssl/certs/ca-certificates.crt
line=$(sed -n 2p "$dir/hutch-box-ca.crt")
grep -qF "$line" "$bundle" 2>/dev/null || cat "$dir/hutch-box-ca.crt" >> "$bundle"
)sh";

// Takes $HUTCH_CA out of the guest's trust store: its file (and the link update-ca-certificates
// makes of it) and every block of the bundle that holds it (found by its first base64 line,
// unique to its key), whether kInstallCa appended it or update-ca-certificates put it there.
constexpr const char* kRemoveCa = R"sh(set -e
rm -f /usr/local/share/ca-certificates/hutch-box-ca.crt /etc/ssl/certs/hutch-box-ca.pem
bundle=/etc/ssl/certs/ca-certificates.crt
[ -f "$bundle" ] || exit 0
mark=$(printf '%s\n' "$HUTCH_CA" | sed -n 2p)
grep -qxF "$mark" "$bundle" || exit 0
sed -e '/^-----BEGIN CERTIFICATE-----$/{' -e ':a' -e 'N' -e '/\n-----END CERTIFICATE-----$/!ba' \
    -e "\\,\\n$mark\\n,d" -e '}' "$bundle" > "$bundle.hutch-new"
cat "$bundle.hutch-new" > "$bundle"
rm -f "$bundle.hutch-new"
)sh";

// Writes $HUTCH_NPMRC to /etc/npmrc and $HUTCH_PIP_CONF to /etc/pip.conf (npm's global and
// pip's site-wide files), or removes a file hutch wrote when there is nothing to say. A file
// that does not start with hutch's mark is the box's own: left alone.
constexpr const char* kWriteRegistryFiles = R"sh(set -e
put() {
  if [ -e "$1" ] && ! head -n 1 "$1" | grep -qF "$HUTCH_MARK"; then return 0; fi
  if [ -z "$2" ]; then rm -f "$1"; return 0; fi
  printf '%s' "$2" > "$1.hutch-new"
  chmod 0644 "$1.hutch-new"
  mv -f "$1.hutch-new" "$1"
}
put /etc/npmrc "$HUTCH_NPMRC"
put /etc/pip.conf "$HUTCH_PIP_CONF"
# The host's registry CA bundle comes on stdin (too large for the environment).
mkdir -p "${HUTCH_CA_FILE%/*}"
if [ -n "$HUTCH_WITH_CA" ]; then
  cat > "$HUTCH_CA_FILE.hutch-new"
  chmod 0644 "$HUTCH_CA_FILE.hutch-new"
  mv -f "$HUTCH_CA_FILE.hutch-new" "$HUTCH_CA_FILE"
else
  rm -f "$HUTCH_CA_FILE"
fi
)sh";

}  // namespace

asio::awaitable<Result<>> BoxService::writeRegistryFiles(const Box& box, Runtime& runtime,
                                                         bool even_if_empty) {
  egress::BoxRegistryFiles files = NetworkService::registryFiles(box);
  if (files.npmrc.empty() && files.pip_conf.empty() && !even_if_empty) co_return ok();
  if (!runtime.agent) co_return ok();
  // An image with no shell (one static binary, a distroless image) has no npm or pip to
  // configure: nothing to write, and no sh to write it with.
  proto::FileStatRequest sh;
  sh.path = "/bin/sh";
  sh.user = "root";
  sh.follow = true;
  auto found = co_await runtime.agent->stat(sh);
  if (!found && found.error().code() == Errc::kNotFound) {
    spdlog::debug("box={} has no /bin/sh: no npm or pip configuration written", box.id);
    co_return ok();
  }
  // Named, not temporaries inside co_await: GCC 12 mishandles those.
  std::vector<std::string> argv = {"/bin/sh", "-c", kWriteRegistryFiles};
  std::vector<std::string> env = {"HUTCH_MARK=" + std::string(egress::kBoxRegistryMark),
                                  "HUTCH_NPMRC=" + files.npmrc, "HUTCH_PIP_CONF=" + files.pip_conf,
                                  "HUTCH_CA_FILE=" + std::string(egress::kBoxRegistryCa)};
  if (!files.ca_pem.empty()) env.emplace_back("HUTCH_WITH_CA=1");
  co_return co_await runAsRoot(*runtime.agent, std::move(argv), std::move(env),
                               "Cannot write the box's npm and pip registry configuration",
                               std::move(files.ca_pem));
}

asio::awaitable<Result<>> BoxService::runAsRoot(guest::AgentClient& agent,
                                                std::vector<std::string> argv,
                                                std::vector<std::string> env, std::string what,
                                                std::string stdin_data) {
  proto::ExecRequest request;
  request.argv = std::move(argv);
  request.env = std::move(env);
  request.env.emplace_back("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
  request.user = "root";
  request.pipe_stdin = !stdin_data.empty();
  auto session = co_await agent.exec(request);
  if (!session) co_return fail(session.error().withContext(what));
  if (request.pipe_stdin) {
    constexpr size_t kChunk = 64 * 1024;
    std::string_view rest(stdin_data);
    while (!rest.empty()) {
      std::string_view chunk = rest.substr(0, kChunk);
      if (!co_await (*session)->writeStdin(chunk)) break;  // the command ended: its exit says why
      rest.remove_prefix(chunk.size());
    }
    (void)(*session)->closeStdin();
  }
  std::string errors;
  for (;;) {
    auto event = co_await (*session)->next();
    if (!event) co_return fail(event.error().withContext(what));
    if (event->kind == guest::ExecEvent::Kind::kStderr && errors.size() < 4096) {
      errors += event->data;
    }
    if (event->kind != guest::ExecEvent::Kind::kExit) continue;
    if (event->exit_status.code && *event->exit_status.code == 0) co_return ok();
    while (!errors.empty() && std::isspace(static_cast<unsigned char>(errors.back()))) {
      errors.pop_back();
    }
    co_return fail(Errc::kFailedPrecondition,
                   what + ": " + (errors.empty() ? "the command failed" : errors));
  }
}

asio::awaitable<Result<>> BoxService::networkUp(const Box& box, Runtime& runtime) {
  if (!network_) co_return ok();
  if (auto attached = network_->attach(box); !attached) {
    // hutch-egress restarts by itself and then serves the box: not a reason to fail it.
    if (attached.error().code() != Errc::kUnavailable) co_return fail(attached.error());
    spdlog::warn("box={} {}", box.id, attached.error().describe());
  }
  HUTCH_CO_TRY_VOID(co_await writeRegistryFiles(box, runtime, false));
  if (box.secrets.empty()) co_return ok();
  // The box's CA in its trust store, so that TLS to its secrets' domains (which hutch-egress
  // terminates to swap the placeholder for the value) verifies.
  co_return co_await runCaScript(box.id, *runtime.agent, kInstallCa,
                                 "Cannot install the box's CA in its trust store");
}

asio::awaitable<Result<>> BoxService::runCaScript(const std::string& box_id,
                                                  guest::AgentClient& agent, const char* script,
                                                  std::string what) {
  HUTCH_CO_TRY(std::string ca, network_->caCert(box_id));
  // Without its last newline: kInstallCa adds one, and kRemoveCa then leaves the bundle as it
  // was.
  while (!ca.empty() && ca.back() == '\n') ca.pop_back();
  // Named, not temporaries inside co_await: GCC 12 mishandles those.
  std::vector<std::string> argv = {"/bin/sh", "-c", script};
  std::vector<std::string> env = {"HUTCH_CA=" + ca};
  std::string no_input;
  co_return co_await runAsRoot(agent, std::move(argv), std::move(env), std::move(what),
                               std::move(no_input));
}

asio::awaitable<Result<>> BoxService::removeCa(const std::string& key) {
  HUTCH_CO_TRY(Box box, store_.find(key));
  if (box.secrets.empty() || !network_) co_return ok();
  auto it = runtimes_.find(box.id);
  if (box.state != BoxState::kRunning || it == runtimes_.end() || !it->second->agent) {
    co_return fail(Errc::kFailedPrecondition,
                   fmt::format("Box {} is {}; its CA leaves its trust store while it runs",
                               box.name, stateName(box.state)));
  }
  std::shared_ptr<Runtime> runtime = it->second;
  co_return co_await runCaScript(box.id, *runtime->agent, kRemoveCa,
                                 "Cannot take the box's CA out of its trust store");
}

}  // namespace hutch::box
