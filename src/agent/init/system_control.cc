#include "agent/init/system_control.h"

#include <fcntl.h>
#include <linux/random.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/unique_fd.h"
#include "proto/identity.h"

// Linux 4.17+ (include/uapi/linux/random.h); older headers lack it.
#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG _IO('R', 0x07)
#endif

namespace hutch::agent {
namespace {

class RealSystemControl : public SystemControl {
 public:
  Result<> setRealtime(int64_t ns) override {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    if (::clock_settime(CLOCK_REALTIME, &ts) != 0) {
      return fail(sysError("Cannot set the clock", errno));
    }
    return ok();
  }

  Result<> setHostname(std::string_view name) override {
    if (::sethostname(name.data(), name.size()) != 0) {
      return fail(sysError("Cannot set the hostname to " + std::string(name), errno));
    }
    return ok();
  }

  Result<> seedRandom(std::string_view seed) override {
    UniqueFd random(::open("/dev/urandom", O_WRONLY | O_CLOEXEC));
    if (!random) return fail(sysError("Cannot open /dev/urandom", errno));
    // struct rand_pool_info ends in a flexible array: build it in a buffer of whole words.
    std::vector<uint32_t> words(2 + (seed.size() + 3) / 4, 0);
    auto* info = reinterpret_cast<rand_pool_info*>(words.data());
    info->entropy_count = static_cast<int>(seed.size() * 8);
    info->buf_size = static_cast<int>(seed.size());
    std::memcpy(info->buf, seed.data(), seed.size());
    if (::ioctl(random.get(), RNDADDENTROPY, info) != 0) {
      return fail(sysError("Cannot add the host's seed to the kernel RNG", errno));
    }
    if (::ioctl(random.get(), RNDRESEEDCRNG) != 0) {
      return fail(sysError("Cannot reseed the kernel RNG", errno));
    }
    return ok();
  }

  Result<RootGrowth> growRoot() override { return growRootFilesystem(deviceOf("/"), "/"); }

  Result<> machineIdChanged() override {
    // sd_booted()'s test: systemd is the init when /run/systemd/system exists.
    if (::getpid() == 1 || ::access("/run/systemd/system", F_OK) != 0) return ok();
    // Started, not waited for: the agent's SIGCHLD handler reaps it like any child.
    const char* argv[] = {"/bin/systemctl", "--no-block", "restart", "systemd-journald.service",
                          nullptr};
    const char* envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", nullptr};
    pid_t pid = 0;
    const int error = ::posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv),
                                    const_cast<char**>(envp));
    if (error != 0) return fail(sysError("Cannot restart journald for the new machine id", error));
    return ok();
  }
};

class RecordingSystemControl : public SystemControl {
 public:
  explicit RecordingSystemControl(std::string dir) : dir_(std::move(dir)) {}

  Result<> setRealtime(int64_t ns) override { return record("clock " + std::to_string(ns)); }
  Result<> setHostname(std::string_view name) override {
    return record("hostname " + std::string(name));
  }
  Result<> seedRandom(std::string_view seed) override {
    return record("seed " + proto::encodeHex(seed));
  }
  Result<> machineIdChanged() override { return record("machine_id"); }
  Result<RootGrowth> growRoot() override {
    constexpr uint64_t kBlock = 4096;
    if (::access((dir_ + "/disk-grown").c_str(), F_OK) != 0) return RootGrowth{kBlock, 256, 256};
    HUTCH_TRY_VOID(record("grow_root"));
    return RootGrowth{kBlock, 256, 512};
  }

 private:
  Result<> record(const std::string& line) {
    std::ofstream log(dir_ + "/system.log", std::ios::app);
    log << line << "\n";
    log.close();
    if (!log) return fail(Errc::kInternal, "Cannot write " + dir_ + "/system.log");
    return ok();
  }

  std::string dir_;
};

}  // namespace

std::unique_ptr<SystemControl> realSystemControl() {
  return std::make_unique<RealSystemControl>();
}

std::unique_ptr<SystemControl> recordingSystemControl(std::string dir) {
  return std::make_unique<RecordingSystemControl>(std::move(dir));
}

}  // namespace hutch::agent
