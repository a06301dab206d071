"""The C toolkit in the life of its host process: what the toolkit loads at the first call must serve
calls until the process is gone, whatever ends it.

1. Exit: a global destructor, another thread still calling when main returns, a thread that calls exit()
   while the others call: each process ends with its own exit code and the leak report of what it
   left, never a crash (the toolkit's own objects are never destroyed).
   NPUEMU_SANITIZE_EXITCODE sets the code without skipping any of the program's exit work.
   A call after the process's Python was finalised (a Python program's C library calling from its global
   destructors) returns ACL_ERROR_UNINITIALIZE with a message.
2. A thread's last calls: a host thread keeps its context and its error messages until its last call,
   made from the destructor of one of its thread_local objects, or, on the main thread, from a global
   destructor.
3. Ctrl-C stays the C program's: SIGINT keeps the action the program gave it (the default: Ctrl-C ends
   the program, during toolkit calls, in its own code, or while the toolkit starts; or its own handler).
4. Programs that run Python themselves: a C program that embeds Python works with the toolkit in the
   documented ways (Python started first, or the toolkit first and the GIL taken for its own Python
   code); where npuemu cannot be imported in a process's own Python, the message says what to do there.

Each program is compiled with the documented recipe (tests/ctoolkit.py) and run in the toolkit's
environment."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from typing import Optional

import pytest

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


DLOPEN_HOST_PROGRAM = r"""#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static const char *mark;

/* The host's own exit work, registered before it loads the toolkit: it writes a file and a line, unflushed. */
static void host_exit_work(void) {
  FILE *file = fopen(mark, "w");
  if (file != NULL) fputs("written\n", file);  /* closed by exit's flush */
  printf("host: exit work done");
}

int main(int argc, char **argv) {
  mark = argc > 1 ? argv[1] : "mark.txt";
  atexit(host_exit_work);
  void *toolkit = dlopen("libascendcl.so", RTLD_NOW);
  if (toolkit == NULL) return 10;
  int (*init)(const char *) = (int (*)(const char *))dlsym(toolkit, "aclInit");
  int (*set_device)(int) = (int (*)(int))dlsym(toolkit, "aclrtSetDevice");
  int (*device_malloc)(void **, size_t, int) = (int (*)(void **, size_t, int))dlsym(toolkit, "aclrtMalloc");
  void *leaked = NULL;
  const int initialised = init(NULL), set = set_device(0);
  printf("calls %d %d %d\n", initialised, set, device_malloc(&leaked, 64, 0));
  return 0;
}
"""


def test_the_sanitizer_exit_code_skips_none_of_the_programs_exit_work(tmp_path):
    """A host that registers its exit work, then dlopen()s the toolkit and leaks: its exit work runs after
    the toolkit's exit hook, and still runs with NPUEMU_SANITIZE_EXITCODE set (os._exit in Python's exit
    functions skipped it): its line, its file, then exit status 9 for the leak reported."""
    executable = ctoolkit.compile_program(DLOPEN_HOST_PROGRAM, tmp_path, language="c", libraries=("dl",))
    mark = tmp_path / "mark.txt"
    for code, expected in ((None, 0), ("9", 9)):
        if mark.exists():
            mark.unlink()
        done = run(executable, str(mark), NPUEMU_SANITIZE_EXITCODE=code)
        assert (done.returncode, done.stdout) == (expected, "calls 0 0 0\nhost: exit work done"), shown(done)
        assert mark.exists() and mark.read_text() == "written\n", shown(done)
        assert len(LEAK_LINE.findall(done.stderr)) == 1 and "SUMMARY: 1 report(s) (1 leak)" in done.stderr, shown(done)


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


# ------------------------------------------------------------------------------------------------
# 3. Ctrl-C stays the C program's

SIGINT_PROGRAM = r"""#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include "acl/acl.h"
#include "aclnnop/aclnn_logsigmoid.h"

static volatile std::sig_atomic_t handled = 0;
static void on_interrupt(int) { handled = handled + 1; }

static const char *action() {
  struct sigaction current;
  sigaction(SIGINT, nullptr, &current);
  return current.sa_handler == SIG_DFL ? "default" : current.sa_handler == SIG_IGN ? "ignored"
         : current.sa_handler == on_interrupt ? "the program's" : "another's";
}

// LogSigmoid over n floats, synchronised: a few milliseconds of toolkit calls and kernels.
static int operator_round(aclrtStream stream, int64_t n, void *x, void *y) {
  aclTensor *tx = aclCreateTensor(&n, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, &n, 1, x);
  aclTensor *ty = aclCreateTensor(&n, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, &n, 1, y);
  uint64_t size = 0;
  aclOpExecutor *executor = nullptr;
  int status = aclnnLogSigmoidGetWorkspaceSize(tx, ty, &size, &executor);
  if (status == 0) status = aclnnLogSigmoid(nullptr, 0, executor, stream);
  if (status == 0) status = aclrtSynchronizeStream(stream);
  aclDestroyTensor(tx);
  aclDestroyTensor(ty);
  return status;
}

// argv[1]: "calls" (operators for 20 s), "own-code" (20 s of the program's own computation after the
// toolkit started), "helper-start" (the first call on a thread that ends, then calls for 20 s),
// "handler-before" / "handler-after" (the program's handler, set before or after the first call, takes
// SIGINT sent during calls).
int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "calls";
  std::printf("before: %s\n", action());
  if (!std::strcmp(mode, "handler-before")) std::signal(SIGINT, on_interrupt);
  if (!std::strcmp(mode, "helper-start")) {
    std::thread([] { aclInit(nullptr); }).join();
  } else if (aclInit(nullptr) != 0) {
    return 10;
  }
  if (!std::strcmp(mode, "handler-after")) std::signal(SIGINT, on_interrupt);
  const int64_t n = 1 << 20;
  void *x = nullptr, *y = nullptr;
  aclrtStream stream = nullptr;
  if (aclrtSetDevice(0) != 0 || aclrtCreateStream(&stream) != 0 || aclrtMalloc(&x, n * 4, ACL_MEM_MALLOC_HUGE_FIRST) != 0 ||
      aclrtMalloc(&y, n * 4, ACL_MEM_MALLOC_HUGE_FIRST) != 0 || aclrtMemset(x, n * 4, 0, n * 4) != 0) {
    return 11;
  }
  std::printf("after: %s\n", action());
  if (!std::strcmp(mode, "handler-before") || !std::strcmp(mode, "handler-after")) {
    while (handled < 3) {
      std::raise(SIGINT);
      if (operator_round(stream, n, x, y) != 0) return 12;
    }
    std::printf("handled %d\n", (int)handled);
    aclrtFree(x);
    aclrtFree(y);
    aclrtDestroyStream(stream);
    aclrtResetDevice(0);
    return aclFinalize();
  }
  std::printf("ready\n");
  std::fflush(stdout);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  volatile unsigned long spins = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (!std::strcmp(mode, "own-code")) {
      ++spins;
    } else if (int status = operator_round(stream, n, x, y)) {
      std::printf("status %d: %s\n", status, aclGetRecentErrMsg());
    }
  }
  std::printf("still running after 20 s\n");
  return 0;
}
"""


def interrupted(executable: str, mode: str) -> tuple:
    """Run the program in `mode`, send SIGINT once it is ready, as Ctrl-C does: (exit status, stdout, stderr)."""
    process = subprocess.Popen([executable, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=ctoolkit.toolkit_environment(NPUEMU_LEAK_CHECK="1"), preexec_fn=ctoolkit.default_sigint)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line == "ready\n":
            time.sleep(0.5)  # well into its calls (or its own loop)
            process.send_signal(signal.SIGINT)
            break
    try:
        out, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return process.returncode, "".join(lines) + out, err


@pytest.fixture(scope="module")
def sigint_program(tmp_path_factory):
    return ctoolkit.compile_program(SIGINT_PROGRAM, tmp_path_factory.mktemp("sigint"), flags=("-pthread",))


@pytest.mark.parametrize("mode", ["calls", "own-code", "helper-start"])
def test_ctrl_c_ends_a_c_program_that_left_sigint_alone(sigint_program, mode):
    """SIGINT keeps its default action after the toolkit started (Python's signal module would take it):
    Ctrl-C during toolkit calls, during the program's own code, or after a start on another thread ends
    the program by SIGINT, as it would without npuemu; no traceback, no leak report."""
    code, out, err = interrupted(sigint_program, mode)
    assert (code, out, err) == (-signal.SIGINT, "before: default\nafter: default\nready\n", ""), (code, out, err)


def test_ctrl_c_while_the_toolkit_starts_ends_the_program(sigint_program, tmp_path):
    """A SIGINT that comes while the toolkit starts the interpreter (here: sent by a sitecustomize module,
    which Python imports as it starts, after its signal module) ends the program too, once the start is
    over, instead of becoming a KeyboardInterrupt in the start."""
    (tmp_path / "sitecustomize.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n")
    env = ctoolkit.toolkit_environment()
    env["PYTHONPATH"] = str(tmp_path) + ":" + env.get("PYTHONPATH", "")
    done = subprocess.run([sigint_program, "calls"], capture_output=True, text=True, timeout=60, env=env,
                          preexec_fn=ctoolkit.default_sigint)
    assert (done.returncode, done.stdout, done.stderr) == (-signal.SIGINT, "before: default\n", ""), shown(done)


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_programs_own_sigint_handler_set_before_or_after_the_first_call_is_kept(sigint_program, when):
    """The program's SIGINT handler, set before its first call or after, stays, and runs for each SIGINT sent
    during toolkit calls (the calls go on)."""
    done = subprocess.run([sigint_program, "handler-" + when], capture_output=True, text=True, timeout=120,
                          env=ctoolkit.toolkit_environment(NPUEMU_LEAK_CHECK="1"), preexec_fn=ctoolkit.default_sigint)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "before: default\nafter: the program's\nhandled 3\n", ""), shown(done)


# Another thread of the program sets its SIGINT handler while the toolkit starts: simulated by wrapping
# sigaction, so that the handler is set right after the first look at SIGINT's action that follows.
SIGACTION_WRAPPER = r"""#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
void programs_handler(int signal) { (void)signal; }
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  static int (*real)(int, const struct sigaction *, struct sigaction *);
  static int done;
  if (!real) real = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
  int result = real(sig, act, old);
  if (sig == SIGINT && act == NULL && !done) {
    struct sigaction handler;
    memset(&handler, 0, sizeof handler);
    handler.sa_handler = programs_handler;
    done = 1;
    real(SIGINT, &handler, NULL);
  }
  return result;
}
"""

HANDLER_NAME_PROGRAM = r"""#include <cstdio>
#include <dlfcn.h>
#include <signal.h>
#include "acl/acl.h"

int main() {
  if (aclInit(nullptr) != 0) return 10;
  struct sigaction now;
  sigaction(SIGINT, nullptr, &now);
  Dl_info info;
  const bool named = now.sa_handler != SIG_DFL && dladdr((void *)now.sa_handler, &info) && info.dli_sname;
  std::printf("%s\n", now.sa_handler == SIG_DFL ? "default" : named ? info.dli_sname : "unnamed");
  return aclFinalize();
}
"""


def test_a_sigint_handler_another_thread_sets_while_the_toolkit_starts_is_kept(tmp_path):
    """The toolkit looked at SIGINT's action, then set its placeholder: a handler set in between was
    overwritten, then replaced by the default action when the start was over (a reviewer's repro)."""
    wrapper = tmp_path / "wrapper.c"
    wrapper.write_text(SIGACTION_WRAPPER)
    library = str(tmp_path / "wrapper.so")
    subprocess.run(["gcc", "-shared", "-fPIC", str(wrapper), "-o", library, "-ldl"], check=True)
    program = ctoolkit.compile_program(HANDLER_NAME_PROGRAM, tmp_path, flags=("-ldl",))
    env = ctoolkit.toolkit_environment(LD_PRELOAD=library)
    done = subprocess.run([program], capture_output=True, text=True, timeout=120, env=env, preexec_fn=ctoolkit.default_sigint)
    assert (done.returncode, done.stdout) == (0, "programs_handler\n"), shown(done)


# ------------------------------------------------------------------------------------------------
# 4. Programs that run Python themselves

EMBEDS_PYTHON_PROGRAM = r"""#include <Python.h>
#include <stdio.h>
#include <string.h>
#include "acl/acl.h"

static void python_code(const char *code) {  /* the program's own Python code, on any thread */
  PyGILState_STATE gil = PyGILState_Ensure();
  if (PyRun_SimpleString(code) != 0) printf("python code failed\n");
  fflush(stdout);
  PyGILState_Release(gil);
}

/* argv[1]: "python-first" (the program starts Python, adds npuemu's site-packages, argv[2], releases the
   GIL, then calls the toolkit, and finalises Python at the end) or "toolkit-first" (the program calls
   the toolkit first, then uses its interpreter, taking the GIL for its Python code). One buffer leaks. */
int main(int argc, char **argv) {
  const int python_first = argc > 1 && !strcmp(argv[1], "python-first");
  PyThreadState *main_thread = NULL;
  if (python_first) {
#ifdef NAMED  /* the program names itself, as Python's embedding docs show: sys.executable is the program */
    Py_SetProgramName(Py_DecodeLocale(argv[0], NULL));
#endif
    Py_Initialize();
    char code[4096];
    snprintf(code, sizeof(code), "import site; site.addsitedir(%s%s%s)", "'", argc > 2 ? argv[2] : "", "'");
    PyRun_SimpleString(code);
    main_thread = PyEval_SaveThread();  /* the GIL released: other threads (npuemu's) run */
  }
  void *leaked = NULL;
  const int initialised = aclInit(NULL), set = aclrtSetDevice(0);
  printf("acl: %d %d %d\n", initialised, set, aclrtMalloc(&leaked, 64, ACL_MEM_MALLOC_HUGE_FIRST));  /* @leak */
  fflush(stdout);
  if (!python_first) Py_Initialize();  /* does nothing: the toolkit's interpreter runs; it does not give the GIL */
  python_code("import emulator.runtime as rt; print('python: device', rt.aclrtGetDevice())");
  int32_t device = -1;
  const int got = aclrtGetDevice(&device);
  printf("acl after python: %d %d\n", got, device);
  if (python_first) {
    PyEval_RestoreThread(main_thread);
    printf("finalised %d\n", Py_FinalizeEx());  /* runs Python's exit functions: npuemu's leak report */
  }
  return 7;
}
"""


def compile_embedding_program(directory) -> str:
    """EMBEDS_PYTHON_PROGRAM built with the toolkit and this interpreter's shared libpython."""
    return ctoolkit.compile_embedding_program(EMBEDS_PYTHON_PROGRAM, directory)


@pytest.mark.parametrize("order", ["python-first", "toolkit-first"])
def test_a_c_program_that_embeds_python_uses_the_toolkit_as_documented(tmp_path, order):
    """docs/toolkit.md, "Programs that embed Python": Python started first (npuemu made importable, the GIL
    released, Python finalised at the end, which reports the leak), or the toolkit first (Py_Initialize is
    then a no-op; the program takes the GIL for its Python code): the toolkit's calls and the program's
    Python code share one interpreter and the thread's context; the program's exit code; one leak."""
    executable = compile_embedding_program(tmp_path)
    done = run(executable, order, sysconfig.get_paths()["purelib"])
    finalised = "finalised 0\n" if order == "python-first" else ""
    assert (done.returncode, done.stdout) == (7, "acl: 0 0 0\npython: device (0, 0)\nacl after python: 0 0\n" +
                                              finalised), shown(done)
    assert len(LEAK_LINE.findall(done.stderr)) == 1, shown(done)


def test_a_program_that_embeds_python_and_names_itself_is_named_by_its_own_lines(tmp_path):
    """A program that set Python's program name to its own (so sys.executable is the program) was taken for
    the Python interpreter running a Python program: its frames were skipped, and the leak was made at
    <unknown> (review I). Now only a program named python is the interpreter."""
    executable = ctoolkit.compile_embedding_program(EMBEDS_PYTHON_PROGRAM, tmp_path, flags=("-g", "-DNAMED"))
    done = run(executable, "python-first", sysconfig.get_paths()["purelib"])
    line = EMBEDS_PYTHON_PROGRAM[:EMBEDS_PYTHON_PROGRAM.index("/* @leak */")].count("\n") + 1
    (leak,) = LEAK_LINE.findall(done.stderr) or [None]
    assert leak is not None and re.search(r"made at \S+:%d in main" % line, done.stderr), shown(done)


def test_a_python_of_its_own_that_cannot_import_npuemu_is_told_to_make_it_importable_there(tmp_path):
    """A C program that started a Python of its own without npuemu's site-packages: the toolkit joins that
    interpreter, so the message says to make npuemu importable in it (site.addsitedir with the
    environment's site-packages), not to set NPUEMU_PYTHON, which cannot apply there."""
    executable = compile_embedding_program(tmp_path)
    done = run(executable, "python-first", str(tmp_path / "nothing-here"), NPUEMU_PYTHON=sys.executable)
    first = done.stderr.splitlines()[0] if done.stderr else ""
    site = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "lib",
                        "python%d.%d" % sys.version_info[:2], "site-packages")
    assert first.startswith("npuemu: the C toolkit cannot start: cannot import npuemu (ModuleNotFoundError: "), shown(done)
    assert "this process already runs Python" in first and "NPUEMU_PYTHON does not apply" in first, shown(done)
    assert 'site.addsitedir("%s")' % site in first and not first.endswith(")" + " (interpreter " + sys.executable + ")"), \
        shown(done)
    assert done.stdout.startswith("acl: 100001 100001 100001\n"), shown(done)
