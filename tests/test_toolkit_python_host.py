"""The C toolkit in a process that already runs Python: a Python program that calls it through ctypes (as
aclnn users do: pyACL has no aclnn binding), directly or through a C library of its own, and a C program
that started Python first. The toolkit joins that interpreter; whatever order the two were set up in:

1. Threads: a thread Python did not create (a C library's pthread) ends cleanly after its calls.
2. The first call: made by several threads at once through ctypes.PyDLL (which keeps the GIL during the
   foreign call), it starts the toolkit once, without a deadlock.
3. The end: daemon threads still in toolkit calls or kernels when the program ends (CPython stops them
   with pthread_exit as they take the GIL) leave the program its own exit code.
4. Stops: a KeyboardInterrupt (Ctrl-C) or a SystemExit (sys.exit() in a callback) raised in the Python code
   that runs under a C call is no internal error: the call returns the layer's "stopped" code (500001,
   ACL_ERROR_FAILURE; 361001 for aclnn) with a message naming it, and the exception is raised again in the
   program's Python code as the foreign call returns (ctypes.CDLL and ctypes.PyDLL alike). A Ctrl-C while
   the toolkit starts leaves the start to the next call.

Each program runs in a child process with the toolkit's environment."""
from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest

import ctoolkit

RUN_TIMEOUT = 120


def run_python(program: str, directory, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run the Python `program` (dedented) from `directory` with the toolkit's root as argv[1]."""
    path = directory / "host.py"
    path.write_text(textwrap.dedent(program))
    return subprocess.run([sys.executable, str(path), ctoolkit.toolkit_root(), *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, env=ctoolkit.toolkit_environment(**env), cwd=str(directory),
                          preexec_fn=ctoolkit.default_sigint)


def shown(done: subprocess.CompletedProcess) -> str:
    return "exit status %d\n--- stdout\n%s--- stderr\n%s" % (done.returncode, done.stdout, done.stderr)


# ------------------------------------------------------------------------------------------------
# 1. Threads Python did not create

# A C thread's calls: its own device, a refused call's message, memory freed; the thread then ends.
C_THREAD = r"""#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "acl/acl.h"

static void *calls(void *device_id) {
  int32_t device = -1;
  void *memory = NULL;
  const int set = aclrtSetDevice(*(int *)device_id);
  const int got = aclrtGetDevice(&device);
  const int refused = aclrtFree(NULL);
  const char *message = aclGetRecentErrMsg();
  const int named = message != NULL && strstr(message, "aclrtFree: devPtr") != NULL;
  const int malloc_free = aclrtMalloc(&memory, 64, ACL_MEM_MALLOC_HUGE_FIRST) | aclrtFree(memory);
  printf("C thread: set %d, device %d %d, free(NULL) %d naming devPtr %d, malloc+free %d, reset %d\n", set, got,
         device, refused, named, malloc_free, aclrtResetDevice(*(int *)device_id));
  fflush(stdout);
  return NULL;
}

/* Starts a thread that calls the toolkit and ends, and joins it. */
int c_thread_calls(int device_id) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, calls, &device_id) != 0) return 1;
  return pthread_join(thread, NULL);
}
"""

C_THREAD_LINE = "C thread: set 0, device 0 %d, free(NULL) 100000 naming devPtr 1, malloc+free 0, reset 0\n"


def test_a_c_thread_of_a_python_programs_library_ends_cleanly(tmp_path):
    """A Python program loads a C library (ctypes) whose threads call the toolkit and end: CPython's
    pthread key, made before the toolkit's, is cleared first as a thread ends, so ending the thread's
    Python thread state through it aborted the process ("PyGILState_Release: ... no thread-state for
    this thread"). Each thread has its own device and messages; the program goes on and exits 0."""
    library = ctoolkit.compile_program(C_THREAD, tmp_path, name="libcthread.so", language="c",
                                       flags=("-shared", "-fPIC", "-pthread"), libraries=("ascendcl",))
    done = run_python('''
        import ctypes, sys
        library = ctypes.CDLL(sys.argv[2])
        print("joined", library.c_thread_calls(0), library.c_thread_calls(1), flush=True)
        import acl
        print("main thread device", acl.rt.get_device()[1])
    ''', tmp_path, library)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, C_THREAD_LINE % 0 + C_THREAD_LINE % 1 + "joined 0 0\nmain thread device 107002\n", ""), shown(done)


EMBEDDING_C_THREAD = C_THREAD.replace('#include <pthread.h>', '#include <Python.h>\n#include <pthread.h>') + r"""
/* Python first (docs/toolkit.md, "Programs that embed Python"): started, npuemu made importable
   (argv[1]), the GIL released; a thread calls the toolkit and ends; Python finalised at the end. */
int main(int argc, char **argv) {
  Py_Initialize();
  char code[4096];
  snprintf(code, sizeof(code), "import site; site.addsitedir('%s')", argc > 1 ? argv[1] : "");
  PyRun_SimpleString(code);
  PyThreadState *main_thread = PyEval_SaveThread();
  const int joined = c_thread_calls(0);
  PyEval_RestoreThread(main_thread);
  printf("joined %d, finalised %d\n", joined, Py_FinalizeEx());
  return 5;
}
"""


def test_a_c_thread_of_a_program_that_started_python_first_ends_cleanly(tmp_path):
    """The same in a C program that started Python itself before its first toolkit call: the thread ends
    without an abort, and the program ends with its own code."""
    executable = ctoolkit.compile_embedding_program(EMBEDDING_C_THREAD, tmp_path, flags=("-pthread",))
    done = ctoolkit.run_program(executable, args=(sysconfig.get_paths()["purelib"],))
    assert (done.returncode, done.stdout, done.stderr) == (5, C_THREAD_LINE % 0 + "joined 0, finalised 0\n", ""), \
        shown(done)


# ------------------------------------------------------------------------------------------------
# 2. The first call

def test_first_calls_of_threads_holding_the_gil_through_pydll_start_the_toolkit_once(tmp_path):
    """Three Python threads make their first toolkit call at once through ctypes.PyDLL, which keeps the GIL
    during the foreign call: the thread that starts the toolkit needs the GIL for its imports while the
    others waited for the start with it, for good. Each thread now gets its device."""
    done = run_python('''
        import ctypes, sys, threading
        runtime = ctypes.PyDLL(sys.argv[1] + "/lib64/libascendcl.so")
        barrier = threading.Barrier(3)
        codes = {}
        def first_call(device):
            barrier.wait()
            codes[device] = runtime.aclrtSetDevice(device)
            current = ctypes.c_int32(-1)
            codes[device] = (codes[device], runtime.aclrtGetDevice(ctypes.byref(current)), current.value,
                             runtime.aclrtResetDevice(device))
        threads = [threading.Thread(target=first_call, args=(device,), daemon=True) for device in range(3)]
        [thread.start() for thread in threads]
        [thread.join(60) for thread in threads]
        print(sorted(codes.items()), [thread.is_alive() for thread in threads])
    ''', tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, "[(0, (0, 0, 0, 0)), (1, (0, 0, 1, 0)), (2, (0, 0, 2, 0))] [False, False, False]\n", ""), shown(done)


def test_a_first_call_through_cdll_while_another_thread_runs_python_leaves_that_thread_its_gil(tmp_path):
    """Up to Python 3.11 the current thread state is the process's: a CDLL caller (which released the GIL)
    making the first call while the main thread ran Python was taken for the GIL's holder and gave the main
    thread's GIL away: two threads ran Python at once, then a segfault."""
    done = run_python('''
        import ctypes, sys, threading, time
        runtime = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
        holds = ctypes.pythonapi.PyGILState_Check  # called with the GIL held, as any Python code is
        result = []
        def worker():
            time.sleep(0.2)
            result.append(runtime.aclInit(None))
        thread = threading.Thread(target=worker)
        thread.start()
        without = 0
        while thread.is_alive():
            without += not holds()
            try:
                {}["x"]  # an exception reads the current thread state
            except KeyError:
                pass
        thread.join()
        print(result, without)
    ''', tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[0] 0\n", ""), shown(done)


@pytest.mark.parametrize("library", ["CDLL", "PyDLL"])
def test_a_first_call_after_a_sub_interpreter_was_made_starts_the_toolkit(tmp_path, library):
    """Once a sub-interpreter has existed, PyGILState_Check says yes for every thread: the start took a CDLL
    caller, which had released the GIL, for one holding it, and gave it up again: a fatal error (134)."""
    done = run_python('''
        import ctypes, sys
        try:
            import _interpreters as interpreters  # 3.13
        except ImportError:
            import _xxsubinterpreters as interpreters
        interpreters.destroy(interpreters.create())
        runtime = getattr(ctypes, sys.argv[2])(sys.argv[1] + "/lib64/libascendcl.so")
        print(runtime.aclInit(None), runtime.aclrtSetDevice(0), runtime.aclrtResetDevice(0), runtime.aclFinalize())
    ''', tmp_path, library)
    assert (done.returncode, done.stdout, done.stderr) == (0, "0 0 0 0\n", ""), shown(done)


# ------------------------------------------------------------------------------------------------
# 3. The end of the program

DAEMONS_CALLING = '''
    import ctypes, sys, threading, time
    runtime = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
    runtime.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
    runtime.aclrtFree.argtypes = [ctypes.c_void_p]
    runtime.aclInit(None)
    def calls():
        runtime.aclrtSetDevice(0)
        while True:
            memory = ctypes.c_void_p()
            runtime.aclrtMalloc(ctypes.byref(memory), 64, 0)
            runtime.aclrtFree(memory)
    for _ in range(3):
        threading.Thread(target=calls, daemon=True).start()
    time.sleep(0.5)
    print("main ends with 3", flush=True)
    sys.exit(3)
'''

DAEMONS_IN_KERNELS = '''
    import sys, threading, time
    import acl, aclnn_api as nn
    acl.init(); acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    n = 1 << 20
    memory, _ = acl.rt.malloc(n * 4, 0); acl.rt.memset(memory, n * 4, 0, n * 4)
    tensor = nn.aclCreateTensor([n], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, memory)
    def launches():
        acl.rt.set_device(0)
        while True:
            size, executor, _ = nn.aclnnLogSigmoidGetWorkspaceSize(tensor, tensor)
            nn.aclnnLogSigmoid(None, size, executor, stream)
            acl.rt.synchronize_stream(stream)
    for _ in range(3):
        threading.Thread(target=launches, daemon=True).start()
    time.sleep(0.5)
    print("main ends with 3", flush=True)
    sys.exit(3)
'''


@pytest.mark.parametrize("program", [DAEMONS_CALLING, DAEMONS_IN_KERNELS], ids=["ctypes-calls", "python-kernels"])
def test_daemon_threads_still_calling_when_the_program_ends_leave_it_its_exit_code(tmp_path, program):
    """Daemon threads that call the toolkit through ctypes (memory calls), or launch and synchronise kernels
    from Python, when the program ends: CPython stops each with pthread_exit as it takes the GIL, an unwind
    that a catch (...) of the toolkit swallowed ("FATAL: exception not rethrown") and that the kernels'
    GIL re-acquire in a noexcept destructor turned into std::terminate: both aborted the process."""
    done = run_python(program, tmp_path, NPUEMU_LEAK_CHECK="0")
    assert (done.returncode, done.stdout) == (3, "main ends with 3\n"), shown(done)


# ------------------------------------------------------------------------------------------------
# 4. Stops: KeyboardInterrupt, SystemExit

STOPPED = ("ACL_ERROR_FAILURE(500001): aclrtProcessReport: stopped by %s before it completed (the program is "
           "interrupted or ending: no error of the call)")

# A callback that raises what argv[3] names, run by aclrtProcessReport called through ctypes (argv[2]: CDLL
# or PyDLL) on the main thread or on another one (argv[4]).
RAISING_CALLBACK = '''
    import ctypes, sys, threading
    runtime = getattr(ctypes, sys.argv[2])(sys.argv[1] + "/lib64/libascendcl.so")
    runtime.aclGetRecentErrMsg.restype = ctypes.c_char_p
    runtime.aclrtSubscribeReport.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
    import acl
    acl.init(); acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    def raising(data):
        if sys.argv[3] == "KeyboardInterrupt":
            raise KeyboardInterrupt  # as a Ctrl-C does in whatever Python code runs
        sys.exit(5)
    def serve():
        acl.rt.set_device(0)
        runtime.aclrtSubscribeReport(threading.get_ident(), stream)
        acl.rt.launch_callback(raising, None, 0, stream)
        try:
            print("returned", runtime.aclrtProcessReport(5000), flush=True)
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
        finally:
            print("finally:", runtime.aclGetRecentErrMsg().decode().split(" ", 2)[2], flush=True)
        print("the thread goes on", flush=True)
        acl.rt.reset_device(0)
    if sys.argv[4] == "main":
        serve()
        served_by = threading.get_ident()
    else:
        thread = threading.Thread(target=serve)
        thread.start(); thread.join()
        served_by = thread.ident
    print("the program goes on", flush=True)
    acl.rt.unsubscribe_report(served_by, stream)
    acl.rt.destroy_stream(stream); acl.rt.reset_device(0); acl.finalize()
'''


@pytest.mark.parametrize("library", ["CDLL", "PyDLL"])
def test_a_keyboard_interrupt_under_a_c_call_is_raised_again_when_it_returns(tmp_path, library):
    """A KeyboardInterrupt in a callback run by aclrtProcessReport (through ctypes): it was 507000 "internal
    error ... please report" and gone. Now the call fails with 500001 naming it, and the program's Python
    code gets the KeyboardInterrupt as the foreign call returns (its line is not reached)."""
    done = run_python(RAISING_CALLBACK, tmp_path, library, "KeyboardInterrupt", "main")
    assert (done.returncode, done.stdout, done.stderr) == (0, (
        "KeyboardInterrupt\nfinally: " + STOPPED % "KeyboardInterrupt" + "\nthe thread goes on\nthe program goes on\n"),
        ""), shown(done)


@pytest.mark.parametrize("library", ["CDLL", "PyDLL"])
def test_sys_exit_in_a_callback_under_a_c_call_ends_the_program_with_its_code(tmp_path, library):
    """sys.exit(5) in a callback run by aclrtProcessReport through ctypes on the main thread: the process
    sometimes ended inside the foreign call (PyErr_Print ends it on a SystemExit), sometimes the call was
    507000 and the program went on. Now the SystemExit is raised as the call returns: the program's
    finally clauses run, and it ends with 5, no traceback."""
    done = run_python(RAISING_CALLBACK, tmp_path, library, "SystemExit", "main", NPUEMU_LEAK_CHECK="0")
    assert (done.returncode, done.stdout, done.stderr) == (5, "finally: " + STOPPED % "SystemExit: 5" + "\n", ""), \
        shown(done)


def test_sys_exit_in_a_callback_under_a_c_call_of_another_thread_is_the_calls_code_and_message_only(tmp_path):
    """On a thread the program started, an exception cannot be held back from the runtime's Python code
    under the next call a C routine makes (it would fail that call and all the routine's later ones): the
    call returns 500001 naming the SystemExit, which is not raised there; the thread and the program go on
    (docs/toolkit.md, Signals)."""
    done = run_python(RAISING_CALLBACK, tmp_path, "CDLL", "SystemExit", "thread")
    assert (done.returncode, done.stdout, done.stderr) == (0, "returned 500001\nfinally: " + STOPPED % "SystemExit: 5"
                                                           + "\nthe thread goes on\nthe program goes on\n", ""), shown(done)


STEPS_LIBRARY = r"""#include <stdio.h>
#include "acl/acl.h"

/* One C routine of a Python program's library: it serves a report (whose Python callback is stopped, as
   Ctrl-C does), then goes on with its work and its cleanup. */
int steps(aclrtStream stream) {
  const int served = aclrtProcessReport(5000);
  void *memory = NULL;
  const int made = aclrtMalloc(&memory, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  const int freed = aclrtFree(memory);
  const int destroyed = aclrtDestroyStream(stream);
  printf("C: processReport %d, malloc %d, free %d, destroyStream %d\n", served, made, freed, destroyed);
  fflush(stdout);
  return 0;
}
"""


@pytest.mark.parametrize("library", ["CDLL", "PyDLL"])
def test_a_stop_under_a_c_routines_call_waits_for_the_routine_to_return_to_python(tmp_path, library):
    """The KeyboardInterrupt of a callback under the routine's first call was raised at the next Python
    instruction: the runtime's, under the routine's next call, so that call failed with 500001 and so did
    every later one (its cleanup leaked). Now the routine's later calls succeed, and the program gets the
    KeyboardInterrupt when the routine returns."""
    steps = ctoolkit.compile_program(STEPS_LIBRARY, tmp_path, name="libsteps.so", language="c",
                                     flags=("-shared", "-fPIC"), libraries=("ascendcl",))
    done = run_python('''
        import ctypes, sys, threading
        steps = getattr(ctypes, sys.argv[3])(sys.argv[2])
        steps.steps.argtypes = [ctypes.c_void_p]
        runtime = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
        runtime.aclrtSubscribeReport.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
        import acl
        acl.init(); acl.rt.set_device(0)
        stream, _ = acl.rt.create_stream()
        def raising(data):
            raise KeyboardInterrupt
        runtime.aclrtSubscribeReport(threading.get_ident(), stream)
        acl.rt.launch_callback(raising, None, 0, stream)
        try:
            steps.steps(stream)
            print("the routine's line after the call")
        except KeyboardInterrupt:
            print("Python: KeyboardInterrupt", flush=True)
        acl.rt.reset_device(0); acl.finalize()
    ''', tmp_path, steps, library)
    assert (done.returncode, done.stdout, done.stderr) == (0, "C: processReport 500001, malloc 0, free 0, "
                                                           "destroyStream 0\nPython: KeyboardInterrupt\n", ""), shown(done)


# seconds of work queued, then stopped 0.3 s into aclrtSynchronizeStream through ctypes: by Ctrl-C (argv[2]
# "ctrl-c": SIGINT, a KeyboardInterrupt) or by a SIGALRM handler raising an Exception ("alarm", the
# signal.alarm time-limit idiom); the program catches what stopped it, then synchronises again.
STOPPED_SYNCHRONISATION = '''
    import ctypes, os, signal, sys, threading, time
    runtime = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
    runtime.aclGetRecentErrMsg.restype = ctypes.c_char_p
    runtime.aclrtSynchronizeStream.argtypes = [ctypes.c_void_p]
    import acl, aclnn_api as nn
    class TimeLimit(Exception):
        pass
    def expired(number, frame):
        raise TimeLimit("time limit reached")
    signal.signal(signal.SIGALRM, expired)
    acl.init(); acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    n = 1 << 22
    memory, _ = acl.rt.malloc(n * 4, 0); acl.rt.memset(memory, n * 4, 0, n * 4)
    tensor = nn.aclCreateTensor([n], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, memory)
    for _ in range(3000):
        size, executor, _ = nn.aclnnLogSigmoidGetWorkspaceSize(tensor, tensor)
        nn.aclnnLogSigmoid(None, size, executor, stream)
    if sys.argv[2] == "ctrl-c":
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    else:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
    start = time.perf_counter()
    try:
        print("returned", runtime.aclrtSynchronizeStream(stream), flush=True)
    except (KeyboardInterrupt, TimeLimit) as stop:
        print(type(stop).__name__, time.perf_counter() - start < 5, runtime.aclGetRecentErrMsg().decode().split(" ", 2)[2])
    print("again", runtime.aclrtSynchronizeStream(stream))
    nn.aclDestroyTensor(tensor); acl.rt.free(memory); acl.rt.destroy_stream(stream); acl.rt.reset_device(0)
'''


@pytest.mark.parametrize("stop,raised", [("ctrl-c", "KeyboardInterrupt"), ("alarm", "TimeLimit: time limit reached")])
def test_a_synchronisation_through_ctypes_stopped_by_a_signal_raises_what_stopped_it(tmp_path, stop, raised):
    """docs/toolkit.md, Signals: in a Python program Ctrl-C is a KeyboardInterrupt and stops the kernels of a
    synchronisation, through ctypes too: SIGINT 0.3 s into aclrtSynchronizeStream of seconds of work. The
    call is stopped (its message says so), the KeyboardInterrupt reaches the program, and the stream
    still completes at the next synchronisation. A SIGALRM handler raising an Exception there (the
    time-limit idiom) was 507000 "internal error ... please report", and the exception was gone: now it is
    a stop as Ctrl-C's is."""
    done = run_python(STOPPED_SYNCHRONISATION, tmp_path, stop, NPUEMU_EXECUTION="async")
    assert (done.returncode, done.stdout, done.stderr) == (0, (
        "%s True ACL_ERROR_FAILURE(500001): aclrtSynchronizeStream: stopped by %s before it completed (the "
        "program is interrupted or ending: no error of the call)\nagain 0\n" % (raised.split(":")[0], raised)), ""), \
        shown(done)


def test_ctrl_c_while_the_toolkit_starts_leaves_the_start_to_the_next_call(tmp_path):
    """A KeyboardInterrupt in the toolkit's start (here: raised by an import hook as npuemu's modules are
    imported, where a Ctrl-C lands) made every later call 100001 "cannot import npuemu ... a module it
    imports failed: reinstall" for the life of the process. Now the first call is 100001 saying the start
    was stopped, the KeyboardInterrupt reaches the program, and the next call starts the toolkit."""
    done = run_python('''
        import ctypes, sys
        class CtrlCOnce:  # a Ctrl-C as the start imports emulator.errors
            def find_spec(self, name, path=None, target=None):
                if name == "emulator.errors":
                    sys.meta_path.remove(self)
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, CtrlCOnce())
        runtime = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
        runtime.aclGetRecentErrMsg.restype = ctypes.c_char_p
        try:
            print("returned", runtime.aclInit(None))
        except KeyboardInterrupt:
            print("KeyboardInterrupt:", runtime.aclGetRecentErrMsg().decode())
        print("again", runtime.aclInit(None), runtime.aclrtSetDevice(0), runtime.aclrtResetDevice(0),
              runtime.aclFinalize())
    ''', tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, (
        "KeyboardInterrupt: npuemu: the start was stopped by KeyboardInterrupt (the program is interrupted or "
        "ending); the call did nothing, and the next call starts the toolkit again\nagain 0 0 0 0\n"), ""), shown(done)


# ------------------------------------------------------------------------------------------------
# 5. The frames of the Python API's calls

# A C library of the Python program: one function queues a download into its own stack buffer and
# returns before it runs (the program forgot to synchronise), another downloads into its own buffer,
# alive until it returns.
OWN_BUFFERS = r"""#include <string.h>
#include "acl/acl.h"

int queue_into_own_buffer(void *device, aclrtStream stream) {
  char buffer[4096];
  memset(buffer, 0, sizeof buffer);
  return aclrtMemcpyAsync(buffer, sizeof buffer, device, sizeof buffer, ACL_MEMCPY_DEVICE_TO_HOST, stream);
}

/* The buffer's last byte, or minus the status of the copy. */
int download_into_own_buffer(void *device) {
  unsigned char buffer[64] = {0};
  const int ret = aclrtMemcpy(buffer, sizeof buffer, device, sizeof buffer, ACL_MEMCPY_DEVICE_TO_HOST);
  return ret != 0 ? -ret : buffer[63];
}
"""


def test_a_python_synchronisation_of_a_copy_into_a_returned_c_functions_buffer_fails_not_the_process(tmp_path):
    """A Python program loads the toolkit (ctypes) and a C library of its own, one of whose functions
    queues a download into its own stack buffer and returns; the program synchronises through the Python
    API. The interpreter's frames of that call are now where the buffer was: the copy wrote over them
    (SIGSEGV). It fails now as from a C synchronisation, 507015 naming the copy and why. A Python callback
    that runs under acl.rt.process_report and calls a C function downloading into its live buffer is the
    program's code: the download is written (171)."""
    library = ctoolkit.compile_program(OWN_BUFFERS, tmp_path, name="libownbuffers.so", language="c",
                                       flags=("-shared", "-fPIC"), libraries=("ascendcl",))
    done = run_python('''
        import ctypes, sys, threading
        runtime = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
        library = ctypes.CDLL(sys.argv[2])
        library.queue_into_own_buffer.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        library.download_into_own_buffer.argtypes = [ctypes.c_void_p]
        runtime.aclInit(None)  # the toolkit starts in this process
        import acl
        acl.rt.set_device(0)
        stream, _ = acl.rt.create_stream()
        device, _ = acl.rt.malloc(4096, 0)
        acl.rt.memset(device, 4096, 0xAB, 4096)
        print("queued", library.queue_into_own_buffer(device, stream))
        print("synchronised", acl.rt.synchronize_stream(stream), flush=True)
        print(acl.get_recent_err_msg().split(" ", 2)[2])
        results, stop = [], []
        context, _ = acl.rt.get_context()
        def reporter():
            acl.rt.set_context(context)
            while not stop:
                acl.rt.process_report(100)
        thread = threading.Thread(target=reporter)
        thread.start()
        acl.rt.subscribe_report(thread.ident, stream)
        acl.rt.launch_callback(lambda data: results.append(library.download_into_own_buffer(device)), None, 1, stream)
        print("callback", acl.rt.synchronize_stream(stream), results)
        stop.append(True)
        thread.join()
        acl.rt.unsubscribe_report(thread.ident, stream)
        acl.rt.free(device); acl.rt.destroy_stream(stream); acl.rt.reset_device(0); acl.finalize()
    ''', tmp_path, library, NPUEMU_SANITIZE="off")
    assert done.returncode == 0 and done.stderr == "", shown(done)
    lines = done.stdout.splitlines()
    assert lines[:2] == ["queued 0", "synchronised 507015"] and lines[3] == "callback 0 [171]", shown(done)
    assert re.fullmatch(r"ACL_ERROR_RT_AICORE_EXCEPTION\(507015\): aclrtSynchronizeStream: the device raised an "
                        r"exception while running queued work: AI Core exception in aclrtMemcpyAsync\(4096 bytes\) "
                        r"on stream 0x[0-9a-f]+ of device 0 launched at \S+host.py:\d+ in <module>: dst: expected "
                        r"4096 bytes of writable host memory at 0x[0-9a-f]+, found \[0x[0-9a-f]+, 0x[0-9a-f]+\) on "
                        r"this thread's stack below the frame of the program's call to aclrtSynchronizeStream, which "
                        r"is in progress and has its own frames there: a stack buffer whose function returned "
                        r"before the copy ran \(keep the buffer alive until the copy has run\)", lines[2]), lines[2]
