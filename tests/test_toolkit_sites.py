"""Sites of C and C++ callers as compilers and loaders really make them (docs/toolkit.md, "How a call is
forwarded", 5): GCC's default DWARF 5, inlined helpers, tail calls, link-time optimisation and split
DWARF, libraries found by a relative path or unloaded, a program rebuilt while it runs, and the cost
of a report of many leaks. The programs are built once for the module, two at a time."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

import ctoolkit
from test_toolkit_behaviour import LEAK_LINE, Program, build_all, line_of, run

# A helper in a header, which binutils 2.40 names by the .cpp file's name (with the header's line) in
# GCC 12's default DWARF 5.
HELPERS_HEADER = r"""#pragma once
#include <vector>
#include "acl/acl.h"
#include "aclnn/acl_meta.h"

inline aclTensor* MakeInHeader(void* dev, const std::vector<float>& host) {
  aclrtMemcpy(dev, 16, host.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE);
  int64_t shape[1] = {4}, strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev);  // @header-create
}
"""

HEADER_USER = r"""#include "sites_helpers.h"

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void* dev = nullptr;
  aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  MakeInHeader(dev, {1, 2, 3, 4});  // @header-call
  aclFinalize();
  return 0;
}
"""

# Built at -O2 -g: a helper always inlined, and a stream made by the last call of a thread's body (a
# tail call from libstdc++'s thread start).
OPTIMISED = r"""#include <thread>
#include "acl/acl.h"
#include "aclnn/acl_meta.h"

static inline __attribute__((always_inline)) aclTensor* MakeInlined(void* dev) {
  int64_t shape[1] = {8}, strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev);  // @inlined-create
}

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void* dev = nullptr;
  aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  MakeInlined(dev);  // @inlined-call-1
  MakeInlined(dev);  // @inlined-call-2
  aclrtStream stream = nullptr;
  std::thread maker([&stream] {
    aclrtSetDevice(0);
    aclrtCreateStream(&stream);
  });
  maker.join();
  aclFinalize();
  return 0;
}
"""

USER_LIBRARY = r"""#include "acl/acl.h"
#include "aclnn/acl_meta.h"

extern "C" aclTensor* LibMake(void* dev) {
  int64_t shape[1] = {4}, strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev);  // @library-create
}
"""

# Loads the library named by argv[1], makes a tensor in it, and unloads it if argv[2] is "close".
LOADER = r"""#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include "acl/acl.h"
#include "aclnn/acl_meta.h"

int main(int argc, char** argv) {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void* dev = nullptr;
  aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) { printf("dlopen: %s\n", dlerror()); return 1; }
  typedef aclTensor* (*make_t)(void*);
  ((make_t)dlsym(library, "LibMake"))(dev);  // @library-call
  if (strcmp(argv[2], "close") == 0) dlclose(library);
  aclFinalize();
  return 0;
}
"""

# A second library of the same size as libuser.so, whose LibMake is at another line: loaded where the first
# was, after it was unloaded.
OTHER_LIBRARY = r"""#include "acl/acl.h"
#include "aclnn/acl_meta.h"
// another library
//
//
extern "C" aclTensor* LibMake(void* dev) {
  int64_t shape[1] = {4}, strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev);  // @other-create
}
"""

# Loads each library named after argv[1] in turn by the same line, makes a tensor in it and unloads it.
# argv[1] "copy": each is first copied to ./plugin.so, which is loaded (the same name each time).
RELOADER = r"""#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include "acl/acl.h"
#include "aclnn/acl_meta.h"

static const char* Installed(const char* library, bool copy) {
  if (!copy) return library;
  { std::ifstream from(library, std::ios::binary); std::ofstream to("plugin.tmp", std::ios::binary); to << from.rdbuf(); }
  return std::rename("plugin.tmp", "plugin.so") == 0 ? "./plugin.so" : nullptr;
}

int main(int argc, char** argv) {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void* dev = nullptr;
  aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  const bool copy = strcmp(argv[1], "copy") == 0;
  for (int i = 2; i < argc; ++i) {
    const char* path = Installed(argv[i], copy);
    void* library = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (library == nullptr) { printf("dlopen: %s\n", dlerror()); return 1; }
    typedef aclTensor* (*make_t)(void*);
    make_t make = (make_t)dlsym(library, "LibMake");
    printf("loaded at %p\n", (void*)make);
    make(dev);  // @reloader-call
    dlclose(library);
  }
  aclFinalize();
  return 0;
}
"""

# Makes a stream, then waits for a line on stdin before it finalizes: its file is replaced meanwhile.
WAITER = r"""#include <cstdio>
#include "acl/acl.h"

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtStream stream;
  aclrtCreateStream(&stream);  // @waiter-stream
  printf("made\n");
  fflush(stdout);
  char line[8];
  if (fgets(line, sizeof line, stdin) == nullptr) return 1;
  aclFinalize();
  return 0;
}
"""

MANY_LEAKS = 20


# Makes a stream after it left the directory it was started in.
WANDERER = r"""#include <unistd.h>
#include "acl/acl.h"

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  if (chdir("/") != 0) return 1;
  aclrtStream stream;
  aclrtCreateStream(&stream);  // @wanderer-stream
  aclFinalize();
  return 0;
}
"""

# A C callback, run by the runtime on a report thread, makes a stream: its caller is npuemu, not the program.
CALLBACK = r"""#include <atomic>
#include <pthread.h>
#include "acl/acl.h"

static std::atomic<bool> stop{false};

static void OnDone(void*) {
  aclrtStream made;
  aclrtCreateStream(&made);  // @callback-stream
}

static void* Report(void*) {
  aclrtSetDevice(0);
  while (!stop) aclrtProcessReport(100);
  return nullptr;
}

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtStream stream;
  aclrtCreateStream(&stream);
  pthread_t reporter;
  pthread_create(&reporter, nullptr, Report, nullptr);
  aclrtSubscribeReport((unsigned long long)reporter, stream);
  aclrtLaunchCallback(OnDone, nullptr, ACL_CALLBACK_BLOCK, stream);
  aclrtSynchronizeStream(stream);
  stop = true;
  pthread_join(reporter, nullptr);
  aclrtUnSubscribeReport((unsigned long long)reporter, stream);
  aclrtDestroyStream(stream);
  aclFinalize();
  return 0;
}
"""

# Two streams write one buffer at once: a race report with a site on each line.
RACE = r"""#include "acl/acl.h"

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtStream first, second;
  aclrtCreateStream(&first);
  aclrtCreateStream(&second);
  void* buffer = nullptr;
  aclrtMalloc(&buffer, 256, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMemsetAsync(buffer, 256, 1, 256, first);  // @race-first
  aclrtMemsetAsync(buffer, 256, 2, 256, second);  // @race-second
  aclrtSynchronizeStream(first);
  aclrtSynchronizeStream(second);
  aclrtFree(buffer);
  aclrtDestroyStream(first);
  aclrtDestroyStream(second);
  aclFinalize();
  return 0;
}
"""


# The same race each round; between rounds, the libraries argv names are loaded (the modules taken anew).
RACE_BETWEEN_LOADS = r"""#include <dlfcn.h>
#include "acl/acl.h"

static void Round(void* buffer, aclrtStream first, aclrtStream second) {
  aclrtMemsetAsync(buffer, 256, 1, 256, first);  // @round-first
  aclrtMemsetAsync(buffer, 256, 2, 256, second);  // @round-second
  aclrtSynchronizeStream(first);
  aclrtSynchronizeStream(second);
}

int main(int argc, char** argv) {
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtStream first, second;
  aclrtCreateStream(&first);
  aclrtCreateStream(&second);
  void* buffer = nullptr;
  aclrtMalloc(&buffer, 256, ACL_MEM_MALLOC_HUGE_FIRST);
  for (int round = 1; round <= argc; ++round) {
    Round(buffer, first, second);
    if (round < argc && dlopen(argv[round], RTLD_NOW) == nullptr) return 1;
  }
  aclrtFree(buffer);
  aclrtDestroyStream(first);
  aclrtDestroyStream(second);
  aclFinalize();
  return 0;
}
"""


def many_leaks_program() -> str:
    """A tensor leaked at each of MANY_LEAKS lines, by a helper; reported at exit (no aclFinalize)."""
    calls = "".join("  Make(dev);  // @leak-%d\n" % number for number in range(MANY_LEAKS))
    return r"""#include "acl/acl.h"
#include "aclnn/acl_meta.h"

static aclTensor* Make(void* dev) {
  int64_t shape[1] = {4}, strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev);  // @many-create
}

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void* dev = nullptr;
  aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
%s  return 0;
}
""" % calls


SMALL_LEAK = r"""#include "acl/acl.h"

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtStream stream;
  aclrtCreateStream(&stream);  // @small-stream
  aclFinalize();
  return 0;
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    ctoolkit.require_compilers()
    directory = tmp_path_factory.mktemp("sites")
    (directory / "sites_helpers.h").write_text(HELPERS_HEADER)
    libraries = {"library": build_library(directory, "libuser", USER_LIBRARY),
                 "other_library": build_library(directory, "libother", OTHER_LIBRARY)}
    programs = build_all([
        Program("header", HEADER_USER),
        Program("optimised", OPTIMISED, flags=("-O2", "-g", "-pthread")),
        Program("loader", LOADER, flags=("-g", "-ldl")),
        Program("waiter", WAITER),
        Program("many_leaks", many_leaks_program()),
        Program("lto", SMALL_LEAK, flags=("-O2", "-g", "-flto")),
        Program("split", SMALL_LEAK, flags=("-O2", "-g", "-gsplit-dwarf")),
        Program("reloader", RELOADER, flags=("-g", "-ldl")),
        Program("wanderer", WANDERER, flags=("-g",)),
        Program("callback", CALLBACK, flags=("-g", "-pthread")),
        Program("race", RACE, flags=("-g",)),
        Program("race_between_loads", RACE_BETWEEN_LOADS, flags=("-g", "-ldl")),
    ], directory)
    return {**programs, **libraries}


def build_library(directory, name: str, source: str) -> str:
    """<directory>/<name>.so, built with -g from `source`, linked with the toolkit."""
    root = ctoolkit.toolkit_root()
    (directory / (name + ".cpp")).write_text(source)
    library = str(directory / (name + ".so"))
    done = subprocess.run(["g++", "-std=c++11", "-O0", "-g", "-shared", "-fPIC", str(directory / (name + ".cpp")),
                           "-I", os.path.join(root, "include"), "-L", os.path.join(root, "lib64"), "-lascendcl",
                           "-lnnopbase", "-o", library], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return library


def leaks_of(done: subprocess.CompletedProcess) -> list:
    assert done.returncode == 0, done.stdout + done.stderr
    return LEAK_LINE.findall(done.stderr)


def made_at(leaks: list, described: str) -> list:
    """The sites of the leaks whose description starts with `described` (without what released them)."""
    return [re.sub(r" \(released only by [^()]*\)$", "", leak.split(", made at ", 1)[1])
            for leak in leaks if leak.startswith(described)]


def frame(path: str, marker: str, function: str) -> str:
    """A regex of one frame: `path:line in function`, the function with its parameters or not."""
    with open(path, encoding="utf-8") as file:
        line = line_of(file.read(), marker)
    return r"%s:%d in %s(?:\([^()]*\))?" % (re.escape(path), line, re.escape(function))


def require_llvm_addr2line() -> None:
    if shutil.which("llvm-addr2line") is None:
        pytest.skip("llvm-addr2line is not installed: binutils' addr2line reads GCC 12's DWARF 5 wrong")


def only_binutils(directory) -> dict:
    """Changes to the environment under which the program finds binutils' addr2line and no LLVM one."""
    tools = directory / "binutils-only"
    tools.mkdir(exist_ok=True)
    real = shutil.which("addr2line")
    if real is None:
        pytest.skip("binutils' addr2line is not installed")
    if not (tools / "addr2line").exists():
        (tools / "addr2line").symlink_to(real)
    return {"PATH": str(tools)}


def counting_addr2line(directory) -> tuple:
    """(environment changes, log): both addr2line commands, each writing a line to the log per run."""
    tools = directory / "counting"
    tools.mkdir(exist_ok=True)
    log = directory / "addr2line.log"
    for name in ("addr2line", "llvm-addr2line"):
        real = shutil.which(name)
        if real is not None:
            (tools / name).write_text('#!/bin/sh\necho run >> "%s"\nexec "%s" "$@"\n' % (log, real))
            (tools / name).chmod(0o755)
    return {"PATH": "%s:%s" % (tools, os.environ.get("PATH", ""))}, log


# ------------------------------------------------------------------------------------------------
# What GCC makes of -g -O2


def test_a_helper_in_a_header_is_named_by_the_header_and_its_lines(built):
    """GCC 12's -g is DWARF 5, whose lines binutils 2.40 names in the .cpp file even when they are the
    header's: llvm-addr2line, where installed, is the one used."""
    require_llvm_addr2line()
    path = built["header"] + ".cpp"
    header = os.path.join(os.path.dirname(path), "sites_helpers.h")
    sites = made_at(leaks_of(run(built["header"])), "aclTensor FLOAT[4] ")
    assert len(sites) == 1, sites
    assert re.fullmatch(r"%s <- %s" % (frame(header, "header-create", "MakeInHeader"),
                                       frame(path, "header-call", "main")), sites[0]), sites[0]


def test_an_inlined_helper_is_named_with_the_line_that_called_it(built):
    """An inlined helper has no frame of its own: the debug information's inlined frames are the site's
    frames, so each leak still names which call of the helper made it."""
    require_llvm_addr2line()
    path = built["optimised"] + ".cpp"
    sites = made_at(leaks_of(run(built["optimised"])), "aclTensor FLOAT[8] ")
    assert len(sites) == 2, sites
    for site, call in zip(sites, ("inlined-call-1", "inlined-call-2")):
        assert re.fullmatch(r"%s <- %s" % (frame(path, "inlined-create", "MakeInlined"), frame(path, call, "main")),
                            site), site


def test_a_call_ending_a_thread_body_has_an_unknown_site_not_the_cpp_library(built):
    """The last call of a std::thread body is a tail call at -O2: its return address is in libstdc++'s
    thread start, which is not the program's line; the site is unknown rather than that."""
    sites = made_at(leaks_of(run(built["optimised"])), "stream ")
    assert sites == ["<unknown>"], sites


def test_a_link_time_optimised_program_has_its_lines_or_its_offsets_never_an_artificial_file(built, tmp_path):
    """-flto: binutils names the file "<artificial>"; the frame is then the offset and the function.
    llvm-addr2line gives the lines."""
    executable = built["lto"]
    sites = made_at(leaks_of(run(executable, **only_binutils(tmp_path))), "stream ")
    assert len(sites) == 1 and re.fullmatch(r"%s\+0x[0-9a-f]+ in main" % re.escape(executable), sites[0]), sites
    if shutil.which("llvm-addr2line") is not None:
        sites = made_at(leaks_of(run(executable)), "stream ")
        assert sites and re.fullmatch(frame(executable + ".cpp", "small-stream", "main"), sites[0]), sites


def test_a_program_built_with_split_dwarf_has_its_lines(built):
    """-gsplit-dwarf (DWARF 5): the lines are in the .dwo files beside the objects, which llvm-addr2line
    reads (binutils 2.40 gives offsets only: docs/toolkit.md)."""
    require_llvm_addr2line()
    executable = built["split"]
    sites = made_at(leaks_of(run(executable)), "stream ")
    assert len(sites) == 1 and re.fullmatch(frame(executable + ".cpp", "small-stream", "main"), sites[0]), sites


# ------------------------------------------------------------------------------------------------
# Modules found by a relative path, unloaded, replaced


def test_a_library_loaded_by_a_relative_path_is_named_by_its_own_lines(built):
    """dladdr names such a library by the relative path it was loaded by, as it names the program:
    the library's frames are its own lines, not the program's lines at the same offsets."""
    directory = os.path.dirname(built["loader"])
    sites = made_at(leaks_of(run(built["loader"], "./libuser.so", "keep")), "aclTensor FLOAT[4] ")
    assert len(sites) == 1, sites
    assert re.fullmatch(r"%s <- %s" % (frame(os.path.join(directory, "libuser.cpp"), "library-create", "LibMake"),
                                       frame(built["loader"] + ".cpp", "library-call", "main")), sites[0]), sites[0]


def test_a_library_unloaded_before_the_report_is_still_named_by_its_lines(built):
    """The module of each frame is taken when the site is: a library unloaded since (dlclose), whose
    addresses are no longer its, keeps its lines."""
    directory = os.path.dirname(built["loader"])
    sites = made_at(leaks_of(run(built["loader"], built["library"], "close")), "aclTensor FLOAT[4] ")
    assert len(sites) == 1, sites
    assert re.fullmatch(r"%s <- %s" % (frame(os.path.join(directory, "libuser.cpp"), "library-create", "LibMake"),
                                       frame(built["loader"] + ".cpp", "library-call", "main")), sites[0]), sites[0]


def reloaded_sites(built, mode: str) -> list:
    """The sites of the tensors made by the reloader in libuser.so, then in libother.so, each unloaded
    before the next is loaded at the same address (else the test cannot tell anything: skipped)."""
    done = run(built["reloader"], mode, built["library"], built["other_library"])
    loaded_at = re.findall(r"^loaded at (\S+)$", done.stdout, re.M)
    assert len(loaded_at) == 2, done.stdout + done.stderr
    if loaded_at[0] != loaded_at[1]:
        pytest.skip("the loader put the second library elsewhere (%s, %s)" % tuple(loaded_at))
    return made_at(leaks_of(done), "aclTensor FLOAT[4] ")


def test_a_library_loaded_where_an_unloaded_one_was_is_named_by_its_own_lines(built):
    """The same return addresses, once the first library was unloaded and another loaded at its base,
    are the second library's: the site of the tensor made there names its lines, not the first's."""
    directory = os.path.dirname(built["reloader"])
    call = frame(built["reloader"] + ".cpp", "reloader-call", "main")
    sites = reloaded_sites(built, "direct")
    assert len(sites) == 2, sites
    assert re.fullmatch(r"%s <- %s" % (frame(os.path.join(directory, "libuser.cpp"), "library-create", "LibMake"), call),
                        sites[0]), sites[0]
    assert re.fullmatch(r"%s <- %s" % (frame(os.path.join(directory, "libother.cpp"), "other-create", "LibMake"), call),
                        sites[1]), sites[1]


def test_a_library_file_replaced_and_loaded_again_by_its_name_is_named_by_its_new_lines(built):
    """./plugin.so loaded, unloaded, its file replaced by another library's and loaded again (a plugin
    rebuilt while its host runs): the second load's frames are the new file's lines, not "file changed
    since the library was loaded"; the first load's, whose file is gone, say that it changed."""
    directory = os.path.dirname(built["reloader"])
    call = frame(built["reloader"] + ".cpp", "reloader-call", "main")
    sites = reloaded_sites(built, "copy")
    assert len(sites) == 2, sites
    assert re.fullmatch(r"%s\+0x[0-9a-f]+ \(file changed since the library was loaded\) in LibMake <- %s"
                        % (re.escape(os.path.join(directory, "plugin.so")), call), sites[0]), sites[0]
    assert re.fullmatch(r"%s <- %s" % (frame(os.path.join(directory, "libother.cpp"), "other-create", "LibMake"), call),
                        sites[1]), sites[1]


def test_without_proc_the_program_is_named_by_the_path_it_was_started_by(built):
    """Without /proc (a container or a chroot that has none) the program's path and file identity are
    unknown there: the path is the name the program was started by (./wanderer, made absolute against
    the directory it was started in, which it left since), and an identity that cannot be taken is
    never said to have changed: the frames have their lines."""
    executable = built["wanderer"]
    directory = os.path.dirname(executable)
    environment = ctoolkit.toolkit_environment(NPUEMU_EXECUTION="async", NPUEMU_LEAK_CHECK="1")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           "mount -t tmpfs none /proc && exec ./wanderer"], capture_output=True, text=True,
                          timeout=120, env=environment, cwd=directory)
    if done.returncode != 0 and "npuemu" not in done.stderr:
        pytest.skip("cannot run a program without /proc here: %s" % done.stderr.strip())
    sites = made_at(leaks_of(done), "stream ")
    assert len(sites) == 1, done.stderr
    assert re.fullmatch(frame(executable + ".cpp", "wanderer-stream", "main"), sites[0]), sites[0]


def test_a_c_callback_site_ends_at_npuemu_and_python(built):
    """A C callback is called by npuemu's C toolkit, under Python's interpreter: those frames are not the
    program's, and end the site as the C library's do."""
    sites = made_at(leaks_of(run(built["callback"])), "stream ")
    assert len(sites) == 1, sites
    assert re.fullmatch(frame(built["callback"] + ".cpp", "callback-stream", "OnDone"), sites[0]), sites[0]


def test_a_program_rebuilt_while_it_runs_shows_offsets_saying_its_file_changed(built):
    """Lines read from the file now at the program's path would be another program's: the frame is the
    offset, with the reason."""
    executable = built["waiter"]
    process = subprocess.Popen([executable], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=ctoolkit.toolkit_environment(NPUEMU_LEAK_CHECK="1"),
                               cwd=os.path.dirname(executable))
    try:
        assert process.stdout.readline() == "made\n"
        shutil.copy(built["many_leaks"], executable + ".new")
        os.replace(executable + ".new", executable)  # as a build writes a new file
        out, err = process.communicate("go\n", timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, out + err
    sites = made_at(LEAK_LINE.findall(err), "stream ")
    assert len(sites) == 1, err
    assert re.fullmatch(r"%s\+0x[0-9a-f]+ \(file changed since the program started\)" % re.escape(executable),
                        sites[0]), sites


# ------------------------------------------------------------------------------------------------
# The cost of looking lines up


def test_with_the_leak_check_off_exit_looks_no_line_up(built, tmp_path):
    """Whether anything was left at exit was learnt by making every leak's line, each of its frames an
    addr2line process of its own, with nothing to print (seconds for a few hundred leaks)."""
    changes, log = counting_addr2line(tmp_path)
    done = run(built["many_leaks"], NPUEMU_LEAK_CHECK="0", **changes)
    assert done.returncode == 0 and "leak" not in done.stderr, done.stderr
    assert not log.exists(), "addr2line ran %d times with the leak check off" % len(log.read_text().splitlines())


def test_a_race_report_runs_addr2line_once_per_module(built, tmp_path):
    """Every report's sites are looked up together, not only a leak report's: a race between two lines
    of the program is one addr2line run, and names both lines."""
    changes, log = counting_addr2line(tmp_path)
    done = run(built["race"], **changes)
    assert done.returncode == 0, done.stderr
    race = re.search(r"^========= npuemu: racecheck: race: .*(?:\n=========     .*)*", done.stderr, re.M)
    assert race is not None, done.stderr
    path = built["race"] + ".cpp"
    for marker in ("race-first", "race-second"):
        assert re.search(r" at %s$" % frame(path, marker, "main"), race.group(0), re.M), race.group(0)
    assert len(log.read_text().splitlines()) == 1, "one run for the program's frames:\n" + done.stderr


def test_a_race_repeated_after_libraries_were_loaded_is_counted_not_reported_anew(built):
    """Loading a library makes the sites' modules be taken anew: the same race, at the same two lines, was
    then a new finding, printed again after each load (review I). It is one finding counted three times."""
    done = run(built["race_between_loads"], built["library"], built["other_library"])
    assert done.returncode == 0, done.stderr
    assert len(re.findall(r"^========= npuemu: racecheck: race: ", done.stderr, re.M)) == 1, done.stderr
    assert "SUMMARY: 3 report(s) (3 race)" in done.stderr, done.stderr


def test_a_report_of_many_leaks_runs_addr2line_once_per_module(built, tmp_path):
    """The sites of a report are looked up together: one run for all the offsets in the program (the
    frames in libc's start-up code are not looked up to be dropped), each leak with its own lines."""
    executable = built["many_leaks"]
    changes, log = counting_addr2line(tmp_path)
    sites = made_at(leaks_of(run(executable, **changes)), "aclTensor FLOAT[4] ")
    assert len(log.read_text().splitlines()) == 1, "one run for the program's frames"
    path = executable + ".cpp"
    assert len(sites) == MANY_LEAKS, sites
    for number, site in enumerate(sites):
        assert re.fullmatch(r"%s <- %s" % (frame(path, "many-create", "Make"), frame(path, "leak-%d" % number, "main")),
                            site), site


def test_a_new_call_stack_of_known_return_addresses_asks_the_loader_nothing(monkeypatch):
    """A site missing from the cache of whole stacks (a helper called from a new line; a program with more
    distinct stacks than the cache holds) asked the loader about each of its addresses again (three
    dladdr calls, ~9 us a call): each return address is pinned once. A full cache forgets its older
    half, not everything: the stacks taken last are still known."""
    import ctypes
    import numpy._core._multiarray_umath as umath
    from emulator import sites
    base = ctypes.cast(ctypes.CDLL(umath.__file__).PyInit__multiarray_umath, ctypes.c_void_p).value
    inner, outer = [base + 16 + i for i in range(10)], [base + 100000 + i for i in range(10)]
    asked = []

    def dladdr(address: int) -> tuple:
        asked.append(address)
        return real_dladdr(address)

    real_dladdr = sites._dladdr
    sites._main_program_base()  # (known once for all: asked of the loader before)
    monkeypatch.setattr(sites, "_dladdr", dladdr)
    for cache in ("_native_sites", "_pinned_calls", "_modules"):
        monkeypatch.setattr(sites, cache, {}, raising=False)
    monkeypatch.setattr(sites, "KNOWN_SITES", 64)
    stack = [()]
    monkeypatch.setattr(sites, "_native_caller", lambda: stack[0])
    monkeypatch.setattr(sites, "_modules_generation", lambda: 0, raising=False)  # no module loaded meanwhile
    monkeypatch.setattr(sites, "_generation_seen", [0], raising=False)

    def site_of(addresses: tuple) -> sites.Site:
        stack[0] = addresses
        return sites.native_site()

    for address in inner:  # every address seen once
        site_of((address, outer[0]))
    for address in outer:
        site_of((inner[0], address))
    assert sorted(set(asked)) == sorted(inner + outer) and len(asked) == len(inner) + len(outer), asked
    asked.clear()
    taken = {(a, b): site_of((a, b)) for a in inner for b in outer}  # 100 stacks, most of them new
    assert asked == [], "the loader was asked again about %d known addresses" % len(asked)
    first = taken[(inner[0], outer[0])]
    for (a, b), site in taken.items():  # each frame pinned at its own offset
        assert isinstance(site, sites.NativeSite) and [call[1] for call in site.calls] == [
            first.calls[0][1] + a - inner[0], first.calls[1][1] + b - outer[0]], site.calls
    assert len(sites._native_sites) <= 64
    last = (inner[-1], outer[-1])
    assert site_of(last) is taken[last], "the stack taken last was forgotten with the others"
