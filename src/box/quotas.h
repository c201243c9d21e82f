// Owners' quotas (docs/api.md "Owners"): what an operation would add to an owner's use, checked
// against the limits of the key that owns the boxes, counting what concurrent operations of the
// same owner have reserved but not yet recorded.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"
#include "box/box.h"
#include "observe/event_bus.h"
#include "storage/box_store.h"

namespace hutch::box {

// What an operation adds to an owner's use.
struct Demand {
  uint64_t boxes = 0;
  uint64_t cpus = 0;        // of boxes that will run
  uint64_t memory_mib = 0;  // of boxes that will run
  uint64_t disk_mib = 0;
  Demand& operator+=(const Demand& more);
  Demand& operator-=(const Demand& less);
  bool operator==(const Demand&) const = default;
};

class Quotas {
 public:
  // The limits of an owner; without a lookup nothing is limited.
  using Lookup = std::function<Quota(const std::string& owner_id)>;

  // `store` must outlive the quotas: an owner's use is counted from its boxes' records.
  explicit Quotas(storage::BoxStore& store) : store_(store) {}
  Quotas(const Quotas&) = delete;
  Quotas& operator=(const Quotas&) = delete;

  void setLookup(Lookup lookup) { lookup_ = std::move(lookup); }
  // Where a refusal is reported ("quota.refused"); may be null.
  void setEvents(observe::EventBus* events) { events_ = events; }

  // kResourceExhausted naming the first limit `more` would pass, what the owner has, and what
  // to do; `operation` ("create", "fork", "start", "rollback") goes into the event.
  Result<> check(const Owner& owner, const Demand& more, std::string_view operation);

  // Counts `demand` against `owner_id` while it lives: an operation whose boxes are not
  // recorded yet (a fork's children), so that two operations of one owner at once cannot pass
  // its limits together.
  class Reservation {
   public:
    Reservation(Quotas& quotas, std::string owner_id, const Demand& demand);
    ~Reservation();
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;

   private:
    Quotas& quotas_;
    std::string owner_id_;
    Demand demand_;
  };

  // A box's disk as quotas count it: its disk_mib, or the size of its template's image.
  static uint64_t diskMib(const BoxConfig& config, const std::string& image_dir);

 private:
  storage::BoxStore& store_;
  Lookup lookup_;
  observe::EventBus* events_ = nullptr;
  std::map<std::string, Demand> reserved_;  // by owner id
};

}  // namespace hutch::box
