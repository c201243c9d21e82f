#include "vmm/accel.h"

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "base/unique_fd.h"
#include "sys/files.h"

namespace hutch::vmm {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Calls fn(line) for each line of text, stopping when fn returns true.
template <class Fn>
void forEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (fn(line)) return;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// "2596.130" → 2596130 (kHz), taking up to three decimals.
std::optional<uint64_t> mhzToKhz(std::string_view text) {
  text = trim(text);
  uint64_t whole = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    whole = whole * 10 + (text[i] - '0');
  if (i == 0) return std::nullopt;
  uint64_t frac = 0;
  int digits = 0;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 3; ++i, ++digits) {
      frac = frac * 10 + (text[i] - '0');
    }
  }
  for (; digits < 3; ++digits) frac *= 10;
  uint64_t khz = whole * 1000 + frac;
  if (khz == 0) return std::nullopt;
  return khz;
}

// Reads every record of the kernel ring buffer through /dev/kmsg (non-blocking).
std::optional<std::string> readKmsg() {
  UniqueFd fd(::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char record[8192];
  for (int records = 0; records < 200000 && out.size() < (8u << 20); ++records) {
    ssize_t n = ::read(fd.get(), record, sizeof record);
    if (n < 0) {
      if (errno == EINTR || errno == EPIPE) continue;  // EPIPE: a record was overwritten
      break;                                           // EAGAIN: the end
    }
    if (n == 0) break;
    // "prio,seq,usec,flags;message\n"
    std::string_view rec(record, static_cast<size_t>(n));
    size_t semi = rec.find(';');
    if (semi != std::string_view::npos) rec.remove_prefix(semi + 1);
    size_t nl = rec.find('\n');
    out.append(rec.substr(0, nl));
    out.push_back('\n');
  }
  return out;
}

}  // namespace

bool cpuinfoHasFlag(std::string_view cpuinfo, std::string_view flag) {
  bool found = false;
  forEachLine(cpuinfo, [&](std::string_view line) {
    if (line.substr(0, 5) != "flags") return false;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    std::string_view flags = line.substr(colon + 1);
    while (!flags.empty()) {
      flags = trim(flags);
      size_t space = flags.find(' ');
      if (flags.substr(0, space) == flag) {
        found = true;
        break;
      }
      if (space == std::string_view::npos) break;
      flags.remove_prefix(space);
    }
    return true;  // the first CPU's flags are enough
  });
  return found;
}

std::optional<uint64_t> tscKhzFromKernelLog(std::string_view log) {
  std::optional<uint64_t> detected;
  std::optional<uint64_t> refined;
  forEachLine(log, [&](std::string_view line) {
    static constexpr std::string_view kRefined = "Refined TSC clocksource calibration: ";
    static constexpr std::string_view kDetected = "tsc: Detected ";
    if (size_t at = line.find(kRefined); at != std::string_view::npos) {
      if (auto khz = mhzToKhz(line.substr(at + kRefined.size()))) refined = khz;
    } else if (size_t at = line.find(kDetected); at != std::string_view::npos) {
      std::string_view rest = line.substr(at + kDetected.size());
      if (rest.find("MHz") != std::string_view::npos) {
        if (auto khz = mhzToKhz(rest)) detected = khz;
      }
    }
    return false;
  });
  return refined ? refined : detected;
}

std::optional<uint64_t> tscKhzFromCpuinfo(std::string_view cpuinfo) {
  std::optional<uint64_t> khz;
  forEachLine(cpuinfo, [&](std::string_view line) {
    if (line.substr(0, 7) != "cpu MHz") return false;
    size_t colon = line.find(':');
    if (colon != std::string_view::npos) khz = mhzToKhz(line.substr(colon + 1));
    return true;
  });
  return khz;
}

bool modulesListHas(std::string_view proc_modules, std::string_view module) {
  bool found = false;
  forEachLine(proc_modules, [&](std::string_view line) {
    found = line.substr(0, line.find(' ')) == module;
    return found;
  });
  return found;
}

HostProbe probeHost() {
  HostProbe probe;
  std::error_code ec;
  probe.dev_kvm_exists = std::filesystem::exists("/dev/kvm", ec);
  if (!probe.dev_kvm_exists) {
    probe.dev_kvm_error = "/dev/kvm does not exist";
  } else {
    UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
    if (!kvm) {
      probe.dev_kvm_error = std::string("cannot open /dev/kvm: ") + std::strerror(errno);
    } else {
      int version = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
      if (version < 0) {
        probe.dev_kvm_error = std::string("KVM_GET_API_VERSION failed: ") + std::strerror(errno);
      } else {
        probe.kvm_api_version = version;
        probe.dev_kvm_usable = version == KVM_API_VERSION;
        if (!probe.dev_kvm_usable) {
          probe.dev_kvm_error = "/dev/kvm reports API version " + std::to_string(version) +
                                ", expected " + std::to_string(KVM_API_VERSION);
        }
      }
    }
  }
  if (auto cpuinfo = sys::readFile("/proc/cpuinfo", 64 << 20)) {
    probe.cpu_has_vmx_or_svm = cpuinfoHasFlag(*cpuinfo, "vmx") || cpuinfoHasFlag(*cpuinfo, "svm");
    probe.cpu_is_virtual = cpuinfoHasFlag(*cpuinfo, "hypervisor");
  }
  probe.kvm_pvm_loaded = std::filesystem::exists("/sys/module/kvm_pvm", ec);
  if (!probe.kvm_pvm_loaded) {
    if (auto modules = sys::readFile("/proc/modules")) {
      probe.kvm_pvm_loaded = modulesListHas(*modules, "kvm_pvm");
    }
  }
  return probe;
}

Result<AccelDecision> decideAccel(const HostProbe& probe, std::optional<Accel> user_override) {
  if (user_override == Accel::kTcg) {
    return AccelDecision{Accel::kTcg, "TCG software emulation, as configured"};
  }
  if (user_override == Accel::kKvm) {
    if (!probe.dev_kvm_usable) {
      return fail(Errc::kUnsupported,
                  "KVM was requested but this host cannot use it (" + probe.dev_kvm_error +
                      "): use tcg, or give hutchd access to a working /dev/kvm");
    }
    if (probe.isPvm()) {
      return AccelDecision{Accel::kKvm,
                           "KVM on a PVM host, as configured: the guest kernel must be PVM-aware"};
    }
    return AccelDecision{Accel::kKvm, "KVM hardware acceleration, as configured"};
  }
  if (!probe.dev_kvm_usable) {
    return AccelDecision{
        Accel::kTcg, "TCG software emulation: no usable /dev/kvm (" + probe.dev_kvm_error + ")"};
  }
  if (probe.isPvm()) {
    return AccelDecision{Accel::kTcg,
                         "TCG software emulation: /dev/kvm is PVM (kvm_pvm loaded, no vmx/svm CPU "
                         "flag) and stock guest kernels do not run on PVM"};
  }
  if (!probe.cpu_has_vmx_or_svm) {
    return AccelDecision{Accel::kTcg,
                         "TCG software emulation: /dev/kvm opens but the CPU has neither vmx nor "
                         "svm"};
  }
  return AccelDecision{Accel::kKvm, "KVM hardware acceleration: /dev/kvm works and the CPU has " +
                                        std::string("vmx/svm")};
}

uint64_t hostTscKhz() {
  if (auto log = readKmsg()) {
    if (auto khz = tscKhzFromKernelLog(*log)) return *khz;
  }
  if (auto cpuinfo = sys::readFile("/proc/cpuinfo", 64 << 20)) {
    if (auto khz = tscKhzFromCpuinfo(*cpuinfo)) return *khz;
  }
  return 0;
}

}  // namespace hutch::vmm
