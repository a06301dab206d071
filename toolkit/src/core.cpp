// libnpuemu_python.so: the half of the bridge that speaks Python.
//
// Loaded by the bridge after libpython is in the global scope (its Py* symbols resolve from there:
// this library is not linked with libpython, so that a missing or static libpython is a message,
// not a loader error). It starts the interpreter (or joins the host's), imports the runtime and the
// functions the table names, and then converts each call: C slots to Python values by their kinds,
// the Python call's outputs back to the C out-parameters, its status to the return value.
//
// Threads: npuemu keeps per-thread state (the current context, the error messages) in
// threading.local, which CPython wipes when a thread's last PyGILState_Release deletes its thread
// state. So a host thread Python did not create keeps one thread state for its whole life (HostThread),
// which the toolkit ends itself when the thread ends.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "forward.h"
#include "page_probe.h"

#if !defined(NPUEMU_INTERFACE) || !defined(NPUEMU_VERSION)
#error "NPUEMU_INTERFACE, NPUEMU_VERSION: this build's interface fingerprint and npuemu version (toolkit/CMakeLists.txt)"
#endif

namespace {

const int kRuntimeNull = 100000, kAclnnNull = 161001;          // ACL_ERROR_INVALID_PARAM, ACLNN_ERR_PARAM_NULLPTR
const int kRuntimeInvalid = 100000, kAclnnInvalid = 161002;    // ... ACLNN_ERR_PARAM_INVALID
const int kRuntimeInternal = 507000, kAclnnInternal = 561000;  // ACL_ERROR_RT_INTERNAL_ERROR, ACLNN_ERR_INNER
const int kRuntimeStopped = 500001, kAclnnStopped = 361001;    // ACL_ERROR_FAILURE, ACLNN_ERR_RUNTIME_ERROR
const uint64_t kMaxArray = uint64_t(1) << 24;                  // elements of one array argument
const int kMaxParameters = 16;                                 // toolkit/generate.py checks the table
const int kCallerFrames = 3;  // the program's frames a site keeps, as for Python callers (emulator/sites.py)

// What the calls use lives as long as the process: nothing here has a destructor. This library is
// loaded at the first call, after the program's global objects were made, so a destructor of its own
// would run at exit before theirs, and before the exit functions of the program and of the bridge:
// a global destructor, an atexit function or another thread that calls then would find freed memory.
// So the tables below are plain pointers to memory that is never freed (as the interpreter is never
// finalised), and the strings the calls return live in memory that is never freed either.
const npuemu_signature *signatures = nullptr;
PyObject **targets = nullptr;      // the Python callable of each function, by number
PyObject *record = nullptr;        // emulator.errors.record(code, api_name, message)
PyObject *rejected = nullptr;      // emulator.errors.c_rejected(code, api_name, message, arguments): the status
PyObject *live_handles = nullptr;  // emulator.resource.HANDLES._live: handle -> live resource
PyObject *by_signal_handler = nullptr;  // emulator.errors.raised_by_signal_handler(error) -> bool
PyObject **object_classes = nullptr;  // the aclnn classes of NK_OBJECT parameters, by number
bool traceback_shown = false;
// The C program's innermost frames of the call in progress (emulator.sites.native_site asks for them).
thread_local void *caller_stack[kCallerFrames];
thread_local int caller_frames = 0;

// What the toolkit keeps for a host thread: its Python thread state, if Python did not create the thread
// (see the top), and the text aclGetRecentErrMsg returned last. It must last until the thread's last
// call, which may come from the destructor of one of the program's thread_local objects, or, on the
// main thread, from a global destructor. So it is no thread_local object (C++ destroys those of a
// thread in the reverse order of their construction, this one before the program's that were made
// before the thread's first call; and those of the main thread first thing in exit()): a plain
// pointer holds it, and a pthread key's destructor ends it, which runs when a thread ends after every
// thread_local destructor of the thread (and again if one of the key destructors called once more).
// exit() runs no key destructors: the main thread's record lasts until the process is gone.
struct HostThread {
  bool pinned = false;
  pid_t pid = 0;  // the process that pinned it
  PyThreadState *saved = nullptr;  // made by PyGILState_Ensure, kept without the GIL between calls
  std::string message;  // aclGetRecentErrMsg's, valid until the thread's next call
};
thread_local HostThread *host_thread = nullptr;
pthread_key_t host_thread_key;  // made at boot; its value is host_thread

HostThread &this_host_thread() {
  if (host_thread == nullptr) {
    host_thread = new HostThread;
    pthread_setspecific(host_thread_key, host_thread);
  }
  return *host_thread;
}

// Gives a thread Python did not create its thread state for good.
void pin_thread_state(HostThread &thread) {
  if (thread.pinned) return;
  PyGILState_Ensure();  // a new thread state, which PyGILState_GetThisThreadState finds at the next calls
  thread.saved = PyEval_SaveThread();
  thread.pid = getpid();
  thread.pinned = true;
}

// The key's destructor, as the thread ends: its thread state goes (with its threading.local values).
// Not by PyGILState_Release: that finds the thread state through CPython's own pthread key, and glibc
// clears each key's value as it reaches the key, in the order the keys were made. In a Python host
// CPython's key is older than this one (made at the boot), so its value is gone by now and the release
// would abort the process ("no thread-state for this thread"). The thread state is ended directly, as
// that release would: the same in either order.
void end_host_thread(void *record) {
  HostThread *thread = static_cast<HostThread *>(record);
  // Not in a child made by fork() that exits on this thread: the child's copy of the GIL may be held
  // by a thread of the parent that does not exist in the child, and taking it would hang the exit.
  if (thread->pinned && thread->pid == getpid() && Py_IsInitialized()) {
    PyEval_RestoreThread(thread->saved);
    PyThreadState_Clear(thread->saved);
    PyThreadState_DeleteCurrent();  // releases the GIL (and clears CPython's key, if it still holds it)
  }
  delete thread;
  host_thread = nullptr;
}

// -------------------------------------------------------------------------------------------------
// Errors

struct Failure {
  int code;
  std::string message;
};

int null_code(const npuemu_signature &sig) { return sig.layer == NL_ACLNN ? kAclnnNull : kRuntimeNull; }
int invalid_code(const npuemu_signature &sig) { return sig.layer == NL_ACLNN ? kAclnnInvalid : kRuntimeInvalid; }
int internal_code(const npuemu_signature &sig) { return sig.layer == NL_ACLNN ? kAclnnInternal : kRuntimeInternal; }
int stopped_code(const npuemu_signature &sig) { return sig.layer == NL_ACLNN ? kAclnnStopped : kRuntimeStopped; }

std::string python_error(bool show_traceback = false);
std::string reinstall_advice(const npuemu_boot *boot);  // what to do when the tree and the package differ

// Leave the message for aclGetRecentErrMsg, as the Python layer does for its own rejections.
void leave_message(const npuemu_signature &sig, const Failure &failure) {
  PyObject *result = PyObject_CallFunction(record, "iss", failure.code, sig.name, failure.message.c_str());
  if (result == nullptr) python_error(true);
  Py_XDECREF(result);
}

// The C arguments of a call as they were given, by parameter name, for the observers of a rejected call:
// numbers as numbers, anything behind a pointer as its address (None for null), never read.
PyObject *given_arguments(const npuemu_signature &sig, const npuemu_value *args) {
  PyObject *given = PyDict_New();
  for (int slot = 0; given != nullptr && slot < sig.param_count; ++slot) {
    PyObject *value;
    switch (sig.params[slot].kind) {
      case NK_INT: value = PyLong_FromLongLong(args[slot].i); break;
      case NK_UINT: case NK_COUNT: value = PyLong_FromUnsignedLongLong(args[slot].u); break;
      case NK_BOOL: value = PyBool_FromLong(args[slot].i != 0); break;
      case NK_DOUBLE: value = PyFloat_FromDouble(args[slot].d); break;
      default:  // (Py_NewRef is not in Python 3.9, which the toolkit builds with too)
        value = args[slot].p != nullptr ? PyLong_FromVoidPtr(const_cast<void *>(args[slot].p)) : Py_None;
        if (value == Py_None) Py_INCREF(value);
    }
    if (value == nullptr || PyDict_SetItemString(given, sig.names[slot], value) != 0) Py_CLEAR(given);
    Py_XDECREF(value);
  }
  return given;
}

// A call rejected here, before its Python function ran: emulator.errors.c_rejected shows it to the call
// observers as the Python layer does its own rejections (fault injection counts it and may fail it with
// an injected code instead, the trace and the logs show it) and leaves the message.
void reject(const npuemu_signature &sig, const npuemu_value *args, Failure *failure) {
  PyObject *given = given_arguments(sig, args);
  PyObject *result = given == nullptr ? nullptr : PyObject_CallFunction(rejected, "issO", failure->code, sig.name,
                                                                         failure->message.c_str(), given);
  Py_XDECREF(given);
  if (result != nullptr && PyLong_Check(result)) {
    failure->code = static_cast<int>(PyLong_AsLong(result));
  } else {
    python_error();
    leave_message(sig, *failure);
  }
  Py_XDECREF(result);
}

// What the Python code under a call may raise that is no error of the call's or of npuemu's: a
// BaseException that is not an Exception. The program was interrupted (KeyboardInterrupt: Ctrl-C in a
// Python host, whose handler raises it in whatever Python code runs, the runtime's under a C call), or
// asked to end (SystemExit: sys.exit() in a Python callback), or a generator was closed; or an Exception
// a Python signal handler of the program raised (the signal.alarm time-limit idiom), which the runtime
// lets through as it does Ctrl-C's. Such an exception is no internal error: the call fails with the layer's "stopped" code, and the exception is kept, never
// printed (PyErr_Print would end the process on a SystemExit), to be raised again for the program's Python
// code when the call returns (leave_call).
struct Kept {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
};
thread_local Kept kept_stop;  // the first stop of this thread's calls in progress
unsigned long main_thread = 0;  // the interpreter's main thread (threading.main_thread().ident)

// Whether the pending Exception was raised by a Python signal handler (it stays pending).
bool raised_by_signal_handler() {
  if (by_signal_handler == nullptr) return false;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value != nullptr && traceback != nullptr) PyException_SetTraceback(value, traceback);
  PyObject *answer = value != nullptr ? PyObject_CallFunctionObjArgs(by_signal_handler, value, nullptr) : nullptr;
  const bool raised = answer == Py_True;
  Py_XDECREF(answer);
  PyErr_Clear();  // an error of the question itself: not a stop
  PyErr_Restore(type, value, traceback);
  return raised;
}

bool stop_pending() {
  if (PyErr_Occurred() == nullptr) return false;
  return !PyErr_ExceptionMatches(PyExc_Exception) || raised_by_signal_handler();
}

// A stop owed to the main thread's Python code (GIL held; pending calls run on the main thread only).
// A pending call raises it at the next instruction the thread runs, which must be the program's, after
// the C call returned: a C routine may make several calls, and raised in the runtime's Python code under
// the next one, it would fail that call and every later one of the routine (its cleanup, its
// aclGetRecentErrMsg). So a pending call that comes while a call is in progress (call_depth) leaves it
// owed, and the end of that call queues it again.
struct Owed {
  Kept stop;
  bool queued = false;
};
Owed *owed = nullptr;
thread_local int call_depth = 0;  // this thread's calls in progress (a callback's call nests)

int raise_owed(void *) {
  if (owed == nullptr) return 0;
  owed->queued = false;
  if (call_depth > 0) return 0;
  const Kept stop = owed->stop;
  delete owed;
  owed = nullptr;
  PyErr_Restore(stop.type, stop.value, stop.traceback);
  return -1;
}

void drop(Kept &stop) {
  Py_XDECREF(stop.type);
  Py_XDECREF(stop.value);
  Py_XDECREF(stop.traceback);
  stop = Kept();
}

// The end of a call (GIL held): at the end of the outermost one, the exception the calls kept is owed to
// the Python code that called, if this is the main thread of a Python program (with the exception itself:
// sys.exit's code is kept), and what is owed is queued. Elsewhere there is nothing to raise it in: a
// thread with no Python code above the call (a C thread, a C program's calls), or another thread of a
// Python program (an exception there cannot be held back from the runtime's code under the routine's next
// call, so it is not raised at all): the call's code and message are all.
void leave_call() {
  if (--call_depth > 0) return;
  // Before the start found the main thread (a start interrupted early), a KeyboardInterrupt says it: Python
  // raises Ctrl-C's in the main thread only.
  const bool main = main_thread != 0 ? PyThread_get_thread_ident() == main_thread
                                     : kept_stop.type != nullptr &&
                                           PyErr_GivenExceptionMatches(kept_stop.type, PyExc_KeyboardInterrupt);
  if (kept_stop.type != nullptr) {
    PyFrameObject *caller = PyThreadState_GetFrame(PyThreadState_Get());
    const bool python_called = caller != nullptr;
    Py_XDECREF(caller);
    if (main && python_called && owed == nullptr) {
      owed = new Owed{kept_stop};
      kept_stop = Kept();
    } else {
      drop(kept_stop);  // a second stop while one is owed: the first is the program's
    }
  }
  if (main && owed != nullptr && !owed->queued && Py_AddPendingCall(raise_owed, nullptr) == 0) owed->queued = true;
}

// An exception as "Type: text".
std::string described(PyObject *value) {
  if (value == nullptr) return "unknown error";
  PyObject *shown = PyObject_Str(value);
  const char *utf8 = shown != nullptr ? PyUnicode_AsUTF8(shown) : nullptr;
  const std::string text = std::string(Py_TYPE(value)->tp_name) + ": " + (utf8 != nullptr ? utf8 : "?");
  Py_XDECREF(shown);
  PyErr_Clear();
  return text;
}

// The pending Python exception, cleared, as "Type: text"; with `show_traceback`, printed on stderr first.
// A stop (above: `stop`, as stop_pending() said of it) is kept for leave_call instead, never printed.
std::string python_error_of(bool stop, bool show_traceback) {
  Kept error;
  PyErr_Fetch(&error.type, &error.value, &error.traceback);
  PyErr_NormalizeException(&error.type, &error.value, &error.traceback);
  const std::string text = described(error.value);
  if (stop && kept_stop.type == nullptr) {
    kept_stop = error;
  } else if (show_traceback && !stop) {
    PyErr_Restore(error.type, error.value, error.traceback);
    PyErr_Print();
  } else {
    drop(error);
  }
  return text;
}

std::string python_error(bool show_traceback) { return python_error_of(stop_pending(), show_traceback); }

// "Type: text" without the ": " of an empty text (a bare KeyboardInterrupt).
std::string trimmed(std::string text) {
  if (text.size() >= 2 && text.compare(text.size() - 2, 2, ": ") == 0) text.resize(text.size() - 2);
  return text;
}

// The pending Python exception as a failure: a stop as the layer's "stopped" code, naming it; anything
// else as a failure of ours, its traceback once on stderr, its text in the message.
Failure internal_failure(const npuemu_signature &sig) {
  const bool stop = stop_pending();  // (a question that may call Python: asked once)
  if (stop) {
    const std::string raised = trimmed(python_error_of(true, false));
    return {stopped_code(sig), "stopped by " + raised + " before it completed (the program is interrupted or ending: "
                               "no error of the call)"};
  }
  const std::string text = python_error_of(false, !traceback_shown);
  traceback_shown = true;
  return {internal_code(sig), "internal error of npuemu's C toolkit (please report): " + text};
}

// -------------------------------------------------------------------------------------------------
// C arguments to Python values

// Copies `size` bytes the caller says are at `address` without trusting it: a wild pointer is a
// message, not a crash (process_vm_readv reports EFAULT where a memcpy would fault).
bool read_memory(void *into, const void *address, size_t size) {
  if (size == 0) return true;
  struct iovec local = {into, size};
  struct iovec remote = {const_cast<void *>(address), size};
  const ssize_t copied = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (copied == static_cast<ssize_t>(size)) return true;
  if (copied < 0 && errno != EFAULT && errno != ESRCH) {  // not permitted here (a sandbox): trust the caller
    std::memcpy(into, address, size);
    return true;
  }
  return false;
}

// Out-parameters are written after the Python call, on success: a wild one (non-null, unmapped or
// read-only) must be refused before the call, as a null one is, not make the store fault. The check
// must cost next to nothing, because nearly every call has out-parameters.
//
// The usual out-parameter is a local variable of the caller (`aclrtMalloc(&ptr, ...)`): it lies on this
// thread's stack between this frame and the stack's top, which is mapped and writable, so two
// comparisons settle it. Anything else (the heap, globals) costs a system call per page it touches
// (below). Nothing is cached: memory that was good at one call may be unmapped by the next. Memory that
// is mapped but no longer the program's (freed heap memory, a returned function's stack frame) cannot
// be told from good memory, here as on the card.
struct StackRange {
  bool known = false;
  uintptr_t low = 0, high = 0;  // this thread's stack; empty if it cannot be told
};
thread_local StackRange stack_range;

const StackRange &this_thread_stack() {
  if (!stack_range.known) {  // once per thread (for the main thread, glibc reads /proc/self/maps)
    stack_range.known = true;
    pthread_attr_t attributes;
    if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
      void *base = nullptr;
      size_t bytes = 0;
      if (pthread_attr_getstack(&attributes, &base, &bytes) == 0) {
        stack_range.low = reinterpret_cast<uintptr_t>(base);
        stack_range.high = stack_range.low + bytes;
      }
      pthread_attr_destroy(&attributes);
    }
  }
  return stack_range;
}

bool on_live_stack(const void *address, size_t size) {
  const StackRange &stack = this_thread_stack();
  // This frame must be on that stack too: for a program running on a stack of its own (a coroutine's,
  // on the heap), everything between its frame and the thread's stack would otherwise look live.
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const uintptr_t start = reinterpret_cast<uintptr_t>(address);
  return here >= stack.low && here < stack.high && start >= here && start < stack.high && size <= stack.high - start;
}

// The toolkit's own part of a thread's stack. A public call runs the runtime (libpython, npuemu) on the
// program's stack, below the program's frame, and a synchronisation runs the queued copies there: a
// download queued into a stack buffer of a function that returned before the synchronisation would
// write over those frames and crash the call (the card would have written dead stack long before).
// Each public call in progress keeps where its frames start (`top`: the program's stack pointer at the
// call); a callback of the program that runs under it (aclrtProcessReport's) marks where the program's
// frames start again (`program_below`), so that the callback's own buffers stay the program's. The
// records live in npuemu_core_call's frames (and `enter`/`leave` cost a store each), or, for a call of
// the Python API in a Python program that loaded the toolkit (PythonCall), on the heap.
struct PublicCall {
  const char *name;            // the function, for messages
  uintptr_t top;
  uintptr_t program_below;     // 0: no callback of the program runs under this call
  PublicCall *outer;
  bool python;                 // a PythonCall
};
thread_local PublicCall *innermost_call = nullptr;

// The public call in progress on this thread whose own frames [start, end) meets, or null. A call's frames
// run from its `top` down to the deepest frame now (this one's), or to where a callback of the program
// runs under it: memory far below the deepest frame is no call's, and may be the program's live memory
// when the program calls from a stack of its own lying above it (a coroutine's stack, or a sigaltstack,
// that is an array in one of its frames: the frames of the function that switched to it lie below). The
// copy that follows the check runs a little deeper than the check (ctypes' call of memmove, NumPy's
// copy: a few KiB at most): kFramesBelowCheck more are the call's. Only the thread's own stack counts: a
// call made on a stack elsewhere (a coroutine's on the heap) is not told apart.
const uintptr_t kFramesBelowCheck = 16 * 1024;

__attribute__((noinline)) const PublicCall *call_whose_frames_meet(uintptr_t start, uintptr_t end) {
  const StackRange &stack = this_thread_stack();
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const uintptr_t deepest = here > kFramesBelowCheck ? here - kFramesBelowCheck : 0;
  for (const PublicCall *call = innermost_call; call != nullptr; call = call->outer) {
    if (call->top <= stack.low || call->top > stack.high) continue;
    const uintptr_t low = std::max({call->program_below, stack.low, deepest});
    if (start < call->top && end > low) return call;
  }
  return nullptr;
}

// The host's page size.
uintptr_t page_size() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// A pointer as messages show it (%p).
std::string address_text(const void *address) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", address);
  return text;
}

bool writable_memory(const void *address, size_t size) {
  if (on_live_stack(address, size)) return true;
  const uintptr_t page = page_size();
  const uintptr_t first = reinterpret_cast<uintptr_t>(address), last = first + size - 1;
  int writable = npuemu::page_writable(first);
  if (writable == 1 && first / page != last / page) writable = npuemu::page_writable(last);  // it straddles two pages
  if (writable >= 0) return writable == 1;
  // No futex operation here (an architecture without it): copy the bytes onto themselves, the kernel
  // reading them (mapped) and writing them back (writable).
  struct iovec range = {const_cast<void *>(address), size};
  const ssize_t copied = process_vm_readv(getpid(), &range, 1, &range, 1, 0);
  if (copied == static_cast<ssize_t>(size)) return true;
  return copied < 0 && errno != EFAULT && errno != ESRCH;  // not permitted here (a sandbox): trust the caller
}

// A function pointer (aclrtCallback) is called later, on the thread that processes the stream's reports:
// one that points anywhere but code (a stray integer, data) would crash the process there, far from the
// call that passed it. So it is refused at the call, as a wild out-parameter is. Nearly every function
// lies in an executable segment of a loaded module (the program, a library), which dl_iterate_phdr lists
// without a system call: nothing of it is cached, a library may be unloaded between two calls. An
// address outside them, legal for code made at run time (a JIT's, a ctypes callback's libffi closure),
// costs a read of /proc/self/maps, once per page: the last pages found executable are kept
// (ExecutablePages) until a module is loaded or unloaded.
struct CodeSearch {
  uintptr_t address;
  bool found;
  unsigned long long generation;  // the modules' (load_generation)
};

// How many modules were loaded and unloaded so far (glibc's counters, which dl_iterate_phdr gives in
// every entry: the first is enough); 0 without them (not glibc). emulator.sites pins return addresses to
// the modules at them; a change means an address may now be another library's (one loaded where an
// unloaded one was).
unsigned long long load_generation(const dl_phdr_info *info, size_t size) {
  return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs ? info->dlpi_adds + info->dlpi_subs : 0;
}

int find_in_executable_segment(dl_phdr_info *info, size_t size, void *data) {
  CodeSearch *search = static_cast<CodeSearch *>(data);
  search->generation = load_generation(info, size);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD || !(segment.p_flags & PF_X)) continue;
    const uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (search->address >= start && search->address - start < segment.p_memsz) {
      search->found = true;
      return 1;
    }
  }
  return 0;
}

// The hexadecimal number at `text` (lower-case digits, as /proc/self/maps writes them); `text` is left
// at the first character after it.
uintptr_t hexadecimal_at(const char *&text) {
  uintptr_t value = 0;
  for (;; ++text) {
    const char digit = *text;
    if (digit >= '0' && digit <= '9') value = value << 4 | static_cast<uintptr_t>(digit - '0');
    else if (digit >= 'a' && digit <= 'f') value = value << 4 | static_cast<uintptr_t>(digit - 'a' + 10);
    else return value;
  }
}

// Whether /proc/self/maps marks the page at `address` executable; true where it cannot be read (a
// sandbox, no free file descriptor): the caller is trusted, as for the other checks. Its lines
// ("start-end perms ...") come in the order of the addresses: the read stops at the first past `address`.
bool mapped_executable(uintptr_t address) {
  std::FILE *maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return true;
  bool executable = false, line_start = true;
  char line[512];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    if (line_start) {
      const char *at = line;
      const uintptr_t start = hexadecimal_at(at);
      if (start > address) break;
      const uintptr_t end = *at == '-' ? hexadecimal_at(++at) : 0;
      if (address < end && at[0] == ' ' && at[1] != '\0' && at[2] != '\0') {
        executable = at[3] == 'x';  // " rwxp"
        break;
      }
    }
    line_start = std::strchr(line, '\n') != nullptr;  // the rest of a line longer than the buffer (a long path) is no line
  }
  std::fclose(maps);
  return executable;
}

// The pages outside the modules last found executable on this thread, while the modules stay as they
// were (`generation`). A page the program unmaps and maps again, not executable, at the same address is
// still taken for code: such a pointer is as dangling as on the card, which never checks.
const int kExecutablePagesKept = 16;
struct ExecutablePages {
  unsigned long long generation = 0;
  uintptr_t pages[kExecutablePagesKept] = {};
  int count = 0, next = 0;  // pages kept; where the next goes (the oldest is replaced)
};
thread_local ExecutablePages executable_pages;

bool executable_memory(const void *function) {
  CodeSearch search = {reinterpret_cast<uintptr_t>(function), false, 0};
  dl_iterate_phdr(find_in_executable_segment, &search);
  if (search.found) return true;
  const uintptr_t page = search.address & ~(page_size() - 1);
  ExecutablePages &kept = executable_pages;
  if (kept.generation != search.generation) kept = ExecutablePages{search.generation};
  if (std::find(kept.pages, kept.pages + kept.count, page) != kept.pages + kept.count) return true;
  if (!mapped_executable(search.address)) return false;
  kept.pages[kept.next] = page;
  kept.next = (kept.next + 1) % kExecutablePagesKept;
  kept.count = std::min(kept.count + 1, kExecutablePagesKept);
  return true;
}

// The bytes the out-parameter of `kind` points to.
size_t output_size(uint8_t kind) {
  switch (kind) {
    case NK_OUT_I32: case NK_OUT_U32: case NK_OUT_F32: return 4;
    case NK_OUT_PTR: case NK_OUT_I64_ARRAY: return sizeof(void *);
    default: return 8;  // NK_OUT_I64, NK_OUT_U64, NK_OUT_COUNT
  }
}

template <typename T>
PyObject *list_of(const T *values, uint64_t count, PyObject *(*make)(T)) {
  PyObject *list = PyList_New(static_cast<Py_ssize_t>(count));
  for (uint64_t i = 0; list != nullptr && i < count; ++i) {
    PyObject *item = make(values[i]);
    if (item == nullptr) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

PyObject *from_i64(int64_t v) { return PyLong_FromLongLong(v); }
PyObject *from_f32(float v) { return PyFloat_FromDouble(v); }
PyObject *from_bool(bool v) { return PyBool_FromLong(v); }
PyObject *from_pointer(const void *v) {
  if (v == nullptr) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(const_cast<void *>(v));
}

// An array argument: null with a count of 0 is an empty list (a 0-D shape), null with a count is None
// (the Python layer names it), otherwise a copy of the caller's values.
PyObject *array_argument(const npuemu_signature &sig, int slot, const npuemu_value *args, Failure *failure) {
  const npuemu_param param = sig.params[slot];
  const uint64_t count = args[param.aux].u;
  const void *address = args[slot].p;
  if (address == nullptr) {
    if (count == 0) return PyList_New(0);
    Py_RETURN_NONE;
  }
  const size_t item = param.kind == NK_I64_ARRAY ? sizeof(int64_t) : param.kind == NK_F32_ARRAY ? sizeof(float)
                      : param.kind == NK_BOOL_ARRAY ? sizeof(bool) : sizeof(void *);
  if (count > kMaxArray) {
    *failure = {invalid_code(sig), std::string(sig.params[param.aux].kind == NK_COUNT ? sig.names[param.aux] : "count") +
                                       ": expected at most " + std::to_string(kMaxArray) + " values for " +
                                       sig.names[slot] + ", found " + std::to_string(count)};
    return nullptr;
  }
  std::vector<unsigned char> bytes(count * item);
  if (!read_memory(bytes.data(), address, bytes.size())) {
    *failure = {invalid_code(sig), std::string(sig.names[slot]) + ": expected " + std::to_string(count) +
                                       " readable values at " + address_text(address) + ", found memory the process cannot read"};
    return nullptr;
  }
  switch (param.kind) {
    case NK_I64_ARRAY: return list_of(reinterpret_cast<const int64_t *>(bytes.data()), count, from_i64);
    case NK_F32_ARRAY: return list_of(reinterpret_cast<const float *>(bytes.data()), count, from_f32);
    case NK_BOOL_ARRAY: return list_of(reinterpret_cast<const bool *>(bytes.data()), count, from_bool);
    default: return list_of(reinterpret_cast<const void *const *>(bytes.data()), count, from_pointer);
  }
}

// An aclnn object's handle as the object a Python caller would pass, when it is a live one of the class
// the prototype names; otherwise the int (null: None), which the Python layer checks and names as usual.
PyObject *object_argument(const void *handle, uint8_t class_number) {
  PyObject *number = from_pointer(handle);
  if (handle == nullptr || number == nullptr) return number;
  PyObject *found = PyDict_GetItemWithError(live_handles, number);  // borrowed
  if (found == nullptr || Py_TYPE(found) != reinterpret_cast<PyTypeObject *>(object_classes[class_number])) {
    PyErr_Clear();
    return number;
  }
  Py_DECREF(number);
  Py_INCREF(found);
  return found;
}

// The length of the NUL-terminated string at `text`, its pages checked readable one at a time while
// the NUL is looked for: a wild pointer, or a string that runs into an unmapped page, is false where a
// strlen would fault.
bool readable_string(const char *text, size_t *length) {
  const uintptr_t page = page_size();
  uintptr_t at = reinterpret_cast<uintptr_t>(text);
  while (true) {
    const int readable = npuemu::page_readable(at);
    if (readable == 0) return false;
    if (readable < 0) {  // the kernel would not say (no futexes here): the caller is trusted
      *length = std::strlen(text);
      return true;
    }
    const uintptr_t page_end = (at / page + 1) * page;  // 0 past the last page: unreadable, above
    const void *nul = std::memchr(reinterpret_cast<const void *>(at), 0, page_end - at);
    if (nul != nullptr) {
      *length = static_cast<size_t>(static_cast<const char *>(nul) - text);
      return true;
    }
    at = page_end;
  }
}

// A `const char *` argument as a str (null: None); nullptr with `failure` set for memory the process
// cannot read.
PyObject *string_argument(const npuemu_signature &sig, int slot, const char *text, Failure *failure) {
  if (text == nullptr) Py_RETURN_NONE;
  size_t length = 0;
  if (!readable_string(text, &length)) {
    *failure = {invalid_code(sig), std::string(sig.names[slot]) + ": expected a NUL-terminated string at " +
                                       address_text(text) +
                                       ", found memory the process cannot read"};
    return nullptr;
  }
  return PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(length), "surrogateescape");
}

// The Python arguments of a call; false with `failure` set for an argument no call could take.
bool arguments(const npuemu_signature &sig, const npuemu_value *args, PyObject **into, int *count,
               Failure *failure) {
  for (int slot = 0; slot < sig.param_count; ++slot) {
    PyObject *value = nullptr;
    switch (sig.params[slot].kind) {
      case NK_INT: value = PyLong_FromLongLong(args[slot].i); break;
      case NK_UINT: value = PyLong_FromUnsignedLongLong(args[slot].u); break;
      case NK_BOOL: value = PyBool_FromLong(args[slot].i != 0); break;
      case NK_DOUBLE: value = PyFloat_FromDouble(args[slot].d); break;
      case NK_PTR: value = from_pointer(args[slot].p); break;
      case NK_FUNCTION:
        if (args[slot].p != nullptr && !executable_memory(args[slot].p)) {  // null: the Python layer names it
          *failure = {invalid_code(sig), std::string(sig.names[slot]) + ": expected a function, found " +
                                             address_text(args[slot].p) +
                                             " (not executable memory)"};
          return false;
        }
        value = from_pointer(args[slot].p);
        break;
      case NK_OBJECT: value = object_argument(args[slot].p, sig.params[slot].aux); break;
      case NK_STR:
        value = string_argument(sig, slot, static_cast<const char *>(args[slot].p), failure);
        if (value == nullptr && !failure->message.empty()) return false;
        break;
      case NK_I64_ARRAY:
      case NK_F32_ARRAY:
      case NK_BOOL_ARRAY:
      case NK_PTR_ARRAY:
        value = array_argument(sig, slot, args, failure);
        if (value == nullptr && !failure->message.empty()) return false;
        break;
      case NK_OUT_COUNT:
      case NK_OUT_I32: case NK_OUT_U32: case NK_OUT_I64: case NK_OUT_U64: case NK_OUT_F32: case NK_OUT_PTR:
      case NK_OUT_I64_ARRAY:
        if (args[slot].p == nullptr) {  // the ACL layer rejects a null out-pointer before anything else
          *failure = {null_code(sig), std::string(sig.names[slot]) + ": expected a non-null pointer, found null"};
          return false;
        }
        if (!writable_memory(args[slot].p, output_size(sig.params[slot].kind))) {  // as an unreadable array
          *failure = {invalid_code(sig), std::string(sig.names[slot]) + ": expected " +
                                             std::to_string(output_size(sig.params[slot].kind)) +
                                             " writable bytes at " + address_text(args[slot].p) + ", found memory the process cannot write"};
          return false;
        }
        continue;
      default:  // NK_COUNT: part of its array
        continue;
    }
    if (value == nullptr) {
      *failure = internal_failure(sig);
      return false;
    }
    into[(*count)++] = value;
  }
  return true;
}

// -------------------------------------------------------------------------------------------------
// Python results to C

// An object's handle: an int as it is, None as null, an aclnn object by its `handle`.
bool handle_of(PyObject *object, const void **into) {
  if (object == Py_None) {
    *into = nullptr;
    return true;
  }
  PyObject *number = PyLong_Check(object) ? (Py_INCREF(object), object) : PyObject_GetAttrString(object, "handle");
  if (number == nullptr) return false;
  *into = PyLong_AsVoidPtr(number);
  Py_DECREF(number);
  return !PyErr_Occurred();
}

bool write_output(const npuemu_signature &sig, int slot, PyObject *value, const npuemu_value *args) {
  void *target = const_cast<void *>(args[slot].p);
  switch (sig.params[slot].kind) {
    case NK_OUT_I32: *static_cast<int32_t *>(target) = static_cast<int32_t>(PyLong_AsLong(value)); break;
    case NK_OUT_U32: *static_cast<uint32_t *>(target) = static_cast<uint32_t>(PyLong_AsUnsignedLong(value)); break;
    case NK_OUT_I64: *static_cast<int64_t *>(target) = PyLong_AsLongLong(value); break;
    case NK_OUT_U64: *static_cast<uint64_t *>(target) = PyLong_AsUnsignedLongLong(value); break;
    case NK_OUT_F32: *static_cast<float *>(target) = static_cast<float>(PyFloat_AsDouble(value)); break;
    case NK_OUT_PTR: {
      const void *handle = nullptr;
      if (!handle_of(value, &handle)) return false;
      *static_cast<const void **>(target) = handle;
      break;
    }
    case NK_OUT_I64_ARRAY: {  // new[]: the caller delete[]s it, as the library's getters require
      PyObject *items = PySequence_Fast(value, "expected a list");
      if (items == nullptr) return false;
      const Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
      int64_t *array = new int64_t[count > 0 ? count : 1];
      for (Py_ssize_t i = 0; i < count; ++i) array[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(items, i));
      Py_DECREF(items);
      if (PyErr_Occurred()) {
        delete[] array;
        return false;
      }
      *static_cast<int64_t **>(target) = array;
      *static_cast<uint64_t *>(const_cast<void *>(args[sig.params[slot].aux].p)) = static_cast<uint64_t>(count);
      break;
    }
    default: break;
  }
  return !PyErr_Occurred();
}

// A Python str as the bytes a C program expects: UTF-8, and a path's bytes that are not UTF-8 (Python
// holds them as lone surrogates, as os.fsdecode does) given back as they were. False with a Python exception.
bool c_bytes(PyObject *text, std::string &into) {
  PyObject *encoded = PyUnicode_AsEncodedString(text, "utf-8", "surrogateescape");
  if (encoded == nullptr) return false;
  into.assign(PyBytes_AS_STRING(encoded), static_cast<size_t>(PyBytes_GET_SIZE(encoded)));
  Py_DECREF(encoded);
  return true;
}

const char *static_string(PyObject *text) {
  // One copy per distinct value (GIL held), valid for the life of the process: never freed (see the top).
  static std::set<std::string> &strings = *new std::set<std::string>;
  std::string bytes;
  return c_bytes(text, bytes) ? strings.insert(bytes).first->c_str() : nullptr;
}

const char *thread_string(PyObject *text) {
  std::string &latest = this_host_thread().message;  // valid until the thread's next call, as aclGetRecentErrMsg's is
  return c_bytes(text, latest) ? latest.c_str() : nullptr;
}

// The C result of a Python call's result; false with a Python exception for a result of the wrong shape.
bool convert_result(const npuemu_signature &sig, PyObject *result, const npuemu_value *args, npuemu_value *into) {
  switch (sig.returns) {
    case NR_STATUS: {
      PyObject *status = result;
      if (sig.output_count > 0 && !PyTuple_Check(result)) {
        PyErr_Format(PyExc_TypeError, "%s returned no tuple of its %d outputs and a status", sig.name,
                     sig.output_count);
        return false;
      }
      if (PyTuple_Check(result)) {
        const Py_ssize_t size = PyTuple_GET_SIZE(result);
        if (size != sig.output_count + 1) {
          PyErr_Format(PyExc_TypeError, "%s returned %zd values, the table says %d outputs and a status", sig.name,
                       size, sig.output_count);
          return false;
        }
        status = PyTuple_GET_ITEM(result, size - 1);
      }
      into->i = PyLong_AsLong(status);
      if (PyErr_Occurred()) return false;
      if (into->i == 0) {  // outputs are written only on success
        for (int k = 0; k < sig.output_count; ++k) {
          if (!write_output(sig, sig.outputs[k], PyTuple_GET_ITEM(result, k), args)) return false;
        }
      }
      return true;
    }
    case NR_HANDLE: return handle_of(result, &into->p);
    case NR_U64: into->u = PyLong_AsUnsignedLongLong(result); break;
    case NR_U16: into->u = PyLong_AsUnsignedLong(result); break;
    case NR_F32: into->d = PyFloat_AsDouble(result); break;
    case NR_STR_STATIC: into->p = result == Py_None ? nullptr : static_string(result); break;
    case NR_STR_THREAD: into->p = result == Py_None ? nullptr : thread_string(result); break;
  }
  return !PyErr_Occurred();
}

npuemu_value failure_value(const npuemu_signature &sig, const Failure &failure) {
  npuemu_value value;
  value.u = 0;
  if (sig.returns == NR_STATUS) value.i = failure.code;
  return value;
}

npuemu_value invoke(int number, const npuemu_value *args) {
  const npuemu_signature &sig = signatures[number];
  PyObject *argv[kMaxParameters];
  int argc = 0;
  Failure failure = {0, ""};
  npuemu_value value;
  value.u = 0;
  if (!arguments(sig, args, argv, &argc, &failure)) {
    reject(sig, args, &failure);
    value = failure_value(sig, failure);
  } else {
    PyObject *result = PyObject_Vectorcall(targets[number], argv, argc, nullptr);
    if (result == nullptr || !convert_result(sig, result, args, &value)) {
      failure = internal_failure(sig);
      leave_message(sig, failure);
      value = failure_value(sig, failure);
    }
    Py_XDECREF(result);
  }
  for (int i = 0; i < argc; ++i) Py_DECREF(argv[i]);
  return value;
}

// -------------------------------------------------------------------------------------------------
// The module _npuemu_c: what the Python side of the toolkit asks of C

// The C program's innermost frames of the call in progress on this thread: a tuple of up to
// `kCallerFrames` return addresses, the forwarder's caller first (empty when no C call is in progress).
PyObject *caller(PyObject *, PyObject *) {
  PyObject *addresses = PyTuple_New(caller_frames);
  for (int i = 0; addresses != nullptr && i < caller_frames; ++i) {
    PyObject *address = PyLong_FromVoidPtr(caller_stack[i]);
    if (address == nullptr) {
      Py_CLEAR(addresses);
      break;
    }
    PyTuple_SET_ITEM(addresses, i, address);
  }
  return addresses;
}

int read_load_counters(dl_phdr_info *info, size_t size, void *counted) {
  *static_cast<unsigned long long *>(counted) = load_generation(info, size);
  return 1;
}

// modules_generation(): load_generation's number, which changes whenever a module is loaded or unloaded.
PyObject *modules_generation(PyObject *, PyObject *) {
  unsigned long long counted = 0;  // without the counters (not glibc): never changes
  dl_iterate_phdr(read_load_counters, &counted);
  return PyLong_FromUnsignedLongLong(counted);
}

// The program's callback, under the public call in progress: its frames, below this one's, are the
// program's (PublicCall). The mark is a local's address, below the frame's saved registers.
__attribute__((noinline)) void run_program_callback(void (*fn)(void *), void *data) {
  PublicCall *under = innermost_call;
  volatile char mark = 0;
  const uintptr_t previous = under != nullptr ? under->program_below : 0;
  if (under != nullptr) under->program_below = reinterpret_cast<uintptr_t>(&mark);
  fn(data);
  if (under != nullptr) under->program_below = previous;
}

// call(function address, argument address): runs a C callback `void fn(void *)` without the GIL.
PyObject *call(PyObject *, PyObject *args) {
  PyObject *function, *argument;
  if (!PyArg_ParseTuple(args, "OO", &function, &argument)) return nullptr;
  void *fn = PyLong_AsVoidPtr(function);
  void *data = argument == Py_None ? nullptr : PyLong_AsVoidPtr(argument);
  if (PyErr_Occurred()) return nullptr;
  Py_BEGIN_ALLOW_THREADS
  run_program_callback(reinterpret_cast<void (*)(void *)>(fn), data);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

// frames_in_use(address, size): the name of the public C call in progress on this thread whose own frames
// (npuemu's, below the program's frame) hold a byte of [address, address + size), or None.
PyObject *frames_in_use(PyObject *, PyObject *args) {
  unsigned long long address, size;
  if (!PyArg_ParseTuple(args, "KK", &address, &size)) return nullptr;
  const uintptr_t start = static_cast<uintptr_t>(address);
  const PublicCall *call = call_whose_frames_meet(start, start + std::max<uintptr_t>(size, 1));
  if (call == nullptr) Py_RETURN_NONE;
  return PyUnicode_FromString(call->name);
}

// A Python program that loaded the toolkit (ctypes) runs its C functions on the interpreter's stack: a
// download one of them queues into its own stack buffer, run when the program synchronises through the
// Python API (acl.rt), would write over the interpreter's frames of that call as it would over a C
// call's. So in such a process (only there: a plain Python program has no C buffers, and the per-call
// cost stays its own) each call of the Python API keeps a record too, from a call observer
// (npuemu_toolkit.adapters): python_call_starts(name) as it starts, python_call_ends(record, status) as
// it ends.
struct PythonCall : PublicCall {
  std::string own_name;
};

void end_python_call() {
  PythonCall *ended = static_cast<PythonCall *>(innermost_call);
  innermost_call = ended->outer;
  delete ended;
}

// The Python calls an exception left without their end (KeyboardInterrupt, which passes the observers'
// ends by): those whose frames start at or below `top`, where a call starts now, and under which no
// callback of the program runs, are over. A Python call made inside one in progress comes from a
// callback of the program (marked), or from a finalizer that the garbage collector runs, through C
// frames, deeper; a C call, from a callback only (the runtime calls none): at a C call, all are over.
void end_python_calls_left_at(uintptr_t top) {
  while (innermost_call != nullptr && innermost_call->python && innermost_call->program_below == 0 &&
         innermost_call->top <= top)
    end_python_call();
}

// python_call_starts(name): the record made (its address), or None for the Python call of a C call in
// progress (the bridge's: that call has its record, whose frames hold this one's).
PyObject *python_call_starts(PyObject *, PyObject *argument) {
  const uintptr_t top = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  end_python_calls_left_at(top);
  const PublicCall *outer = innermost_call;
  const char *name = PyUnicode_AsUTF8(argument);
  if (name == nullptr) return nullptr;
  if (outer != nullptr && !outer->python && outer->program_below == 0) Py_RETURN_NONE;
  PythonCall *call = new PythonCall();
  call->own_name = name;
  call->name = call->own_name.c_str();
  call->top = top;
  call->program_below = 0;
  call->outer = innermost_call;
  call->python = true;
  innermost_call = call;
  return PyLong_FromVoidPtr(call);
}

// python_call_ends(record, status): the record ends, with those an exception left inside it; nothing if a
// later start found it left (end_python_calls_left_at).
PyObject *python_call_ends(PyObject *, PyObject *args) {
  PyObject *record, *status;
  if (!PyArg_UnpackTuple(args, "python_call_ends", 2, 2, &record, &status)) return nullptr;
  const void *ending = PyLong_AsVoidPtr(record);
  if (PyErr_Occurred()) return nullptr;
  bool open = false;
  for (const PublicCall *call = innermost_call; call != nullptr && call->python && !open; call = call->outer)
    open = call == ending;
  while (open && innermost_call != ending) end_python_call();
  if (open) end_python_call();
  Py_RETURN_NONE;
}

// program_code_starts(): the program's Python callback starts under the call in progress (the
// runtime's, as run_program_callback for a C one): the C functions it calls have their frames below.
// Returns what program_code_ends(mark) restores.
PyObject *program_code_starts(PyObject *, PyObject *) {
  PublicCall *under = innermost_call;
  if (under == nullptr) Py_RETURN_NONE;
  const uintptr_t previous = under->program_below;
  under->program_below = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return PyLong_FromUnsignedLongLong(previous);
}

PyObject *program_code_ends(PyObject *, PyObject *mark) {
  if (mark == Py_None || innermost_call == nullptr) Py_RETURN_NONE;
  const unsigned long long previous = PyLong_AsUnsignedLongLong(mark);
  if (PyErr_Occurred()) return nullptr;
  innermost_call->program_below = static_cast<uintptr_t>(previous);
  Py_RETURN_NONE;
}

// symbol(address): the name of the function that starts at `address` (a C callback), as the program
// writes it: demangled, without its parameter list (`ns::on_done`, not `_ZN2ns7on_doneEPv`); None where
// the dynamic symbol table has no function starting there (a static function, a program linked
// without -rdynamic). dladdr's nearest symbol below the address would name some other function.
PyObject *symbol(PyObject *, PyObject *argument) {
  void *address = PyLong_AsVoidPtr(argument);
  if (PyErr_Occurred()) return nullptr;
  Dl_info info;
  if (dladdr(address, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != address) Py_RETURN_NONE;
  int status = 0;
  char *demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
  std::free(demangled);
  if (!name.empty() && name.back() == ')') {  // a C++ name's parameter list: from its matching '('
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      depth += name[i] == ')' ? 1 : name[i] == '(' ? -1 : 0;
      if (depth == 0) {
        if (i > 0) name.erase(i);
        break;
      }
    }
  }
  return PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), "surrogateescape");
}

// The end of a C program that NPUEMU_SANITIZE_EXITCODE gives an exit code (it reported something). Python's
// exit functions run at the program's exit, in the bridge's exit hook, which other exit work may follow:
// the atexit functions the program registered before it loaded the toolkit (a dlopen()ing host), the
// destructors of its libraries. os._exit there, as in a Python program, would skip them. So emulator.report
// hands the code to end_process, and the process ends with it later: in a function that this library's
// destructor registers. That destructor runs in the dynamic loader's finalisation (_dl_fini), which exit()
// runs after every atexit function and global destructor the program registered (the loader registered it
// before main), and a function registered from there runs once it has finalised every library: after all
// the exit work there is, but the flush of the C streams, which it does itself.
int exit_status = -1;  // the code given, or -1
pid_t embedded_pid = 0;  // the process whose interpreter this library started (not a child made by fork())

PyObject *end_process(PyObject *, PyObject *argument) {
  const long code = PyLong_AsLong(argument);
  if (PyErr_Occurred()) return nullptr;
  exit_status = static_cast<int>(code & 0xff);
  Py_RETURN_NONE;
}

void end_with_exit_status(void *) {
  if (exit_status < 0) return;
  std::fflush(nullptr);
  _exit(exit_status);
}

__attribute__((destructor)) void register_end_with_exit_status() {
  if (embedded_pid != 0 && embedded_pid == getpid()) abi::__cxa_atexit(end_with_exit_status, nullptr, nullptr);
}

// report.end_process_with(_npuemu_c.end_process): the C program ends with the code as above.
std::string hand_over_exit_status(const npuemu_boot *boot) {
  PyObject *report = PyImport_ImportModule("emulator.report");
  PyObject *module = report != nullptr ? PyImport_ImportModule("_npuemu_c") : nullptr;
  PyObject *end = module != nullptr ? PyObject_GetAttrString(module, "end_process") : nullptr;
  PyObject *done = end != nullptr ? PyObject_CallMethod(report, "end_process_with", "O", end) : nullptr;
  Py_XDECREF(end);
  Py_XDECREF(module);
  Py_XDECREF(report);
  if (done == nullptr) {
    return "cannot hand NPUEMU_SANITIZE_EXITCODE to the toolkit (" + python_error() + "): npuemu's Python packages "
           "and its C toolkit differ; " + reinstall_advice(boot);
  }
  Py_DECREF(done);
  return "";
}

PyMethodDef methods[] = {
    {"caller", caller, METH_NOARGS, "The innermost return addresses of the C program's call in progress (a tuple)."},
    {"modules_generation", modules_generation, METH_NOARGS,
     "A number that changes whenever a module is loaded or unloaded (dlopen, dlclose)."},
    {"end_process", end_process, METH_O, "end_process(code): the C program ends with this exit code, after its exit work."},
    {"call", call, METH_VARARGS, "call(fn, data): run the C function void fn(void *data) without the GIL."},
    {"frames_in_use", frames_in_use, METH_VARARGS,
     "frames_in_use(address, size): the public C call in progress whose own frames hold a byte of the range, or None."},
    {"symbol", symbol, METH_O, "symbol(address): the name of the C function at address, or None."},
    {"python_call_starts", python_call_starts, METH_O,
     "python_call_starts(name): a call of the Python API starts (its frames are the toolkit's): its record, or None."},
    {"python_call_ends", python_call_ends, METH_VARARGS,
     "python_call_ends(record, status): the recorded call of the Python API ends."},
    {"program_code_starts", program_code_starts, METH_NOARGS,
     "program_code_starts(): the program's Python callback starts; returns the mark program_code_ends takes."},
    {"program_code_ends", program_code_ends, METH_O, "program_code_ends(mark): the program's Python callback ended."},
    {nullptr, nullptr, 0, nullptr}};
PyModuleDef module_definition = {PyModuleDef_HEAD_INIT, "_npuemu_c", "npuemu's C toolkit, seen from Python.", -1,
                                 methods, nullptr, nullptr, nullptr, nullptr};

// -------------------------------------------------------------------------------------------------
// Start

// SIGINT stays the C program's. install_signal_handlers = 0 is not enough: Python's signal module, when
// it is first imported (npuemu's imports do), gives SIGINT a handler of its own if it finds the default
// action (CPython 3.9 to 3.13 all do). In a C program that handler turns Ctrl-C into a KeyboardInterrupt
// inside some later call, or into nothing while the program runs its own code, instead of ending the
// program. So while the interpreter starts and npuemu is imported, a placeholder holds SIGINT (Python
// leaves a signal that has a handler alone), and then the default action is put back; a Ctrl-C that came
// meanwhile is sent again, and ends the program as it would have. A handler or SIG_IGN the program set
// is not touched. (A Python host keeps its own handlers: it is not started here.)
volatile sig_atomic_t interrupted_while_starting = 0;

void hold_interrupt(int) { interrupted_while_starting = 1; }

// True if SIGINT had its default action and the placeholder now holds it.
bool hold_sigint() {
  struct sigaction placeholder, previous;
  std::memset(&placeholder, 0, sizeof(placeholder));
  placeholder.sa_handler = hold_interrupt;
  sigemptyset(&placeholder.sa_mask);
  placeholder.sa_flags = SA_RESTART;  // the start's system calls go on
  // One swap, not a look then a set: a handler another thread of the program sets in between would be
  // overwritten, then lost to the default action at the release.
  if (sigaction(SIGINT, &placeholder, &previous) != 0) return false;
  const bool took_default = !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_DFL;
  if (!took_default) sigaction(SIGINT, &previous, nullptr);  // the program's own: given back at once
  return took_default;
}

// The default action back (unless the program changed SIGINT meanwhile, on another thread), and a Ctrl-C
// that came while it was held sent again.
void release_sigint() {
  struct sigaction current, default_action;
  std::memset(&default_action, 0, sizeof(default_action));
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  if (sigaction(SIGINT, nullptr, &current) == 0 && current.sa_handler == hold_interrupt)
    sigaction(SIGINT, &default_action, nullptr);
  if (interrupted_while_starting) kill(getpid(), SIGINT);  // to whatever handles it now, the program's too
}

// Python's signal module, imported while SIGINT is held, so that no later import of it takes SIGINT.
void import_signal_module() {
  PyObject *module = PyImport_ImportModule("signal");
  if (module == nullptr) PyErr_Clear();
  Py_XDECREF(module);
}

std::string start_interpreter(const char *executable) {
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;  // SIGINT and the rest stay the C program's
  config.parse_argv = 0;
  PyStatus status = PyConfig_SetBytesString(&config, &config.executable, executable);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    return std::string("the interpreter did not start: ") + (status.err_msg != nullptr ? status.err_msg : "unknown");
  }
  return "";
}

// The handle table and the aclnn classes of NK_OBJECT parameters; "" or what failed.
std::string import_objects(const npuemu_boot *boot) {
  PyObject *resource = PyImport_ImportModule("emulator.resource");
  PyObject *handles = resource != nullptr ? PyObject_GetAttrString(resource, "HANDLES") : nullptr;
  Py_XSETREF(live_handles, handles != nullptr ? PyObject_GetAttrString(handles, "_live") : nullptr);  // a retried start
  Py_XDECREF(handles);
  Py_XDECREF(resource);
  PyObject *aclnn = live_handles != nullptr && PyDict_Check(live_handles) ? PyImport_ImportModule("aclnn_api") : nullptr;
  if (object_classes == nullptr)  // once: a start stopped by Ctrl-C is retried
    object_classes = new PyObject *[boot->object_class_count > 0 ? boot->object_class_count : 1]();  // never freed
  for (int i = 0; aclnn != nullptr && i < boot->object_class_count; ++i) {
    PyObject *cls = PyObject_GetAttrString(aclnn, boot->object_classes[i]);
    if (cls == nullptr || !PyType_Check(cls)) {
      Py_XDECREF(cls);
      Py_CLEAR(aclnn);
      break;
    }
    Py_XSETREF(object_classes[i], cls);
  }
  if (aclnn == nullptr) {
    return "cannot find npuemu's handle table and aclnn classes (" + python_error() + "): npuemu's Python packages and "
           "its C toolkit differ; " + reinstall_advice(boot);
  }
  Py_DECREF(aclnn);
  return "";
}

// "/a/b/c" -> "/a/b" ("." for a name alone).
std::string parent_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// sys.<name> as text ("?" if it cannot be had).
std::string sys_text(const char *name) {
  PyObject *value = PySys_GetObject(name);  // borrowed
  const char *utf8 = value != nullptr && PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : nullptr;
  if (utf8 == nullptr) PyErr_Clear();
  return utf8 != nullptr ? utf8 : "?";
}

// What to do when npuemu cannot be imported. In an interpreter the toolkit started, that interpreter is
// the one to fix or to choose (NPUEMU_PYTHON). In a process that already ran Python (a Python program,
// a C program that embeds Python), the toolkit joins that interpreter, and NPUEMU_PYTHON cannot change
// it: npuemu must be importable there. site.addsitedir (not PYTHONPATH) also reads the .pth files of the
// environment, which an editable install (`make install`) needs.
std::string import_advice(const npuemu_boot *boot) {
  if (boot->embedded) {
    return "install npuemu into this interpreter's environment (`make install` or `pip install .` in the npuemu "
           "checkout), or set NPUEMU_PYTHON to the python of the environment it is installed in";
  }
  const std::string executable = boot->executable;  // <prefix>/bin/python, whose site-packages are these
  const std::string site = parent_of(parent_of(executable)) + "/lib/python" + std::to_string(PY_MAJOR_VERSION) + "." +
                           std::to_string(PY_MINOR_VERSION) + "/site-packages";
  const std::string version = sys_text("version");
  return "this process already runs Python (" + sys_text("executable") + ", " + version.substr(0, version.find(' ')) +
         "), and the toolkit runs npuemu in it, not in an interpreter of its own, so NPUEMU_PYTHON does not apply: "
         "make npuemu importable in this Python before the first toolkit call, e.g. with `import site; "
         "site.addsitedir(\"" + site + "\")` (the site-packages of the environment npuemu is installed in, whose "
         "python is " + executable + "), or run a Python program with that python";
}

// True if the pending exception says that npuemu's package itself is not on the path (not that
// something it imports failed).
bool npuemu_missing() {
  if (!PyErr_ExceptionMatches(PyExc_ModuleNotFoundError)) return false;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject *name = value != nullptr ? PyObject_GetAttrString(value, "name") : nullptr;
  const char *utf8 = name != nullptr && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
  const bool missing = utf8 != nullptr && std::strcmp(utf8, "emulator") == 0;
  Py_XDECREF(name);
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
  return missing;
}

// What to do when npuemu was found but a module it imports failed: installing npuemu again or choosing
// another interpreter does not help when the cause is a PYTHONPATH entry (another project's, another
// toolkit's set_env.sh) that hides a module npuemu needs, such as NumPy.
// Only the entries that exist count: set_env.sh adds the toolkit's own, which hold nothing here.
std::string broken_import_advice() {
  const char *path = std::getenv("PYTHONPATH");
  std::string directories;
  for (const char *entry = path; entry != nullptr && *entry != '\0';) {
    const char *end = std::strchr(entry, ':');
    const std::string name = end != nullptr ? std::string(entry, end) : std::string(entry);
    struct stat status;
    if (!name.empty() && stat(name.c_str(), &status) == 0 && S_ISDIR(status.st_mode))
      directories += (directories.empty() ? "" : ":") + name;
    entry = end != nullptr ? end + 1 : nullptr;
  }
  if (!directories.empty()) {
    return "npuemu was found, but a module it imports failed, and PYTHONPATH puts " + directories +
           " before the environment's modules: a module there may hide one npuemu needs; remove that entry or unset "
           "PYTHONPATH";
  }
  return "npuemu was found, but a module it imports failed: reinstall npuemu's dependencies in that environment "
         "(`make install` or `pip install .`)";
}

// The directory of this library, the toolkit's lib64: emulator.sites takes no frame in it (a C callback's
// caller) for the program's. "" if unknown.
std::string library_directory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&library_directory), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// _npuemu_c.library_directory: the directory, as Python names a path (bytes that are not UTF-8 kept).
bool add_library_directory(PyObject *module) {
  PyObject *directory = PyUnicode_DecodeFSDefault(library_directory().c_str());
  const bool added = directory != nullptr && PyModule_AddObject(module, "library_directory", directory) == 0;
  if (!added) Py_XDECREF(directory);
  return added;
}

// ---- The interface check: this tree and the package's Python side must be of one build's interface.

// `text` as one word of a shell command line (quoted when it must be).
std::string shell_word(const std::string &text) {
  if (!text.empty() && text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+-=,:@%") ==
                           std::string::npos)
    return text;
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// module.attribute, a str, as text; false if it cannot be had, with `error` (python_error(): a stop is kept
// for the start to report) and `absent` (the module itself cannot be imported) set.
bool read_attribute(const char *module_name, const char *attribute, std::string *text, std::string *error,
                    bool *absent) {
  PyObject *module = PyImport_ImportModule(module_name);
  PyObject *value = module != nullptr ? PyObject_GetAttrString(module, attribute) : nullptr;
  const char *utf8 = value != nullptr && PyUnicode_Check(value) ? PyUnicode_AsUTF8(value) : nullptr;
  if (utf8 != nullptr) *text = utf8;
  *absent = module == nullptr && PyErr_ExceptionMatches(PyExc_ImportError);
  Py_XDECREF(value);
  Py_XDECREF(module);
  if (utf8 == nullptr) *error = python_error();
  return utf8 != nullptr;
}

// module.attribute as text ("?" if it cannot be had).
std::string attribute_text(const char *module_name, const char *attribute) {
  std::string text = "?", error;
  bool absent = false;
  read_attribute(module_name, attribute, &text, &error, &absent);
  return text;
}

// The tree this library is part of (the directory above its lib64).
std::string tree_root() { return parent_of(library_directory()); }

// The interpreter that runs npuemu here: the one this library started, or the Python host's own.
std::string running_interpreter(const npuemu_boot *boot) {
  return boot->embedded ? boot->executable : sys_text("executable");
}

// What to do when this tree and the npuemu package the start found are of different builds (the same advice
// as adapters.py's for a tree older than this check). A copy made by `npuemu toolkit install DIR` (which
// records npuemu.python) lives on its own, e.g. cached between CI runs while the package was upgraded: it is
// copied again from the package. The package's own tree comes and goes with the package: reinstall it.
std::string reinstall_advice(const npuemu_boot *boot) {
  const std::string root = tree_root(), interpreter = running_interpreter(boot);
  std::string advice = access((root + "/npuemu.python").c_str(), F_OK) == 0
      ? "this toolkit is a copy made by `npuemu toolkit install`: install the package's toolkit over it again with "
        "the npuemu of " + interpreter + " (`" + shell_word(interpreter) + " -m emulator toolkit install " +
        shell_word(root) + "`)"
      : "reinstall npuemu in the environment of " + interpreter + " (`make install` or `pip install .` in the npuemu "
        "checkout)";
  if (boot->embedded && std::getenv("NPUEMU_PYTHON") != nullptr && *std::getenv("NPUEMU_PYTHON") != '\0')
    advice += ", or point NPUEMU_PYTHON at the python of the environment this toolkit was installed from";
  return advice;
}

// The interface fingerprint of the package's Python side, which its build wrote beside its own tree
// (npuemu_toolkit/_interface.py), or why there is none.
std::string package_fingerprint() {
  std::string fingerprint, error;
  bool absent = false;
  if (!read_attribute("npuemu_toolkit._interface", "FINGERPRINT", &fingerprint, &error, &absent))
    fingerprint = absent ? "none: a build older than this check" : "unreadable (" + error + ")";
  return fingerprint;
}

// "" when the package's Python side was built with this tree's interface; else why the toolkit cannot start,
// naming both builds, and what to do. Checked once, before any name is looked up: a tree of another build
// may find every name and still pass its arguments by another convention.
std::string interface_mismatch(const npuemu_boot *boot) {
  const std::string package = package_fingerprint();
  if (package == NPUEMU_INTERFACE) return "";
  return "npuemu's C toolkit in " + tree_root() + " (npuemu " NPUEMU_VERSION ", interface " NPUEMU_INTERFACE
         ") and the npuemu package of " + running_interpreter(boot) + " (npuemu " +
         attribute_text("emulator", "__version__") + ", interface " + package + ") are of different builds, "
         "whose calls may differ in their arguments: " + reinstall_advice(boot);
}

// _npuemu_c.interface_fingerprint: adapters.py tells a tree older than the check above by its absence.
bool add_interface_fingerprint(PyObject *module) {
  return PyModule_AddStringConstant(module, "interface_fingerprint", NPUEMU_INTERFACE) == 0;
}

// Import what the table names; "" or what failed.
std::string import_targets(const npuemu_boot *boot) {
  const npuemu_signature *table = boot->signatures;
  const int count = boot->signature_count;
  PyObject *module = PyModule_Create(&module_definition);
  PyObject *modules = PyImport_GetModuleDict();
  // python_host: the process ran Python before the toolkit started (a Python program that loaded it)
  if (module == nullptr || !add_library_directory(module) || !add_interface_fingerprint(module) ||
      PyModule_AddIntConstant(module, "python_host", boot->embedded ? 0 : 1) != 0 ||
      PyDict_SetItemString(modules, "_npuemu_c", module) != 0)
    return python_error();
  Py_DECREF(module);
  PyObject *errors = PyImport_ImportModule("emulator.errors");
  if (errors == nullptr) {
    const bool found = !npuemu_missing();
    const std::string error = python_error();
    return "cannot import npuemu (" + error + "): " + (found ? broken_import_advice() : import_advice(boot));
  }
  const std::string mismatch = interface_mismatch(boot);
  if (!mismatch.empty()) {
    Py_DECREF(errors);
    return mismatch;
  }
  Py_XSETREF(record, PyObject_GetAttrString(errors, "record"));  // a retried start replaces the first's
  Py_XSETREF(rejected, PyObject_GetAttrString(errors, "c_rejected"));
  Py_XSETREF(by_signal_handler, PyObject_GetAttrString(errors, "raised_by_signal_handler"));
  Py_DECREF(errors);
  if (targets == nullptr) targets = new PyObject *[count > 0 ? count : 1]();  // never freed (see the top)
  for (int number = 0; number < count; ++number) {
    PyObject *owner = PyImport_ImportModule(table[number].module);
    PyObject *target = owner != nullptr ? PyObject_GetAttrString(owner, table[number].attribute) : nullptr;
    Py_XDECREF(owner);
    if (target == nullptr) {
      return std::string("cannot find ") + table[number].module + "." + table[number].attribute + " for " +
             table[number].name + " (" + python_error() + "): npuemu's Python packages and its C toolkit "
             "differ; " + reinstall_advice(boot);
    }
    Py_XSETREF(targets[number], target);
  }
  return record != nullptr && rejected != nullptr && by_signal_handler != nullptr ? "" : python_error();
}

// The interpreter's main thread, which runs Python's signal handlers and pending calls; "" or what failed.
std::string find_main_thread() {
  PyObject *threading = PyImport_ImportModule("threading");
  PyObject *thread = threading != nullptr ? PyObject_CallMethod(threading, "main_thread", nullptr) : nullptr;
  PyObject *ident = thread != nullptr ? PyObject_GetAttrString(thread, "ident") : nullptr;
  if (ident != nullptr) main_thread = PyLong_AsUnsignedLong(ident);
  Py_XDECREF(ident);
  Py_XDECREF(thread);
  Py_XDECREF(threading);
  return ident != nullptr && !PyErr_Occurred() ? "" : "cannot find Python's main thread (" + python_error() + ")";
}

// The program's frames of this call: the forwarder's caller, and for the calls that make resources
// (which a helper of the program often makes: its leak report names the helper's callers too) two
// more. The stack walk costs about a microsecond, so the launches' sites keep the caller only.
void take_caller_stack(const npuemu_signature &sig, const void *caller) {
  caller_stack[0] = const_cast<void *>(caller);
  caller_frames = 1;
  if (sig.site_frames <= 1) return;
  void *frames[kCallerFrames + 5];  // backtrace's caller (this function), core_call, the bridge, the forwarder first
  const int walked = backtrace(frames, kCallerFrames + 5);
  int first = 0;
  while (first < walked && frames[first] != caller) ++first;  // the forwarder's frame may be gone (a tail call)
  if (first == walked) return;
  caller_frames = std::min<int>(std::min<int>(kCallerFrames, sig.site_frames), walked - first);
  std::copy(frames + first, frames + first + caller_frames, caller_stack);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int npuemu_core_boot(const npuemu_boot *boot, char *error,
                                                                        unsigned long error_size) {
  signatures = boot->signatures;
  static int key_error = pthread_key_create(&host_thread_key, end_host_thread);  // once: a start may be retried
  if (key_error != 0) {
    std::snprintf(error, error_size, "cannot make a pthread key for the toolkit's threads: %s", std::strerror(key_error));
    return 1;
  }
  // NumPy's OpenBLAS would start a spinning thread per core as the imports below load it, for no use of
  // npuemu's: on a small machine they compete with the kernels' threads. It reads OPENBLAS_NUM_THREADS
  // once, then: the variable is set for the imports only, so that the program's environment, which its
  // children inherit, stays as it was (a value the program set is kept).
  const bool blas_threads_set_here = boot->embedded && std::getenv("OPENBLAS_NUM_THREADS") == nullptr;
  if (blas_threads_set_here) setenv("OPENBLAS_NUM_THREADS", "1", 0);
  std::string problem;
  bool interrupted = false;
  const bool sigint_held = boot->embedded && hold_sigint();
  if (boot->embedded) problem = start_interpreter(boot->executable);
  if (problem.empty()) {
    PyGILState_STATE gil = PyGILState_Ensure();
    ++call_depth;  // a stop owed from an interrupted start waits for this one's end
    if (boot->embedded) import_signal_module();
    problem = import_targets(boot);
    if (problem.empty()) problem = import_objects(boot);
    if (problem.empty()) problem = find_main_thread();
    if (problem.empty() && boot->embedded) {
      problem = hand_over_exit_status(boot);
      embedded_pid = getpid();
    }
    // A stop in the imports (Ctrl-C in a Python host, as the first call starts the toolkit) is no failure
    // of the toolkit: the start is left to the next call, and the stop raised again in the program.
    if (kept_stop.type != nullptr) {
      problem = "the start was stopped by " + trimmed(described(kept_stop.value)) + " (the program is interrupted "
                "or ending); the call did nothing, and the next call starts the toolkit again";
      interrupted = true;
    }
    leave_call();
    PyGILState_Release(gil);
    if (boot->embedded) PyEval_SaveThread();  // the interpreter's first thread state stays this thread's
  }
  if (sigint_held) release_sigint();
  if (blas_threads_set_here) unsetenv("OPENBLAS_NUM_THREADS");
  if (!problem.empty()) std::snprintf(error, error_size, "%s", problem.c_str());
  return problem.empty() ? NB_STARTED : interrupted ? NB_STOPPED : NB_FAILED;
}

extern "C" __attribute__((visibility("default"))) npuemu_value npuemu_core_call(int number, const npuemu_value *args,
                                                                                 const void *caller, const void *frame) {
  end_python_calls_left_at(UINTPTR_MAX);
  PublicCall in_progress = {signatures[number].name, reinterpret_cast<uintptr_t>(frame), 0, innermost_call, false};
  innermost_call = &in_progress;
  void *outer[kCallerFrames];  // a call from a callback of this thread's own call nests
  const int outer_frames = caller_frames;
  std::copy(caller_stack, caller_stack + kCallerFrames, outer);
  take_caller_stack(signatures[number], caller);  // before the GIL: other threads go on meanwhile
  if (PyGILState_GetThisThreadState() == nullptr) pin_thread_state(this_host_thread());
  PyGILState_STATE gil = PyGILState_Ensure();
  ++call_depth;
  npuemu_value value;
  try {
    value = invoke(number, args);
  } catch (abi::__forced_unwind &) {
    // CPython ends a thread that takes the GIL while the interpreter is finalised (a daemon thread of a
    // Python program that ends) with pthread_exit: the unwind must go on, or the process aborts.
    throw;
  } catch (...) {  // no C++ exception crosses into the C program (std::bad_alloc of a huge output, ...)
    const Failure failure = {internal_code(signatures[number]), "internal error of npuemu's C toolkit: a C++ exception"};
    leave_message(signatures[number], failure);
    value = failure_value(signatures[number], failure);
  }
  caller_frames = outer_frames;
  std::copy(outer, outer + kCallerFrames, caller_stack);
  innermost_call = in_progress.outer;
  leave_call();
  PyGILState_Release(gil);
  return value;
}

// At the C program's exit: Python's atexit functions (npuemu's leak report), then the streams flushed.
// The interpreter is not finalised: host threads and the kernels' pool may still be alive.
extern "C" __attribute__((visibility("default"))) void npuemu_core_exit(void) {
  if (!Py_IsInitialized()) return;
  // The program's own output first (what its global destructors printed, say), ahead of the reports.
  std::fflush(nullptr);
  PyGILState_STATE gil = PyGILState_Ensure();
  if (PyRun_SimpleString("import atexit, sys\natexit._run_exitfuncs()\nsys.stdout.flush()\nsys.stderr.flush()\n") != 0) {
    PyErr_Clear();
  }
  PyGILState_Release(gil);
}
