// The `allot` CLI's entry point on x86-64: it prefaults the writable segment in one system call,
// then goes on to glibc's _start.
//
// Why: a static position-independent executable relocates itself before main (glibc's
// _dl_relocate_static_pie), writing a pointer into nearly every page of its 456 KiB of
// .data.rel.ro, most of it libcrypto's method tables. Each first write to a page of that private
// file mapping is a copy-on-write fault, and these were 116 of a CLI process's 227 page faults;
// the .data and .bss pages a run touches added 29 more. One madvise(MADV_POPULATE_WRITE) over the
// segment does the same copies in the kernel without a fault each: `allot --version` takes 82
// page faults instead of 227 and 0.06-0.16 ms less of task clock (docs/benchmarks.md, 2b).
// Kernels before 5.14 refuse the advice (EINVAL), and the process goes on exactly as before.
//
// What runs here runs before glibc has set anything up: no relocations are applied yet (so no
// pointer held in data may be read), there is no thread pointer (so no stack protector and no
// errno), and the registers and stack must reach _start as the kernel left them. Only the ELF
// headers, which the first read-only segment maps, are read; the system call is made directly.

#include <elf.h>
#include <link.h>

#include <cstdint>

// The executable's own ELF header, placed by the linker at the start of its first segment.
extern "C" const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

namespace {

constexpr long kMadvisePopulateWrite = 23;  // MADV_POPULATE_WRITE, Linux 5.14

long rawMadvise(uintptr_t start, uintptr_t length, long advice) {
  long result;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(28L /* __NR_madvise on x86-64 */), "D"(start), "S"(length), "d"(advice)
                   : "rcx", "r11", "memory");
  return result;
}

}  // namespace

extern "C" __attribute__((visibility("hidden"), no_stack_protector)) void allot_prefault_data() {
  const auto* header = &__ehdr_start;
  const auto* segments =
      reinterpret_cast<const ElfW(Phdr)*>(reinterpret_cast<const char*>(header) + header->e_phoff);
  // The load bias: where the segment that holds the header (file offset 0) was put.
  uintptr_t bias = 0;
  for (int i = 0; i < header->e_phnum; ++i) {
    if (segments[i].p_type == PT_LOAD && segments[i].p_offset == 0)
      bias = reinterpret_cast<uintptr_t>(header) - segments[i].p_vaddr;
  }
  constexpr uintptr_t kPage = 4096;
  for (int i = 0; i < header->e_phnum; ++i) {
    const ElfW(Phdr)& s = segments[i];
    if (s.p_type != PT_LOAD || (s.p_flags & PF_W) == 0) continue;
    const uintptr_t start = (bias + s.p_vaddr) & ~(kPage - 1);
    const uintptr_t end = (bias + s.p_vaddr + s.p_memsz + kPage - 1) & ~(kPage - 1);
    // An advice: where it fails, nothing has changed.
    (void)rawMadvise(start, end - start, kMadvisePopulateWrite);
  }
}

// The entry point (-Wl,-e,allot_entry): _start reads argc, argv and the environment from the
// stack and the loader's finalizer from %rdx, so both are as they were when it is reached.
__asm__(R"(
  .text
  .globl allot_entry
  .type allot_entry, @function
allot_entry:
  endbr64
  push %rdx
  sub $8, %rsp
  call allot_prefault_data
  add $8, %rsp
  pop %rdx
  jmp _start
  .size allot_entry, .-allot_entry
)");
