// Shared folders (hutch run -v; docs/security.md "Shared folders"): who may ask, the VM's
// virtio-fs tags, and mounting them in the guest at every boot. The server of each is started
// with the VM by the backend (vmm/qemu, jail/share.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "box/box_service.h"
#include "jail/share.h"

namespace hutch::box {

namespace {

// Mounts each shared folder: arguments in threes, TAG BOXDIR rw|ro.
constexpr const char* kMountShares = R"sh(set -e
while [ $# -ge 3 ]; do
  if [ -e "$2" ] && [ ! -d "$2" ]; then
    echo "$2 exists in the box and is not a directory: share the folder elsewhere" >&2
    exit 1
  fi
  mkdir -p -- "$2"
  mount -t virtiofs -o "$3,nodev" -- "$1" "$2"
  shift 3
done
)sh";

}  // namespace

Result<> BoxService::checkShares(const BoxSpec& spec) {
  if (spec.shares.empty()) return ok();
  if (!spec.owner.id.empty()) {
    return fail(Errc::kPermissionDenied,
                "Only the host's administrator (hutchd's unix socket) may share host folders "
                "with a box; an API key cannot");
  }
  HUTCH_TRY_VOID(validateShares(spec.shares));
  for (const auto& share : spec.shares) HUTCH_TRY_VOID(jail::checkShareDir(share.host_dir));
  return ok();
}

std::string BoxService::shareTag(size_t i) {
  return "hutch-share" + std::to_string(i);
}

asio::awaitable<Result<>> BoxService::mountShares(const Box& box,
                                                  std::shared_ptr<Runtime> runtime) {
  if (box.shares.empty()) co_return ok();
  std::vector<std::string> argv = {"/bin/sh", "-c", kMountShares, "sh"};
  for (size_t i = 0; i < box.shares.size(); ++i) {
    argv.push_back(shareTag(i));
    argv.push_back(box.shares[i].box_dir);
    argv.push_back(box.shares[i].read_only ? "ro" : "rw");
  }
  std::string what = fmt::format("Cannot mount the shared folders of box {}", box.name);
  auto timer = std::make_shared<asio::steady_timer>(loop_, config_.boot_timeout);
  auto watchdog = [](std::shared_ptr<asio::steady_timer> timer, std::shared_ptr<Runtime> runtime,
                     std::string id) -> asio::awaitable<void> {
    boost::system::error_code ec;
    co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || runtime->exited || !runtime->vm) co_return;
    spdlog::warn("box={} its shared folders did not mount in time: stopping its VM", id);
    (void)co_await runtime->vm->kill();
  };
  asio::co_spawn(loop_, watchdog(timer, runtime, box.id), asio::detached);
  // Named, not temporaries inside co_await: GCC 12 mishandles those.
  std::vector<std::string> env;
  std::string no_input;
  auto mounted = co_await runAsRoot(*runtime->agent, std::move(argv), std::move(env),
                                    std::move(what), std::move(no_input));
  timer->cancel();
  co_return mounted;
}

}  // namespace hutch::box
