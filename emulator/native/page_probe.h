// Whether the host may read or write the page holding an address, asked of the kernel instead of found
// out by faulting: one futex system call each, which fails with EFAULT exactly where the access would
// fault. Shared by the runtime's check of copies (host_memory.cpp) and the C toolkit's check of
// out-parameters (toolkit/src/core.cpp).
#pragma once

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace npuemu {

// 1 if the page holding `address` allows the access, 0 if not, -1 if the kernel would not say (no
// futexes here: then the caller is trusted).
inline int futex_probe(int operation, uint32_t *word, uint32_t *other, uint32_t value3) {
  const long done = syscall(SYS_futex, word, operation | FUTEX_PRIVATE_FLAG, 0, 0, other, value3);
  if (done >= 0 || errno == EAGAIN) return 1;
  return errno == EFAULT ? 0 : -1;
}

inline uint32_t *word_at(uintptr_t address) { return reinterpret_cast<uint32_t *>(address & ~uintptr_t(3)); }

// FUTEX_CMP_REQUEUE loads the word and compares it (EAGAIN when it differs), waking and moving no one.
inline int page_readable(uintptr_t address) {
  static uint32_t nobody = 0;
  return futex_probe(FUTEX_CMP_REQUEUE, word_at(address), &nobody, 0x5a5a5a5a);
}

// FUTEX_WAKE_OP adds 0 to the word in one atomic operation and wakes no one. Atomic, so a store of
// another thread to that word cannot be lost (copying the bytes onto themselves could lose one); a
// third of the cost of a process_vm_readv, which pins the pages (0.3 µs against 0.9 µs); and sandboxes
// that forbid process_vm_readv allow futexes.
inline int page_writable(uintptr_t address) {
  static uint32_t nobody = 0;
  return futex_probe(FUTEX_WAKE_OP, &nobody, word_at(address), FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
}

}  // namespace npuemu
