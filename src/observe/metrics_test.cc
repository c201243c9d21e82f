#include "observe/metrics.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "storage/box_store.h"

namespace hutch::observe {
namespace {

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = storage::BoxStore::open(":memory:");
    ASSERT_TRUE(opened);
    boxes_ = std::make_unique<storage::BoxStore>(std::move(*opened));
    store_ = std::make_unique<storage::EventStore>(boxes_->database(), 1000);
    bus_ = std::make_unique<EventBus>(io_.get_executor(), *store_);
    metrics_ = std::make_unique<Metrics>(*bus_);
  }
  bool has(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  }

  boost::asio::io_context io_;
  std::unique_ptr<storage::BoxStore> boxes_;
  std::unique_ptr<storage::EventStore> store_;
  std::unique_ptr<EventBus> bus_;
  std::unique_ptr<Metrics> metrics_;
};

TEST_F(MetricsTest, OperationsAndExecsAreCountedFromEvents) {
  bus_->publish("box.created", {"b1", "one", ""}, {{"duration_ms", 40}, {"pool", "hit"}});
  bus_->publish("box.created", {"b2", "two", ""}, {{"duration_ms", 300}, {"pool", "miss"}});
  bus_->publish("box.created", {"b3", "three", ""}, {{"from", "fork"}});
  bus_->publish("operation.failed", {"b1", "one", ""}, {{"operation", "checkpoint"}});
  bus_->publish("exec.ended", {"b1", "one", ""}, {{"exit_code", 0}, {"duration_ms", 20}});
  bus_->publish("exec.ended", {"b1", "one", ""}, {{"exit_code", 2}, {"duration_ms", 20}});
  bus_->publish("exec.ended", {"b1", "one", ""}, {{"timed_out", true}, {"signal", 9}});
  bus_->publish("quota.refused", {"", "", "k1"}, {{"limit", "max_boxes"}});
  std::string text = metrics_->render();
  EXPECT_TRUE(has(text, R"(hutch_box_operations_total{operation="create",result="ok"} 2)")) << text;
  EXPECT_TRUE(has(text, R"(hutch_box_operations_total{operation="checkpoint",result="error"} 1)"))
      << text;
  EXPECT_TRUE(has(text, R"(hutch_box_operation_duration_seconds_count{operation="create"} 2)"));
  EXPECT_TRUE(
      has(text, R"(hutch_box_operation_duration_seconds_bucket{operation="create",le="0.05"} 1)"))
      << text;
  EXPECT_TRUE(has(text, R"(hutch_warm_pool_creates_total{result="hit"} 1)"));
  EXPECT_TRUE(has(text, R"(hutch_warm_pool_creates_total{result="miss"} 1)"));
  EXPECT_TRUE(has(text, R"(hutch_execs_total{result="ok"} 1)"));
  EXPECT_TRUE(has(text, R"(hutch_execs_total{result="failed"} 1)"));
  EXPECT_TRUE(has(text, R"(hutch_execs_total{result="timeout"} 1)"));
  EXPECT_TRUE(has(text, R"(hutch_exec_duration_seconds_count 2)")) << text;
  EXPECT_TRUE(has(text, R"(hutch_quota_refusals_total{limit="max_boxes"} 1)"));
  EXPECT_TRUE(has(text, R"(hutch_events_total{type="box.created"} 3)"));
}

TEST_F(MetricsTest, CollectorsAndEgressAreRendered) {
  metrics_->addCollector([] {
    return std::vector<GaugeFamily>{
        {"hutch_boxes",
         "Boxes by state and template",
         false,
         {{{{"state", "running"}, {"template", "base"}}, 3}}},
        {"hutch_box_cpu_seconds_total", "CPU", true, {{{{"box", "b1"}}, 1.5}}}};
  });
  metrics_->egress("b1", true, 100, 2000);
  metrics_->egress("b1", false, 0, 0);
  std::string text = metrics_->render();
  EXPECT_TRUE(has(text, R"(hutch_boxes{state="running",template="base"} 3)")) << text;
  EXPECT_TRUE(has(text, "# TYPE hutch_box_cpu_seconds_total counter"));
  EXPECT_TRUE(has(text, R"(hutch_box_egress_bytes_total{box="b1",direction="down"} 2000)"));
  EXPECT_TRUE(has(text, R"(hutch_egress_decisions_total{decision="deny"} 1)"));
}

TEST_F(MetricsTest, TheEventLoopLagIsAHistogramFromTheStart) {
  std::string text = metrics_->render();
  EXPECT_TRUE(has(text, "# TYPE hutch_event_loop_lag_seconds histogram")) << text;
  EXPECT_TRUE(has(text, R"(hutch_event_loop_lag_seconds_bucket{le="0.001"} 0)")) << text;
  EXPECT_TRUE(has(text, R"(hutch_event_loop_lag_seconds_bucket{le="5"} 0)")) << text;
  metrics_->loopLag().Observe(0.3);
  text = metrics_->render();
  EXPECT_TRUE(has(text, R"(hutch_event_loop_lag_seconds_bucket{le="0.25"} 0)")) << text;
  EXPECT_TRUE(has(text, R"(hutch_event_loop_lag_seconds_bucket{le="0.5"} 1)")) << text;
  EXPECT_TRUE(has(text, R"(hutch_event_loop_lag_seconds_count 1)")) << text;
}

TEST(ProcessMetricsTest, DescribesThisProcess) {
  auto families = processMetrics();
  std::map<std::string, double> value;
  for (const auto& f : families) value[f.name] = f.samples.at(0).second;
  EXPECT_GT(value["process_resident_memory_bytes"], 1 << 20);
  EXPECT_GE(value["process_open_fds"], 3);  // stdin, stdout, stderr at least
  EXPECT_GT(value["process_max_fds"], 0);
  EXPECT_GE(value["process_cpu_seconds_total"], 0);
  EXPECT_GT(value["process_start_time_seconds"], 1.7e9);
}

}  // namespace
}  // namespace hutch::observe
