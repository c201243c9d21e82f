#include "box/uid_indices.h"

#include <vector>

#include "jail/box_ids.h"

namespace hutch::box {

Result<uint32_t> UidIndices::lowestFree() const {
  HUTCH_TRY(std::vector<uint32_t> used, store_.uidIndices());
  used.insert(used.end(), held_.begin(), held_.end());
  return jail::firstFreeIndex(used);
}

Result<uint32_t> UidIndices::take() {
  HUTCH_TRY(uint32_t index, lowestFree());
  held_.insert(index);
  return index;
}

}  // namespace hutch::box
