#include "vmm/qemu/qemu_argv.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hutch::vmm::qemu {
namespace {

VmSpec tcgSpec() {
  VmSpec spec;
  spec.id = "box-1";
  spec.cpus = 2;
  spec.memory_mib = 512;
  spec.accel = Accel::kTcg;
  spec.tsc_khz = 2596130;
  spec.kernel = "/var/lib/hutch/templates/base/vmlinux";
  spec.initrd = "/var/lib/hutch/templates/base/initrd.img";
  spec.disk = "/var/lib/hutch/boxes/box-1/disk.qcow2";
  spec.run_dir = "/var/lib/hutch/boxes/box-1";
  spec.guest_params = {{"hostname", "web"}, {"id", "box-1"}};
  return spec;
}

TEST(QemuArgvTest, TcgSpec) {
  Argv argv = QemuArgv::forSpec(tcgSpec(), "/usr/bin/qemu-system-x86_64").render();
  Argv want = {
      "/usr/bin/qemu-system-x86_64",
      "-name",
      "box-1",
      "-nodefaults",
      "-no-user-config",
      "-nographic",
      "-no-reboot",
      "-machine",
      "microvm,memory-backend=mem",
      "-accel",
      "tcg,tb-size=256",
      "-smp",
      "2",
      "-m",
      "512M",
      "-object",
      "memory-backend-ram,id=mem,size=512M",
      "-kernel",
      "/var/lib/hutch/templates/base/vmlinux",
      "-initrd",
      "/var/lib/hutch/templates/base/initrd.img",
      "-append",
      "console=ttyS0 root=/dev/vda rw quiet panic=-1 tsc=reliable tsc_early_khz=2596130 "
      "hutch.hostname=web hutch.id=box-1",
      "-drive",
      "id=root,file=/var/lib/hutch/boxes/box-1/disk.qcow2,format=qcow2,if=none",
      "-device",
      "virtio-blk-device,drive=root",
      "-device",
      "virtio-serial-device",
      "-chardev",
      "socket,id=agent,fd=6,server=on,wait=off",
      "-device",
      "virtserialport,chardev=agent,name=hutch.agent",
      "-object",
      "rng-random,id=rng0,filename=/dev/urandom",
      "-device",
      "virtio-rng-device,rng=rng0",
      "-chardev",
      "file,id=console,path=/var/lib/hutch/boxes/box-1/console.log,append=on",
      "-serial",
      "chardev:console",
      "-chardev",
      "socket,id=qmp,fd=5,server=on,wait=off",
      "-mon",
      "chardev=qmp,mode=control",
      "-sandbox",
      "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
  };
  EXPECT_EQ(argv, want);
}

TEST(QemuArgvTest, KvmSpec) {
  VmSpec spec = tcgSpec();
  spec.accel = Accel::kKvm;
  spec.tsc_khz = 0;
  spec.guest_params.clear();
  spec.initrd.clear();
  Argv argv = QemuArgv::forSpec(spec, "qemu-system-x86_64").render();
  auto after = [&](std::string_view flag) -> std::string {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it == argv.end() || it + 1 == argv.end() ? "<absent>" : *(it + 1);
  };
  EXPECT_EQ(after("-accel"), "kvm");
  EXPECT_EQ(after("-cpu"), "host");
  // A PVM /dev/kvm refuses the ARCH_CAPABILITIES MSR that -cpu host sets: QEMU would abort.
  Argv pvm = QemuArgv::forSpec(spec, "qemu-system-x86_64", /*pvm_host=*/true).render();
  auto cpu = std::find(pvm.begin(), pvm.end(), "-cpu");
  ASSERT_NE(cpu, pvm.end());
  EXPECT_EQ(*(cpu + 1), "host,-arch-capabilities");
  Argv tcg = QemuArgv::forSpec(tcgSpec(), "q", /*pvm_host=*/true).render();
  EXPECT_EQ(std::find(tcg.begin(), tcg.end(), "-cpu"), tcg.end());
  EXPECT_EQ(after("-initrd"), "<absent>");
  EXPECT_EQ(after("-append"), "console=ttyS0 root=/dev/vda rw quiet panic=-1 tsc=reliable");
  EXPECT_EQ(after("-machine"), "microvm,memory-backend=mem");
}

TEST(QemuArgvTest, TcgHasNoCpuModel) {
  Argv argv = QemuArgv::forSpec(tcgSpec(), "q").render();
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "-cpu"), argv.end());
  // Unless the spec names one (for guests whose software needs newer instructions)...
  VmSpec max = tcgSpec();
  max.tcg_cpu_model = "max";
  Argv with_max = QemuArgv::forSpec(max, "q").render();
  auto cpu = std::find(with_max.begin(), with_max.end(), "-cpu");
  ASSERT_NE(cpu, with_max.end());
  EXPECT_EQ(*(cpu + 1), "max");
  // ...which KVM ignores: there the guest sees the host's CPU.
  max.accel = Accel::kKvm;
  Argv kvm = QemuArgv::forSpec(max, "q").render();
  EXPECT_EQ(*(std::find(kvm.begin(), kvm.end(), "-cpu") + 1), "host");
  AccelOption accel{.accel = Accel::kTcg, .tcg_tb_size_mib = 0};
  Argv only;
  accel.appendTo(only);
  EXPECT_EQ(only, (Argv{"-accel", "tcg"}));
}

TEST(QemuArgvTest, CommasInPathsAreDoubled) {
  EXPECT_EQ(escapeOptionValue("/a,b/c"), "/a,,b/c");
  VirtioBlockDevice disk{.id = "root", .file = "/x,y/disk.img", .format = "raw", .read_only = true};
  Argv argv;
  disk.appendTo(argv);
  EXPECT_EQ(argv, (Argv{"-drive", "id=root,file=/x,,y/disk.img,format=raw,if=none,read-only=on",
                        "-device", "virtio-blk-device,drive=root"}));
  QmpSocket qmp{"/run/a,b/qmp.sock"};
  Argv q;
  qmp.appendTo(q);
  EXPECT_EQ(q, (Argv{"-qmp", "unix:/run/a,,b/qmp.sock,server=on,wait=off"}));
}

TEST(QemuArgvTest, SocketsQemuInheritsAreNamedByDescriptor) {
  QmpSocket qmp{.socket = "/run/b/qmp.sock", .listen_fd = 5};
  VirtioSerialPort agent{.socket = "/run/b/agent.sock", .listen_fd = 6};
  Argv argv;
  qmp.appendTo(argv);
  agent.appendTo(argv);
  EXPECT_EQ(argv, (Argv{"-chardev", "socket,id=qmp,fd=5,server=on,wait=off", "-mon",
                        "chardev=qmp,mode=control", "-device", "virtio-serial-device", "-chardev",
                        "socket,id=agent,fd=6,server=on,wait=off", "-device",
                        "virtserialport,chardev=agent,name=hutch.agent"}));
}

TEST(QemuArgvTest, GuestRamModes) {
  VmSpec spec = tcgSpec();
  auto object = [&] {
    Argv argv = QemuArgv::forSpec(spec, "qemu").render();
    auto it = std::find(argv.begin(), argv.end(), "-object");
    return it + 1 == argv.end() ? std::string() : *(it + 1);
  };
  spec.ram = GuestRam::kSharedFile;
  spec.memory_file = "/snap/t1/memory";
  EXPECT_EQ(object(), "memory-backend-file,id=mem,size=512M,mem-path=/snap/t1/memory,share=on");
  spec.ram = GuestRam::kMappedFile;
  EXPECT_EQ(object(), "memory-backend-file,id=mem,size=512M,mem-path=/snap/t1/memory,share=off");
}

TEST(QemuArgvTest, BalloonOnlyWithFreePageReporting) {
  VmSpec spec = tcgSpec();
  auto balloons = [&] {
    Argv argv = QemuArgv::forSpec(spec, "qemu").render();
    return std::count(argv.begin(), argv.end(), "virtio-balloon-device,free-page-reporting=on");
  };
  EXPECT_EQ(balloons(), 0);
  spec.free_page_reporting = true;
  EXPECT_EQ(balloons(), 1);
}

TEST(QemuArgvTest, SharesAreVhostUserFsOnInheritedSocketsWithSharedRam) {
  VmSpec spec = tcgSpec();
  spec.shares = {{.tag = "share0", .host_dir = "/home/a/p"},
                 {.tag = "share1", .host_dir = "/srv/x", .read_only = true}};
  Argv argv = QemuArgv::forSpec(spec, "qemu").render();
  auto has = [&](const std::string& arg) {
    return std::find(argv.begin(), argv.end(), arg) != argv.end();
  };
  EXPECT_TRUE(has("memory-backend-memfd,id=mem,size=512M,share=on"));
  EXPECT_TRUE(has("socket,id=share0,fd=10"));
  EXPECT_TRUE(has("vhost-user-fs-device,chardev=share0,tag=share0"));
  EXPECT_TRUE(has("socket,id=share1,fd=11"));
  EXPECT_TRUE(has("vhost-user-fs-device,chardev=share1,tag=share1"));
  EXPECT_TRUE(has("virtio-mmio.force-legacy=false")) << "virtiofsd serves virtio 1.0 only";
  spec.shares.clear();
  argv = QemuArgv::forSpec(spec, "qemu").render();
  EXPECT_TRUE(has("memory-backend-ram,id=mem,size=512M"));
  EXPECT_FALSE(has("virtio-mmio.force-legacy=false")) << "snapshots keep legacy devices";
  EXPECT_FALSE(has("-global"));
}

TEST(QemuArgvTest, RestoreWaitsPausedForTheStream) {
  VmSpec spec = tcgSpec();
  Argv boot = QemuArgv::forSpec(spec, "qemu").render();
  EXPECT_EQ(std::find(boot.begin(), boot.end(), "-incoming"), boot.end());
  spec.incoming_state = "/snap/t1/state";
  Argv restore = QemuArgv::forSpec(spec, "qemu").render();
  Argv tail(restore.end() - 5, restore.end() - 2);  // before -sandbox
  EXPECT_EQ(tail, (Argv{"-S", "-incoming", "defer"}));
  // A state that is handed over later (a fork's children start while it is saved) waits alike.
  spec.incoming_state.clear();
  spec.incoming_later = true;
  Argv later = QemuArgv::forSpec(spec, "qemu").render();
  EXPECT_EQ(Argv(later.end() - 5, later.end() - 2), (Argv{"-S", "-incoming", "defer"}));
}

TEST(QemuArgvTest, RestoreShapedMemory) {
  // A snapshot restore maps the frozen RAM file privately.
  MemoryBackendFile mem{.id = "mem", .size_mib = 256, .mem_path = "/snap/memory", .share = false};
  Argv argv;
  mem.appendTo(argv);
  EXPECT_EQ(argv, (Argv{"-m", "256M", "-object",
                        "memory-backend-file,id=mem,size=256M,mem-path=/snap/memory,share=off"}));
  MachineOption machine{.memory_backend = "mem", .properties = {{"rtc", "on"}}};
  Argv m;
  machine.appendTo(m);
  EXPECT_EQ(m, (Argv{"-machine", "microvm,memory-backend=mem,rtc=on"}));
}

TEST(QemuArgvTest, ExtraArgumentsGoLast) {
  QemuArgv q = QemuArgv::forSpec(tcgSpec(), "q");
  q.extra = {"-incoming", "defer"};
  Argv argv = q.render();
  ASSERT_GE(argv.size(), 2u);
  EXPECT_EQ(argv[argv.size() - 2], "-incoming");
  EXPECT_EQ(argv.back(), "defer");
}

}  // namespace
}  // namespace hutch::vmm::qemu

namespace hutch::vmm::qemu {
namespace {

TEST(QemuArgvTest, NicOnlyWithANetworkNamespaceAndOnTheInheritedTapFd) {
  VmSpec spec;
  spec.id = "n";
  spec.kernel = "/k";
  spec.disk = "/d";
  spec.run_dir = "/r";
  Argv none = QemuArgv::forSpec(spec, "q").render();
  EXPECT_EQ(std::find(none.begin(), none.end(), "-netdev"), none.end());
  spec.netns = "/run/netns/hutch-3";
  Argv argv = QemuArgv::forSpec(spec, "q").render();
  auto it = std::find(argv.begin(), argv.end(), "-netdev");
  ASSERT_NE(it, argv.end());
  EXPECT_EQ(*(it + 1), "tap,id=net0,fd=" + std::to_string(QemuArgv::kTapFd));
  EXPECT_EQ(*(it + 3), "virtio-net-device,netdev=net0,mac=52:54:00:12:34:56");
}

}  // namespace
}  // namespace hutch::vmm::qemu
