#include "box/quotas.h"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

namespace hutch::box {

Demand& Demand::operator+=(const Demand& more) {
  boxes += more.boxes;
  cpus += more.cpus;
  memory_mib += more.memory_mib;
  disk_mib += more.disk_mib;
  return *this;
}

Demand& Demand::operator-=(const Demand& less) {
  boxes -= less.boxes;
  cpus -= less.cpus;
  memory_mib -= less.memory_mib;
  disk_mib -= less.disk_mib;
  return *this;
}

uint64_t Quotas::diskMib(const BoxConfig& config, const std::string& image_dir) {
  if (config.disk_mib != 0) return config.disk_mib;
  std::error_code ec;
  uint64_t bytes = std::filesystem::file_size(std::filesystem::path(image_dir) / "rootfs.img", ec);
  return ec ? 0 : (bytes + (1u << 20) - 1) >> 20;
}

Result<> Quotas::check(const Owner& owner, const Demand& more, std::string_view operation) {
  if (owner.id.empty() || !lookup_) return ok();
  const Quota quota = lookup_(owner.id);
  if (quota.unlimited()) return ok();
  HUTCH_TRY(std::vector<Box> boxes, store_.list(owner.id));
  Demand used;
  if (auto it = reserved_.find(owner.id); it != reserved_.end()) used = it->second;
  for (const Box& b : boxes) {
    ++used.boxes;
    used.disk_mib += diskMib(b.config, b.image_dir);
    if (b.state == BoxState::kCreating || b.state == BoxState::kRunning ||
        b.state == BoxState::kStopping || b.state == BoxState::kPaused) {
      used.cpus += b.config.cpus;
      used.memory_mib += b.config.memory_mib;
    }
  }
  struct Limit {
    const char* field;
    uint64_t max;
    uint64_t used;
    uint64_t more;
    const char* what;  // "boxes", "CPUs in running boxes", ...
    const char* remedy;
  };
  const Limit limits[] = {
      {"max_boxes", quota.max_boxes, used.boxes, more.boxes, "boxes", "remove one"},
      {"max_cpus", quota.max_cpus, used.cpus, more.cpus, "CPUs in running boxes", "stop a box"},
      {"max_memory_mib", quota.max_memory_mib, used.memory_mib, more.memory_mib,
       "MiB of memory in running boxes", "stop a box"},
      {"max_disk_mib", quota.max_disk_mib, used.disk_mib, more.disk_mib, "MiB of disk",
       "remove a box"},
  };
  for (const Limit& l : limits) {
    if (l.max == 0 || l.more == 0 || l.used + l.more <= l.max) continue;
    std::string message = fmt::format(
        "Key {} may have at most {} {} (it has {}, this needs {} more); {} or ask "
        "for a higher {}",
        owner.name, l.max, l.what, l.used, l.more, l.remedy, l.field);
    if (events_) {
      events_->publish("quota.refused", {.owner_id = owner.id},
                       {{"operation", operation},
                        {"limit", l.field},
                        {"max", l.max},
                        {"used", l.used},
                        {"more", l.more},
                        {"message", message}});
    }
    return fail(Errc::kResourceExhausted, std::move(message));
  }
  return ok();
}

Quotas::Reservation::Reservation(Quotas& quotas, std::string owner_id, const Demand& demand)
    : quotas_(quotas), owner_id_(std::move(owner_id)), demand_(demand) {
  quotas_.reserved_[owner_id_] += demand_;
}

Quotas::Reservation::~Reservation() {
  auto it = quotas_.reserved_.find(owner_id_);
  if (it == quotas_.reserved_.end()) return;
  it->second -= demand_;
  if (it->second == Demand{}) quotas_.reserved_.erase(it);
}

}  // namespace hutch::box
