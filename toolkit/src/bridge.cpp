// libnpuemu_bridge.so: what every public library of the toolkit calls (npuemu_forward).
//
// It has no link-time dependency on Python, so a program always loads, and a bad set-up is reported,
// never a loader error or an abort. On the first call of any function it finds the interpreter of the
// environment npuemu is installed in (`interpreter()`), loads its shared libpython
// into the global scope (so that Python's own extension modules resolve their symbols even when the
// host dlopen()ed us with RTLD_LOCAL), then loads the core (libnpuemu_python.so), which starts the
// interpreter and forwards every call. If any step fails, every call returns ACL_ERROR_UNINITIALIZE
// (NULL for the creators) and leaves a message that names the interpreter and what to do.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "forward.h"
#include "signatures.inc"

#ifndef NPUEMU_PYTHON_EXECUTABLE
#error "NPUEMU_PYTHON_EXECUTABLE: the interpreter npuemu is installed with (set by toolkit/CMakeLists.txt)"
#endif

namespace {

const int kUninitialized = 100001;  // ACL_ERROR_UNINITIALIZE
const int kSignatureCount = static_cast<int>(sizeof(NPUEMU_SIGNATURES) / sizeof(NPUEMU_SIGNATURES[0]));

std::mutex boot_mutex;            // held by the thread that starts the toolkit
std::atomic<bool> booted{false};  // set once the start is over (success or failure)
npuemu_core_call_fn core_call = nullptr;
npuemu_core_exit_fn core_exit = nullptr;  // set only when the toolkit started its own interpreter
pid_t boot_pid = 0;                       // the process that started it (not a child made by fork())
// Why the toolkit cannot run, when it cannot. Never freed: a global std::string of a library the program
// dlopen()s would be destroyed at exit before the program's own exit work, which may still call.
const std::string *boot_error = nullptr;
int (*python_running)() = nullptr;  // libpython's Py_IsInitialized, once the toolkit started
// What aclGetRecentErrMsg returns after a call that could not run (once), and the text for a call made
// after Python was finalised: plain arrays and pointers, valid in any destructor.
thread_local const char *unread_reason = nullptr;
thread_local char finalised_reason[512];

std::string setting(const char *name, const char *fallback) {
  const char *value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

bool is_file(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

std::string directory_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string advice() {
  return "reinstall npuemu where it was built (`make install`, or `pip install .` in the npuemu checkout), or set "
         "NPUEMU_PYTHON to the python of the environment npuemu is installed in";
}

// A setting of the environment, with "" for unset: an empty NPUEMU_* or PYTHON* variable is unset.
std::string variable(const char *name) { return setting(name, ""); }

// Why a file that may be missing (a venv's pyvenv.cfg) cannot be read, or "" (read, or missing). Every
// descriptor in use (EMFILE, ENFILE) passes: nothing else could be opened either; `*transient` says so.
// What to do when every file descriptor is in use (EMFILE, ENFILE): a start failing so may be tried again.
const char kNoDescriptorAdvice[] = "every file descriptor the process may have is in use: close the files it no "
                                   "longer needs, or raise the limit, `ulimit -n`";

std::string unreadable(const std::string &path, int error, bool *transient) {
  if (error == ENOENT || error == ENOTDIR) return "";
  std::string reason = "cannot open " + path + ": " + std::strerror(error);
  if (error == EMFILE || error == ENFILE) {
    *transient = true;
    return reason + " (" + kNoDescriptorAdvice + ")";
  }
  return reason + ": make it readable, or " + advice();
}

// The prefix an interpreter at `executable` would start from: PYTHONHOME's (its first part: "prefix[:exec_prefix]"),
// else a venv's pyvenv.cfg's base interpreter's (`home = <prefix>/bin`), else its own; `*problem` says why
// a pyvenv.cfg could not be read (`*transient`: for lack of file descriptors).
std::string prefix_of(const std::string &executable, std::string *problem, bool *transient) {
  const std::string home = variable("PYTHONHOME");
  if (!home.empty()) return home.substr(0, home.find(':'));
  std::string bin = directory_of(executable);
  for (const std::string &config : {directory_of(bin) + "/pyvenv.cfg", bin + "/pyvenv.cfg"}) {
    std::FILE *file = std::fopen(config.c_str(), "r");
    if (file == nullptr) {
      *problem = unreadable(config, errno, transient);
      if (!problem->empty()) return "";
      continue;
    }
    char buffer[4096];
    while (std::fgets(buffer, sizeof(buffer), file) != nullptr) {
      const std::string line = buffer;
      if (line.compare(0, 4, "home") == 0 && line.find('=') != std::string::npos) {
        std::string found = line.substr(line.find('=') + 1);
        found.erase(0, found.find_first_not_of(" \t"));
        found.erase(found.find_last_not_of(" \t\r\n") + 1);
        bin = found;
      }
    }
    std::fclose(file);
  }
  return directory_of(bin);
}

// The landmark of the standard library CPython looks for: <prefix>/<platlibdir>/pythonX.Y/os.py.
std::string standard_library_in(const std::string &prefix) {
  const std::string platlibdir = variable("PYTHONPLATLIBDIR");
  return prefix + "/" + (platlibdir.empty() ? "lib" : platlibdir) + "/python" NPUEMU_PYTHON_VERSION "/os.py";
}

// The variables Python reads as it starts that can stop it (CPython then prints its path configuration,
// or a fatal error, with a status that names none of them): "" or "NAME=value, ..." of those set.
std::string start_variables() {
  std::string set;
  for (const char *name : {"PYTHONHOME", "PYTHONPLATLIBDIR", "PYTHONIOENCODING", "PYTHONMALLOC", "PYTHONHASHSEED",
                           "PYTHONUTF8", "PYTHONPYCACHEPREFIX", "PYTHONWARNINGS"}) {
    if (!variable(name).empty()) set += (set.empty() ? "" : ", ") + std::string(name) + "=" + variable(name);
  }
  return set;
}

// The library this code is in: the core sits beside it.
std::string own_directory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&npuemu_forward), &info) == 0 || info.dli_fname == nullptr) return ".";
  return directory_of(info.dli_fname);
}

std::string base_name(const std::string &path) { return path.substr(path.rfind('/') + 1); }

// The interpreter `npuemu toolkit install DIR` recorded in DIR/npuemu.python: the one that ran it; ""
// for a tree that is no copy, or with `*problem` saying why the record cannot be read.
std::string recorded_interpreter(const std::string &root, std::string *problem, bool *transient) {
  const std::string record = root + "/npuemu.python";
  std::FILE *file = std::fopen(record.c_str(), "r");
  if (file == nullptr) {
    *problem = unreadable(record, errno, transient);
    return "";
  }
  char buffer[4096] = "";
  if (std::fgets(buffer, sizeof(buffer), file) == nullptr) buffer[0] = '\0';
  std::fclose(file);
  const std::string line = buffer;
  return line.substr(0, line.find_last_not_of(" \t\r\n") + 1);
}

// The python of the environment whose site-packages holds the tree (<prefix>/lib/pythonX.Y/site-packages/
// npuemu_toolkit/cann, or dist-packages): a wheel runs in the environment it is installed in, wherever it
// was built. "" for a tree elsewhere.
std::string environment_interpreter(const std::string &root) {
  const std::string site = directory_of(directory_of(root));
  if (base_name(site) != "site-packages" && base_name(site) != "dist-packages") return "";
  std::string lib = directory_of(site);
  if (base_name(lib).compare(0, 6, "python") == 0) lib = directory_of(lib);
  const std::string bin = directory_of(lib) + "/bin/";
  for (const char *name : {"python" NPUEMU_PYTHON_VERSION, "python3", "python"}) {
    if (access((bin + name).c_str(), X_OK) == 0) return bin + name;
  }
  return "";
}

// The interpreter that runs npuemu's runtime, and where the choice came from (for the messages):
// NPUEMU_PYTHON; the one recorded beside a copied tree; the one of the environment the tree is
// installed in; the one of the build.
struct Interpreter {
  std::string executable, origin;
};

// `*problem`: why npuemu.python, where it may be, cannot be read.
Interpreter interpreter(std::string *problem, bool *transient) {
  const std::string chosen = variable("NPUEMU_PYTHON");  // empty: unset, as every NPUEMU_* setting
  if (!chosen.empty()) return {chosen, "NPUEMU_PYTHON"};
  const std::string root = directory_of(own_directory());
  std::string found = recorded_interpreter(root, problem, transient);
  if (!found.empty()) return {found, "recorded in " + root + "/npuemu.python by `npuemu toolkit install`"};
  found = environment_interpreter(root);
  if (!found.empty()) return {found, "the environment the toolkit is installed in"};
  return {NPUEMU_PYTHON_EXECUTABLE, "the one npuemu was built with"};
}

// A Python process that loads the toolkit (ctypes, a Python extension) already runs an interpreter.
bool host_runs_python(std::string *error) {
  auto is_initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  if (is_initialized == nullptr || !is_initialized()) return false;
  auto version = reinterpret_cast<const char *(*)()>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  const std::string expected = NPUEMU_PYTHON_VERSION ".";
  if (version != nullptr && std::string(version()).compare(0, expected.size(), expected) != 0) {
    *error = std::string("this process runs Python ") + version() + ", but npuemu's toolkit was built for Python " +
             NPUEMU_PYTHON_VERSION + " (" + NPUEMU_PYTHON_EXECUTABLE + "): load it from that Python, or from a "
             "C or C++ program";
  }
  return true;
}

std::string load_libpython(const std::string &executable) {
  const std::string library = setting("NPUEMU_LIBPYTHON", NPUEMU_LIBPYTHON);
  if (library.empty()) {
    return "the Python npuemu uses (" + executable + ") has no shared libpython" NPUEMU_PYTHON_VERSION ".so "
           "(it was built without --enable-shared), which the C toolkit embeds: install npuemu with a Python "
           "built with --enable-shared (pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install "
           NPUEMU_PYTHON_VERSION "; Debian: the libpython" NPUEMU_PYTHON_VERSION " package), or, with such a "
           "libpython of the same Python installed since, set NPUEMU_LIBPYTHON to its path";
  }
  if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char *reason = dlerror();
    return "cannot load the shared libpython of " + executable + " (" + library + "): " +
           (reason != nullptr ? reason : "unknown error") + "; the C toolkit needs it (a Python " NPUEMU_PYTHON_VERSION
           " built with --enable-shared): " + advice();
  }
  return "";
}

// Why `python` cannot be embedded, or "" once its libpython is loaded; `*transient`: for a lack of file
// descriptors, which the next call may no longer have (nothing is loaded yet: it can start again).
std::string embeddable(const Interpreter &python, bool *transient) {
  const std::string &executable = python.executable;
  if (access(executable.c_str(), X_OK) != 0) {
    return "the Python interpreter " + executable + " (" + python.origin +
           ") does not exist (a moved or deleted virtual environment?): " + advice();
  }
  std::string problem;
  const std::string prefix = prefix_of(executable, &problem, transient);
  if (!problem.empty()) return "cannot start the Python interpreter " + executable + " (" + python.origin + "): " + problem;
  const std::string standard_library = standard_library_in(prefix);
  if (!is_file(standard_library)) {
    const std::string set = variable("PYTHONHOME").empty() && variable("PYTHONPLATLIBDIR").empty() ? "" : start_variables();
    if (!set.empty()) {
      return "the environment sets " + set + ", and with it the Python interpreter " + executable + " (" + python.origin +
             ") finds no Python " NPUEMU_PYTHON_VERSION " standard library (no " + standard_library + "): unset " +
             "PYTHONHOME and PYTHONPLATLIBDIR (the interpreter finds its own), or make them name that Python's";
    }
    return executable + " (" + python.origin + ") is no Python " NPUEMU_PYTHON_VERSION " installation (no " +
           standard_library + "): " + advice();
  }
  return load_libpython(executable);
}

// The descriptors the interpreter may hold open at once while it starts and imports npuemu (it needs 2
// here: a module file and a directory), with room to spare. Fewer free is no start but a transient
// failure, decided before the interpreter starts: one that ran out of descriptors halfway cannot start
// again. "" when they are free (they are opened and closed again to tell).
constexpr int kStartDescriptors = 8;

std::string descriptors_short(bool *transient) {
  int opened[kStartDescriptors];
  int count = 0, error = 0;
  for (; count < kStartDescriptors; ++count) {
    opened[count] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (opened[count] < 0) {
      error = errno;
      break;
    }
  }
  for (int i = 0; i < count; ++i) close(opened[i]);
  if (error != EMFILE && error != ENFILE) return "";  // (no /dev/null, in a sandbox: let the start tell)
  *transient = true;
  return "Python needs " + std::to_string(kStartDescriptors) + " free file descriptors to start, found " +
         std::to_string(count) + " (" + std::strerror(error) + "): " + kNoDescriptorAdvice;
}

// Why the last start on this thread did not end (stopped by a KeyboardInterrupt, say): the next call starts again.
thread_local char stopped_reason[2048];

// A start that failed for a reason that may pass (no free file descriptor) is no start: the reason, on
// stderr the first time, is what this call's aclGetRecentErrMsg says, and the next call starts again.
bool report_transient(const std::string &error) {
  static std::atomic<bool> told{false};
  std::snprintf(stopped_reason, sizeof(stopped_reason), "npuemu: the C toolkit cannot start: %s; the call did nothing, "
                "and the next call tries to start it again", error.c_str());
  if (!told.exchange(true)) {
    std::fprintf(stderr, "%s\n", stopped_reason);
    std::fflush(stderr);
  }
  return false;
}

// Starts the toolkit; false if the start was stopped before its end (a Ctrl-C in a Python host), to be
// tried again by the next call.
bool boot() {
  std::string error, unread_record;
  bool transient = false;
  const Interpreter python = interpreter(&unread_record, &transient);  // a Python host's own interpreter runs npuemu
  const std::string &executable = python.executable;
  const bool hosted = host_runs_python(&error);
  if (error.empty() && !hosted) error = !unread_record.empty() ? unread_record : embeddable(python, &transient);
  if (error.empty() && !hosted) error = descriptors_short(&transient);
  if (!hosted && transient) return report_transient(error);
  void *core = nullptr;
  if (error.empty()) {
    const std::string path = own_directory() + "/libnpuemu_python.so";
    core = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (core == nullptr) {
      const char *reason = dlerror();
      error = "cannot load " + path + ": " + (reason != nullptr ? reason : "unknown error") + "; " + advice();
    }
  }
  if (error.empty()) {
    auto core_boot = reinterpret_cast<npuemu_core_boot_fn>(dlsym(core, "npuemu_core_boot"));
    const npuemu_boot settings = {executable.c_str(), NPUEMU_SIGNATURES, kSignatureCount, hosted ? 0 : 1,
                                  NPUEMU_OBJECT_CLASSES, sizeof(NPUEMU_OBJECT_CLASSES) / sizeof(char *)};
    char reason[4096] = "";
    const int started = core_boot == nullptr ? NB_FAILED : core_boot(&settings, reason, sizeof(reason));
    if (started == NB_STOPPED) {  // the user's doing, not a broken set-up: nothing on stderr
      std::snprintf(stopped_reason, sizeof(stopped_reason), "npuemu: %s", reason);
      return false;
    }
    if (core_boot == nullptr) {
      error = "the core library has no npuemu_core_boot: " + advice();
    } else if (started != NB_STARTED) {
      // (a process that runs Python has its own interpreter, which the reason names)
      error = std::string(reason) + (hosted ? "" : " (interpreter " + executable + ")");
      const std::string set = hosted ? "" : start_variables();
      if (!set.empty()) {
        error += "; the environment sets " + set + ", which Python reads as it starts: unset what is not meant for "
                 "npuemu's interpreter";
      }
    } else {
      core_call = reinterpret_cast<npuemu_core_call_fn>(dlsym(core, "npuemu_core_call"));
      if (core_call == nullptr) error = "the core library has no npuemu_core_call: " + advice();
      python_running = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
      boot_pid = getpid();
      // at_exit (below) runs it: npuemu's "leaks at exit" report. A Python host runs its own exit functions.
      if (!hosted) core_exit = reinterpret_cast<npuemu_core_exit_fn>(dlsym(core, "npuemu_core_exit"));
    }
  }
  if (!error.empty()) {
    boot_error = new std::string("npuemu: the C toolkit cannot start: " + error);
    std::fprintf(stderr, "%s\n", boot_error->c_str());
    std::fflush(stderr);
  }
  return true;
}

// What the function numbered `number` returns (NR_STATUS for a number out of the table).
uint8_t returns_of(int number) {
  return number >= 0 && number < kSignatureCount ? NPUEMU_SIGNATURES[number].returns : uint8_t(NR_STATUS);
}

// What a call that cannot run returns: ACL_ERROR_UNINITIALIZE (NULL, 0 for the other returns), and
// `reason` from the next aclGetRecentErrMsg.
npuemu_value failed(int number, const char *reason) {
  npuemu_value result;
  result.u = 0;
  const uint8_t returns = returns_of(number);
  if (returns == NR_STR_THREAD) {  // aclGetRecentErrMsg: the reason, once after each failed call
    result.p = unread_reason;
    unread_reason = nullptr;
    return result;
  }
  unread_reason = reason;
  if (returns == NR_STATUS) result.i = kUninitialized;
  return result;
}

// A call made once the process's Python was finalised: by a Python program that has ended (whose C
// libraries' global destructors or atexit functions call the toolkit afterwards), or by a C program that
// finalised the Python it embeds. npuemu's runtime ended with the interpreter: the call does nothing,
// and says so (on stderr the first time: such calls are often in destructors whose codes nobody reads).
npuemu_value after_finalisation(int number) {
  static std::atomic<bool> told{false};
  const bool known = number >= 0 && number < kSignatureCount;
  const char *name = known ? NPUEMU_SIGNATURES[number].name : "?";
  if (!told.exchange(true)) {
    std::fprintf(stderr, "npuemu: %s was called after the process's Python was finalised (Py_FinalizeEx): npuemu's "
                 "runtime ended with it; such calls return ACL_ERROR_UNINITIALIZE (100001) and do nothing\n", name);
    std::fflush(stderr);
  }
  if (returns_of(number) != NR_STR_THREAD) {  // aclGetRecentErrMsg keeps the last one
    std::snprintf(finalised_reason, sizeof(finalised_reason), "%s: the Python interpreter that runs npuemu: expected "
                  "it running, found it finalised (Py_FinalizeEx has run: the Python program has ended, or the "
                  "program finalised the Python it embeds); the call did nothing", name);
  }
  return failed(number, finalised_reason);
}

// At the program's exit: Python's exit functions (the leak report; the core ends the process with
// NPUEMU_SANITIZE_EXITCODE's code later, after all the exit work), once the program's own exit work is
// done. Registered by the constructor below, when the bridge is loaded: that is before the program's
// global objects are constructed (a library's constructors run before those of the program that needs
// it), so it runs after their destructors; a program that releases everything in a global object's
// destructor then has nothing reported. Registering it at the first call, as before, ran it first, and
// reported what the destructors were about to release.
//
// It does nothing if the toolkit never started, in a Python host (Python runs its own exit functions),
// or in a child made by fork(): the child shares none of the parent's resources, and its copy of the
// interpreter may have a GIL some other thread of the parent held at the fork, which nobody releases
// (the child would hang at exit). Children that call the toolkit must exec first (docs/toolkit.md).
void at_exit() {
  if (core_exit != nullptr && getpid() == boot_pid) core_exit();
}

__attribute__((constructor)) void register_at_exit() { std::atexit(at_exit); }

// Whether this thread holds the GIL: the current thread state is this thread's own. Not PyGILState_Check,
// which says yes for every thread once a sub-interpreter was ever made (a thread without the GIL would
// then give it up: a fatal error). The current thread state alone is not enough either: up to 3.11 it is
// the process's, that of whichever thread holds the GIL (a thread that took it for another's would let
// two threads run Python at once). _PyThreadState_UncheckedGet up to 3.12, PyThreadState_GetUnchecked
// from 3.13.
bool holds_gil() {
  using ThreadState = void *(*)();
  auto current = reinterpret_cast<ThreadState>(dlsym(RTLD_DEFAULT, "PyThreadState_GetUnchecked"));
  if (current == nullptr) current = reinterpret_cast<ThreadState>(dlsym(RTLD_DEFAULT, "_PyThreadState_UncheckedGet"));
  auto own = reinterpret_cast<ThreadState>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  if (current == nullptr || own == nullptr) return false;
  void *state = current();
  return state != nullptr && state == own();
}

// The GIL given up for a while by a thread of a Python host that holds it: a caller through ctypes.PyDLL or
// an extension module, which keep it during the foreign call. Nothing in a process without Python.
class WithoutGil {
 public:
  WithoutGil() {
    auto running = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
    auto save = reinterpret_cast<void *(*)()>(dlsym(RTLD_DEFAULT, "PyEval_SaveThread"));
    restore_ = reinterpret_cast<void (*)(void *)>(dlsym(RTLD_DEFAULT, "PyEval_RestoreThread"));
    if (running != nullptr && save != nullptr && restore_ != nullptr && running() && holds_gil()) saved_ = save();
  }
  void end() {  // not in a destructor: taking the GIL back may end the thread (Python's finalisation)
    if (saved_ != nullptr) restore_(saved_);
    saved_ = nullptr;
  }
  WithoutGil(const WithoutGil &) = delete;
  WithoutGil &operator=(const WithoutGil &) = delete;

 private:
  void (*restore_)(void *) = nullptr;
  void *saved_ = nullptr;
};

// The first call of any thread starts the toolkit, once; the others wait for the end of the start. The
// start takes the GIL in a Python host (its imports, which let other threads run in between): a thread that
// waited for it with the GIL held would never let it end. So a caller waits without the GIL.
// False if this call's start was stopped (stopped_reason says why).
bool start() {
  if (booted.load(std::memory_order_acquire)) return true;
  WithoutGil released;
  bool over = true;
  {
    std::lock_guard<std::mutex> lock(boot_mutex);
    if (!booted.load(std::memory_order_relaxed)) {
      over = boot();
      booted.store(over, std::memory_order_release);
    }
  }
  released.end();
  return over;
}

}  // namespace

extern "C" npuemu_value npuemu_forward(int number, const npuemu_value *args, const void *caller,
                                      const void *frame) {
  if (__fpending(stdout) != 0) std::fflush(stdout);  // the C program's output stays ahead of npuemu's
  if (unread_reason != nullptr && returns_of(number) == NR_STR_THREAD) {  // why the last start was stopped
    return failed(number, nullptr);
  }
  if (!start()) return failed(number, stopped_reason);
  if (core_call == nullptr) return failed(number, boot_error->c_str());
  if (python_running != nullptr && !python_running()) return after_finalisation(number);
  unread_reason = nullptr;  // the runtime's messages from now on
  return core_call(number, args, caller, frame);
}
