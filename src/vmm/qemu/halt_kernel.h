// For tests that start QEMU without a guest to boot: a tiny PVH kernel that only halts.
// Shared by the QEMU backend's e2e tests and the jail's QEMU tests (tests/jail/).
#pragma once

#include <cstdint>
#include <string>

namespace hutch::vmm::qemu {

// An ELF64 x86-64 image whose only code is `cli; hlt; jmp .-1`, loaded at 1 MiB, with the Xen
// PHYS32_ENTRY note (type 18) that QEMU's PVH loader looks for. Enough for microvm to "run".
inline std::string haltKernelElf() {
  std::string out;
  auto put = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  constexpr uint64_t kLoad = 0x100000;
  constexpr uint64_t kNoteOff = 64 + 2 * 56;
  constexpr uint64_t kNoteSize = 12 + 4 + 8;
  constexpr uint64_t kCodeOff = (kNoteOff + kNoteSize + 15) & ~15ull;
  const std::string code = "\xfa\xf4\xeb\xfd";
  // ELF header.
  out +=
      "\x7f"
      "ELF";
  put(2, 1), put(1, 1), put(1, 1), put(0, 1), put(0, 8);  // 64-bit, LE, v1, SysV
  put(2, 2), put(62, 2), put(1, 4), put(kLoad, 8);        // EXEC, x86-64, v1, entry
  put(64, 8), put(0, 8), put(0, 4);                       // phoff, shoff, flags
  put(64, 2), put(56, 2), put(2, 2), put(64, 2), put(0, 2), put(0, 2);
  // PT_LOAD, R+X.
  put(1, 4), put(5, 4), put(kCodeOff, 8), put(kLoad, 8), put(kLoad, 8);
  put(code.size(), 8), put(code.size(), 8), put(0x1000, 8);
  // PT_NOTE.
  put(4, 4), put(4, 4), put(kNoteOff, 8), put(0, 8), put(0, 8);
  put(kNoteSize, 8), put(kNoteSize, 8), put(4, 8);
  // Note: namesz 4, descsz 8, type XEN_ELFNOTE_PHYS32_ENTRY, "Xen\0", entry.
  put(4, 4), put(8, 4), put(18, 4);
  out += std::string("Xen", 4);
  put(kLoad, 8);
  out.resize(kCodeOff, '\0');
  out += code;
  return out;
}

}  // namespace hutch::vmm::qemu
