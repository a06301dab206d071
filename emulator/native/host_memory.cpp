// The pybind11 module emulator._host_memory: whether the host may read or write a range, asked of the
// kernel instead of found out by faulting. A copy or memset checks its host ranges here before it moves
// a byte, so that a bad host pointer is a status code, not a segfault of the program.
//
// One native call instead of ctypes: the whole check (an msync and one or two futex probes) costs less
// than ctypes' msync alone did (0.8 us), and copies of a few bytes are where this is paid.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include <pybind11/pybind11.h>

#include "page_probe.h"

namespace {

// What the check found: the Python side words the message.
enum Access : int { kUsable = 0, kUnmapped = 1, kUnreadable = 2, kReadOnly = 3 };

const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));

// Whether every page of [first, last] is mapped: msync fails with ENOMEM over a hole. It says nothing of
// the pages' protection.
bool mapped(uintptr_t first, uintptr_t last) {
  const uintptr_t start = first - first % kPage;
  return msync(reinterpret_cast<void *>(start), last + 1 - start, MS_ASYNC) == 0;
}

// [address, address + size) (one byte when size is 0): mapped throughout, and readable (or writable, with
// `write`) at its first and last page. Pages between them are not probed: a probe a page would cost as
// much as a large copy itself, and a buffer's protection is nearly always one for the whole of it.
int check(uintptr_t address, uint64_t size, bool write) {
  const uint64_t span = size ? size : 1;
  if (address == 0 || span > UINT64_MAX / 2 || address > (uintptr_t(1) << 63) - span) return kUnmapped;
  const uintptr_t first = address, last = address + span - 1;
  if (!mapped(first, last)) return kUnmapped;
  int (*probe)(uintptr_t) = write ? npuemu::page_writable : npuemu::page_readable;
  uintptr_t refused = 0;  // the end found refusing the access
  const int at_first = probe(first);
  if (at_first == 0) refused = first;
  else if (at_first == 1 && first / kPage != last / kPage && probe(last) == 0) refused = last;
  if (!refused) return kUsable;
  return write && npuemu::page_readable(refused) == 1 ? kReadOnly : kUnreadable;
}

}  // namespace

PYBIND11_MODULE(_host_memory, m) {
  m.doc() = "npuemu: whether host memory may be read or written, asked of the kernel instead of by faulting";
  m.def("check", &check, pybind11::arg("address"), pybind11::arg("size"), pybind11::arg("write") = false,
        "0 usable, 1 unmapped, 2 not readable, 3 read-only (when asked to write)");
  m.attr("USABLE") = int(kUsable);
  m.attr("UNMAPPED") = int(kUnmapped);
  m.attr("UNREADABLE") = int(kUnreadable);
  m.attr("READ_ONLY") = int(kReadOnly);
}
