"""The C toolkit in the life of its host process: what the toolkit loads at the first call must serve
calls until the process is gone, whatever ends it.

1. Exit: a global destructor, another thread still calling when main returns, a thread that calls exit()
   while the others call: each process ends with its own exit code and the leak report of what it
   left, never a crash (the toolkit's own objects are never destroyed).
   A call after the process's Python was finalised (a Python program's C library calling from its global
   destructors) returns ACL_ERROR_UNINITIALIZE with a message.
2. A thread's last calls: a host thread keeps its context and its error messages until its last call,
   made from the destructor of one of its thread_local objects, or, on the main thread, from a global
   destructor.

Each program is compiled with the documented recipe (tests/ctoolkit.py) and run in the toolkit's
environment."""
from __future__ import annotations

import re
import subprocess
import sys
from typing import Optional

import ctoolkit

LEAK_LINE = re.compile(r"^npuemu: leak: (.*)$", re.M)
# glibc fills what free() releases with this byte: a use of freed memory reads garbage at once, where it
# would otherwise often read what was there and pass by luck.
PERTURBED = {"MALLOC_PERTURB_": "165"}


def run(executable: str, *args: str, **env: Optional[str]) -> subprocess.CompletedProcess:
    """Run a built program in the toolkit's environment with `env` changes."""
    settings = {"NPUEMU_EXECUTION": "async", "NPUEMU_LEAK_CHECK": "1", **PERTURBED, **env}
    return ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(**settings), args=args, timeout=120)


def shown(done: subprocess.CompletedProcess) -> str:
    return "exit status %d\n--- stdout\n%s--- stderr\n%s" % (done.returncode, done.stdout, done.stderr)


# ------------------------------------------------------------------------------------------------
# 1. Exit

GLOBAL_DESTRUCTOR_PROGRAM = r"""#include <cstdio>
#include "acl/acl.h"

// Made before the first toolkit call (the toolkit is loaded by it), destroyed after main returns: its
// destructor uses what the toolkit gave and calls the first function of the table.
struct Session {
  void *memory = nullptr;
  const char *soc = nullptr;  // aclrtGetSocName's: valid for the life of the process
  ~Session() {
    const size_t bytes = 4 * aclDataTypeSize(ACL_FLOAT);
    std::printf("soc %s, %zu bytes, free %d\n", soc != nullptr ? soc : "(null)", bytes, aclrtFree(memory));
    const int reset = aclrtResetDevice(0);
    std::printf("reset %d, finalize %d\n", reset, aclFinalize());
  }
} session;

int main() {
  if (aclInit(nullptr) != 0 || aclrtSetDevice(0) != 0) return 10;
  session.soc = aclrtGetSocName();
  if (aclrtMalloc(&session.memory, 4 * aclDataTypeSize(ACL_FLOAT), ACL_MEM_MALLOC_HUGE_FIRST) != 0) return 11;
  std::printf("main returns 3\n");
  return 3;
}
"""


def test_a_global_destructor_calls_after_main_and_the_program_keeps_its_exit_code(tmp_path):
    """The toolkit is loaded at the first call, after the program's global objects were made; what it
    keeps (the Python function of each C function, the strings aclrtGetSocName returns) must outlive
    their destructors. Freed memory is perturbed: a use of it shows."""
    executable = ctoolkit.compile_program(GLOBAL_DESTRUCTOR_PROGRAM, tmp_path)
    done = run(executable)
    soc = re.search(r"^soc (\S+),", done.stdout, re.M)
    assert soc is not None and soc.group(1).startswith("Ascend"), shown(done)
    assert (done.returncode, done.stdout, done.stderr) == (
        3, "main returns 3\nsoc %s, 16 bytes, free 0\nreset 0, finalize 0\n" % soc.group(1), ""), shown(done)


BUSY_THREAD_PROGRAM = r"""#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "acl/acl.h"

static volatile long rounds = 0;
static char host[4096];

/* Copies to the device for ever, on a thread nobody joins. */
static void *copier(void *unused) {
  (void)unused;
  void *device = NULL;
  if (aclrtSetDevice(0) != 0 || aclrtMalloc(&device, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST) != 0) exit(10);
  for (;;) {
    if (aclrtMemcpy(device, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE) != 0) exit(11);
    ++rounds;
  }
  return NULL;
}

/* Ends the process with exit(4) once the copier is well under way. */
static void *quitter(void *unused) {
  (void)unused;
  while (rounds < 100) usleep(1000);
  printf("exit(4) while main copies\n");
  fflush(stdout);
  exit(4);
}

/* "exit": the main thread copies until another thread calls exit(4); else main returns 5 while a thread
   copies. */
int main(int argc, char **argv) {
  if (aclInit(NULL) != 0) return 12;
  pthread_t thread;
  if (argc > 1) {
    pthread_create(&thread, NULL, quitter, NULL);
    copier(NULL);
  }
  pthread_create(&thread, NULL, copier, NULL);
  pthread_detach(thread);
  while (rounds < 100) usleep(1000);
  printf("main returns 5 while a thread copies\n");
  return 5;
}
"""


def test_a_process_that_ends_while_another_thread_calls_keeps_its_exit_code_and_reports_its_leak(tmp_path):
    """main returns while a thread copies, and a thread calls exit() while the main thread copies: the
    exit work (the leak report included) runs while the other thread is still inside calls, and the
    process ends with the program's code. Twice each: the race has more than one outcome."""
    executable = ctoolkit.compile_program(BUSY_THREAD_PROGRAM, tmp_path, language="c", flags=("-pthread",))
    for args, code, line in (((), 5, "main returns 5 while a thread copies\n"),
                             (("exit",), 4, "exit(4) while main copies\n")):
        for _ in range(2):
            done = run(executable, *args)
            assert (done.returncode, done.stdout) == (code, line), shown(done)
            leaks = LEAK_LINE.findall(done.stderr)
            assert len(leaks) == 1 and leaks[0].startswith("device memory "), shown(done)


LATE_LIBRARY = r"""#include <cstdio>
#include "acl/acl.h"

// A C++ library of a Python program (loaded with ctypes): its global object is destroyed after the
// program has ended, and so after Python was finalised.
struct Late {
  ~Late() {
    int32_t device = -1;
    const int status = aclrtGetDevice(&device);
    const char *message = aclGetRecentErrMsg();
    std::printf("~Late: %d %d\n%s\n", status, device, message != nullptr ? message : "(null)");
    std::printf("again: %s\n", aclGetRecentErrMsg() == nullptr ? "null" : "a message");
  }
} late;

extern "C" int start() { return aclrtSetDevice(0); }
"""

LATE_HOST = """import ctypes, sys
library = ctypes.CDLL(sys.argv[1])
print("start", library.start(), flush=True)
import emulator.runtime as rt
print("reset", rt.aclrtResetDevice(0), flush=True)
sys.exit(6)
"""


def test_a_call_after_python_was_finalised_returns_uninitialize_with_a_message(tmp_path):
    """A Python program loads a C++ library that calls the toolkit (which joins the program's interpreter);
    the library's global destructor calls after the program ended, when Python is finalised: 100001
    (ACL_ERROR_UNINITIALIZE), the message naming the call and why, once; one line on stderr; the program's
    exit code."""
    library = ctoolkit.compile_program(LATE_LIBRARY, tmp_path, name="liblate.so", flags=("-shared", "-fPIC"),
                                       libraries=("ascendcl",))
    host = tmp_path / "host.py"
    host.write_text(LATE_HOST)
    done = subprocess.run([sys.executable, str(host), library], capture_output=True, text=True, timeout=120,
                          env=ctoolkit.toolkit_environment(**PERTURBED), cwd=str(tmp_path))
    assert (done.returncode, done.stdout) == (6, (
        "start 0\nreset 0\n~Late: 100001 -1\n"
        "aclrtGetDevice: the Python interpreter that runs npuemu: expected it running, found it finalised "
        "(Py_FinalizeEx has run: the Python program has ended, or the program finalised the Python it embeds); "
        "the call did nothing\nagain: null\n")), shown(done)
    assert done.stderr == ("npuemu: aclrtGetDevice was called after the process's Python was finalised "
                           "(Py_FinalizeEx): npuemu's runtime ended with it; such calls return "
                           "ACL_ERROR_UNINITIALIZE (100001) and do nothing\n"), shown(done)


# ------------------------------------------------------------------------------------------------
# 2. A thread's last calls

LAST_CALLS_PROGRAM = r"""#include <cstdio>
#include <cstring>
#include <thread>
#include "acl/acl.h"

// What a thread's last calls see: its device (its current context), and the message of a call refused.
static void last_calls(const char *who, void *memory) {
  int32_t device = -1;
  const int got = aclrtGetDevice(&device);
  const int refused = aclrtFree(nullptr);
  const char *message = aclGetRecentErrMsg();
  const bool named = message != nullptr && std::strstr(message, "aclrtFree: devPtr") != nullptr;
  std::printf("%s: device %d %d, free(NULL) %d naming devPtr %d, free %d\n", who, got, device, refused, named,
              aclrtFree(memory));
}

// A thread's holder, made before the thread's first call: destroyed after what the toolkit made for the thread.
struct PerThread {
  void *memory = nullptr;
  ~PerThread() { last_calls("thread_local", memory); }
};
thread_local PerThread holder;

// The main thread's, destroyed after main returns.
struct Global {
  void *memory = nullptr;
  ~Global() {
    last_calls("global", memory);
    const int reset = aclrtResetDevice(0);
    std::printf("reset %d, finalize %d\n", reset, aclFinalize());
  }
} global;

int main() {
  std::thread([] { aclInit(nullptr); }).join();  // the first call, on a thread that is gone
  std::thread([] {
    PerThread &mine = holder;
    if (aclrtSetDevice(1) != 0 || aclrtMalloc(&mine.memory, 64, ACL_MEM_MALLOC_HUGE_FIRST) != 0) std::printf("setup\n");
  }).join();
  if (aclrtSetDevice(0) != 0 || aclrtMalloc(&global.memory, 64, ACL_MEM_MALLOC_HUGE_FIRST) != 0) return 10;
  std::printf("main returns\n");
  return 0;
}
"""


def test_a_threads_last_calls_in_its_thread_local_and_global_destructors_keep_its_context_and_messages(tmp_path):
    """The first call is made by a thread that then ends; a second thread sets device 1 and its last calls
    come from a thread_local destructor; the main thread sets device 0 and its last calls come from a
    global destructor. Each sees its own device and gets the message of its refused call, and what
    each made is freed (no leak)."""
    executable = ctoolkit.compile_program(LAST_CALLS_PROGRAM, tmp_path, flags=("-pthread",))
    done = run(executable)
    assert (done.returncode, done.stdout, done.stderr) == (0, (
        "thread_local: device 0 1, free(NULL) 100000 naming devPtr 1, free 0\n"
        "main returns\n"
        "global: device 0 0, free(NULL) 100000 naming devPtr 1, free 0\n"
        "reset 0, finalize 0\n"), ""), shown(done)
