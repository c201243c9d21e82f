// Which acceleration this host can give a stock guest kernel, and the host TSC frequency the
// guest needs on its command line (tsc_early_khz=, see docs/measured.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "base/result.h"
#include "vmm/vm_spec.h"

namespace hutch::vmm {

// What the host offers, read once at startup (probeHost) or made up in tests.
struct HostProbe {
  bool dev_kvm_exists = false;
  bool dev_kvm_usable = false;  // opened read-write and KVM_GET_API_VERSION answered 12
  int kvm_api_version = 0;
  std::string dev_kvm_error;  // why it is not usable, for messages
  bool cpu_has_vmx_or_svm = false;
  bool cpu_is_virtual = false;  // the "hypervisor" CPU flag: we are a guest ourselves
  bool kvm_pvm_loaded = false;  // kvm_pvm module: /dev/kvm runs PVM-aware guests only

  // A /dev/kvm that only runs PVM-aware kernels.
  bool isPvm() const { return dev_kvm_usable && kvm_pvm_loaded && !cpu_has_vmx_or_svm; }
  bool operator==(const HostProbe&) const = default;
};

struct AccelDecision {
  Accel accel = Accel::kTcg;
  std::string reason;  // one sentence for logs and `hutch doctor`
  bool operator==(const AccelDecision&) const = default;
};

// Reads /dev/kvm, /proc/cpuinfo and /sys/module (or /proc/modules).
HostProbe probeHost();

// Pure: the acceleration to use. A user override wins, except kvm on a host whose /dev/kvm is
// unusable, which is an error (kUnsupported) saying why.
Result<AccelDecision> decideAccel(const HostProbe& probe, std::optional<Accel> user_override);

// The host TSC frequency in kHz: the kernel's own measurement ("Refined TSC clocksource
// calibration", else "tsc: Detected") from /dev/kmsg when readable, else /proc/cpuinfo's
// "cpu MHz". 0 if nothing was found.
uint64_t hostTscKhz();

// Parsers behind the probes, exposed for tests.
bool cpuinfoHasFlag(std::string_view cpuinfo, std::string_view flag);
std::optional<uint64_t> tscKhzFromKernelLog(std::string_view log);
std::optional<uint64_t> tscKhzFromCpuinfo(std::string_view cpuinfo);
bool modulesListHas(std::string_view proc_modules, std::string_view module);

}  // namespace hutch::vmm
