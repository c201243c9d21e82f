#include "vmm/vm_spec.h"

#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <regex>
#include <system_error>

namespace hutch::vmm {

namespace {

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

Result<> checkFile(std::string_view what, const std::filesystem::path& path) {
  if (path.empty()) return fail(Errc::kInvalidArgument, "Set the " + std::string(what) + " path");
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    return fail(Errc::kNotFound, "The " + std::string(what) + " " + path.string() +
                                     " does not exist: check the path");
  }
  if (!std::filesystem::is_regular_file(status) && !std::filesystem::is_block_file(status)) {
    return fail(Errc::kInvalidArgument,
                "The " + std::string(what) + " " + path.string() + " is not a regular file");
  }
  return ok();
}

}  // namespace

std::string_view accelName(Accel accel) {
  switch (accel) {
    case Accel::kKvm: return "kvm";
    case Accel::kTcg: return "tcg";
  }
  return "tcg";
}

Result<Accel> parseAccel(std::string_view text) {
  if (text == "kvm") return Accel::kKvm;
  if (text == "tcg") return Accel::kTcg;
  return fail(Errc::kInvalidArgument,
              "Unknown acceleration '" + std::string(text) + "': use kvm or tcg");
}

std::string_view guestRamName(GuestRam ram) {
  switch (ram) {
    case GuestRam::kPrivate: return "private";
    case GuestRam::kSharedFile: return "shared-file";
    case GuestRam::kMappedFile: return "mapped-file";
  }
  return "?";
}

Result<> checkCpuModelText(std::string_view model) {
  if (model.size() > 128 || !std::all_of(model.begin(), model.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_.,+=", c) != nullptr;
      })) {
    return fail(Errc::kInvalidArgument,
                "CPU model '" + std::string(model) +
                    "' is invalid: use a QEMU -cpu model and its flags (letters, digits and "
                    "-_.,+=), e.g. max; 'qemu-system-x86_64 -cpu help' lists them");
  }
  return ok();
}

Result<> VmSpec::validate() const {
  if (id.empty()) return fail(Errc::kInvalidArgument, "Set the VM id");
  if (id.size() > 64 || !std::all_of(id.begin(), id.end(), isNameChar)) {
    return fail(Errc::kInvalidArgument, "VM id '" + id +
                                            "' is invalid: use up to 64 letters, digits, '-', "
                                            "'_' or '.'");
  }
  if (cpus < 1 || cpus > 64) {
    return fail(Errc::kInvalidArgument,
                "cpus is " + std::to_string(cpus) + ": use a value from 1 to 64");
  }
  if (memory_mib < 128 || memory_mib > 65536) {
    return fail(Errc::kInvalidArgument, "memory is " + std::to_string(memory_mib) +
                                            " MiB: use a value from 128 to 65536 MiB");
  }
  HUTCH_TRY_VOID(checkCpuModelText(tcg_cpu_model));
  HUTCH_TRY_VOID(checkFile("kernel", kernel));
  if (!initrd.empty()) HUTCH_TRY_VOID(checkFile("initrd", initrd));
  HUTCH_TRY_VOID(checkFile("disk", disk));
  if (disk_format != "qcow2" && disk_format != "raw") {
    return fail(Errc::kInvalidArgument,
                "Disk format '" + disk_format + "' is not supported: use qcow2 or raw");
  }
  for (const auto& [key, value] : guest_params) {
    if (key.empty() || !std::all_of(key.begin(), key.end(), isNameChar)) {
      return fail(Errc::kInvalidArgument, "Guest parameter name '" + key +
                                              "' is invalid: use letters, digits, '-', '_' or '.'");
    }
    if (value.find_first_of(" \t\n\"") != std::string::npos) {
      return fail(Errc::kInvalidArgument, "Guest parameter " + key +
                                              " contains spaces or quotes: the kernel command "
                                              "line cannot carry them");
    }
  }
  if (ram != GuestRam::kPrivate && memory_file.empty()) {
    return fail(Errc::kInvalidArgument,
                "Guest RAM '" + std::string(guestRamName(ram)) + "' needs a memory file");
  }
  if (ram == GuestRam::kMappedFile) HUTCH_TRY_VOID(checkFile("memory file", memory_file));
  if (!incoming_state.empty()) HUTCH_TRY_VOID(checkFile("snapshot state", incoming_state));
  for (size_t i = 0; i < shares.size(); ++i) {
    const VmShare& share = shares[i];
    if (share.tag.empty() || share.tag.size() > 36 ||
        !std::all_of(share.tag.begin(), share.tag.end(), isNameChar)) {
      return fail(Errc::kInvalidArgument, "Share tag '" + share.tag +
                                              "' is invalid: use 1 to 36 letters, digits, '-', "
                                              "'_' or '.'");
    }
    for (size_t j = 0; j < i; ++j) {
      if (shares[j].tag == share.tag) {
        return fail(Errc::kInvalidArgument, "Two shares have the tag '" + share.tag + "'");
      }
    }
    if (!share.host_dir.is_absolute()) {
      return fail(Errc::kInvalidArgument,
                  "Share '" + share.tag + "': the host directory must be an absolute path");
    }
  }
  if (!shares.empty() && (ram != GuestRam::kPrivate || !incoming_state.empty() || incoming_later)) {
    return fail(Errc::kInvalidArgument,
                "A VM with shared directories boots cold with its own RAM: QEMU cannot migrate "
                "virtio-fs, so it is never restored from a snapshot");
  }
  if (run_dir.empty()) return fail(Errc::kInvalidArgument, "Set the VM's run directory");
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) {
    return fail(Errc::kNotFound,
                "The run directory " + run_dir.string() + " does not exist: create it first");
  }
  if (!netns.empty()) {
    if (!std::filesystem::exists(netns, ec)) {
      return fail(Errc::kNotFound, "The network namespace " + netns.string() +
                                       " does not exist: make the box's network first");
    }
    if (tap.empty() || tap.size() > 15) {
      return fail(Errc::kInvalidArgument, "\"" + tap + "\" is not a tap device name (1-15 bytes)");
    }
    static const std::regex kMac("^[0-9a-f]{2}(:[0-9a-f]{2}){5}$");
    if (!std::regex_match(mac, kMac)) {
      return fail(
          Errc::kInvalidArgument,
          "\"" + mac + "\" is not a MAC address (six lowercase hex pairs, like 52:54:00:12:34:56)");
    }
  }
  // Unix socket paths are limited to sizeof(sun_path) - 1 bytes.
  for (const auto& socket : {qmpSocket(), agentSocket()}) {
    if (socket.string().size() >= sizeof(sockaddr_un::sun_path)) {
      return fail(Errc::kInvalidArgument, "Socket path " + socket.string() + " is longer than " +
                                              std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                              " bytes: use a shorter run directory");
    }
  }
  return ok();
}

}  // namespace hutch::vmm
