// The box service's levels for /metrics (docs/observability.md "Metrics"), read when they are
// asked for: boxes by state and template, the warm pool, and each running box's CPU, memory and
// disk.
#include "box/box_gauges.h"

#include <map>
#include <utility>

#include "box/snapshot_helpers.h"

namespace hutch::box {

std::vector<observe::GaugeFamily> boxGauges(BoxService& service,
                                            const std::filesystem::path& boxes_dir) {
  observe::GaugeFamily boxes{"hutch_boxes", "Boxes by state and template", false, {}};
  observe::GaugeFamily cpu{
      "hutch_box_cpu_seconds_total", "CPU time of a running box's VMM (its cgroup)", true, {}};
  observe::GaugeFamily memory{
      "hutch_box_memory_bytes", "Memory a running box's VMM uses (its cgroup)", false, {}};
  observe::GaugeFamily disk{"hutch_box_disk_bytes",
                            "Space a box's own disk layer, logs and sockets take on the host",
                            false,
                            {}};
  observe::GaugeFamily pool{
      "hutch_warm_pool_boxes", "Restored VMs waiting in the warm pool, by template", false, {}};
  std::map<std::pair<std::string, std::string>, double> counts;
  // Every state appears, at 0 when no box is in it, so that a series does not vanish.
  for (BoxState state :
       {BoxState::kCreating, BoxState::kRunning, BoxState::kStopping, BoxState::kStopped,
        BoxState::kFailed, BoxState::kPaused, BoxState::kSuspended}) {
    counts[{std::string(stateName(state)), "base"}] = 0;
  }
  if (auto all = service.list(); all) {
    for (const Box& b : *all) {
      counts[{std::string(stateName(b.state)), b.config.template_name}] += 1;
      std::map<std::string, std::string> labels{{"box", b.id}, {"name", b.name}};
      disk.samples.push_back({labels, static_cast<double>(allocatedBytes(boxes_dir / b.id))});
      if (b.state != BoxState::kRunning && b.state != BoxState::kPaused) continue;
      if (auto used = service.usage(b.id); used) {
        cpu.samples.push_back({labels, static_cast<double>(used->cpu_ns) / 1e9});
        memory.samples.push_back({labels, static_cast<double>(used->memory_bytes)});
      }
    }
  }
  for (const auto& [key, n] : counts) {
    boxes.samples.push_back({{{"state", key.first}, {"template", key.second}}, n});
  }
  for (const PoolStatus& p : service.poolStatus()) {
    pool.samples.push_back({{{"template", p.template_name},
                             {"cpus", std::to_string(p.cpus)},
                             {"memory_mib", std::to_string(p.memory_mib)}},
                            static_cast<double>(p.ready)});
  }
  return {boxes, cpu, memory, disk, pool};
}

}  // namespace hutch::box
