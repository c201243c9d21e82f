// Brings the loopback interface up (the kernel then assigns 127.0.0.1/8 and ::1 itself).
#pragma once

#include "base/result.h"

namespace hutch::agent {

Result<> bringUpLoopback();

}  // namespace hutch::agent
