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
  int fail_at[kCount] = {};
  std::atomic<int> passed[kCount] = {};
  bool any = false;
};

Plan& plan() {
  static Plan* p = [] {
    auto* made = new Plan;  // never freed: a point may be passed until the process ends
    const char* env = std::getenv("HUTCH_FAULT_POINTS");
    if (env == nullptr) return made;
    for (size_t i = 0; i < kCount; ++i) {
      made->fail_at[i] = passageToFail(env, kPoints[i]);
      made->any = made->any || made->fail_at[i] > 0;
    }
    return made;
  }();
  return *p;
}

}  // namespace

int passageToFail(std::string_view spec, std::string_view point) {
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    std::string_view name = item.substr(0, item.find('@'));
    if (name != point) continue;
    if (name.size() == item.size()) return 1;
    std::string_view count = item.substr(name.size() + 1);
    int n = 0;
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
    if (ec != std::errc() || end != count.data() + count.size() || n < 1) return 0;
    return n;
  }
  return 0;
}

void point(std::string_view name) {
  Plan& p = plan();
  if (!p.any) return;
  size_t i = indexOf(name);
  if (i == kCount || p.fail_at[i] == 0) return;
  if (p.passed[i].fetch_add(1) + 1 != p.fail_at[i]) return;
  std::string line = "hutchd: fault point " + std::string(name) + " (passage " +
                     std::to_string(p.fail_at[i]) + "): killed by HUTCH_FAULT_POINTS\n";
  (void)::write(STDERR_FILENO, line.data(), line.size());
  ::kill(::getpid(), SIGKILL);
}

}  // namespace hutch::fault
