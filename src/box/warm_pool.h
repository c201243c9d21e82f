// The warm pool (docs/snapshots.md "Warm pool"): restored, warmed-up, paused VMs kept ready per
// template snapshot and size, handed to creates and refilled in the background. The pool decides
// how many VMs each key keeps and when; a Source (the box service) makes and disposes of them.
// Runs on the daemon's event loop (one thread), like everything that owns boxes.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "box/box.h"
#include "guest/agent_client.h"
#include "storage/templates.h"
#include "vmm/backend.h"

namespace hutch::box {

namespace asio = boost::asio;

// A VM restored from a template snapshot, waiting paused for a create to make it a box.
struct PooledVm {
  std::string id;  // the box id it was made for (its directory)
  std::string snapshot_id;
  std::unique_ptr<vmm::Vm> vm;
  std::shared_ptr<guest::AgentClient> agent;  // handshaken while the VM warmed up
  int64_t uid_index = -1;                     // held by the Source until a box takes it
};

class WarmPool {
 public:
  // What makes pool VMs and disposes of them.
  class Source {
   public:
    virtual ~Source() = default;
    // A VM of `tmpl` restored from the current snapshot of `key` (a template snapshot key: build,
    // cpus, memory), warmed up and paused, its uid index held. An error ends the refill.
    virtual asio::awaitable<Result<PooledVm>> make(std::string key, storage::Template tmpl,
                                                   BoxConfig config) = 0;
    // Whether `vm` may still become a box of `config`: its snapshot is still the current one of
    // `key` and compatible with this host and size, and its VM and agent are alive.
    virtual bool usable(const PooledVm& vm, const std::string& key, const BoxConfig& config) = 0;
    // Closes the agent and kills the VM, then gives back what it held (network, uid index,
    // directory).
    virtual asio::awaitable<void> discard(PooledVm vm) = 0;
  };
  struct Limits {
    unsigned size = 0;               // VMs kept per key (hutchd --pool-size); 0: no pool
    unsigned max = 0;                // what a key's pool may grow to when creates find it empty
    std::chrono::seconds idle{600};  // unused this long, a grown pool gives one VM back
  };

  WarmPool(asio::any_io_executor loop, Source& source, Limits limits);
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  bool enabled() const { return limits_.size > 0; }
  // A usable VM for a create of `key`, if one is ready; VMs found unusable are discarded on
  // the way. Either way the pool counts the use: a miss grows it by one (up to Limits::max).
  std::optional<PooledVm> take(const std::string& key, const BoxConfig& config);
  // A VM take() gave out that the create did not use after all (it failed before booting).
  void giveBack(const std::string& key, PooledVm vm);
  // Starts filling the pool of `key` up to its size in the background, unless it is full or
  // filling already; remembers what it is of, for status().
  void refill(const std::string& key, const storage::Template& tmpl, const BoxConfig& config);
  // Pools nobody used for Limits::idle give back one VM per idle period, down to Limits::size.
  void shrinkIdle();
  // Every pool made so far, by template name, cpus and memory.
  std::vector<PoolStatus> status() const;
  // For shutdown: no more refills; waits for those under way and for discards, then disposes
  // of every VM.
  asio::awaitable<void> drain();

  // While a create is under way (one of these lives), refills wait: a refill is a restore and
  // would compete with the create for the CPU.
  class CreateUnderWay {
   public:
    explicit CreateUnderWay(WarmPool& pool) : pool_(&pool) { ++pool_->creating_; }
    ~CreateUnderWay() { --pool_->creating_; }
    CreateUnderWay(const CreateUnderWay&) = delete;
    CreateUnderWay& operator=(const CreateUnderWay&) = delete;

   private:
    WarmPool* pool_;
  };
  CreateUnderWay createUnderWay() { return CreateUnderWay(*this); }

 private:
  unsigned target(const std::string& key) const;
  void discardLater(PooledVm vm);
  asio::awaitable<void> fill(std::string key, storage::Template tmpl, BoxConfig config);
  asio::awaitable<void> discardCounted(PooledVm vm);
  asio::awaitable<void> waitForCreates();

  asio::any_io_executor loop_;
  Source& source_;
  Limits limits_;
  std::map<std::string, std::vector<PooledVm>> ready_;  // by snapshot key
  std::set<std::string> filling_;                       // keys being refilled
  std::map<std::string, PoolStatus> shapes_;            // what each key's pool is of
  // Each key's size now (between Limits::size and Limits::max), and when a create last used it.
  std::map<std::string, unsigned> targets_;
  std::map<std::string, std::chrono::steady_clock::time_point> used_;
  bool draining_ = false;
  int discarding_ = 0;  // VMs being discarded
  int creating_ = 0;    // CreateUnderWay alive
};

}  // namespace hutch::box
