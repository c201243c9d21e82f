// Metrics: hutchd's numbers in the Prometheus text format (docs/observability.md "Metrics"),
// made with prometheus-cpp's core (Debian's prometheus-cpp-dev). Counters and histograms are
// driven by the event bus as events are published (nothing polls for them); what is a level
// rather than a count (boxes by state, the warm pool, per-box CPU, memory and disk, hutchd's own
// memory and descriptors) is gathered by collectors when /metrics is read. Event loop only.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "observe/event_bus.h"

namespace hutch::observe {

// A gauge family built at scrape time: {labels} -> value.
struct GaugeFamily {
  std::string name;
  std::string help;
  bool counter = false;  // a count kept elsewhere (e.g. a cgroup's CPU time): TYPE counter
  std::vector<std::pair<std::map<std::string, std::string>, double>> samples;
};

class Metrics {
 public:
  using Collector = std::function<std::vector<GaugeFamily>()>;

  // Subscribes to `bus` (as a listener); the bus must outlive nothing here but itself.
  explicit Metrics(EventBus& bus);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void addCollector(Collector collector) { collectors_.push_back(std::move(collector)); }
  // A connection or DNS question decided by a box's egress proxy: counted by decision, and its
  // bytes per box.
  void egress(const std::string& box_id, bool allowed, uint64_t bytes_up, uint64_t bytes_down);

  // hutch_event_loop_lag_seconds, fed by a LoopLagProbe (loop_lag.h) on hutchd's loop.
  prometheus::Histogram& loopLag() { return loop_lag_; }

  // Everything, in the text exposition format (version 0.0.4).
  std::string render() const;

 private:
  void onEvent(const Event& event);
  void operation(const std::string& op, bool ok, double seconds);

  prometheus::Registry registry_;
  prometheus::Family<prometheus::Counter>& operations_;
  prometheus::Family<prometheus::Histogram>& operation_seconds_;
  prometheus::Family<prometheus::Counter>& execs_;
  prometheus::Family<prometheus::Histogram>& exec_seconds_;
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Family<prometheus::Counter>& pool_;
  prometheus::Family<prometheus::Counter>& egress_decisions_;
  prometheus::Family<prometheus::Counter>& egress_bytes_;
  prometheus::Family<prometheus::Counter>& quota_refusals_;
  prometheus::Histogram& loop_lag_;
  std::vector<Collector> collectors_;
};

// hutchd's own process: resident memory, open descriptors, CPU time, start time (the standard
// process_* names).
std::vector<GaugeFamily> processMetrics();

}  // namespace hutch::observe
