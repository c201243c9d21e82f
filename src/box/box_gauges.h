// What the box service contributes to /metrics as levels (box_gauges.cc).
#pragma once

#include <filesystem>
#include <vector>

#include "box/box_service.h"
#include "observe/metrics.h"

namespace hutch::box {

std::vector<observe::GaugeFamily> boxGauges(BoxService& service,
                                            const std::filesystem::path& boxes_dir);

}  // namespace hutch::box
