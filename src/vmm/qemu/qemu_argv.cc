#include "vmm/qemu/qemu_argv.h"

namespace hutch::vmm::qemu {

std::string escapeOptionValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    out.push_back(c);
    if (c == ',') out.push_back(',');
  }
  return out;
}

namespace {
std::string esc(const std::filesystem::path& path) {
  return escapeOptionValue(path.string());
}
}  // namespace

void GeneralOptions::appendTo(Argv& argv) const {
  if (!name.empty()) argv.insert(argv.end(), {"-name", escapeOptionValue(name)});
  argv.insert(argv.end(), {"-nodefaults", "-no-user-config", "-nographic", "-no-reboot"});
}

void MachineOption::appendTo(Argv& argv) const {
  std::string value = type;
  if (!memory_backend.empty()) value += ",memory-backend=" + escapeOptionValue(memory_backend);
  for (const auto& [key, prop] : properties) value += "," + key + "=" + escapeOptionValue(prop);
  argv.insert(argv.end(), {"-machine", value});
}

void AccelOption::appendTo(Argv& argv) const {
  std::string value(accelName(accel));
  if (accel == Accel::kTcg && tcg_tb_size_mib != 0) {
    value += ",tb-size=" + std::to_string(tcg_tb_size_mib);
  }
  argv.insert(argv.end(), {"-accel", value});
}

void CpuOption::appendTo(Argv& argv) const {
  if (!model.empty()) argv.insert(argv.end(), {"-cpu", model});
  argv.insert(argv.end(), {"-smp", std::to_string(count)});
}

void MemoryBackendFile::appendTo(Argv& argv) const {
  std::string size = std::to_string(size_mib) + "M";
  // -m must match the backend's size when the machine uses memory-backend=.
  argv.insert(argv.end(), {"-m", size});
  if (mem_path.empty()) {
    argv.insert(argv.end(),
                {"-object", std::string(memfd ? "memory-backend-memfd" : "memory-backend-ram") +
                                ",id=" + escapeOptionValue(id) + ",size=" + size +
                                (memfd ? ",share=on" : "")});
    return;
  }
  argv.insert(argv.end(),
              {"-object", "memory-backend-file,id=" + escapeOptionValue(id) + ",size=" + size +
                              ",mem-path=" + esc(mem_path) + ",share=" + (share ? "on" : "off")});
}

void IncomingMigration::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-S", "-incoming", "defer"});
}

KernelCmdline KernelCmdline::forGuest(uint64_t tsc_khz,
                                      const std::map<std::string, std::string>& guest_params) {
  KernelCmdline cmdline;
  cmdline.params = {"console=ttyS0", "root=/dev/vda", "rw", "quiet", "panic=-1", "tsc=reliable"};
  if (tsc_khz != 0) cmdline.params.push_back("tsc_early_khz=" + std::to_string(tsc_khz));
  for (const auto& [key, value] : guest_params) {
    cmdline.params.push_back("hutch." + key + "=" + value);
  }
  return cmdline;
}

std::string KernelCmdline::render() const {
  std::string out;
  for (const std::string& param : params) {
    if (!out.empty()) out.push_back(' ');
    out += param;
  }
  return out;
}

void DirectKernelBoot::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-kernel", kernel.string()});
  if (!initrd.empty()) argv.insert(argv.end(), {"-initrd", initrd.string()});
  argv.insert(argv.end(), {"-append", cmdline.render()});
}

void VirtioBlockDevice::appendTo(Argv& argv) const {
  std::string drive = "id=" + escapeOptionValue(id) + ",file=" + esc(file) +
                      ",format=" + escapeOptionValue(format) + ",if=none";
  if (read_only) drive += ",read-only=on";
  argv.insert(argv.end(), {"-drive", drive});
  argv.insert(argv.end(), {"-device", "virtio-blk-device,drive=" + escapeOptionValue(id)});
}

void VirtioSerialPort::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-device", "virtio-serial-device"});
  std::string where = listen_fd ? "fd=" + std::to_string(*listen_fd) : "path=" + esc(socket);
  argv.insert(argv.end(), {"-chardev", "socket,id=" + escapeOptionValue(chardev_id) + "," + where +
                                           ",server=on,wait=off"});
  argv.insert(argv.end(), {"-device", "virtserialport,chardev=" + escapeOptionValue(chardev_id) +
                                          ",name=" + escapeOptionValue(port_name)});
}

void VirtioRng::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-object", "rng-random,id=rng0,filename=/dev/urandom"});
  argv.insert(argv.end(), {"-device", "virtio-rng-device,rng=rng0"});
}

void VirtioBalloon::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-device", "virtio-balloon-device,free-page-reporting=on"});
}

void VhostUserFs::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-chardev", "socket,id=" + escapeOptionValue(chardev_id) +
                                           ",fd=" + std::to_string(fd)});
  argv.insert(argv.end(),
              {"-device", "vhost-user-fs-device,chardev=" + escapeOptionValue(chardev_id) +
                              ",tag=" + escapeOptionValue(tag)});
}

void SerialConsoleLog::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-chardev", "file,id=console,path=" + esc(log) + ",append=on"});
  argv.insert(argv.end(), {"-serial", "chardev:console"});
}

void QmpSocket::appendTo(Argv& argv) const {
  if (listen_fd) {
    argv.insert(
        argv.end(),
        {"-chardev", "socket,id=qmp,fd=" + std::to_string(*listen_fd) + ",server=on,wait=off",
         "-mon", "chardev=qmp,mode=control"});
    return;
  }
  argv.insert(argv.end(), {"-qmp", "unix:" + esc(socket) + ",server=on,wait=off"});
}

void SandboxOption::appendTo(Argv& argv) const {
  argv.insert(
      argv.end(),
      {"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
}

QemuArgv QemuArgv::forSpec(const VmSpec& spec, std::filesystem::path binary, bool pvm_host) {
  QemuArgv q;
  q.binary = std::move(binary);
  q.general.name = spec.id;
  q.accel.accel = spec.accel;
  q.cpu.model = spec.accel == Accel::kKvm ? std::string(pvm_host ? kPvmCpuModel : kKvmCpuModel)
                                          : spec.tcg_cpu_model;
  q.cpu.count = spec.cpus;
  q.memory = MemoryBackendFile{.id = "mem",
                               .size_mib = spec.memory_mib,
                               .mem_path = spec.ram == GuestRam::kPrivate ? "" : spec.memory_file,
                               .share = spec.ram == GuestRam::kSharedFile,
                               .memfd = spec.ram == GuestRam::kPrivate && !spec.shares.empty()};
  q.machine.memory_backend = q.memory->id;
  q.boot.kernel = spec.kernel;
  q.boot.initrd = spec.initrd;
  q.boot.cmdline = KernelCmdline::forGuest(spec.tsc_khz, spec.guest_params);
  q.disks.push_back(VirtioBlockDevice{.id = "root", .file = spec.disk, .format = spec.disk_format});
  // Both sockets are made and connected by the backend before QEMU starts (startProcess).
  q.agent = VirtioSerialPort{.socket = spec.agentSocket(), .listen_fd = kAgentFd};
  if (!spec.netns.empty()) q.nic = VirtioNetTap{.fd = kTapFd, .mac = spec.mac};
  q.rng = VirtioRng{};
  if (spec.free_page_reporting) q.balloon = VirtioBalloon{};
  for (size_t i = 0; i < spec.shares.size(); ++i) {
    q.shares.push_back(VhostUserFs{.chardev_id = "share" + std::to_string(i),
                                   .fd = kShareFd + static_cast<int>(i),
                                   .tag = spec.shares[i].tag});
  }
  q.console = SerialConsoleLog{.log = spec.consoleLog()};
  q.qmp = QmpSocket{.socket = spec.qmpSocket(), .listen_fd = kQmpFd};
  if (!spec.incoming_state.empty() || spec.incoming_later) q.incoming = IncomingMigration{};
  q.sandbox = SandboxOption{};
  return q;
}

void VirtioNetTap::appendTo(Argv& argv) const {
  argv.insert(argv.end(), {"-netdev", "tap,id=net0,fd=" + std::to_string(fd), "-device",
                           "virtio-net-device,netdev=net0,mac=" + escapeOptionValue(mac)});
}

Argv QemuArgv::render() const {
  Argv argv{binary.string()};
  general.appendTo(argv);
  machine.appendTo(argv);
  accel.appendTo(argv);
  cpu.appendTo(argv);
  if (memory) memory->appendTo(argv);
  boot.appendTo(argv);
  for (const VirtioBlockDevice& disk : disks) disk.appendTo(argv);
  if (agent) agent->appendTo(argv);
  if (nic) nic->appendTo(argv);
  if (rng) rng->appendTo(argv);
  if (balloon) balloon->appendTo(argv);
  // libvhost-user (virtiofsd) serves only virtio 1.0 devices; microvm's virtio-mmio transport
  // is legacy unless told otherwise. Only VMs with shares get it: they are never snapshotted,
  // and every other VM keeps the device state its snapshots were made with.
  if (!shares.empty()) argv.insert(argv.end(), {"-global", "virtio-mmio.force-legacy=false"});
  for (const VhostUserFs& share : shares) share.appendTo(argv);
  if (console) console->appendTo(argv);
  qmp.appendTo(argv);
  if (incoming) incoming->appendTo(argv);
  if (sandbox) sandbox->appendTo(argv);
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

}  // namespace hutch::vmm::qemu
