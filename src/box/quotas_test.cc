// Owners' quotas over a real (in-memory) box store and event bus.
#include "box/quotas.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <optional>

#include "storage/event_store.h"

namespace hutch::box {
namespace {

class QuotasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened) << opened.error().message();
    store_.emplace(std::move(*opened));
    event_store_.emplace(store_->database(), 1000);
    bus_.emplace(io_.get_executor(), *event_store_);
    bus_->addListener([this](const observe::Event& e) { events_.push_back(e); });
    quotas_.emplace(*store_);
    quotas_->setEvents(&*bus_);
  }

  void addBox(const std::string& name, const Owner& owner, BoxState state, unsigned cpus = 1,
              uint64_t memory_mib = 512, uint64_t disk_mib = 1024) {
    Box box;
    box.id = randomId();
    box.name = name;
    box.owner = owner;
    box.state = state;
    box.config.cpus = cpus;
    box.config.memory_mib = memory_mib;
    box.config.disk_mib = disk_mib;
    ASSERT_TRUE(store_->insert(box));
  }

  void limit(const Quota& quota) {
    quotas_->setLookup(
        [quota](const std::string& owner_id) { return owner_id == "k1" ? quota : Quota{}; });
  }

  boost::asio::io_context io_;
  std::optional<storage::BoxStore> store_;
  std::optional<storage::EventStore> event_store_;
  std::optional<observe::EventBus> bus_;
  std::optional<Quotas> quotas_;
  std::vector<observe::Event> events_;
  const Owner alice_{.id = "k1", .name = "alice"};
  const Owner bob_{.id = "k2", .name = "bob"};
};

TEST_F(QuotasTest, NothingIsLimitedWithoutALookupOrALimit) {
  addBox("a", alice_, BoxState::kRunning, 64);
  EXPECT_TRUE(quotas_->check(alice_, {.boxes = 100, .cpus = 100}, "create"));
  limit({});
  EXPECT_TRUE(quotas_->check(alice_, {.boxes = 100, .cpus = 100}, "create"));
  // A box with no owner (made over the unix socket by the host's administrator) neither.
  limit({.max_boxes = 1});
  EXPECT_TRUE(quotas_->check({}, {.boxes = 5}, "create"));
}

TEST_F(QuotasTest, TheFirstLimitPassedIsNamedWithWhatToDoAndReported) {
  limit({.max_boxes = 2});
  addBox("a", alice_, BoxState::kRunning);
  EXPECT_TRUE(quotas_->check(alice_, {.boxes = 1}, "create"));
  addBox("b", alice_, BoxState::kStopped);
  addBox("c", bob_, BoxState::kRunning);  // another owner's box is not alice's
  auto refused = quotas_->check(alice_, {.boxes = 1, .cpus = 1}, "create");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), Errc::kResourceExhausted);
  EXPECT_EQ(refused.error().message(),
            "Key alice may have at most 2 boxes (it has 2, this needs 1 more); remove one or ask "
            "for a higher max_boxes");
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].type, "quota.refused");
  EXPECT_EQ(events_[0].owner_id, "k1");
  const auto data = nlohmann::json::parse(events_[0].data);
  EXPECT_EQ(data["operation"], "create");
  EXPECT_EQ(data["limit"], "max_boxes");
  EXPECT_EQ(data["used"], 2);
  EXPECT_EQ(data["more"], 1);
  // What the operation does not add is not checked: a start adds no box.
  EXPECT_TRUE(quotas_->check(alice_, {.cpus = 1, .memory_mib = 512}, "start"));
}

TEST_F(QuotasTest, CpusAndMemoryCountOnlyBoxesThatRun) {
  limit({.max_cpus = 4, .max_memory_mib = 4096});
  addBox("running", alice_, BoxState::kRunning, 2, 1024);
  addBox("paused", alice_, BoxState::kPaused, 1, 1024);
  addBox("stopped", alice_, BoxState::kStopped, 8, 8192);
  addBox("suspended", alice_, BoxState::kSuspended, 8, 8192);
  addBox("failed", alice_, BoxState::kFailed, 8, 8192);
  EXPECT_TRUE(quotas_->check(alice_, {.cpus = 1, .memory_mib = 1024}, "start"));
  auto cpus = quotas_->check(alice_, {.cpus = 2, .memory_mib = 1024}, "start");
  ASSERT_FALSE(cpus);
  EXPECT_NE(cpus.error().message().find("at most 4 CPUs in running boxes (it has 3, this needs 2 "
                                        "more); stop a box"),
            std::string::npos)
      << cpus.error().message();
  auto memory = quotas_->check(alice_, {.cpus = 1, .memory_mib = 2100}, "rollback");
  ASSERT_FALSE(memory);
  EXPECT_NE(memory.error().message().find("max_memory_mib"), std::string::npos);
}

TEST_F(QuotasTest, DiskCountsEveryBoxWhateverItsState) {
  limit({.max_disk_mib = 3000});
  addBox("a", alice_, BoxState::kStopped, 1, 512, 1000);
  addBox("b", alice_, BoxState::kFailed, 1, 512, 1000);
  EXPECT_TRUE(quotas_->check(alice_, {.boxes = 1, .disk_mib = 1000}, "create"));
  auto refused = quotas_->check(alice_, {.boxes = 1, .disk_mib = 1001}, "create");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("MiB of disk (it has 2000, this needs 1001 more); "
                                           "remove a box"),
            std::string::npos)
      << refused.error().message();
}

TEST_F(QuotasTest, AReservationCountsUntilItEnds) {
  limit({.max_boxes = 3});
  addBox("a", alice_, BoxState::kRunning);
  {
    Quotas::Reservation fork(*quotas_, alice_.id, {.boxes = 2});
    EXPECT_FALSE(quotas_->check(alice_, {.boxes = 1}, "fork"));
    EXPECT_TRUE(quotas_->check(bob_, {.boxes = 1}, "fork"));  // alice's, not bob's
    { Quotas::Reservation nothing(*quotas_, alice_.id, {}); }
    EXPECT_FALSE(quotas_->check(alice_, {.boxes = 1}, "fork"));  // still held
  }
  EXPECT_TRUE(quotas_->check(alice_, {.boxes = 2}, "fork"));
}

TEST(QuotasDiskTest, ABoxWithoutItsOwnSizeCountsItsTemplateImage) {
  EXPECT_EQ(Quotas::diskMib({.disk_mib = 77}, "/nonexistent"), 77u);
  EXPECT_EQ(Quotas::diskMib({}, "/nonexistent"), 0u);
  auto dir = std::filesystem::temp_directory_path() / ("quotas-" + randomId());
  std::filesystem::create_directories(dir);
  {
    std::ofstream image(dir / "rootfs.img", std::ios::binary);
    image.seekp((3 << 20) + 1);  // 3 MiB and a byte: counted as 4
    image.put('\0');
  }
  EXPECT_EQ(Quotas::diskMib({}, dir.string()), 4u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hutch::box
