// Which uid indices (jail/box_ids.h: a VMM's own uid and gid are base + index) are taken: every
// box's, from its record, and those held by VMs with no box record (template VMs, the warm pool's,
// a removed box's until its QEMU is gone). Event loop only.
#pragma once

#include <cstdint>
#include <set>

#include "base/result.h"
#include "storage/box_store.h"

namespace hutch::box {

class UidIndices {
 public:
  // `store` must outlive this: the boxes' indices are read from their records.
  explicit UidIndices(storage::BoxStore& store) : store_(store) {}
  UidIndices(const UidIndices&) = delete;
  UidIndices& operator=(const UidIndices&) = delete;

  // The lowest index no box record and no holder has (not held: for a box whose record takes it
  // at once).
  Result<uint32_t> lowestFree() const;
  // The lowest free index, held until release().
  Result<uint32_t> take();
  void hold(uint32_t index) { held_.insert(index); }
  void release(uint32_t index) { held_.erase(index); }
  // Indices held without a box record.
  const std::set<uint32_t>& held() const { return held_; }

 private:
  storage::BoxStore& store_;
  std::set<uint32_t> held_;
};

}  // namespace hutch::box
