#include "vmm/accel.h"

#include <gtest/gtest.h>

namespace hutch::vmm {
namespace {

HostProbe probe(bool usable, bool vmx, bool pvm) {
  HostProbe p;
  p.dev_kvm_exists = usable;
  p.dev_kvm_usable = usable;
  p.kvm_api_version = usable ? 12 : 0;
  p.dev_kvm_error = usable ? "" : "/dev/kvm does not exist";
  p.cpu_has_vmx_or_svm = vmx;
  p.kvm_pvm_loaded = pvm;
  return p;
}

struct Row {
  const char* name;
  HostProbe host;
  std::optional<Accel> user;
  std::optional<Accel> want;  // nullopt: an error
  const char* reason_has;
};

TEST(DecideAccelTest, Table) {
  const Row rows[] = {
      {"kvm host", probe(true, true, false), std::nullopt, Accel::kKvm, "KVM"},
      {"pvm host", probe(true, false, true), std::nullopt, Accel::kTcg, "PVM"},
      {"pvm module on a vmx host", probe(true, true, true), std::nullopt, Accel::kKvm, "vmx"},
      {"no /dev/kvm", probe(false, true, false), std::nullopt, Accel::kTcg, "does not exist"},
      {"no /dev/kvm, no vmx", probe(false, false, false), std::nullopt, Accel::kTcg, "no usable"},
      {"kvm without vmx/svm, no pvm", probe(true, false, false), std::nullopt, Accel::kTcg,
       "neither vmx nor svm"},
      {"user tcg on a kvm host", probe(true, true, false), Accel::kTcg, Accel::kTcg, "configured"},
      {"user kvm on a kvm host", probe(true, true, false), Accel::kKvm, Accel::kKvm, "configured"},
      {"user kvm on a pvm host", probe(true, false, true), Accel::kKvm, Accel::kKvm, "PVM-aware"},
      {"user kvm without /dev/kvm", probe(false, true, false), Accel::kKvm, std::nullopt,
       "cannot use it"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    auto decision = decideAccel(row.host, row.user);
    if (!row.want) {
      ASSERT_FALSE(decision);
      EXPECT_EQ(decision.error().code(), Errc::kUnsupported);
      EXPECT_NE(decision.error().message().find(row.reason_has), std::string::npos)
          << decision.error().message();
      EXPECT_NE(decision.error().message().find("/dev/kvm does not exist"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(decision) << decision.error().message();
    EXPECT_EQ(decision->accel, *row.want);
    EXPECT_NE(decision->reason.find(row.reason_has), std::string::npos) << decision->reason;
  }
}

TEST(AccelParsersTest, CpuinfoFlags) {
  std::string cpuinfo =
      "processor\t: 0\nflags\t\t: fpu vme tsc svm hypervisor\nbugs\t\t: spectre\n"
      "processor\t: 1\nflags\t\t: fpu vmx\n";
  EXPECT_TRUE(cpuinfoHasFlag(cpuinfo, "svm"));
  EXPECT_TRUE(cpuinfoHasFlag(cpuinfo, "hypervisor"));
  EXPECT_TRUE(cpuinfoHasFlag(cpuinfo, "fpu"));
  EXPECT_FALSE(cpuinfoHasFlag(cpuinfo, "vmx"));  // only the first CPU is read
  EXPECT_FALSE(cpuinfoHasFlag(cpuinfo, "sv"));
}

TEST(AccelParsersTest, TscFromKernelLog) {
  EXPECT_EQ(tscKhzFromKernelLog("[    0.000064] tsc: Detected 2596.130 MHz processor\n"), 2596130u);
  EXPECT_EQ(tscKhzFromKernelLog("tsc: Detected 2100.000 MHz processor\n"
                                "tsc: Refined TSC clocksource calibration: 2099.998 MHz\n"),
            2099998u);
  EXPECT_EQ(tscKhzFromKernelLog("tsc: Detected 3000 MHz TSC\n"), 3000000u);
  EXPECT_EQ(tscKhzFromKernelLog("clocksource: Switched to clocksource tsc\n"), std::nullopt);
}

TEST(AccelParsersTest, TscFromCpuinfo) {
  EXPECT_EQ(tscKhzFromCpuinfo("model name\t: X\ncpu MHz\t\t: 2596.1304\n"), 2596130u);
  EXPECT_EQ(tscKhzFromCpuinfo("model name\t: X\n"), std::nullopt);
}

TEST(AccelParsersTest, ProcModules) {
  std::string modules = "kvm_pvm 12345 0 - Live 0x0\nkvm 999 1 kvm_pvm, Live 0x0\n";
  EXPECT_TRUE(modulesListHas(modules, "kvm_pvm"));
  EXPECT_TRUE(modulesListHas(modules, "kvm"));
  EXPECT_FALSE(modulesListHas(modules, "kvm_intel"));
}

// What this host offers: printed for the record, checked only for consistency.
TEST(HostProbeTest, ProbesThisHost) {
  HostProbe host = probeHost();
  auto decision = decideAccel(host, std::nullopt);
  ASSERT_TRUE(decision);
  uint64_t tsc = hostTscKhz();
  std::printf(
      "host: /dev/kvm %s (api %d%s%s), vmx/svm %d, hypervisor %d, kvm_pvm %d → %s: %s; "
      "TSC %llu kHz\n",
      host.dev_kvm_exists ? "present" : "absent", host.kvm_api_version,
      host.dev_kvm_error.empty() ? "" : ", ", host.dev_kvm_error.c_str(), host.cpu_has_vmx_or_svm,
      host.cpu_is_virtual, host.kvm_pvm_loaded, std::string(accelName(decision->accel)).c_str(),
      decision->reason.c_str(), static_cast<unsigned long long>(tsc));
  if (host.dev_kvm_usable) {
    EXPECT_EQ(host.kvm_api_version, 12);
  }
  if (!host.dev_kvm_usable) {
    EXPECT_FALSE(host.dev_kvm_error.empty());
  }
  EXPECT_GT(tsc, 0u);
}

}  // namespace
}  // namespace hutch::vmm
