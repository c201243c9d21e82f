// The warm pool's policy without a VM: a fake Source makes and discards VMs that are only names.
#include "box/warm_pool.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "event/async_event.h"

namespace hutch::box {
namespace {

using namespace std::chrono_literals;

class FakeVm : public vmm::Vm {
 public:
  pid_t pid() const override { return 0; }
  asio::awaitable<std::string> waitExit() override { co_return "exited"; }
  bool exited() const override { return false; }
  asio::awaitable<Result<>> pause() override { co_return ok(); }
  asio::awaitable<Result<>> resume() override { co_return ok(); }
  asio::awaitable<Result<>> kill() override { co_return ok(); }
};

// Makes VMs named vm1, vm2, ...; make() waits while `held`, so a test can catch a fill mid-way.
class FakeSource : public WarmPool::Source {
 public:
  explicit FakeSource(asio::any_io_executor ex) : gate(std::move(ex)) {}

  asio::awaitable<Result<PooledVm>> make(std::string key, storage::Template tmpl,
                                         BoxConfig config) override {
    (void)key;
    (void)tmpl;
    (void)config;
    ++started;
    while (held) co_await gate.wait();
    if (failing) co_return fail(Errc::kUnavailable, "no room for another VM");
    PooledVm made;
    made.id = "vm" + std::to_string(++count);
    made.snapshot_id = "snap";
    made.vm = std::make_unique<FakeVm>();
    co_return made;
  }
  bool usable(const PooledVm& vm, const std::string& key, const BoxConfig& config) override {
    (void)key;
    (void)config;
    return !unusable.contains(vm.id);
  }
  asio::awaitable<void> discard(PooledVm vm) override {
    discarded.push_back(vm.id);
    co_return;
  }

  void release() {
    held = false;
    gate.notify();
  }

  event::AsyncEvent gate;
  bool held = false;
  bool failing = false;
  int started = 0;
  int count = 0;
  std::set<std::string> unusable;
  std::vector<std::string> discarded;
};

class WarmPoolTest : public ::testing::Test {
 protected:
  // Runs the loop until `done` holds; a guard against hangs only, nothing is timed.
  void runUntil(const std::function<bool()>& done) {
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!done() && std::chrono::steady_clock::now() < give_up) step();
    ASSERT_TRUE(done()) << "the loop never got there";
  }
  // Runs one handler (the loop stops whenever it runs out of work: start it again).
  void step() {
    if (io_.stopped()) io_.restart();
    io_.run_one_for(100ms);
  }
  void refill(WarmPool& pool, const std::string& key = "k") {
    pool.refill(key, tmpl_, config_);
    runUntil([&] { return pool.status().empty() || !pool.status().front().filling; });
  }
  PoolStatus only(const WarmPool& pool) {
    auto status = pool.status();
    EXPECT_EQ(status.size(), 1u);
    return status.empty() ? PoolStatus{} : status.front();
  }

  asio::io_context io_;
  FakeSource source_{io_.get_executor()};
  storage::Template tmpl_{.name = "base"};
  BoxConfig config_{};
};

TEST_F(WarmPoolTest, NoSizeNoPool) {
  WarmPool pool(io_.get_executor(), source_, {});
  EXPECT_FALSE(pool.enabled());
  pool.refill("k", tmpl_, config_);
  EXPECT_FALSE(pool.take("k", config_).has_value());
  EXPECT_TRUE(pool.status().empty());
  EXPECT_EQ(source_.started, 0);
}

TEST_F(WarmPoolTest, FillsToItsSizeAndRefillsWhatACreateTook) {
  WarmPool pool(io_.get_executor(), source_, {.size = 2, .max = 2});
  refill(pool);
  PoolStatus status = only(pool);
  EXPECT_EQ(status.template_name, "base");
  EXPECT_EQ(status.ready, 2u);
  EXPECT_EQ(status.size, 2u);
  EXPECT_FALSE(status.filling);

  auto taken = pool.take("k", config_);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(only(pool).ready, 1u);
  refill(pool);
  EXPECT_EQ(only(pool).ready, 2u);
  EXPECT_EQ(source_.count, 3);
  EXPECT_FALSE(pool.take("other", config_).has_value());  // another key has its own pool
}

TEST_F(WarmPoolTest, UnusableVmsAreDiscardedOnTheWayToAUsableOne) {
  WarmPool pool(io_.get_executor(), source_, {.size = 3, .max = 3});
  refill(pool);
  source_.unusable = {"vm3", "vm2"};  // take() hands out the newest first
  auto taken = pool.take("k", config_);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->id, "vm1");
  runUntil([&] { return source_.discarded.size() == 2; });
  EXPECT_EQ(source_.discarded, (std::vector<std::string>{"vm3", "vm2"}));
  EXPECT_EQ(only(pool).ready, 0u);
}

TEST_F(WarmPoolTest, AMissGrowsThePoolUpToItsMaxAndIdlenessShrinksItBack) {
  WarmPool pool(io_.get_executor(), source_, {.size = 1, .max = 3, .idle = 0s});
  pool.refill("k", tmpl_, config_);
  // Taken before the fill made anything: three misses, but the pool grows only to 3.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(pool.take("k", config_).has_value());
  EXPECT_EQ(only(pool).size, 3u);
  runUntil([&] { return !only(pool).filling; });
  EXPECT_EQ(only(pool).ready, 3u);

  pool.shrinkIdle();  // unused for `idle` (0 s): one VM back per call, down to size
  EXPECT_EQ(only(pool).size, 2u);
  pool.shrinkIdle();
  pool.shrinkIdle();
  EXPECT_EQ(only(pool).size, 1u);
  runUntil([&] { return source_.discarded.size() == 2; });
  EXPECT_EQ(only(pool).ready, 1u);
}

TEST_F(WarmPoolTest, AHitDoesNotGrowThePool) {
  WarmPool pool(io_.get_executor(), source_, {.size = 1, .max = 4});
  refill(pool);
  EXPECT_TRUE(pool.take("k", config_).has_value());
  EXPECT_EQ(only(pool).size, 1u);
}

TEST_F(WarmPoolTest, RefillsWaitWhileACreateIsUnderWay) {
  WarmPool pool(io_.get_executor(), source_, {.size = 1, .max = 1});
  {
    auto creating = pool.createUnderWay();
    pool.refill("k", tmpl_, config_);
    for (int i = 0; i < 5; ++i) step();
    EXPECT_EQ(source_.started, 0);
    EXPECT_TRUE(only(pool).filling);
  }
  runUntil([&] { return !only(pool).filling; });
  EXPECT_EQ(source_.started, 1);
  EXPECT_EQ(only(pool).ready, 1u);
}

TEST_F(WarmPoolTest, AFailedMakeEndsTheRefill) {
  WarmPool pool(io_.get_executor(), source_, {.size = 2, .max = 2});
  source_.failing = true;
  refill(pool);
  EXPECT_EQ(source_.started, 1);  // not tried again in a loop
  EXPECT_EQ(only(pool).ready, 0u);
  source_.failing = false;
  refill(pool);  // the next create's refill tries again
  EXPECT_EQ(only(pool).ready, 2u);
}

TEST_F(WarmPoolTest, ATakenVmGivenBackIsHandedOutAgain) {
  WarmPool pool(io_.get_executor(), source_, {.size = 1, .max = 1});
  refill(pool);
  auto taken = pool.take("k", config_);
  ASSERT_TRUE(taken.has_value());
  pool.giveBack("k", std::move(*taken));
  auto again = pool.take("k", config_);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->id, "vm1");
  EXPECT_TRUE(source_.discarded.empty());
}

TEST_F(WarmPoolTest, DrainWaitsForAFillUnderWayAndDiscardsEverything) {
  WarmPool pool(io_.get_executor(), source_, {.size = 2, .max = 2});
  refill(pool);
  (void)pool.take("k", config_);
  source_.held = true;
  pool.refill("k", tmpl_, config_);
  runUntil([&] { return source_.started == 3; });  // the refill's make is under way

  bool drained = false;
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        co_await pool.drain();
        drained = true;
      },
      asio::detached);
  for (int i = 0; i < 5; ++i) step();
  EXPECT_FALSE(drained);  // it waits for the make
  source_.release();
  runUntil([&] { return drained; });
  // vm1 was ready (vm2 was taken), vm3 finished its make after the drain began: both
  // discarded, none kept.
  std::set<std::string> discarded(source_.discarded.begin(), source_.discarded.end());
  EXPECT_EQ(discarded, (std::set<std::string>{"vm1", "vm3"}));
  EXPECT_EQ(only(pool).ready, 0u);

  // Nothing after a drain: no refill, and a VM given back is discarded.
  pool.refill("k", tmpl_, config_);
  EXPECT_FALSE(only(pool).filling);
  PooledVm late;
  late.id = "late";
  late.vm = std::make_unique<FakeVm>();
  pool.giveBack("k", std::move(late));
  runUntil([&] { return source_.discarded.size() == 3; });
  EXPECT_EQ(source_.discarded.back(), "late");
}

}  // namespace
}  // namespace hutch::box
