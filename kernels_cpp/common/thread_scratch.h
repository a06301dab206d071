// Per-thread scratch for buffers too large for a kernel's stack frame. A kernel runs on the host
// thread that launched or synchronised it, whose stack may be small (`ulimit -s`,
// threading.stack_size(), a C++ program's own threads: 80 KiB is legal), so no frame of a kernel
// takes more than a few KB. Each Buffer type is one use (buffers in use at the same time are of
// different types): allocated on a thread's first use, kept until the thread ends, so that a kernel
// called again reuses it, still in the caches, as it did its stack.
#pragma once
#include <memory>

namespace npuemu {

template <class Buffer>
Buffer& thread_scratch() {
  thread_local std::unique_ptr<Buffer> buffer;
  if (!buffer) buffer.reset(new Buffer);  // not value-initialised: every use writes before it reads
  return *buffer;
}

}  // namespace npuemu
