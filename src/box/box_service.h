// BoxService: every box operation, transport-agnostic. Runs on the daemon's event loop (one
// thread); blocking work (qemu-img, deleting directories) goes to the worker pool.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "guest/agent_client.h"
#include "storage/box_store.h"
#include "storage/templates.h"
#include "vmm/accel.h"
#include "vmm/backend.h"

namespace hutch::box {

namespace asio = boost::asio;

struct ServiceConfig {
  std::filesystem::path boxes_dir;  // <state>/boxes: one directory per box
  vmm::AccelDecision accel;
  uint64_t tsc_khz = 0;
  std::chrono::seconds boot_timeout{120};  // QEMU start -> agent handshake
  std::chrono::seconds stop_timeout{30};   // poweroff request -> QEMU gone
  std::string boot_id;                     // this host boot (/proc/sys/kernel/random/boot_id)
  std::string default_user = "hutch";      // exec's user when the request names none
};

class BoxService {
 public:
  BoxService(asio::any_io_executor loop, asio::thread_pool& pool, storage::BoxStore& store,
             const storage::TemplateStore& templates, vmm::VmBackend& backend,
             ServiceConfig config);
  ~BoxService();

  // Boots a new box and returns once its agent answers (state running), or the error that made
  // it fail (the box then stays, state failed, with the reason, for `inspect` and `logs`).
  asio::awaitable<Result<Box>> create(BoxSpec spec);
  Result<std::vector<Box>> list();
  Result<Box> get(const std::string& key);
  // Boots a stopped or failed box again from its own disk: every file is where it was left.
  asio::awaitable<Result<Box>> start(const std::string& key);
  // Clean shutdown: the agent syncs and powers off; QEMU is killed if it does not exit in time.
  asio::awaitable<Result<Box>> stop(const std::string& key);
  // Removes the box's VM (force needed if it is running), its directory and its record.
  asio::awaitable<Result<>> remove(const std::string& key, bool force);
  // The agent of a running box, to start processes in it; kFailedPrecondition if the box is not
  // running.
  Result<std::shared_ptr<guest::AgentClient>> agentFor(const std::string& key);
  Result<std::filesystem::path> consoleLog(const std::string& key);
  const std::string& defaultUser() const { return config_.default_user; }

  // After a hutchd restart: boxes recorded as running whose QEMU still runs are adopted (VM and
  // agent reattached); the others, and boxes caught mid-operation, are marked failed with why.
  asio::awaitable<Result<>> recoverAfterRestart();
  // Stops watching all VMs (they keep running) — for daemon shutdown.
  void detachAll();

 private:
  struct Runtime {
    explicit Runtime(const asio::any_io_executor& ex) : exit_signal(ex) {}
    std::unique_ptr<vmm::Vm> vm;
    std::shared_ptr<guest::AgentClient> agent;
    asio::steady_timer exit_signal;  // cancelled when the VM exits
    bool exited = false;
    bool stopping = false;
    bool removed = false;
    std::string exit_reason;
  };

  asio::awaitable<Result<Box>> bootBox(Box& box);
  asio::awaitable<Result<>> boot(Box& box, std::shared_ptr<Runtime> runtime);
  asio::awaitable<Result<std::shared_ptr<guest::AgentClient>>> connectAgent(
      const std::filesystem::path& socket, std::chrono::steady_clock::time_point deadline);
  asio::awaitable<Result<>> adopt(Box& box);
  asio::awaitable<void> watch(std::string id, std::shared_ptr<Runtime> runtime);
  asio::awaitable<bool> waitExit(Runtime& runtime, std::chrono::steady_clock::duration timeout);
  Result<> setState(Box& box, BoxState state, std::string reason = {});
  std::filesystem::path boxDir(const std::string& id) const { return config_.boxes_dir / id; }

  asio::any_io_executor loop_;
  asio::thread_pool& pool_;
  storage::BoxStore& store_;
  const storage::TemplateStore& templates_;
  vmm::VmBackend& backend_;
  ServiceConfig config_;
  std::map<std::string, std::shared_ptr<Runtime>> runtimes_;
};

}  // namespace hutch::box
