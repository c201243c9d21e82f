// What a box may use and for how long: its network policy, its lifetime (run --timeout), what
// it uses now, and the guest kernel's OOM kills read from its console. Quotas are quotas.h.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <charconv>
#include <fstream>
#include <limits>

#include "box/box_service.h"
#include "box/network_service.h"

namespace hutch::box {

Result<vmm::ResourceUsage> BoxService::usage(const std::string& key) {
  HUTCH_TRY(Box box, store_.find(key));
  auto it = runtimes_.find(box.id);
  if ((box.state != BoxState::kRunning && box.state != BoxState::kPaused) ||
      it == runtimes_.end() || !it->second->vm) {
    return fail(Errc::kFailedPrecondition,
                fmt::format("Box {} is {}; only a running box uses resources", box.name,
                            stateName(box.state)));
  }
  return it->second->vm->usage();
}

Result<std::filesystem::path> BoxService::consoleLog(const std::string& key) {
  HUTCH_TRY(Box box, store_.find(key));
  return boxDir(box.id) / "console.log";
}

Result<Box> BoxService::setPolicy(const std::string& key, const std::string& text,
                                  const observe::Actor& actor) {
  HUTCH_TRY(Box box, store_.find(key));
  if (!network_) {
    return fail(Errc::kUnsupported,
                "This hutchd runs without networking (--no-network): there is no policy to set");
  }
  if (text.empty()) {
    return fail(Errc::kInvalidArgument,
                "Give a policy: a preset (none, allow-all, debian-mirrors) or a JSON document");
  }
  HUTCH_TRY(box.network_policy, network_->policyFor(text, box.image_dir));
  HUTCH_TRY_VOID(store_.update(box));
  HUTCH_TRY_VOID(network_->updatePolicy(box));
  spdlog::info("box={} network policy changed", box.id);
  // The box's npm and pip follow: told of the registries the new policy allows (or no longer).
  if (auto it = runtimes_.find(box.id); it != runtimes_.end() && it->second->agent) {
    asio::co_spawn(
        loop_,
        [](BoxService* self, Box b, std::shared_ptr<Runtime> runtime) -> asio::awaitable<void> {
          if (auto written = co_await self->writeRegistryFiles(b, *runtime, true); !written) {
            spdlog::warn("box={} {}", b.id, written.error().describe());
          }
        }(this, box, it->second),
        asio::detached);
  }
  nlohmann::json policy = nlohmann::json::parse(box.network_policy, nullptr, false);
  publish("policy.changed", box, {{"policy", policy}});
  activity_.record("policy.set", actor, observe::subjectOf(box), {{"policy", std::move(policy)}});
  return box;
}

Result<Box> BoxService::setLifetime(const std::string& key, int64_t expires_at, Expiry on_expiry) {
  HUTCH_TRY(Box box, store_.find(key));
  box.expires_at = expires_at;
  box.on_expiry = expires_at != 0 ? on_expiry : Expiry::kNone;
  HUTCH_TRY_VOID(store_.update(box));
  next_expiry_ = 0;  // expireDue looks again
  return box;
}

asio::awaitable<void> BoxService::expireDue() {
  const int64_t now = unixNow();
  // The next lifetime to end is kept, so that most seconds read nothing from SQLite.
  if (next_expiry_ > now) co_return;
  auto boxes = store_.list();
  if (!boxes) co_return;
  next_expiry_ = std::numeric_limits<int64_t>::max();
  for (const Box& b : *boxes) {
    if (b.expires_at == 0 || b.on_expiry == Expiry::kNone) continue;
    if (b.expires_at > now) {
      next_expiry_ = std::min(next_expiry_, b.expires_at);
      continue;
    }
    if (b.state == BoxState::kCreating || b.state == BoxState::kStopping) {
      next_expiry_ = now + 1;  // look again once the operation is over
      continue;
    }
    const bool live = b.state == BoxState::kRunning || b.state == BoxState::kPaused;
    if (b.on_expiry != Expiry::kRemove && !live) continue;
    spdlog::info("box={} its lifetime ended {} s ago: {} it", b.id, now - b.expires_at,
                 expiryName(b.on_expiry));
    publish("box.expired", b, {{"action", expiryName(b.on_expiry)}});
    if (b.on_expiry == Expiry::kStop || b.on_expiry == Expiry::kSuspend) {
      // Once: a later start gives it a new lifetime or none.
      (void)setLifetime(b.id, 0, Expiry::kNone);
      // No co_await inside a conditional expression: GCC 12 mangles the temporaries.
      Result<Box> done = fail(Errc::kInternal, "not done");
      if (b.on_expiry == Expiry::kStop) {
        done = co_await stop(b.id);
      } else {
        done = co_await suspend(b.id, "expiry");
      }
      if (!done) {
        spdlog::warn("box={} could not be {}: {}", b.id,
                     b.on_expiry == Expiry::kStop ? "stopped" : "suspended",
                     done.error().describe());
      }
    } else {
      auto removed = co_await remove(b.id, true);
      if (!removed)
        spdlog::warn("box={} could not be removed: {}", b.id, removed.error().describe());
    }
  }
}

void BoxService::scanConsoles() {
  if (!activity_.events) return;
  // The guest kernel's words, e.g. "Out of memory: Killed process 812 (python3) total-vm:...".
  // A box's console is the box's own claim about itself: read at most kConsoleScan bytes a
  // second, so a guest that floods its console costs hutchd little.
  constexpr uint64_t kConsoleScan = 64 << 10;
  static const std::string kMarker = "Out of memory: Killed process ";
  for (auto& [id, runtime] : runtimes_) {
    std::error_code ec;
    const std::filesystem::path log = boxDir(id) / "console.log";
    const uint64_t size = std::filesystem::file_size(log, ec);
    if (ec) continue;
    if (size < runtime->console_offset) runtime->console_offset = 0;  // a new console.log
    if (size == runtime->console_offset) continue;
    if (size - runtime->console_offset > kConsoleScan)
      runtime->console_offset = size - kConsoleScan;
    std::ifstream in(log, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(runtime->console_offset));
    std::string text(size - runtime->console_offset, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    // Only whole lines: a line still being written is read again next time.
    size_t end = text.rfind('\n');
    if (end == std::string::npos) continue;
    runtime->console_offset += end + 1;
    auto box = store_.find(id);
    if (!box) continue;
    for (size_t at = text.find(kMarker); at != std::string::npos && at < end;
         at = text.find(kMarker, at + 1)) {
      std::string_view rest = std::string_view(text).substr(at + kMarker.size());
      rest = rest.substr(0, rest.find('\n'));
      int64_t pid = 0;
      auto [p, err] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
      std::string process;
      if (size_t open = rest.find('('), close = rest.find(')');
          open != std::string_view::npos && close != std::string_view::npos && close > open) {
        process = std::string(rest.substr(open + 1, std::min<size_t>(close - open - 1, 64)));
      }
      if (err != std::errc()) continue;
      spdlog::warn("box={} the guest kernel killed process {} ({}) for memory", id, pid, process);
      publish("box.oom_kill", *box, {{"pid", pid}, {"process", process}});
    }
  }
}

}  // namespace hutch::box
