#include "base/fault.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hutch::fault {

namespace {

constexpr size_t kCount = std::size(kPoints);

size_t indexOf(std::string_view name) {
  return static_cast<size_t>(std::find(std::begin(kPoints), std::end(kPoints), name) -
                             std::begin(kPoints));
}

// Which passage of each point kills (0: none), from HUTCH_FAULT_POINTS, read once.
struct Plan {
  Fault faults[kCount] = {};
  std::atomic<int> passed[kCount] = {};
  bool any = false;
};

Plan& plan() {
  static Plan* p = [] {
    auto* made = new Plan;  // never freed: a point may be passed until the process ends
    const char* env = std::getenv("HUTCH_FAULT_POINTS");
    if (env == nullptr) return made;
    for (size_t i = 0; i < kCount; ++i) {
      made->faults[i] = faultFor(env, kPoints[i]);
      made->any = made->any || made->faults[i].passage > 0;
    }
    return made;
  }();
  return *p;
}

std::atomic<pid_t> egress_pid{0};

}  // namespace

void setEgressPid(pid_t pid) {
  egress_pid.store(pid);
}

Fault faultFor(std::string_view spec, std::string_view point) {
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    Fault fault{.passage = 1};
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      std::string_view target = item.substr(colon + 1);
      if (target == "qemu") {
        fault.target = Target::kQemu;
      } else if (target == "egress") {
        fault.target = Target::kEgress;
      } else {
        return {};
      }
      item = item.substr(0, colon);
    }
    std::string_view name = item.substr(0, item.find('@'));
    if (name != point) continue;
    if (name.size() == item.size()) return fault;
    std::string_view count = item.substr(name.size() + 1);
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), fault.passage);
    if (ec != std::errc() || end != count.data() + count.size() || fault.passage < 1) return {};
    return fault;
  }
  return {};
}

void point(std::string_view name, pid_t qemu) {
  Plan& p = plan();
  if (!p.any) return;
  size_t i = indexOf(name);
  if (i == kCount || p.faults[i].passage == 0) return;
  if (p.passed[i].fetch_add(1) + 1 != p.faults[i].passage) return;
  std::string where = "hutchd: fault point " + std::string(name) + " (passage " +
                      std::to_string(p.faults[i].passage) + "): ";
  if (p.faults[i].target != Target::kHutchd) {
    const bool is_qemu = p.faults[i].target == Target::kQemu;
    const pid_t victim = is_qemu ? qemu : egress_pid.load();
    const std::string what = is_qemu ? "the box's QEMU" : "hutch-egress";
    std::string line = victim > 0 ? where + what + " (pid " + std::to_string(victim) +
                                        ") killed by HUTCH_FAULT_POINTS\n"
                                  : where + "no " + what + " to kill here\n";
    (void)::write(STDERR_FILENO, line.data(), line.size());
    if (victim > 0) ::kill(victim, SIGKILL);
    return;
  }
  std::string line = where + "killed by HUTCH_FAULT_POINTS\n";
  (void)::write(STDERR_FILENO, line.data(), line.size());
  ::kill(::getpid(), SIGKILL);
}

}  // namespace hutch::fault
