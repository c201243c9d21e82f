#include "observe/metrics.h"

#include <dirent.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "observe/loop_lag.h"

namespace hutch::observe {

using json = nlohmann::json;

namespace {

const prometheus::Histogram::BucketBoundaries kOperationBuckets{
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
const prometheus::Histogram::BucketBoundaries kExecBuckets{
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800};

// The operation an event reports the success of ("" for none).
std::string operationOf(const Event& event, const json& data) {
  if (event.type == "box.created") return data.value("from", "") == "fork" ? "" : "create";
  if (event.type == "box.started") return "start";
  if (event.type == "box.stopped") return data.value("by", "") == "guest" ? "" : "stop";
  if (event.type == "box.suspended") return "suspend";
  if (event.type == "box.resumed") return "resume";
  if (event.type == "box.forked") return "fork";
  if (event.type == "box.checkpointed") return "checkpoint";
  if (event.type == "box.rolled_back") return "rollback";
  if (event.type == "box.diffed") return "diff";
  if (event.type == "box.removed") return "remove";
  return "";
}

prometheus::MetricFamily toFamily(const GaugeFamily& g) {
  prometheus::MetricFamily f;
  f.name = g.name;
  f.help = g.help;
  f.type = g.counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge;
  for (const auto& [labels, value] : g.samples) {
    prometheus::ClientMetric m;
    for (const auto& [k, v] : labels) m.label.push_back({k, v});
    if (g.counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace

Metrics::Metrics(EventBus& bus)
    : operations_(prometheus::BuildCounter()
                      .Name("hutch_box_operations_total")
                      .Help("Box operations done, by operation and result (ok or error)")
                      .Register(registry_)),
      operation_seconds_(prometheus::BuildHistogram()
                             .Name("hutch_box_operation_duration_seconds")
                             .Help("How long successful box operations took, by operation")
                             .Register(registry_)),
      execs_(prometheus::BuildCounter()
                 .Name("hutch_execs_total")
                 .Help("Commands that ended in boxes, by result (ok: exit 0, failed: another exit "
                       "code, signal, error: no exit status, timeout: killed for running too "
                       "long)")
                 .Register(registry_)),
      exec_seconds_(prometheus::BuildHistogram()
                        .Name("hutch_exec_duration_seconds")
                        .Help("How long commands in boxes ran")
                        .Register(registry_)),
      events_(prometheus::BuildCounter()
                  .Name("hutch_events_total")
                  .Help("Events published, by type (docs/observability.md)")
                  .Register(registry_)),
      pool_(prometheus::BuildCounter()
                .Name("hutch_warm_pool_creates_total")
                .Help("Creates by where their VM came from: hit (the warm pool), miss (the pool "
                      "was empty), off (no pool for that template and size)")
                .Register(registry_)),
      egress_decisions_(prometheus::BuildCounter()
                            .Name("hutch_egress_decisions_total")
                            .Help("Connections and DNS questions from boxes, by decision")
                            .Register(registry_)),
      egress_bytes_(prometheus::BuildCounter()
                        .Name("hutch_box_egress_bytes_total")
                        .Help("Bytes through a box's egress proxy, by direction (up: from the "
                              "box)")
                        .Register(registry_)),
      quota_refusals_(prometheus::BuildCounter()
                          .Name("hutch_quota_refusals_total")
                          .Help("Operations refused because an owner's quota would be passed")
                          .Register(registry_)),
      loop_lag_(prometheus::BuildHistogram()
                    .Name("hutch_event_loop_lag_seconds")
                    .Help("How late hutchd's event loop ran a timer that was due (sampled every "
                          "100 ms): time the loop spent blocked instead of serving")
                    .Register(registry_)
                    .Add({}, kLoopLagBuckets)) {
  bus.addListener([this](const Event& event) { onEvent(event); });
}

void Metrics::operation(const std::string& op, bool ok, double seconds) {
  operations_.Add({{"operation", op}, {"result", ok ? "ok" : "error"}}).Increment();
  if (ok && seconds >= 0) {
    operation_seconds_.Add({{"operation", op}}, kOperationBuckets).Observe(seconds);
  }
}

void Metrics::onEvent(const Event& event) {
  events_.Add({{"type", event.type}}).Increment();
  json data = json::parse(event.data, nullptr, false);
  if (!data.is_object()) data = json::object();
  const double seconds = data.value("duration_ms", -1.0) / 1000.0;
  if (std::string op = operationOf(event, data); !op.empty()) {
    operation(op, true, data.contains("duration_ms") ? seconds : -1);
  }
  if (event.type == "operation.failed" || event.type == "box.failed") {
    if (std::string op = data.value("operation", ""); !op.empty()) operation(op, false, -1);
  }
  if (event.type == "box.created" && data.contains("pool")) {
    pool_.Add({{"result", data.value("pool", "off")}}).Increment();
  }
  if (event.type == "exec.ended") {
    std::string result = "error";
    if (data.value("timed_out", false)) {
      result = "timeout";
    } else if (data.contains("exit_code") && data["exit_code"].is_number()) {
      result = data["exit_code"].get<int>() == 0 ? "ok" : "failed";
    } else if (data.contains("signal") && data["signal"].is_number()) {
      result = "signal";
    }
    execs_.Add({{"result", result}}).Increment();
    if (data.contains("duration_ms")) exec_seconds_.Add({}, kExecBuckets).Observe(seconds);
  }
  if (event.type == "quota.refused") {
    quota_refusals_.Add({{"limit", data.value("limit", "unknown")}}).Increment();
  }
}

void Metrics::egress(const std::string& box_id, bool allowed, uint64_t bytes_up,
                     uint64_t bytes_down) {
  egress_decisions_.Add({{"decision", allowed ? "allow" : "deny"}}).Increment();
  if (bytes_up) egress_bytes_.Add({{"box", box_id}, {"direction", "up"}}).Increment(bytes_up);
  if (bytes_down) {
    egress_bytes_.Add({{"box", box_id}, {"direction", "down"}}).Increment(bytes_down);
  }
}

std::string Metrics::render() const {
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (const Collector& collect : collectors_) {
    for (const GaugeFamily& g : collect()) families.push_back(toFamily(g));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

std::vector<GaugeFamily> processMetrics() {
  std::vector<GaugeFamily> out;
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream statm("/proc/self/statm");
  double size = 0;
  double resident = 0;
  if (statm >> size >> resident) {
    out.push_back({"process_resident_memory_bytes",
                   "Resident memory of hutchd",
                   false,
                   {{{}, resident * page}}});
    out.push_back(
        {"process_virtual_memory_bytes", "Virtual memory of hutchd", false, {{{}, size * page}}});
  }
  double fds = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ++fds;
    }
    ::closedir(d);
    --fds;  // the one opendir holds
  }
  out.push_back({"process_open_fds", "Open file descriptors of hutchd", false, {{{}, fds}}});
  std::ifstream limits("/proc/self/limits");
  std::string line;
  while (std::getline(limits, line)) {
    if (line.starts_with("Max open files")) {
      std::istringstream fields(line.substr(14));
      double soft = 0;
      if (fields >> soft) {
        out.push_back({"process_max_fds", "Descriptor limit of hutchd", false, {{{}, soft}}});
      }
    }
  }
  // /proc/self/stat: utime and stime are fields 14 and 15, starttime 22 (after the comm).
  std::ifstream stat("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  if (size_t close = all.rfind(')'); close != std::string::npos) {
    std::istringstream fields(all.substr(close + 2));
    std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                               std::istream_iterator<std::string>());
    if (f.size() > 19) {
      double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      out.push_back({"process_cpu_seconds_total", "CPU time hutchd used", true, {{{}, cpu}}});
      std::ifstream uptime_file("/proc/uptime");
      double uptime = 0;
      if (uptime_file >> uptime) {
        double boot = static_cast<double>(::time(nullptr)) - uptime;
        out.push_back({"process_start_time_seconds",
                       "When hutchd started (unix seconds)",
                       false,
                       {{{}, boot + std::stod(f[19]) / ticks}}});
      }
    }
  }
  return out;
}

}  // namespace hutch::observe
