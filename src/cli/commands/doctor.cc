// hutch doctor: what this host offers and what is missing, checked locally (so it works before
// hutchd runs) and against hutchd when it answers.
#include <fmt/format.h>
#include <sys/stat.h>

#include "cli/commands/commands.h"
#include "sys/spawn.h"
#include "vmm/accel.h"

namespace hutch::cli {

int cmdDoctor(const ApiClient& client, const Output& out) {
  nlohmann::json report;
  bool healthy = true;

  vmm::HostProbe probe = vmm::probeHost();
  auto decision = vmm::decideAccel(probe, std::nullopt);
  report["accel"] = {
      {"name", decision ? std::string(vmm::accelName(decision->accel)) : "none"},
      {"reason", decision ? decision->reason : decision.error().message()},
      {"dev_kvm",
       probe.dev_kvm_exists ? (probe.dev_kvm_usable ? "usable" : probe.dev_kvm_error) : "absent"},
      {"cpu_vmx_or_svm", probe.cpu_has_vmx_or_svm},
      {"kvm_pvm_loaded", probe.kvm_pvm_loaded}};
  report["tsc_khz"] = vmm::hostTscKhz();

  nlohmann::json tools = nlohmann::json::object();
  for (const char* tool : {"qemu-system-x86_64", "qemu-img", "mmdebstrap", "mkfs.ext4"}) {
    auto path = sys::findExecutable(tool);
    tools[tool] = path ? path->string() : "missing";
    if (!path) healthy = false;
  }
  report["tools"] = tools;

  struct stat st {};
  report["dev_net_tun"] = ::stat("/dev/net/tun", &st) == 0;

  auto daemon = client.call(boost::beast::http::verb::get, "/v1/info");
  if (daemon) {
    report["hutchd"] = {
        {"endpoint", client.endpoint().describe()}, {"running", true}, {"info", *daemon}};
  } else {
    healthy = false;
    report["hutchd"] = {{"endpoint", client.endpoint().describe()},
                        {"running", false},
                        {"error", daemon.error().message()}};
  }
  report["healthy"] = healthy;

  if (out.json) {
    printJson(report);
    return healthy ? 0 : 1;
  }
  fmt::print("acceleration: {} — {}\n", report["accel"]["name"].get<std::string>(),
             report["accel"]["reason"].get<std::string>());
  fmt::print("  /dev/kvm: {}; vmx/svm: {}; kvm_pvm: {}\n",
             report["accel"]["dev_kvm"].get<std::string>(), probe.cpu_has_vmx_or_svm ? "yes" : "no",
             probe.kvm_pvm_loaded ? "loaded" : "no");
  fmt::print("host TSC: {} kHz{}\n", report["tsc_khz"].get<uint64_t>(),
             report["tsc_khz"].get<uint64_t>() == 0 ? " (unknown: guests may hang at boot)" : "");
  for (const auto& [tool, path] : tools.items()) {
    std::string where = path.get<std::string>();
    fmt::print("{:<20} {}\n", tool,
               where == "missing" ? "MISSING: run scripts/install-deps.sh" : where);
  }
  if (daemon) {
    fmt::print("hutchd: running on {} (version {}, accel {})\n", client.endpoint().describe(),
               (*daemon)["version"].get<std::string>(),
               (*daemon)["accel"]["name"].get<std::string>());
    if (daemon->contains("listeners") && (*daemon)["listeners"].is_array()) {
      for (const auto& l : (*daemon)["listeners"]) {
        if (l.is_string()) fmt::print("  listening: {}\n", l.get<std::string>());
      }
    }
    if (daemon->contains("tls") && (*daemon)["tls"].is_object()) {
      fmt::print("  TLS certificate SHA-256: {}\n",
                 (*daemon)["tls"].value("fingerprint_sha256", std::string("?")));
    }
    if (daemon->contains("caller") && (*daemon)["caller"].is_object()) {
      const auto& caller = (*daemon)["caller"];
      std::string name = caller.value("name", std::string());
      fmt::print("  you are: {}{}\n", name.empty() ? "the host administrator" : "key " + name,
                 caller.value("admin", false) && !name.empty() ? " (admin)" : "");
    }
  } else {
    fmt::print("hutchd: NOT RUNNING — {}\n", daemon.error().message());
  }
  return healthy ? 0 : 1;
}

}  // namespace hutch::cli
