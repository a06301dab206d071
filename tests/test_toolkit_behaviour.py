"""Same behaviour as Python, from C: programs built against the C toolkit (tests/ctoolkit.py: the
documented g++ recipe, the set_env.sh environment) get exactly what the same calls get from Python.

1. Error paths, generated: every error input of every operator declaration (aclnn_api.declaration),
   a table of runtime bad calls and a table of framework bad calls, each made by a compiled C++
   program and by Python (emulator.runtime / aclnn_api by C name); the status codes and the messages
   after their `[PID:n] timestamp ` prefix are identical, once the values that legitimately differ
   between two processes are normalised (hex numbers: addresses and handles; sites, which name the
   C file in C and the Python file in Python; allocation numbers). A null out-parameter, which only
   C can pass, gets its layer's null code (100000 runtime, 161001 aclnn) and a message naming it.
2. Handles: a repeatable executor moved by aclSetInputTensorAddr / aclSetRawTensorAddr computes
   the right values at each launch; a single-use executor launched twice, a tensor destroyed by its
   list and destroyed again name the C lines where they were made and used; aclCreateScalar reads
   the value at the C pointer for every dtype it takes.
3. Faults at synchronisation name the operator, the tensor, the allocation and the C lines of the
   launch and of the aclrtMalloc (module+offset without -g), as the same program's in Python do.
4. Leaks are reported at aclFinalize and at exit with the C lines that made them, after the program's
   global destructors (what they release is no leak); the documented sample leaks nothing.
5. Streams are asynchronous from C: a copy without synchronisation reads stale data.
6. Callbacks: a C function launched with aclrtLaunchCallback runs on a C report thread, and messages
   name it by its symbol, as Python's name a Python function.
7. fork(): children that make no toolkit call end at once and report nothing.
8. Out-parameters the process cannot write and values it cannot read are a message, not a crash.

Every program is built once per module (in parallel) and runs many cases; a case that a C compiler
could not express (a string where an int64_t is taken) is listed, not run."""
from __future__ import annotations

import concurrent.futures
import json
import math
import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pytest

import aclnn_api as nn
import ctoolkit
from aclnn_api.declaration import IntArrayInput, TensorInput, all_declarations
from emulator import runtime as rt
from emulator.cargs import INT64
from emulator.resource import Resource
from support import REPO, encode, run_program
from test_operators import DEFAULT_CHIP, apply_changes, first_phase_of, first_sample

try:
    from npuemu_toolkit import surface
except ImportError:  # the toolkit is part of the install: its absence fails the tests that need it
    surface = None

DECLARATIONS = all_declarations()
FLOAT = nn.ACL_FLOAT

# ------------------------------------------------------------------------------------------------
# Messages and what two processes may legitimately disagree on

PREFIX = re.compile(r"^\[PID:\d+\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3} ", re.M)
# A site: `file:line in function` (a demangled C++ name may have spaces in its parameter list), or
# `module+0xoffset[ in function]` for code without debug information, and up to two callers after ` <- `.
_FUNCTION = r"(?:<\w+>|\w+(?:::~?\w+)*)(?:\([^()]*\))?"
_FRAME = r"(?:(?:/[^:<>\n]*?|[^\s:]+):\d+ in %s|/[^:<>\n]+?\+0x[0-9a-f]+(?: in %s)?)" % (_FUNCTION, _FUNCTION)  # paths may hold spaces
SITE = re.compile(r"%s(?: <- %s)*" % (_FRAME, _FRAME))
HEX = re.compile(r"0x[0-9a-fA-F]+")
ALLOCATION = re.compile(r"allocation #\d+")


def without_prefix(message: Optional[str]) -> str:
    """The message lines without their `[PID:n] timestamp ` prefixes ("(none)" for no message)."""
    return "(none)" if message is None else PREFIX.sub("", message)


def normalised(message: Optional[str]) -> str:
    """What must be identical from C and from Python: the text with sites, hex numbers (addresses,
    handles) and allocation numbers replaced."""
    text = without_prefix(message)
    text = SITE.sub("<site>", text)
    text = HEX.sub("0x?", text)
    return ALLOCATION.sub("allocation #?", text)


def test_normalising_keeps_the_words_and_replaces_only_what_differs_between_processes():
    c = ("[PID:4242] 2026-11-21-16:40:00.123 AclNN_Parameter_Error(EZ1001): aclDestroyTensor: tensor: expected a "
         "live aclTensor, found aclTensor FLOAT[2] at 0x7f00 already released at /tmp/x/p.cpp:21 in main "
         "(made at /tmp/x/p.cpp:20 in main) in allocation #3")
    python = ("[PID:7] 2026-01-01-00:00:00.000 AclNN_Parameter_Error(EZ1001): aclDestroyTensor: tensor: expected a "
              "live aclTensor, found aclTensor FLOAT[2] at 0x5e40 already released at /r/t.py:9 in case <- "
              "/r/t.py:30 in run <- /v/pluggy/_callers.py:103 in _multicall (made at /r/t.py:8 in case) in "
              "allocation #71")
    assert normalised(c) == normalised(python)
    assert normalised(c) == ("AclNN_Parameter_Error(EZ1001): aclDestroyTensor: tensor: expected a live aclTensor, "
                             "found aclTensor FLOAT[2] at 0x? already released at <site> (made at <site>) in "
                             "allocation #?")
    assert normalised(c.replace("FLOAT[2]", "FLOAT[3]")) != normalised(python)


@dataclass
class Outcome:
    """What one case printed: its result (a status, "null"/"non-null", or several values) and the
    messages aclGetRecentErrMsg returned right after the call."""
    result: str
    message: str


OUTCOME = re.compile(r"^@@case (\S+)\n@@result ([^\n]*)\n@@message\n(.*?)\n@@end$", re.S | re.M)


def outcomes(stdout: str) -> dict:
    """{case id: Outcome} of a program's output."""
    return {match.group(1): Outcome(match.group(2), match.group(3)) for match in OUTCOME.finditer(stdout)}


def line_of(source: str, marker: str) -> int:
    """The 1-based line of `source` that ends with the comment `// @marker`."""
    lines = [number for number, text in enumerate(source.splitlines(), 1) if text.endswith("// @" + marker)]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def at(path: str, line: int, function: str = "main") -> str:
    """A regex for the C site `path:line in function[(parameters)]`, with any callers after it (` <- ...`)."""
    return r"%s:%d in %s(?:\([^()]*\))?(?: <- [^;]*?)?" % (re.escape(path), line, re.escape(function))


def c_string(text: str) -> str:
    return json.dumps(text)  # ASCII JSON strings are valid C string literals


# ------------------------------------------------------------------------------------------------
# The C side: a prelude every program shares, building in parallel, running in the toolkit's environment

OPERATOR_HEADERS = tuple(header.path for header in surface.OPERATORS) if surface is not None else ()  # every operator

PRELUDE = r"""#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "acl/acl.h"
""" + "".join('#include "%s"\n' % header for header in OPERATOR_HEADERS) + r"""
// One case's outcome: its result and the messages left for aclGetRecentErrMsg (read, so cleared).
static void report(const char *id, const char *result) {
  const char *message = aclGetRecentErrMsg();
  std::printf("@@case %s\n@@result %s\n@@message\n%s\n@@end\n", id, result, message != nullptr ? message : "(none)");
  std::fflush(stdout);
}
static void report_status(const char *id, long long status) {
  char text[32];
  std::snprintf(text, sizeof(text), "%lld", status);
  report(id, text);
}
static void report_pointer(const char *id, const void *pointer) { report(id, pointer != nullptr ? "non-null" : "null"); }
static void forget_messages() { aclGetRecentErrMsg(); }
static void check(int status, const char *what) {  // set-up that must work: stop the program otherwise
  if (status != 0) {
    const char *message = aclGetRecentErrMsg();
    std::printf("@@setup-failed %s %d %s\n", what, status, message != nullptr ? message : "");
    std::exit(3);
  }
}
static void *device_memory(size_t size) {
  void *address = nullptr;
  check(aclrtMalloc(&address, size, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  return address;
}
static void print_floats(const char *id, const float *values, int count) {
  std::printf("@@values %s", id);
  for (int i = 0; i < count; ++i) std::printf(" %.9g", values[i]);
  std::printf("\n");
  std::fflush(stdout);
}
"""


def c_program(body: str) -> str:
    return PRELUDE + body


@dataclass
class Program:
    """A program to build: its source, its name (<name>.cpp or .c) and the compiler flags."""
    name: str
    source: str
    language: str = "c++"
    flags: tuple = ("-g",)


def build_all(programs: list, directory) -> dict:
    """{name: executable} of every program, built two at a time (compiling is the slow part)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {p.name: pool.submit(ctoolkit.compile_program, p.source, directory, p.name, p.language, p.flags)
                   for p in programs}
        return {name: future.result() for name, future in futures.items()}


PINNED = {"NPUEMU_EXECUTION": "async", "NPUEMU_LEAK_CHECK": "1"}  # what these tests show depends on them


def run(executable: str, *args: str, **env: Optional[str]) -> subprocess.CompletedProcess:
    """Run a built program in the toolkit's environment with `env` changes (and PINNED settings)."""
    done = ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(**{**PINNED, **env}), args=args)
    assert "@@setup-failed" not in done.stdout, done.stdout + done.stderr
    return done


# ------------------------------------------------------------------------------------------------
# 1a. Every error input of every operator declaration, from C and from Python

def c_parameters(declaration) -> list:
    """(kind, C name) of each parameter of the first phase's C prototype before its two outputs; kind is
    tensor, int_array, int64, bool or double."""
    prototype = surface.function(declaration.first_phase_name).prototype
    parameters = []
    for text in prototype[prototype.index("(") + 1:prototype.rindex(")")].split(","):
        words = text.replace("*", " ").split()
        name, ctype = words[-1], words[-2]
        if name in ("workspaceSize", "executor"):
            continue
        kinds = {"aclTensor": "tensor", "aclIntArray": "int_array", "int64_t": "int64", "bool": "bool",
                 "double": "double"}
        assert ctype in kinds, "a parameter kind this generator does not know: %r" % text
        parameters.append((kinds[ctype], name))
    return parameters


NOT_IN_C = object()  # a value no argument of the C type can hold


def c_value(kind: str, value):
    """The value a C caller passes for `value` (True for the bool 1), or NOT_IN_C."""
    if kind == "int64":
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
        return int(value) if ok and INT64[0] <= int(value) <= INT64[1] else NOT_IN_C
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and int(value) in (0, 1)):
            return bool(value)
        return NOT_IN_C
    if kind == "double":
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
        return float(value) if ok and math.isfinite(float(value)) else NOT_IN_C
    return value  # tensors and int arrays: the changes describe them, or None for null


@dataclass
class ErrorCase:
    """An error input of a declaration, with its changes as a C caller makes them."""
    key: str
    declaration: object
    error: object
    changes: Optional[dict]   # None: not expressible in C
    out: Optional[str] = None  # both out-pointers given (NullOutCase: the one passed null)

    @property
    def chip(self) -> str:
        return self.error.chip or DEFAULT_CHIP

    @property
    def id(self) -> str:
        return "%s-%s" % (self.declaration.name[len("aclnn"):], self.error.label)


def error_cases() -> list:
    cases = []
    for declaration in DECLARATIONS:
        kinds = dict((name, kind) for kind, name in c_parameters(declaration)) if surface is not None else {}
        for error in declaration.error_inputs:
            changes = {name: c_value(kinds.get(name, "tensor"), value) for name, value in error.changes.items()}
            expressible = all(value is not NOT_IN_C for value in changes.values())
            cases.append(ErrorCase("e%d" % len(cases), declaration, error, changes if expressible else None))
    return cases


ERROR_CASES = error_cases()


@dataclass
class NullOutCase:
    """A valid first-phase call of a declaration from C with one of its two out-pointers null (only C can
    pass one): 161001 and a message naming it."""
    key: str
    declaration: object
    out: str                  # "workspaceSize" or "executor"
    changes: dict = field(default_factory=dict)
    chip: str = DEFAULT_CHIP

    @property
    def id(self) -> str:
        return "%s-null-%s" % (self.declaration.name[len("aclnn"):], self.out)


NULL_OUT_CASES = [NullOutCase("n%d-%s" % (number, out), declaration, out)
                  for number, declaration in enumerate(DECLARATIONS) for out in ("workspaceSize", "executor")]
C_ERROR_CASES = [case for case in ERROR_CASES if case.changes is not None]
C_PHASE_CASES = C_ERROR_CASES + NULL_OUT_CASES  # the cases of the error-input program


def c_literal(kind: str, value) -> str:
    if kind == "int64":
        return "INT64_MIN" if value == INT64[0] else "static_cast<int64_t>(%dLL)" % value
    if kind == "bool":
        return "true" if value else "false"
    return repr(float(value))


def c_int_list(values) -> str:
    values = [int(v) for v in values]
    if len(values) > 8 and len(set(values)) == 1:
        return "std::vector<int64_t>(%d, %dLL)" % (len(values), values[0])
    return "std::vector<int64_t>{%s}" % ", ".join("%dLL" % v for v in values)


def c_error_case(number: int, case: ErrorCase) -> str:
    """A function making the case's tensors and arrays as support.Call does (each tensor over its own
    aclrtMalloc of its storage's byte size, storage shape [extent]) and calling the first phase, with a
    null workspaceSize or executor pointer for a NullOutCase."""
    sample, nulls = apply_changes(first_sample(case.declaration, case.chip), case.changes)
    lines = ["static void error_case_%d() {" % number, "  Made made;"]
    arguments = []
    for kind, name in c_parameters(case.declaration):
        arg = sample.args[name]
        if isinstance(arg, TensorInput):
            dtype = FLOAT if arg.dtype is None else arg.dtype
            shape = arg.shape
            strides = arg.strides if arg.strides is not None else nn.tensor.contiguous_strides(shape)
            extent = arg.offset + 1 if 0 in shape else arg.offset + sum((d - 1) * s for d, s in zip(shape, strides)) + 1
            nbytes = encode(np.zeros(extent), dtype).nbytes
            lines.append("  aclTensor *%s = made.tensor(%s, %d, %s, %dLL, %d, %dLL, %d);" % (
                name, c_int_list(shape), dtype, c_int_list(strides), arg.offset, arg.format, extent, nbytes))
        elif isinstance(arg, IntArrayInput):
            lines.append("  aclIntArray *%s = made.int_array(%s);" % (name, c_int_list(arg.values)))
        arguments.append("nullptr" if name in nulls else name if kind in ("tensor", "int_array")
                         else c_literal(kind, c_value(kind, arg)))
    lines += ["  uint64_t workspaceSize = 0;",
              "  aclOpExecutor *executor = nullptr;",
              "  forget_messages();",
              "  const aclnnStatus ret = %s(%s, %s, %s);" % (
                  case.declaration.first_phase_name, ", ".join(arguments),
                  "nullptr" if case.out == "workspaceSize" else "&workspaceSize",
                  "nullptr" if case.out == "executor" else "&executor"),
              "  report_phase(%s, ret, executor);" % c_string(case.key),
              "  if (executor != nullptr) aclDestroyAclOpExecutor(executor);",
              "}"]
    return "\n".join(lines)


ERROR_PROGRAM_HEAD = r"""
// What one case made, released at its end.
struct Made {
  std::vector<void *> memory;
  std::vector<aclTensor *> tensors;
  std::vector<aclIntArray *> arrays;
  aclTensor *tensor(std::vector<int64_t> shape, int dtype, std::vector<int64_t> strides, int64_t offset, int format,
                    int64_t extent, size_t nbytes) {
    memory.push_back(device_memory(nbytes));
    std::vector<int64_t> storage{extent};
    aclTensor *made = aclCreateTensor(shape.data(), shape.size(), static_cast<aclDataType>(dtype), strides.data(),
                                      offset, static_cast<aclFormat>(format), storage.data(), 1, memory.back());
    if (made == nullptr) check(1, "aclCreateTensor");
    tensors.push_back(made);
    return made;
  }
  aclIntArray *int_array(std::vector<int64_t> values) {
    aclIntArray *made = aclCreateIntArray(values.data(), values.size());
    if (made == nullptr) check(1, "aclCreateIntArray");
    arrays.push_back(made);
    return made;
  }
  ~Made() {
    for (aclTensor *t : tensors) check(aclDestroyTensor(t), "aclDestroyTensor");
    for (aclIntArray *a : arrays) check(aclDestroyIntArray(a), "aclDestroyIntArray");
    for (void *m : memory) check(aclrtFree(m), "aclrtFree");
  }
};
static void report_phase(const char *id, aclnnStatus ret, const aclOpExecutor *executor) {
  char text[48];
  std::snprintf(text, sizeof(text), "%d %s", ret, executor != nullptr ? "non-null" : "null");
  report(id, text);
}
"""


def error_program() -> str:
    functions = [c_error_case(number, case) for number, case in enumerate(C_PHASE_CASES)]
    table = ",\n".join("  {%s, error_case_%d}" % (c_string(case.chip), number)
                       for number, case in enumerate(C_PHASE_CASES))
    return c_program(ERROR_PROGRAM_HEAD + "\n\n".join(functions) + r"""

struct Case { const char *chip; void (*run)(); };
static const Case cases[] = {
%s
};

int main(int argc, char **argv) {  // runs the cases of the chip argv[1] (NPUEMU_SOC says the same)
  aclrtStream stream = nullptr;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&stream), "aclrtCreateStream");
  for (const Case &c : cases) {
    if (argc > 1 && std::strcmp(c.chip, argv[1]) == 0) c.run();
  }
  check(aclrtDestroyStream(stream), "aclrtDestroyStream");
  check(aclrtResetDevice(0), "aclrtResetDevice");
  check(aclFinalize(), "aclFinalize");
  std::printf("@@done\n");
  return 0;
}
""" % table)


def test_only_values_of_the_wrong_c_type_are_left_out_of_the_c_runs():
    """An error input is run from C unless one of its values is one no C argument of that parameter's
    type can hold (a string or 2**64 for an int64_t, 2 for a bool): the type checks of Python's form."""
    left_out = [case for case in ERROR_CASES if case.changes is None]
    assert len(C_ERROR_CASES) > 4 * len(left_out), [case.id for case in left_out]
    for case in left_out:
        assert re.search(r"expected an? (int64|bool|double)", case.error.fragment), case.id


# ------------------------------------------------------------------------------------------------
# 1b, 1c. Runtime and framework bad calls: one C snippet and one Python function each

@dataclass
class BadCall:
    """A call made in a fresh state (`needs`: "none", "init" (aclInit), "device" (aclInit,
    aclrtSetDevice(0), aclrtCreateStream: `stream`)). `c` reports its result with report_status /
    report_pointer / report(ID, ...); `python` returns the same result (a status, None or an object for a
    pointer, or the text). `python` None: a call only C can make (a null out-parameter), whose
    message (after the prefix) is `message`."""
    id: str
    needs: str
    c: str
    python: Optional[Callable]
    expect: object = None         # the result C and Python must both give (None: only that they agree)
    message: Optional[str] = None


BAD_CALLS: list = []


def bad_call(id: str, needs: str, c: str, expect: object = None):
    def register(python: Callable) -> Callable:
        BAD_CALLS.append(BadCall(id, needs, c, python, expect))
        return python
    return register


def c_only(id: str, needs: str, c: str, code: object, message: str) -> None:
    BAD_CALLS.append(BadCall(id, needs, c, None, code, message))


@dataclass
class Context:
    stream: Optional[int]


@dataclass
class Read:
    """A Python case's result, with the message it read right after the call."""
    result: object
    message: Optional[str]


def host_buffer(size: int = 64) -> np.ndarray:
    return np.zeros(size, np.uint8)


# --- the runtime

@bad_call("aclrtSetDevice(-1)", "init", "report_status(ID, aclrtSetDevice(-1));", 107001)
def _(ctx):
    return rt.aclrtSetDevice(-1)


@bad_call("aclrtSetDevice(99)", "init", "report_status(ID, aclrtSetDevice(99));", 107001)
def _(ctx):
    return rt.aclrtSetDevice(99)


c_only("aclrtMalloc-null-devPtr", "device", "report_status(ID, aclrtMalloc(nullptr, 64, ACL_MEM_MALLOC_HUGE_FIRST));",
       100000, "ACL_ERROR_INVALID_PARAM(100000): aclrtMalloc: devPtr: expected a non-null pointer, found null")


@bad_call("aclrtMalloc-size-0", "device", """void *p = nullptr;
  report_status(ID, aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST));""", 100000)
def _(ctx):
    return rt.aclrtMalloc(0, 0)


c_only("aclrtMallocHost-null-hostPtr", "device", "report_status(ID, aclrtMallocHost(nullptr, 64));", 100000,
       "ACL_ERROR_INVALID_PARAM(100000): aclrtMallocHost: hostPtr: expected a non-null pointer, found null")


@bad_call("aclrtMallocHost-beyond-what-the-host-can-pin", "device", """void *p = nullptr;
  report_status(ID, aclrtMallocHost(&p, (size_t)1 << 45));""", 207001)
def _(ctx):
    return rt.aclrtMallocHost(1 << 45)


@bad_call("aclrtFree-null", "device", "report_status(ID, aclrtFree(nullptr));", 100000)
def _(ctx):
    return rt.aclrtFree(None)


@bad_call("aclrtFree-host-pointer", "device", """static char host[64];
  report_status(ID, aclrtFree(host));""", 107000)
def _(ctx):
    host = host_buffer()
    return rt.aclrtFree(host.ctypes.data)


@bad_call("aclrtFree-twice", "device", """void *p = device_memory(64);
  aclrtFree(p);
  report_status(ID, aclrtFree(p));""", 107000)
def _(ctx):
    p, _ = rt.aclrtMalloc(64, 0)
    rt.aclrtFree(p)
    return rt.aclrtFree(p)


@bad_call("aclrtMemcpy-bad-kind", "device", """void *d = device_memory(64);
  char host[64] = {0};
  report_status(ID, aclrtMemcpy(d, 64, host, 64, static_cast<aclrtMemcpyKind>(7)));
  aclrtFree(d);""", 100000)
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    host = host_buffer()
    ret = rt.aclrtMemcpy(d, 64, host.ctypes.data, 64, 7)
    rt.aclrtFree(d)
    return ret


@bad_call("aclrtMemcpy-count-over-destMax", "device", """void *d = device_memory(64);
  char host[64] = {0};
  report_status(ID, aclrtMemcpy(d, 32, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
  aclrtFree(d);""", 107000)
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    host = host_buffer()
    ret = rt.aclrtMemcpy(d, 32, host.ctypes.data, 64, 1)
    rt.aclrtFree(d)
    return ret


@bad_call("aclrtMemcpy-null-dst", "device", """char host[64] = {0};
  report_status(ID, aclrtMemcpy(nullptr, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));""", 100000)
def _(ctx):
    host = host_buffer()
    return rt.aclrtMemcpy(None, 64, host.ctypes.data, 64, 1)


@bad_call("aclrtMemcpy-kind-not-the-addresses", "device", """void *d = device_memory(64);
  char host[64] = {0};
  report_status(ID, aclrtMemcpy(host, 64, d, 64, ACL_MEMCPY_HOST_TO_DEVICE));
  aclrtFree(d);""", 107000)
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    host = host_buffer()
    ret = rt.aclrtMemcpy(host.ctypes.data, 64, d, 64, 1)
    rt.aclrtFree(d)
    return ret


@bad_call("aclrtMemset-count-over-maxCount", "device", """void *d = device_memory(64);
  report_status(ID, aclrtMemset(d, 32, 0, 64));
  aclrtFree(d);""", 107000)
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    ret = rt.aclrtMemset(d, 32, 0, 64)
    rt.aclrtFree(d)
    return ret


@bad_call("aclrtMemcpyAsync-count-over-destMax", "device", """void *d = device_memory(64);
  char host[64] = {0};
  report_status(ID, aclrtMemcpyAsync(d, 16, host, 64, ACL_MEMCPY_HOST_TO_DEVICE, stream));
  aclrtFree(d);""", 107000)
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    host = host_buffer()
    ret = rt.aclrtMemcpyAsync(d, 16, host.ctypes.data, 64, 1, ctx.stream)
    rt.aclrtFree(d)
    return ret


@bad_call("aclrtDestroyStream-stale", "device", """aclrtStream other = nullptr;
  check(aclrtCreateStream(&other), "aclrtCreateStream");
  aclrtDestroyStream(other);
  report_status(ID, aclrtDestroyStream(other));""", 107017)
def _(ctx):
    other, _ = rt.aclrtCreateStream()
    rt.aclrtDestroyStream(other)
    return rt.aclrtDestroyStream(other)


@bad_call("aclrtDestroyStream-null", "device", "report_status(ID, aclrtDestroyStream(nullptr));", 100000)
def _(ctx):
    return rt.aclrtDestroyStream(None)


@bad_call("aclrtSynchronizeStream-garbage", "device",
          "report_status(ID, aclrtSynchronizeStream(reinterpret_cast<aclrtStream>(0x5e00dead)));", 107017)
def _(ctx):
    return rt.aclrtSynchronizeStream(0x5e00dead)


@bad_call("aclrtRecordEvent-given-a-stream", "device",
          "report_status(ID, aclrtRecordEvent(reinterpret_cast<aclrtEvent>(stream), stream));", 107017)
def _(ctx):
    return rt.aclrtRecordEvent(ctx.stream, ctx.stream)


@bad_call("aclrtDestroyEvent-twice", "device", """aclrtEvent event = nullptr;
  check(aclrtCreateEvent(&event), "aclrtCreateEvent");
  aclrtDestroyEvent(event);
  report_status(ID, aclrtDestroyEvent(event));""", 107017)
def _(ctx):
    event, _ = rt.aclrtCreateEvent()
    rt.aclrtDestroyEvent(event)
    return rt.aclrtDestroyEvent(event)


@bad_call("aclrtCreateStream-no-device", "init", """aclrtStream s = nullptr;
  report_status(ID, aclrtCreateStream(&s));""", 107002)
def _(ctx):
    return rt.aclrtCreateStream()


@bad_call("aclrtCreateStreamWithConfig-priority-9", "device", """aclrtStream s = nullptr;
  report_status(ID, aclrtCreateStreamWithConfig(&s, 9, 0));""", 100000)
def _(ctx):
    return rt.aclrtCreateStreamWithConfig(9, 0)


c_only("aclrtGetDevice-null", "device", "report_status(ID, aclrtGetDevice(nullptr));", 100000,
       "ACL_ERROR_INVALID_PARAM(100000): aclrtGetDevice: deviceId: expected a non-null pointer, found null")


@bad_call("aclrtGetDevice-no-device", "init", """int32_t device = -1;
  report_status(ID, aclrtGetDevice(&device));""", 107002)
def _(ctx):
    return rt.aclrtGetDevice()


@bad_call("aclrtResetDevice-not-set", "init", "report_status(ID, aclrtResetDevice(1));", 507007)
def _(ctx):
    return rt.aclrtResetDevice(1)


@bad_call("aclrtSynchronizeStreamWithTimeout(-5)", "device",
          "report_status(ID, aclrtSynchronizeStreamWithTimeout(stream, -5));", 107000)
def _(ctx):
    return rt.aclrtSynchronizeStreamWithTimeout(ctx.stream, -5)


@bad_call("aclrtGetMemInfo-attr-99", "device", """size_t free = 0, total = 0;
  report_status(ID, aclrtGetMemInfo(static_cast<aclrtMemAttr>(99), &free, &total));""", 107000)
def _(ctx):
    return rt.aclrtGetMemInfo(99)


@bad_call("aclInit-missing-config", "none", 'report_status(ID, aclInit("/nonexistent/npuemu/acl.json"));', 100003)
def _(ctx):
    return rt.aclInit("/nonexistent/npuemu/acl.json")


@bad_call("aclInit-twice", "init", "report_status(ID, aclInit(nullptr));", 100002)
def _(ctx):
    return rt.aclInit(None)


@bad_call("aclFinalize-twice", "none", """check(aclInit(nullptr), "aclInit");
  aclFinalize();
  report_status(ID, aclFinalize());""", 100037)
def _(ctx):
    rt.aclInit(None)
    rt.aclFinalize()
    return rt.aclFinalize()


@bad_call("aclrtGetLastError-level-3", "init",
          "report_status(ID, aclrtGetLastError(static_cast<aclrtLastErrLevel>(3)));", 100000)
def _(ctx):
    return rt.aclrtGetLastError(3)


@bad_call("aclrtGetLastError-reads-and-clears", "init", """aclrtSetDevice(-1);
  const int first = aclrtGetLastError(ACL_RT_THREAD_LEVEL);
  const int second = aclrtGetLastError(ACL_RT_THREAD_LEVEL);
  char text[32];
  std::snprintf(text, sizeof(text), "%d %d", first, second);
  report(ID, text);""")
def _(ctx):
    rt.aclrtSetDevice(-1)
    first = rt.aclrtGetLastError(0)
    second = rt.aclrtGetLastError(0)
    return "%d %d" % (first, second)


@bad_call("aclrtProcessReport(-2)", "device", "report_status(ID, aclrtProcessReport(-2));", 100000)
def _(ctx):
    return rt.aclrtProcessReport(-2)


@bad_call("aclrtLaunchCallback-null-fn", "device",
          "report_status(ID, aclrtLaunchCallback(nullptr, nullptr, ACL_CALLBACK_BLOCK, stream));", 100000)
def _(ctx):
    return rt.aclrtLaunchCallback(None, None, 1, ctx.stream)


# A negative enum value: GCC makes an enum without negative members unsigned, so the C call must pass
# it on as the 32-bit int it is (Python names -1, not 4294967295).
@bad_call("aclrtMemcpy-kind--1", "device", """void *d = device_memory(64);
  char host[64] = {0};
  report_status(ID, aclrtMemcpy(d, 64, host, 64, static_cast<aclrtMemcpyKind>(-1)));
  aclrtFree(d);""", 100000)
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    host = host_buffer()
    ret = rt.aclrtMemcpy(d, 64, host.ctypes.data, 64, -1)
    message = rt.aclGetRecentErrMsg()
    rt.aclrtFree(d)
    return Read(ret, message)


@bad_call("aclrtGetMemInfo-attr--1", "device", """size_t free = 0, total = 0;
  report_status(ID, aclrtGetMemInfo(static_cast<aclrtMemAttr>(-1), &free, &total));""", 107000)
def _(ctx):
    return rt.aclrtGetMemInfo(-1)


@bad_call("aclrtGetLastError-level--1", "init",
          "report_status(ID, aclrtGetLastError(static_cast<aclrtLastErrLevel>(-1)));", 100000)
def _(ctx):
    return rt.aclrtGetLastError(-1)


# --- the aclnn framework

LSB_C = r"""
// LogSigmoidBackward's four [2, 2] FLOAT tensors, each over its own 16 bytes
struct Lsb {
  void *memory[4];
  aclTensor *tensors[4];
  Lsb() {
    int64_t dims[2] = {2, 2};
    for (int i = 0; i < 4; ++i) {
      memory[i] = device_memory(16);
      tensors[i] = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory[i]);
    }
  }
  aclOpExecutor *plan() {
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    check(aclnnLogSigmoidBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[2], tensors[3], &workspaceSize,
                                                  &executor), "aclnnLogSigmoidBackwardGetWorkspaceSize");
    return executor;
  }
  ~Lsb() {
    for (int i = 0; i < 4; ++i) {
      aclDestroyTensor(tensors[i]);
      aclrtFree(memory[i]);
    }
  }
};
"""


class Lsb:
    """The Python twin of the C struct Lsb."""

    def __init__(self):
        self.memory = [rt.aclrtMalloc(16, 0)[0] for _ in range(4)]
        self.tensors = [nn.aclCreateTensor([2, 2], FLOAT, None, 0, nn.ACL_FORMAT_ND, [2, 2], m) for m in self.memory]

    def plan(self):
        _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*self.tensors)
        assert ret == 0
        return executor

    def close(self):
        for tensor, memory in zip(self.tensors, self.memory):
            nn.aclDestroyTensor(tensor)
            rt.aclrtFree(memory)


@bad_call("aclCreateTensor-null-dims", "device", """aclTensor *t = aclCreateTensor(nullptr, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  report_pointer(ID, t);
  if (t != nullptr) aclDestroyTensor(t);""", "null")
def _(ctx):
    # C's (nullptr, 2) arrives as None, (nullptr, 0) as an empty list
    t = nn.aclCreateTensor(None, FLOAT, None, 0, nn.ACL_FORMAT_ND, [], None)
    if t is not None:
        nn.aclDestroyTensor(t)
    return t


@bad_call("aclCreateTensor-unknown-dtype", "device", """int64_t dims[2] = {2, 2};
  void *d = device_memory(16);
  aclTensor *t = aclCreateTensor(dims, 2, static_cast<aclDataType>(1000), nullptr, 0, ACL_FORMAT_ND, dims, 2, d);
  report_pointer(ID, t);
  if (t != nullptr) aclDestroyTensor(t);
  aclrtFree(d);""", "null")
def _(ctx):
    d, _ = rt.aclrtMalloc(16, 0)
    t = nn.aclCreateTensor([2, 2], 1000, None, 0, nn.ACL_FORMAT_ND, [2, 2], d)
    if t is not None:
        nn.aclDestroyTensor(t)
    rt.aclrtFree(d)
    return t


@bad_call("aclCreateTensor-negative-stride", "device", """int64_t dims[2] = {2, 2};
  int64_t strides[2] = {2, -1};
  void *d = device_memory(16);
  aclTensor *t = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, d);
  report_pointer(ID, t);
  if (t != nullptr) aclDestroyTensor(t);
  aclrtFree(d);""", "null")
def _(ctx):
    d, _ = rt.aclrtMalloc(16, 0)
    t = nn.aclCreateTensor([2, 2], FLOAT, [2, -1], 0, nn.ACL_FORMAT_ND, [2, 2], d)
    if t is not None:
        nn.aclDestroyTensor(t)
    rt.aclrtFree(d)
    return t


@bad_call("aclCreateTensor-negative-offset", "device", """int64_t dims[2] = {2, 2};
  void *d = device_memory(16);
  aclTensor *t = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, -1, ACL_FORMAT_ND, dims, 2, d);
  report_pointer(ID, t);
  if (t != nullptr) aclDestroyTensor(t);
  aclrtFree(d);""", "null")
def _(ctx):
    d, _ = rt.aclrtMalloc(16, 0)
    t = nn.aclCreateTensor([2, 2], FLOAT, None, -1, nn.ACL_FORMAT_ND, [2, 2], d)
    if t is not None:
        nn.aclDestroyTensor(t)
    rt.aclrtFree(d)
    return t


@bad_call("aclCreateTensor-strides-beyond-int64", "device", """int64_t dims[3] = {2, 1LL << 62, 2};
  void *d = device_memory(64);
  aclTensor *t = aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 3, d);
  report_pointer(ID, t);
  if (t != nullptr) {  // what the card's getter would hand back: strides no int64_t holds
    int64_t *strides = nullptr;
    uint64_t count = 0;
    report_status("aclGetViewStrides-of-a-tensor-beyond-int64", aclGetViewStrides(t, &strides, &count));
    delete[] strides;
    aclDestroyTensor(t);
  }
  aclrtFree(d);""", "null")
def _(ctx):
    d, _ = rt.aclrtMalloc(64, 0)
    t = nn.aclCreateTensor([2, 1 << 62, 2], FLOAT, None, 0, nn.ACL_FORMAT_ND, [2, 1 << 62, 2], d)
    if t is not None:
        nn.aclDestroyTensor(t)
    rt.aclrtFree(d)
    return t


@bad_call("aclDestroyTensor-twice", "device", """int64_t dims[2] = {2, 2};
  void *d = device_memory(16);
  aclTensor *t = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, d); // @tensor-made
  aclDestroyTensor(t); // @tensor-destroyed
  report_status(ID, aclDestroyTensor(t));
  aclrtFree(d);""", 161002)
def _(ctx):
    d, _ = rt.aclrtMalloc(16, 0)
    t = nn.aclCreateTensor([2, 2], FLOAT, None, 0, nn.ACL_FORMAT_ND, [2, 2], d)
    nn.aclDestroyTensor(t)
    ret = nn.aclDestroyTensor(t)
    rt.aclrtFree(d)
    return ret


@bad_call("aclDestroyTensor-garbage", "device",
          "report_status(ID, aclDestroyTensor(reinterpret_cast<aclTensor *>(0x5e00dead)));", 161002)
def _(ctx):
    return nn.aclDestroyTensor(0x5e00dead)


@bad_call("aclDestroyTensor-given-an-executor", "device", """Lsb lsb;
  aclOpExecutor *executor = lsb.plan();
  report_status(ID, aclDestroyTensor(reinterpret_cast<aclTensor *>(executor)));
  aclDestroyAclOpExecutor(executor);""", 161002)
def _(ctx):
    lsb = Lsb()
    executor = lsb.plan()
    ret = nn.aclDestroyTensor(executor.handle)
    nn.aclDestroyAclOpExecutor(executor)
    lsb.close()
    return ret


@bad_call("aclGetViewShape-null-tensor", "device", """int64_t *dims = nullptr;
  uint64_t count = 0;
  report_status(ID, aclGetViewShape(nullptr, &dims, &count));""", 161001)
def _(ctx):
    return nn.aclGetViewShape(None)


c_only("aclGetViewShape-null-viewDims", "device", """Lsb lsb;
  uint64_t count = 0;
  report_status(ID, aclGetViewShape(lsb.tensors[0], nullptr, &count));""", 161001,
       "AclNN_Parameter_Error(EZ1001): aclGetViewShape: viewDims: expected a non-null pointer, found null")

@bad_call("aclnnLogSigmoidBackward-null-executor", "device",
          "report_status(ID, aclnnLogSigmoidBackward(nullptr, 0, nullptr, stream));", 161001)
def _(ctx):
    return nn.aclnnLogSigmoidBackward(None, 0, None, ctx.stream)


@bad_call("aclnnLogSigmoidBackward-single-use-executor-again", "device", """Lsb lsb;
  aclOpExecutor *executor = lsb.plan();
  check(aclnnLogSigmoidBackward(nullptr, 0, executor, stream), "aclnnLogSigmoidBackward");
  report_status(ID, aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  aclrtSynchronizeStream(stream);""", 161002)
def _(ctx):
    lsb = Lsb()
    executor = lsb.plan()
    assert nn.aclnnLogSigmoidBackward(None, 0, executor, ctx.stream) == 0
    ret = nn.aclnnLogSigmoidBackward(None, 0, executor, ctx.stream)
    message = rt.aclGetRecentErrMsg()
    rt.aclrtSynchronizeStream(ctx.stream)
    lsb.close()
    return Read(ret, message)


# As CommonOpExecutorRun on the card: any second phase runs the executor's own work, and uses it up.
@bad_call("aclnnKlDivBackward-given-a-LogSigmoidBackward-executor", "device", """Lsb lsb;
  aclOpExecutor *executor = lsb.plan();
  const int launched = aclnnKlDivBackward(nullptr, 0, executor, stream);
  check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  const int destroyed = aclDestroyAclOpExecutor(executor);
  char text[64];
  std::snprintf(text, sizeof(text), "launch %d, destroy %d", launched, destroyed);
  report(ID, text);""", "launch 0, destroy 161002")
def _(ctx):
    lsb = Lsb()
    executor = lsb.plan()
    launched = nn.aclnnKlDivBackward(None, 0, executor, ctx.stream)
    assert rt.aclrtSynchronizeStream(ctx.stream) == 0
    destroyed = nn.aclDestroyAclOpExecutor(executor)
    message = rt.aclGetRecentErrMsg()
    lsb.close()
    return Read("launch %d, destroy %d" % (launched, destroyed), message)


@bad_call("aclnnLogSigmoidBackward-destroyed-stream", "device", """Lsb lsb;
  aclOpExecutor *executor = lsb.plan();
  aclrtStream other = nullptr;
  check(aclrtCreateStream(&other), "aclrtCreateStream");
  aclrtDestroyStream(other);
  report_status(ID, aclnnLogSigmoidBackward(nullptr, 0, executor, other));
  aclDestroyAclOpExecutor(executor);""", 361001)
def _(ctx):
    lsb = Lsb()
    executor = lsb.plan()
    other, _ = rt.aclrtCreateStream()
    rt.aclrtDestroyStream(other)
    ret = nn.aclnnLogSigmoidBackward(None, 0, executor, other)
    message = rt.aclGetRecentErrMsg()
    nn.aclDestroyAclOpExecutor(executor)
    lsb.close()
    return Read(ret, message)


@bad_call("aclDestroyAclOpExecutor-null", "device", "report_status(ID, aclDestroyAclOpExecutor(nullptr));", 561103)
def _(ctx):
    return nn.aclDestroyAclOpExecutor(None)


@bad_call("aclSetAclOpExecutorRepeatable-twice", "device", """Lsb lsb;
  aclOpExecutor *executor = lsb.plan();
  check(aclSetAclOpExecutorRepeatable(executor), "aclSetAclOpExecutorRepeatable");
  report_status(ID, aclSetAclOpExecutorRepeatable(executor));
  aclDestroyAclOpExecutor(executor);""")
def _(ctx):
    lsb = Lsb()
    executor = lsb.plan()
    assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
    ret = nn.aclSetAclOpExecutorRepeatable(executor)
    message = rt.aclGetRecentErrMsg()
    nn.aclDestroyAclOpExecutor(executor)
    lsb.close()
    return Read(ret, message)


@bad_call("aclSetInputTensorAddr-index-out-of-range", "device", """Lsb lsb;
  aclOpExecutor *executor = lsb.plan();
  check(aclSetAclOpExecutorRepeatable(executor), "aclSetAclOpExecutorRepeatable");
  report_status(ID, aclSetInputTensorAddr(executor, 7, lsb.tensors[1], lsb.memory[0]));
  aclDestroyAclOpExecutor(executor);""", 161002)
def _(ctx):
    lsb = Lsb()
    executor = lsb.plan()
    assert nn.aclSetAclOpExecutorRepeatable(executor) == 0
    ret = nn.aclSetInputTensorAddr(executor, 7, lsb.tensors[1], lsb.memory[0])
    message = rt.aclGetRecentErrMsg()
    nn.aclDestroyAclOpExecutor(executor)
    lsb.close()
    return Read(ret, message)


@bad_call("aclSetRawTensorAddr-destroyed-tensor", "device", """int64_t dims[1] = {4};
  void *d = device_memory(16);
  aclTensor *t = aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, d);
  aclDestroyTensor(t);
  report_status(ID, aclSetRawTensorAddr(t, d));
  aclrtFree(d);""", 161002)
def _(ctx):
    d, _ = rt.aclrtMalloc(16, 0)
    t = nn.aclCreateTensor([4], FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], d)
    nn.aclDestroyTensor(t)
    ret = nn.aclSetRawTensorAddr(t, d)
    message = rt.aclGetRecentErrMsg()
    rt.aclrtFree(d)
    return Read(ret, message)


@bad_call("aclCreateTensorList-destroyed-element", "device", """Lsb lsb;
  aclDestroyTensor(lsb.tensors[0]);
  const aclTensor *elements[2] = {lsb.tensors[0], lsb.tensors[1]};
  aclTensorList *list = aclCreateTensorList(elements, 2);
  report_pointer(ID, list);
  if (list != nullptr) aclDestroyTensorList(list);""", "null")
def _(ctx):
    lsb = Lsb()
    nn.aclDestroyTensor(lsb.tensors[0])
    made = nn.aclCreateTensorList([lsb.tensors[0], lsb.tensors[1]])
    message = rt.aclGetRecentErrMsg()
    if made is not None:
        nn.aclDestroyTensorList(made)
    lsb.close()
    return Read(made, message)


@bad_call("aclCreateScalar-null-value", "device", """aclScalar *s = aclCreateScalar(nullptr, ACL_FLOAT);
  report_pointer(ID, s);
  if (s != nullptr) aclDestroyScalar(s);""", "null")
def _(ctx):
    s = nn.aclCreateScalar(None, FLOAT)
    if s is not None:
        nn.aclDestroyScalar(s)
    return s


@bad_call("aclCreateScalar-unknown-dtype", "device", """float value = 1.5f;
  aclScalar *s = aclCreateScalar(&value, static_cast<aclDataType>(1000));
  report_pointer(ID, s);
  if (s != nullptr) aclDestroyScalar(s);""", "null")
def _(ctx):
    s = nn.aclCreateScalar(1.5, 1000)
    if s is not None:
        nn.aclDestroyScalar(s)
    return s


@bad_call("aclCreateIntArray(nullptr, 0)-is-empty", "device", """aclIntArray *a = aclCreateIntArray(nullptr, 0);
  uint64_t size = 99;
  const int ret = aclGetIntArraySize(a, &size);
  char text[64];
  std::snprintf(text, sizeof(text), "%s %d %llu", a != nullptr ? "non-null" : "null", ret, (unsigned long long)size);
  report(ID, text);
  aclDestroyIntArray(a);""")
def _(ctx):
    a = nn.aclCreateIntArray([])  # C's (nullptr, 0) arrives as an empty list
    size, ret = nn.aclGetIntArraySize(a)
    nn.aclDestroyIntArray(a)
    return "%s %d %d" % ("null" if a is None else "non-null", ret, size)


@bad_call("aclCreate-Int-Float-Bool-Array(nullptr, 3)-and-lists(nullptr, 0)-are-empty", "device", """
  aclIntArray *ints = aclCreateIntArray(nullptr, 3);
  aclFloatArray *floats = aclCreateFloatArray(nullptr, 3);
  aclBoolArray *bools = aclCreateBoolArray(nullptr, 3);
  aclTensorList *tensors = aclCreateTensorList(nullptr, 0);
  aclScalarList *scalars = aclCreateScalarList(nullptr, 0);
  uint64_t sizes[5] = {99, 99, 99, 99, 99};
  aclGetIntArraySize(ints, &sizes[0]);
  aclGetFloatArraySize(floats, &sizes[1]);
  aclGetBoolArraySize(bools, &sizes[2]);
  aclGetTensorListSize(tensors, &sizes[3]);
  aclGetScalarListSize(scalars, &sizes[4]);
  char text[64];
  std::snprintf(text, sizeof(text), "%llu %llu %llu %llu %llu", (unsigned long long)sizes[0], (unsigned long long)sizes[1],
                (unsigned long long)sizes[2], (unsigned long long)sizes[3], (unsigned long long)sizes[4]);
  report(ID, text);
  aclDestroyIntArray(ints);
  aclDestroyFloatArray(floats);
  aclDestroyBoolArray(bools);
  aclDestroyTensorList(tensors);
  aclDestroyScalarList(scalars);""", "0 0 0 0 0")
def _(ctx):
    # C's NULL with a count arrives as None for the arrays (RUNTIME.md: a valid empty array); NULL with 0 as []
    made = [nn.aclCreateIntArray(None), nn.aclCreateFloatArray(None), nn.aclCreateBoolArray(None),
            nn.aclCreateTensorList([]), nn.aclCreateScalarList([])]
    sizes = [size for size, _ in (nn.aclGetIntArraySize(made[0]), nn.aclGetFloatArraySize(made[1]),
                                  nn.aclGetBoolArraySize(made[2]), nn.aclGetTensorListSize(made[3]),
                                  nn.aclGetScalarListSize(made[4]))]
    message = rt.aclGetRecentErrMsg()
    for destroy, made_one in zip((nn.aclDestroyIntArray, nn.aclDestroyFloatArray, nn.aclDestroyBoolArray,
                                  nn.aclDestroyTensorList, nn.aclDestroyScalarList), made):
        destroy(made_one)
    return Read(" ".join(str(size) for size in sizes), message)


# A tensor or scalar list of NULL with a count: the card's constructor would read the pointers from NULL.
c_only("aclCreateTensorList(nullptr, 2)", "device", "report_pointer(ID, aclCreateTensorList(nullptr, 2));", "null",
       "AclNN_Parameter_Error(EZ1001): aclCreateTensorList: value: expected an array of aclTensor pointers, "
       "found null")
c_only("aclCreateScalarList(nullptr, 3)", "device", "report_pointer(ID, aclCreateScalarList(nullptr, 3));", "null",
       "AclNN_Parameter_Error(EZ1001): aclCreateScalarList: value: expected an array of aclScalar pointers, "
       "found null")


@bad_call("aclGetTensorListSize-and-aclGetScalarListSize", "device", """Lsb lsb;
  const aclTensor *elements[2] = {lsb.tensors[0], lsb.tensors[1]};
  aclTensorList *tensors = aclCreateTensorList(elements, 2);
  lsb.tensors[0] = lsb.tensors[1] = nullptr;  // the list's now
  float value = 1.5f;
  const aclScalar *scalar[1] = {aclCreateScalar(&value, ACL_FLOAT)};
  aclScalarList *scalars = aclCreateScalarList(scalar, 1);
  uint64_t tensor_count = 99, scalar_count = 99;
  const int tensor_ret = aclGetTensorListSize(tensors, &tensor_count);
  const int scalar_ret = aclGetScalarListSize(scalars, &scalar_count);
  char text[64];
  std::snprintf(text, sizeof(text), "%d %llu %d %llu", tensor_ret, (unsigned long long)tensor_count, scalar_ret,
                (unsigned long long)scalar_count);
  report(ID, text);
  aclDestroyTensorList(tensors);
  aclDestroyScalarList(scalars);""", "0 2 0 1")
def _(ctx):
    lsb = Lsb()
    tensors = nn.aclCreateTensorList(lsb.tensors[:2])
    scalars = nn.aclCreateScalarList([nn.aclCreateScalar(1.5, FLOAT)])
    tensor_count, tensor_ret = nn.aclGetTensorListSize(tensors)
    scalar_count, scalar_ret = nn.aclGetScalarListSize(scalars)
    message = rt.aclGetRecentErrMsg()
    nn.aclDestroyTensorList(tensors)  # destroys lsb.tensors[0:2]
    nn.aclDestroyScalarList(scalars)
    for tensor in lsb.tensors[2:]:
        nn.aclDestroyTensor(tensor)
    for memory in lsb.memory:
        rt.aclrtFree(memory)
    return Read("%d %d %d %d" % (tensor_ret, tensor_count, scalar_ret, scalar_count), message)


@bad_call("aclGetTensorListSize-null-list", "device", """uint64_t size = 99;
  report_status(ID, aclGetTensorListSize(nullptr, &size));""", 161001)
def _(ctx):
    return nn.aclGetTensorListSize(None)


c_only("aclGetScalarListSize-null-size", "device", """float value = 1.5f;
  const aclScalar *scalar[1] = {aclCreateScalar(&value, ACL_FLOAT)};
  aclScalarList *scalars = aclCreateScalarList(scalar, 1);
  report_status(ID, aclGetScalarListSize(scalars, nullptr));
  aclDestroyScalarList(scalars);""", 161001,
       "AclNN_Parameter_Error(EZ1001): aclGetScalarListSize: size: expected a non-null pointer, found null")


NEEDS_SETUP = {
    "none": ("", ""),
    "init": ('check(aclInit(nullptr), "aclInit");', "aclFinalize();"),
    "device": ('check(aclInit(nullptr), "aclInit");\n  check(aclrtSetDevice(0), "aclrtSetDevice");\n'
               '  check(aclrtCreateStream(&stream), "aclrtCreateStream");',
               "aclrtDestroyStream(stream);\n  aclrtResetDevice(0);\n  aclFinalize();"),
}


def bad_call_program() -> str:
    functions, calls = [], []
    for number, case in enumerate(BAD_CALLS):
        functions.append("static void bad_call_%d(aclrtStream stream) {\n  const char *ID = %s;\n  (void)stream;\n"
                         "  forget_messages();\n  %s\n}" % (number, c_string("b%d" % number), case.c))
        setup, teardown = NEEDS_SETUP[case.needs]
        calls.append("  {\n  aclrtStream stream = nullptr;\n  %s\n  bad_call_%d(stream);\n  %s\n  forget_messages();\n"
                     "  }" % (setup, number, teardown))
    return c_program(LSB_C + "\n\n".join(functions) + "\n\nint main() {\n" + "\n".join(calls)
                     + '\n  std::printf("@@done\\n");\n  return 0;\n}\n')


def python_outcome(case: BadCall) -> Outcome:
    """The case's Python function run in the same fresh state as the C one; its result as C prints it."""
    stream = None
    if case.needs in ("init", "device"):
        assert rt.aclInit(None) == 0
    if case.needs == "device":
        assert rt.aclrtSetDevice(0) == 0
        stream, ret = rt.aclrtCreateStream()
        assert ret == 0
    rt.aclGetRecentErrMsg()
    result = case.python(Context(stream))
    message = rt.aclGetRecentErrMsg()
    if isinstance(result, Read):
        result, message = result.result, result.message
    if isinstance(result, tuple):
        result = result[-1]       # pyACL convention: the status last
    if result is None or isinstance(result, Resource):
        result = "null" if result is None else "non-null"
    if case.needs == "device":
        rt.aclrtDestroyStream(stream)
        rt.aclrtResetDevice(0)
    if case.needs != "none":
        rt.aclFinalize()
    rt.aclGetRecentErrMsg()
    return Outcome(str(result), "(none)" if message is None else message)


# ------------------------------------------------------------------------------------------------
# 2. Handles, 3. faults, 4. leaks, 5. asynchronous streams, 6. callbacks: one program each

HANDLES_PROGRAM = c_program(LSB_C + r"""
int main() {
  aclrtStream stream = nullptr;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&stream), "aclrtCreateStream");

  // A repeatable executor, moved between its launches
  const float ones[4] = {1, 1, 1, 1}, first[4] = {1, 2, 3, 4}, second[4] = {-1, 0, 0.5f, 8};
  void *memory[6];
  for (int i = 0; i < 6; ++i) memory[i] = device_memory(16);
  check(aclrtMemcpy(memory[0], 16, ones, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  check(aclrtMemcpy(memory[1], 16, first, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  check(aclrtMemcpy(memory[2], 16, first, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  check(aclrtMemcpy(memory[4], 16, second, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  int64_t dims[2] = {2, 2};
  aclTensor *gradOutput = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory[0]);
  aclTensor *self = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory[1]);
  aclTensor *buffer = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory[2]);
  aclTensor *gradInput = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory[3]);
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = nullptr;
  check(aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, buffer, gradInput, &workspaceSize, &executor), "plan");
  report_status("repeatable", aclSetAclOpExecutorRepeatable(executor));
  float out[4];
  report_status("launch-1", aclnnLogSigmoidBackward(nullptr, workspaceSize, executor, stream));
  check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  check(aclrtMemcpy(out, 16, memory[3], 16, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  print_floats("launch-1", out, 4);
  report_status("set-input-1", aclSetInputTensorAddr(executor, 1, self, memory[4]));
  report_status("launch-2", aclnnLogSigmoidBackward(nullptr, workspaceSize, executor, stream));
  check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  check(aclrtMemcpy(out, 16, memory[3], 16, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  print_floats("launch-2", out, 4);
  report_status("set-raw-gradInput", aclSetRawTensorAddr(gradInput, memory[5]));
  report_status("set-raw-self", aclSetRawTensorAddr(self, memory[1]));
  report_status("launch-3", aclnnLogSigmoidBackward(nullptr, workspaceSize, executor, stream));
  check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  check(aclrtMemcpy(out, 16, memory[5], 16, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  print_floats("launch-3", out, 4);
  check(aclrtMemcpy(out, 16, memory[3], 16, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  print_floats("launch-3-old-output", out, 4);
  report_status("destroy-repeatable", aclDestroyAclOpExecutor(executor)); // @repeatable-destroyed
  report_status("launch-destroyed", aclnnLogSigmoidBackward(nullptr, workspaceSize, executor, stream));

  // A single-use executor launched twice
  aclOpExecutor *single = nullptr;
  check(aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, buffer, gradInput, &workspaceSize, &single), "plan"); // @single-made
  report_status("single-launch-1", aclnnLogSigmoidBackward(nullptr, workspaceSize, single, stream)); // @single-used
  report_status("single-launch-2", aclnnLogSigmoidBackward(nullptr, workspaceSize, single, stream)); // @single-again
  check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(buffer);
  aclDestroyTensor(gradInput);
  for (int i = 0; i < 6; ++i) aclrtFree(memory[i]);

  // A tensor list destroys its tensors
  {
    Lsb lsb;
    const aclTensor *elements[2] = {lsb.tensors[0], lsb.tensors[1]};
    aclTensorList *list = aclCreateTensorList(elements, 2); // @list-made
    report_pointer("tensor-list", list);
    report_status("destroy-list", aclDestroyTensorList(list)); // @list-destroyed
    report_status("destroy-element", aclDestroyTensor(lsb.tensors[0]));
    report_status("destroy-list-again", aclDestroyTensorList(list));
    lsb.tensors[0] = nullptr;  // gone with the list: ~Lsb destroys only the others
    lsb.tensors[1] = nullptr;
  }

  // aclCreateScalar reads the value at the pointer, as the dtype says
  {
    const float f32 = 1.5f;
    const int32_t i32 = -7;
    const int64_t i64 = 1099511627776LL;
    const bool b = true;
    const uint16_t f16 = 0x3E00, bf16 = 0x3FC0;  // 1.5 in both
    const double f64 = 0.1;
    const struct { const char *id; const void *value; aclDataType dtype; } scalars[] = {
        {"FLOAT", &f32, ACL_FLOAT}, {"INT32", &i32, ACL_INT32}, {"INT64", &i64, ACL_INT64}, {"BOOL", &b, ACL_BOOL},
        {"FLOAT16", &f16, ACL_FLOAT16}, {"BF16", &bf16, ACL_BF16}, {"DOUBLE", &f64, ACL_DOUBLE}};
    for (const auto &s : scalars) {
      char id[64];
      aclScalar *scalar = aclCreateScalar(const_cast<void *>(s.value), s.dtype);
      std::snprintf(id, sizeof(id), "scalar-%s", s.id);
      report_pointer(id, scalar);
      std::snprintf(id, sizeof(id), "destroy-scalar-%s", s.id);
      report_status(id, aclDestroyScalar(scalar));
    }
    aclScalar *unknown = aclCreateScalar(const_cast<float *>(&f32), static_cast<aclDataType>(1000));
    report_pointer("scalar-unknown-dtype", unknown);
  }

  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  return 0;
}
""")

FAULTS_PROGRAM = c_program(r"""
static aclTensor *floats(int64_t count, void *memory) {
  int64_t dims[1] = {count};
  return aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, memory);
}

int main() {
  aclrtStream stream = nullptr;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&stream), "aclrtCreateStream");
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = nullptr;

  // A view of 1024 floats over 1024 bytes
  void *small = nullptr;
  check(aclrtMalloc(&small, 1024, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"); // @small-malloc
  void *gradOutputMemory = nullptr, *outputMemory = nullptr;  // made here, in main: the sites say main
  check(aclrtMalloc(&gradOutputMemory, 4096, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  check(aclrtMalloc(&outputMemory, 4096, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  aclTensor *gradOutput = floats(1024, gradOutputMemory);
  aclTensor *self = floats(1024, small);
  aclTensor *gradInput = floats(1024, outputMemory);
  check(aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, self, gradInput, &workspaceSize, &executor), "plan");
  report_status("overrun-launch", aclnnLogSigmoidBackward(nullptr, 0, executor, stream)); // @overrun-launch
  report_status("overrun-sync", aclrtSynchronizeStream(stream));
  report_status("overrun-sync-again", aclrtSynchronizeStream(stream));

  // Device memory freed before the stream ran the launch
  void *freed = nullptr;
  check(aclrtMalloc(&freed, 4096, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"); // @freed-malloc
  aclTensor *lost = floats(1024, freed);
  check(aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, gradOutput, gradOutput, lost, &workspaceSize, &executor), "plan");
  report_status("freed-launch", aclnnLogSigmoidBackward(nullptr, 0, executor, stream)); // @freed-launch
  report_status("freed-free", aclrtFree(freed)); // @freed-free
  report_status("freed-sync", aclrtSynchronizeStream(stream));

  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(gradInput);
  aclDestroyTensor(lost);
  aclrtFree(small);
  aclrtFree(gradOutputMemory);
  aclrtFree(outputMemory);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  return 0;
}
""")

# The same program in Python: the same calls in the same order.
FAULTS_PYTHON = r'''
import aclnn_api as nn
from emulator import runtime as rt


def report(id, result):
    message = rt.aclGetRecentErrMsg()
    print("@@case %s\n@@result %s\n@@message\n%s\n@@end" % (id, result, "(none)" if message is None else message),
          flush=True)


def floats(count, memory):
    return nn.aclCreateTensor([count], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, [count], memory)


assert rt.aclInit(None) == 0
assert rt.aclrtSetDevice(0) == 0
stream, _ = rt.aclrtCreateStream()

small, _ = rt.aclrtMalloc(1024, 0)
grad_output_memory, _ = rt.aclrtMalloc(4096, 0)
output_memory, _ = rt.aclrtMalloc(4096, 0)
grad_output = floats(1024, grad_output_memory)
self = floats(1024, small)
grad_input = floats(1024, output_memory)
_, executor, _ = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(grad_output, self, self, grad_input)
report("overrun-launch", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
report("overrun-sync", rt.aclrtSynchronizeStream(stream))
report("overrun-sync-again", rt.aclrtSynchronizeStream(stream))

freed, _ = rt.aclrtMalloc(4096, 0)
lost = floats(1024, freed)
_, executor, _ = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(grad_output, grad_output, grad_output, lost)
report("freed-launch", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
report("freed-free", rt.aclrtFree(freed))
report("freed-sync", rt.aclrtSynchronizeStream(stream))

for tensor in (grad_output, self, grad_input, lost):
    nn.aclDestroyTensor(tensor)
for memory in (small, grad_output_memory, output_memory):
    rt.aclrtFree(memory)
rt.aclrtDestroyStream(stream)
rt.aclrtResetDevice(0)
rt.aclFinalize()
print("@@done")
'''

LEAKS_PROGRAM = c_program(r"""
static aclTensor *make_tensor(void *memory) {  // a helper, as the documented sample's CreateAclTensor
  int64_t dims[1] = {4};
  return aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, memory); // @helper-create
}

__attribute__((noinline)) static void make_in_a_helper(void *memory) {  // a helper's helper: three frames
  make_tensor(memory); // @helper-inner-call
  std::fflush(stdout);  // not a tail call
}

int main() {
  aclrtStream stream = nullptr;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&stream), "aclrtCreateStream");
  void *memory = nullptr;
  check(aclrtMalloc(&memory, 64, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"); // @leaked-malloc
  int64_t dims[2] = {4, 4};
  aclTensor *tensor = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory); // @leaked-tensor
  if (tensor == nullptr) check(1, "aclCreateTensor");
  make_tensor(memory); // @helper-call-1
  make_tensor(memory); // @helper-call-2
  make_in_a_helper(memory); // @helper-outer-call
  // Scalars left to the report, which describes each with the value read at its pointer
  const float f32 = 1.5f;
  const int32_t i32 = -7;
  const int64_t i64 = 1099511627776LL;
  const bool b = true;
  const uint16_t f16 = 0x3E00, bf16 = 0x3FC0;
  const double f64 = 0.1;
  aclCreateScalar(const_cast<float *>(&f32), ACL_FLOAT);
  aclCreateScalar(const_cast<int32_t *>(&i32), ACL_INT32);
  aclCreateScalar(const_cast<int64_t *>(&i64), ACL_INT64);
  aclCreateScalar(const_cast<bool *>(&b), ACL_BOOL);
  aclCreateScalar(const_cast<uint16_t *>(&f16), ACL_FLOAT16);
  aclCreateScalar(const_cast<uint16_t *>(&bf16), ACL_BF16);
  aclCreateScalar(const_cast<double *>(&f64), ACL_DOUBLE);
  check(aclrtDestroyStream(stream), "aclrtDestroyStream");
  check(aclrtResetDevice(0), "aclrtResetDevice");
  std::printf("finalize %d\n", aclFinalize());
  std::fflush(stdout);
  return 0;
}
""")

# aclCreateScalar from C, for every numeric dtype: (case id, dtype, the bytes at `value`, the value the scalar
# must hold; None: refused, as npuemu cannot decode the dtype). FLOAT6 and FLOAT4 sit in the low bits of
# the first byte (aclDataTypeSize says 8 bytes, which the library copies); INT4 is the low nibble, signed.
def _le(numpy_type, *values) -> bytes:
    return np.array(values, numpy_type).tobytes()


C_SCALARS = [
    ("FLOAT", "ACL_FLOAT", _le(np.float32, 1.5), 1.5), ("FLOAT16", "ACL_FLOAT16", _le(np.float16, 1.5), 1.5),
    ("BF16", "ACL_BF16", _le(np.uint16, 0x3FC0), 1.5), ("DOUBLE", "ACL_DOUBLE", _le(np.float64, 0.1), 0.1),
    ("INT8", "ACL_INT8", _le(np.int8, -7), -7), ("UINT8", "ACL_UINT8", _le(np.uint8, 200), 200),
    ("INT16", "ACL_INT16", _le(np.int16, -300), -300), ("UINT16", "ACL_UINT16", _le(np.uint16, 60000), 60000),
    ("INT32", "ACL_INT32", _le(np.int32, -7), -7), ("UINT32", "ACL_UINT32", _le(np.uint32, 4000000000), 4000000000),
    ("INT64", "ACL_INT64", _le(np.int64, 1 << 40), 1 << 40),
    ("UINT64", "ACL_UINT64", _le(np.uint64, (1 << 64) - 1), (1 << 64) - 1), ("BOOL", "ACL_BOOL", b"\x01", True),
    ("COMPLEX32", "ACL_COMPLEX32", _le(np.float16, 1.5, -2.0), 1.5 - 2j),
    ("COMPLEX64", "ACL_COMPLEX64", _le(np.float32, 1.5, -2.0), 1.5 - 2j),
    ("COMPLEX128", "ACL_COMPLEX128", _le(np.float64, 0.25, 4.0), 0.25 + 4j),
    ("FLOAT8_E5M2", "ACL_FLOAT8_E5M2", b"\x3e", 1.5), ("FLOAT8_E5M2-negative", "ACL_FLOAT8_E5M2", b"\xc0", -2.0),
    ("FLOAT8_E5M2-inf", "ACL_FLOAT8_E5M2", b"\x7c", math.inf),
    ("FLOAT8_E5M2-subnormal", "ACL_FLOAT8_E5M2", b"\x01", 2.0 ** -16),
    ("FLOAT8_E4M3FN", "ACL_FLOAT8_E4M3FN", b"\x3c", 1.5), ("FLOAT8_E4M3FN-max", "ACL_FLOAT8_E4M3FN", b"\x7e", 448.0),
    ("FLOAT8_E4M3FN-nan", "ACL_FLOAT8_E4M3FN", b"\x7f", math.nan),
    ("FLOAT8_E4M3FN-subnormal", "ACL_FLOAT8_E4M3FN", b"\x81", -(2.0 ** -9)),
    ("FLOAT8_E8M0", "ACL_FLOAT8_E8M0", b"\x80", 2.0), ("FLOAT8_E8M0-least", "ACL_FLOAT8_E8M0", b"\x00", 2.0 ** -127),
    ("FLOAT8_E8M0-nan", "ACL_FLOAT8_E8M0", b"\xff", math.nan),
    ("FLOAT6_E3M2", "ACL_FLOAT6_E3M2", b"\x0e", 1.5), ("FLOAT6_E3M2-max", "ACL_FLOAT6_E3M2", b"\x1f", 28.0),
    ("FLOAT6_E3M2-high-bits-ignored", "ACL_FLOAT6_E3M2", b"\xce", 1.5),
    ("FLOAT6_E2M3", "ACL_FLOAT6_E2M3", b"\x0c", 1.5), ("FLOAT6_E2M3-subnormal", "ACL_FLOAT6_E2M3", b"\x01", 0.125),
    ("FLOAT6_E2M3-negative-max", "ACL_FLOAT6_E2M3", b"\x3f", -7.5),
    ("FLOAT4_E2M1", "ACL_FLOAT4_E2M1", b"\x03", 1.5), ("FLOAT4_E2M1-max", "ACL_FLOAT4_E2M1", b"\x07", 6.0),
    ("FLOAT4_E2M1-negative-subnormal", "ACL_FLOAT4_E2M1", b"\xf9", -0.5),
    ("INT4", "ACL_INT4", b"\x07", 7), ("INT4-negative", "ACL_INT4", b"\x0f", -1), ("INT4-least", "ACL_INT4", b"\xf8", -8),
    ("UINT1", "ACL_UINT1", b"\x01", 1), ("UINT1-zero", "ACL_UINT1", b"\xfe", 0),
    ("HIFLOAT8", "ACL_HIFLOAT8", b"\x38", None), ("FLOAT4_E1M2", "ACL_FLOAT4_E1M2", b"\x03", None),
]

SCALARS_PROGRAM = c_program(r"""
struct ScalarCase { const char *id; aclDataType dtype; unsigned char bytes[16]; };
static const ScalarCase cases[] = {
%s
};

int main() {
  check(aclInit(nullptr), "aclInit");
  // Scalars left to the leak report, which describes each with the value it holds
  for (const ScalarCase &c : cases) report_pointer(c.id, aclCreateScalar(const_cast<unsigned char *>(c.bytes), c.dtype));
  std::printf("@@done\n");
  std::fflush(stdout);
  aclFinalize();
  return 0;
}
""" % ",\n".join("  {%s, %s, {%s}}" % (c_string(id), dtype, ", ".join("0x%02x" % b for b in data))
                  for id, dtype, data, _ in C_SCALARS))


LEAK_AT_EXIT_PROGRAM = r"""#include <stdio.h>
#include "acl/acl.h"

int main(void) {
  void *memory = NULL;
  aclrtStream stream = NULL;
  if (aclInit(NULL) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 3;
  if (aclrtMalloc(&memory, 256, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return 3; // @exit-malloc
  if (aclrtCreateStream(&stream) != ACL_SUCCESS) return 3; // @exit-stream
  printf("returning\n");
  return 0;
}
"""

ASYNC_PROGRAM = c_program(r"""
int main() {
  aclrtStream stream = nullptr;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&stream), "aclrtCreateStream");
  const float ones[4] = {1, 1, 1, 1}, x[4] = {1, 2, 3, 4}, sevens[4] = {7, 7, 7, 7};
  void *memory[4];
  for (int i = 0; i < 4; ++i) memory[i] = device_memory(16);
  check(aclrtMemcpy(memory[0], 16, ones, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  check(aclrtMemcpy(memory[1], 16, x, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  check(aclrtMemcpy(memory[2], 16, x, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  check(aclrtMemcpy(memory[3], 16, sevens, 16, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
  int64_t dims[2] = {2, 2};
  aclTensor *t[4];
  for (int i = 0; i < 4; ++i) t[i] = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, memory[i]);
  uint64_t workspaceSize = 0;
  aclOpExecutor *executor = nullptr;
  check(aclnnLogSigmoidBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], &workspaceSize, &executor), "plan");
  check(aclnnLogSigmoidBackward(nullptr, 0, executor, stream), "launch");
  float out[4] = {0, 0, 0, 0};
  report_status("copy-without-sync", aclrtMemcpy(out, 16, memory[3], 16, ACL_MEMCPY_DEVICE_TO_HOST));
  print_floats("without-sync", out, 4);
  report_status("sync", aclrtSynchronizeStream(stream));
  report_status("copy-after-sync", aclrtMemcpy(out, 16, memory[3], 16, ACL_MEMCPY_DEVICE_TO_HOST));
  print_floats("after-sync", out, 4);

  // aclrtMemcpyAsync both ways: the host buffer changes at the synchronisation
  float source[4] = {10, 20, 30, 40}, back[4] = {-1, -1, -1, -1};
  report_status("async-to-device", aclrtMemcpyAsync(memory[0], 16, source, 16, ACL_MEMCPY_HOST_TO_DEVICE, stream));
  report_status("async-to-host", aclrtMemcpyAsync(back, 16, memory[0], 16, ACL_MEMCPY_DEVICE_TO_HOST, stream));
  print_floats("async-before-sync", back, 4);
  report_status("async-sync", aclrtSynchronizeStream(stream));
  print_floats("async-after-sync", back, 4);

  for (int i = 0; i < 4; ++i) {
    aclDestroyTensor(t[i]);
    aclrtFree(memory[i]);
  }
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  return 0;
}
""")

CALLBACKS_PROGRAM = c_program(r"""#include <pthread.h>
#include <sched.h>
#include <atomic>

static std::atomic<uint64_t> report_thread_id(0);
static std::atomic<int> subscribed(0);
static std::atomic<int> processed(0);

static void *report_thread(void *) {  // says who it is, processes one report, then ends
  report_thread_id.store(static_cast<uint64_t>(pthread_self()));
  while (subscribed.load() == 0) sched_yield();
  for (int attempt = 0; attempt < 600; ++attempt) {
    if (aclrtProcessReport(1000) == ACL_SUCCESS) {
      processed.store(1);
      break;
    }
  }
  return nullptr;
}

static void on_stream(void *userData) { *static_cast<int *>(userData) = 42; }

int main() {
  aclrtStream stream = nullptr;
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  check(aclrtCreateStream(&stream), "aclrtCreateStream");
  pthread_t reporter;
  if (pthread_create(&reporter, nullptr, report_thread, nullptr) != 0) check(1, "pthread_create");
  while (report_thread_id.load() == 0) sched_yield();
  report_status("subscribe", aclrtSubscribeReport(report_thread_id.load(), stream));
  subscribed.store(1);
  int data = 0;
  report_status("launch-callback", aclrtLaunchCallback(on_stream, &data, ACL_CALLBACK_BLOCK, stream));
  report_status("sync", aclrtSynchronizeStream(stream));
  report_status("data-after-sync", data);
  pthread_join(reporter, nullptr);
  report_status("processed-by-report-thread", processed.load());
  report_status("launch-null-fn", aclrtLaunchCallback(nullptr, nullptr, ACL_CALLBACK_BLOCK, stream));
  report_status("unsubscribe", aclrtUnSubscribeReport(report_thread_id.load(), stream));
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  return 0;
}
""")


def documented_sample() -> str:
    with open(os.path.join(REPO, "samples", "cpp", "log_sigmoid_backward.cpp"), encoding="utf-8") as file:
        return file.read()


# ------------------------------------------------------------------------------------------------
# Building and running, once per module

@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """Every program of this module, built against the installed toolkit: {name: executable}."""
    ctoolkit.require_compilers()
    assert surface is not None, "npuemu_toolkit is not installed: the C toolkit is part of npuemu's install"
    directory = tmp_path_factory.mktemp("toolkit_behaviour")
    programs = [
        Program("error_inputs", error_program()),
        Program("bad_calls", bad_call_program()),
        Program("handles", HANDLES_PROGRAM),
        Program("faults", FAULTS_PROGRAM),
        Program("faults_nodebug", FAULTS_PROGRAM, flags=()),
        Program("leaks", LEAKS_PROGRAM),
        Program("scalars", SCALARS_PROGRAM),
        Program("leak_at_exit", LEAK_AT_EXIT_PROGRAM, language="c"),
        Program("documented_sample", documented_sample(), flags=()),
        Program("async_streams", ASYNC_PROGRAM),
        Program("callbacks", CALLBACKS_PROGRAM, flags=("-g", "-pthread")),
    ]
    return build_all(programs, directory)


def finished(done: subprocess.CompletedProcess) -> dict:
    """The outcomes of a program that ran to its end."""
    assert done.returncode == 0 and "@@done" in done.stdout, "exit %d\n%s\n%s" % (done.returncode, done.stdout,
                                                                                  done.stderr)
    return outcomes(done.stdout)


@pytest.fixture(scope="module")
def error_input_runs(built) -> dict:
    """{chip: {case key: Outcome}}: the error-input program run once per chip, NPUEMU_SOC set to it."""
    runs = {}
    for chip in sorted({case.chip for case in C_PHASE_CASES}):
        done = run(built["error_inputs"], chip, NPUEMU_SOC=chip)
        runs[chip] = finished(done)
        assert "leak" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return runs


@pytest.fixture(scope="module")
def bad_call_run(built) -> dict:
    done = run(built["bad_calls"])
    assert "leak" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return finished(done)


# ------------------------------------------------------------------------------------------------
# 1. Error-path parity

@pytest.mark.parametrize("case", C_ERROR_CASES, ids=[case.id for case in C_ERROR_CASES])
def test_each_error_input_gives_from_c_the_code_and_message_python_gets(case, error_input_runs):
    """The error input's tensors made from C as support.Call makes them (FLOAT where the sample says
    the dtype under test), on its chip: the declared code and fragment, and Python's exact message."""
    c = error_input_runs[case.chip][case.key]
    assert c.result == "%d null" % case.error.code, c.message
    assert case.error.fragment in c.message, c.message
    ret, executor, message = first_phase_of(case.declaration, case.changes, case.error.chip)
    assert "%d %s" % (ret, "null" if executor is None else "non-null") == c.result, message
    assert normalised(c.message) == normalised(message), "C:      %s\nPython: %s" % (c.message, message)


@pytest.mark.parametrize("case", NULL_OUT_CASES, ids=[case.id for case in NULL_OUT_CASES])
def test_each_first_phase_given_a_null_out_pointer_from_c_names_it(case, error_input_runs):
    """The library itself never checks its two out-pointers; npuemu's C functions answer 161001 and name
    the one that is null, for every operator of the toolkit."""
    c = error_input_runs[case.chip][case.key]
    assert c.result == "161001 null", c.message
    assert without_prefix(c.message) == "AclNN_Parameter_Error(EZ1001): %s: %s: expected a non-null pointer, found null" % (
        case.declaration.first_phase_name, case.out), c.message


@pytest.mark.sanitizer_reports("uninitialised read")
@pytest.mark.parametrize("case", BAD_CALLS, ids=[case.id for case in BAD_CALLS])
def test_each_bad_call_gives_from_c_the_code_and_message_python_gets(case, bad_call_run):
    """A runtime or framework bad call: the same result and message from C and from Python (or, for a null
    out-parameter, the layer's null code and a message naming the parameter)."""
    c = bad_call_run["b%d" % BAD_CALLS.index(case)]
    if case.expect is not None:
        assert c.result == str(case.expect), c.message
    if case.python is None:  # a null out-parameter: only C can pass one
        assert without_prefix(c.message) == case.message
        return
    python = python_outcome(case)
    assert c.result == python.result, "C: %s\nPython: %s" % (c.message, python.message)
    assert normalised(c.message) == normalised(python.message), "C:      %s\nPython: %s" % (c.message, python.message)


def test_a_double_destroy_names_the_c_lines_from_c_and_the_python_lines_from_python(built, bad_call_run):
    source_path = built["bad_calls"] + ".cpp"
    source = read_text(source_path)
    index = [case.id for case in BAD_CALLS].index("aclDestroyTensor-twice")
    message = bad_call_run["b%d" % index].message
    made, destroyed = line_of(source, "tensor-made"), line_of(source, "tensor-destroyed")
    function = "bad_call_%d" % index
    assert re.search(r"already released at %s \(made at %s\)$" % (at(source_path, destroyed, function),
                                                                  at(source_path, made, function)), message), message
    python = python_outcome(BAD_CALLS[index]).message
    assert re.search(r"already released at %s:\d+ in _ <- .* \(made at %s:\d+ in _ <- "
                     % (re.escape(__file__), re.escape(__file__)), python), python


# ------------------------------------------------------------------------------------------------
# 2. Handles

def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


def log_sigmoid_backward(x) -> list:
    return list(1.0 / (1.0 + np.exp(np.asarray(x, dtype=np.float64))))


VALUES = re.compile(r"^@@values (\S+) (.*)$", re.M)


def printed_values(stdout: str) -> dict:
    return {match.group(1): [float(v) for v in match.group(2).split()] for match in VALUES.finditer(stdout)}


@pytest.fixture(scope="module")
def handles_run(built) -> tuple:
    done = run(built["handles"])
    return finished(done), printed_values(done.stdout), done


def test_a_repeatable_executor_moved_by_the_setters_computes_the_right_values_each_time(handles_run):
    """Launch 1 reads self at its first address; aclSetInputTensorAddr(executor, 1, self, B) moves launch 2
    to B; aclSetRawTensorAddr moves launch 3's self back and its output elsewhere (the old output keeps
    launch 2's values)."""
    results, values, _ = handles_run
    for step in ("repeatable", "launch-1", "set-input-1", "launch-2", "set-raw-gradInput", "set-raw-self",
                 "launch-3", "destroy-repeatable"):
        assert results[step].result == "0", (step, results[step].message)
    np.testing.assert_allclose(values["launch-1"], log_sigmoid_backward([1, 2, 3, 4]), rtol=1e-6)
    np.testing.assert_allclose(values["launch-2"], log_sigmoid_backward([-1, 0, 0.5, 8]), rtol=1e-6)
    np.testing.assert_allclose(values["launch-3"], log_sigmoid_backward([1, 2, 3, 4]), rtol=1e-6)
    np.testing.assert_allclose(values["launch-3-old-output"], log_sigmoid_backward([-1, 0, 0.5, 8]), rtol=1e-6)


def test_a_destroyed_repeatable_executor_is_not_launched_again(built, handles_run):
    results, _, _ = handles_run
    source = built["handles"] + ".cpp"
    destroyed = line_of(read_text(source), "repeatable-destroyed")
    launch = results["launch-destroyed"]
    assert launch.result == "161002", launch.message
    assert re.search("already released at " + at(source, destroyed), launch.message), launch.message


def test_a_single_use_executor_launched_twice_names_the_c_lines_that_made_and_used_it(built, handles_run):
    results, _, _ = handles_run
    path = built["handles"] + ".cpp"
    source = read_text(path)
    assert results["single-launch-1"].result == "0", results["single-launch-1"].message
    again = results["single-launch-2"]
    assert again.result == "161002", again.message
    assert without_prefix(again.message).startswith(
        "AclNN_Parameter_Error(EZ1001): aclnnLogSigmoidBackward: executor: expected a live aclOpExecutor, found "
        "aclOpExecutor of aclnnLogSigmoidBackward (workspace 0 bytes, already used by its second phase"), again.message
    assert re.search(r"already released at %s \(made at %s\)$" % (at(path, line_of(source, "single-used")),
                                                                  at(path, line_of(source, "single-made"))),
                     again.message), again.message


def test_destroying_a_tensor_list_destroys_its_tensors(built, handles_run):
    results, _, _ = handles_run
    path = built["handles"] + ".cpp"
    source = read_text(path)
    assert results["tensor-list"].result == "non-null"
    assert results["destroy-list"].result == "0", results["destroy-list"].message
    element = results["destroy-element"]
    assert element.result == "161002", element.message
    assert re.search("already released at " + at(path, line_of(source, "list-destroyed")), element.message)
    again = results["destroy-list-again"]
    assert again.result == "161002", again.message
    assert re.search(r"already released at %s \(made at %s\)$" % (at(path, line_of(source, "list-destroyed")),
                                                                  at(path, line_of(source, "list-made"))),
                     again.message), again.message


def test_c_scalars_of_every_dtype_are_made_and_an_unknown_dtype_is_null(handles_run):
    results, _, _ = handles_run
    for dtype in ("FLOAT", "INT32", "INT64", "BOOL", "FLOAT16", "BF16", "DOUBLE"):
        made, destroyed = results["scalar-" + dtype], results["destroy-scalar-" + dtype]
        assert (made.result, made.message) == ("non-null", "(none)"), (dtype, made.message)
        assert destroyed.result == "0", (dtype, destroyed.message)
    unknown = results["scalar-unknown-dtype"]
    assert unknown.result == "null"
    assert without_prefix(unknown.message) == ("AclNN_Parameter_Error(EZ1001): aclCreateScalar: dataType: expected an "
                                               "aclDataType, found 1000"), unknown.message
    assert nn.aclCreateScalar(1.5, 1000) is None
    assert without_prefix(rt.aclGetRecentErrMsg()) == without_prefix(unknown.message)


# ------------------------------------------------------------------------------------------------
# 3. Faults at synchronisation

@pytest.fixture(scope="module")
def fault_runs(built, tmp_path_factory) -> dict:
    """{"c": outcomes with -g, "nodebug": without, "python": of the same program in Python}."""
    done, _ = run_program(FAULTS_PYTHON, str(tmp_path_factory.mktemp("faults_python")), env=PINNED)
    return {"c": finished(run(built["faults"])), "nodebug": finished(run(built["faults_nodebug"])),
            "python": finished(done)}


def test_a_view_past_its_allocation_fails_the_synchronisation_naming_the_c_lines(built, fault_runs):
    """A view of 1024 floats over aclrtMalloc(1024): the synchronisation is 507015, naming the operator,
    the tensor, the allocation with the line of its aclrtMalloc, and the line of the launch."""
    c = fault_runs["c"]
    path = built["faults"] + ".cpp"
    source = read_text(path)
    assert c["overrun-launch"].result == "0"
    sync = c["overrun-sync"]
    assert sync.result == "507015", sync.message
    text = without_prefix(sync.message)
    assert text.startswith("ACL_ERROR_RT_AICORE_EXCEPTION(507015): aclrtSynchronizeStream: the device raised an "
                           "exception while running queued work: AI Core exception in aclnnLogSigmoidBackward"), text
    assert re.search(r"launched at %s: tensor self \(FLOAT\[1024\]" % at(path, line_of(source, "overrun-launch")),
                     text), text
    assert re.search(r"expected a range inside allocation #\d+ on device 0 \[0x[0-9a-f]+, 0x[0-9a-f]+\) of 1024 bytes "
                     r"\(1056 with padding\), made at %s, live; found it overruns that allocation by 3040 bytes"
                     % at(path, line_of(source, "small-malloc")), text), text
    assert c["overrun-sync-again"].result == "0", "each fault is reported once"


def test_memory_freed_before_the_stream_ran_fails_the_synchronisation_naming_the_c_lines(built, fault_runs):
    c = fault_runs["c"]
    path = built["faults"] + ".cpp"
    source = read_text(path)
    assert c["freed-launch"].result == "0" and c["freed-free"].result == "0"
    sync = c["freed-sync"]
    assert sync.result == "507015", sync.message
    text = without_prefix(sync.message)
    assert "AI Core exception in aclnnLogSigmoidBackward" in text, text
    assert re.search(r"launched at %s: tensor gradInput \(FLOAT\[1024\]" % at(path, line_of(source, "freed-launch")),
                     text), text
    assert re.search(r"made at %s, freed at %s$" % (at(path, line_of(source, "freed-malloc")),
                                                  at(path, line_of(source, "freed-free"))), text), text


def symbol_range(executable: str, symbol: str, table: str = "--defined-only") -> tuple:
    """[start, end) of a symbol of an executable (nm -S; `table` "-D" for the dynamic symbols of a
    stripped module), as offsets from its load address."""
    done = subprocess.run(["nm", "-S", "--defined-only", table, executable], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        words = line.split()
        if len(words) == 4 and words[3] == symbol:
            return int(words[0], 16), int(words[0], 16) + int(words[1], 16)
    raise AssertionError("%s has no symbol %s" % (executable, symbol))


def test_without_debug_information_the_sites_are_the_executable_and_an_offset_in_main(built, fault_runs):
    executable = built["faults_nodebug"]
    start, end = symbol_range(executable, "main")
    for case, count in (("overrun-sync", 3), ("freed-sync", 3)):  # launched at, made at (x2 / made, freed at)
        text = without_prefix(fault_runs["nodebug"][case].message)
        assert fault_runs["nodebug"][case].result == "507015", text
        offsets = re.findall(r" at %s\+0x([0-9a-f]+) in main\b" % re.escape(executable), text)
        assert len(offsets) == count, text
        for offset in offsets:
            assert start < int(offset, 16) <= end, (hex(start), hex(end), offset)
        assert ".cpp:" not in text, text


STRIPPED_LIBRARY = r"""#include "acl/acl.h"
__attribute__((visibility("hidden"), noinline)) void make_stream_unexported();

// Exported, and placed just before the function that makes the stream: the nearest dynamic symbol below
// that function's code, though its code ends before it.
extern "C" void make_leaked_stream() { make_stream_unexported(); }

void make_stream_unexported() {
  aclrtStream stream;
  aclrtCreateStream(&stream);
}
"""

STRIPPED_LIBRARY_CALLER = r"""#include "acl/acl.h"
extern "C" void make_leaked_stream();
int main() {
  aclrtSetDevice(0);
  make_leaked_stream();  // @call
  return 0;
}
"""


def test_a_frame_past_the_end_of_the_nearest_exported_symbol_is_named_by_its_offset_only(tmp_path):
    """A stripped library keeps only its dynamic symbols: a frame inside one of its non-exported
    functions is `library+0xoffset`, not named after the exported function just below it (which dladdr
    and addr2line would give, though that function ends before the address); a frame inside the
    exported function keeps its name."""
    library = str(tmp_path / "libstripped.so")
    root = ctoolkit.toolkit_root()
    built = subprocess.run(["g++", "-std=c++11", "-O0", "-shared", "-fPIC", "-s", "-x", "c++", "-",
                            "-I", os.path.join(root, "include"), "-L", os.path.join(root, "lib64"), "-lascendcl",
                            "-o", library], input=STRIPPED_LIBRARY, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    executable = ctoolkit.compile_program(STRIPPED_LIBRARY_CALLER, tmp_path, flags=(
        "-g", "-L", str(tmp_path), "-Wl,-rpath," + str(tmp_path)), libraries=(":libstripped.so", "ascendcl"))
    done = run(executable)
    assert done.returncode == 0, done.stderr
    leak = re.search(r"^npuemu: leak: stream 0x[0-9a-f]+ of device 0, made at (.*)$", done.stderr, re.M)
    assert leak is not None, done.stderr
    inner, outer, caller = leak.group(1).split(" <- ")
    assert re.fullmatch(r"%s\+0x[0-9a-f]+" % re.escape(library), inner), leak.group(1)
    assert re.fullmatch(r"%s\+0x[0-9a-f]+ in make_leaked_stream" % re.escape(library), outer), leak.group(1)
    assert re.fullmatch(at(executable + ".cpp", line_of(STRIPPED_LIBRARY_CALLER, "call")), caller), leak.group(1)
    start, end = symbol_range(library, "make_leaked_stream", "-D")
    offsets = [int(re.search(r"\+(0x[0-9a-f]+)", frame).group(1), 16) for frame in (inner, outer)]
    assert offsets[0] > end >= offsets[1] > start, (hex(start), hex(end), leak.group(1))


def test_faults_from_c_and_from_python_have_the_same_codes_and_messages(fault_runs):
    """The fault program and its Python twin (the same calls in the same order, in a fresh interpreter)."""
    c, nodebug, python = fault_runs["c"], fault_runs["nodebug"], fault_runs["python"]
    assert sorted(c) == sorted(python) == sorted(nodebug)
    for case in c:
        assert c[case].result == python[case].result == nodebug[case].result, case
        assert normalised(c[case].message) == normalised(python[case].message), (
            "C:      %s\nPython: %s" % (c[case].message, python[case].message))


# ------------------------------------------------------------------------------------------------
# 4. Leaks

LEAK_LINE = re.compile(r"^npuemu: leak: (.*)$", re.M)


def test_leaks_of_a_c_program_are_reported_at_aclfinalize_with_the_c_lines(built):
    """A device allocation (released only by the reset), a tensor, two tensors made in a helper and seven
    scalars, never destroyed: reported once, at aclFinalize, each with the C line that made it."""
    done = run(built["leaks"])
    path = built["leaks"] + ".cpp"
    source = read_text(path)
    assert done.returncode == 0 and "finalize 0" in done.stdout, done.stdout + done.stderr
    assert "npuemu: 12 resource(s) never released at aclFinalize:" in done.stderr, done.stderr
    leaks = LEAK_LINE.findall(done.stderr)
    assert len(leaks) == 12, done.stderr
    assert any(re.fullmatch(r"device memory 0x[0-9a-f]+ \(64 bytes\) on device 0, made at %s "
                            r"\(released only by aclrtResetDevice\(0\)\)" % at(path, line_of(source, "leaked-malloc")),
                            leak) for leak in leaks), leaks
    assert any(re.fullmatch(r"aclTensor FLOAT\[4, 4\] at 0x[0-9a-f]+ \(strides \[4, 1\], offset 0, FORMAT_ND\), "
                            r"made at %s" % at(path, line_of(source, "leaked-tensor")), leak) for leak in leaks), leaks
    assert "never released at exit" not in done.stderr, "each leak is reported once"


def test_a_leak_made_in_a_c_helper_names_the_lines_that_called_the_helper(built):
    """As from Python, a site is the user's short call stack: the helper's line, then its caller's."""
    done = run(built["leaks"])
    path = built["leaks"] + ".cpp"
    source = read_text(path)
    made = [leak for leak in LEAK_LINE.findall(done.stderr) if leak.startswith("aclTensor FLOAT[4] ")]
    assert len(made) == 3, done.stderr
    helper = "%s:%d in make_tensor" % (path, line_of(source, "helper-create"))
    for leak, call in zip(made, ("helper-call-1", "helper-call-2")):
        assert re.search(r"made at %s\S* <- %s:%d in main\b" % (re.escape(helper), re.escape(path), line_of(source, call)),
                         leak), leak
    # three frames, as Python sites keep: the helper, the helper's helper, main
    assert re.search(r"made at %s\S* <- %s:%d in make_in_a_helper\S* <- %s:%d in main$"
                     % (re.escape(helper), re.escape(path), line_of(source, "helper-inner-call"), re.escape(path),
                        line_of(source, "helper-outer-call")), made[2]), made[2]


def test_leaked_c_scalars_are_described_with_the_values_at_their_pointers(built):
    done = run(built["leaks"])
    described = [re.sub(r", made at .*", "", leak) for leak in LEAK_LINE.findall(done.stderr)
                 if leak.startswith("aclScalar")]
    assert described == ["aclScalar FLOAT 1.5", "aclScalar INT32 -7", "aclScalar INT64 1099511627776",
                         "aclScalar BOOL True", "aclScalar FLOAT16 1.5", "aclScalar BF16 1.5",
                         "aclScalar DOUBLE 0.1"], done.stderr


def test_c_scalars_of_every_dtype_hold_the_value_their_bytes_encode(built):
    """aclCreateScalar reads the value at the pointer as its dtype says, for every numeric dtype (the 8-, 6-
    and 4-bit floats by their public definitions, INT4 and UINT1 by their bits, COMPLEX32 as two float16):
    the leak report describes each with its value, never the pointer. HIFLOAT8 and FLOAT4_E1M2, which
    npuemu cannot decode for certain, are NULL with a message saying so; Python takes their numbers."""
    done = run(built["scalars"])
    results = finished(done)
    described = [re.sub(r", made at .*", "", leak) for leak in LEAK_LINE.findall(done.stderr)]
    expected = []
    for id, dtype, _, value in C_SCALARS:
        outcome = results[id]
        if value is None:
            assert outcome.result == "null", (id, outcome.message)
            assert without_prefix(outcome.message) == (
                "AclNN_Parameter_Error(EZ1001): aclCreateScalar: dataType: expected a dtype whose bits npuemu can "
                "read, found %s: npuemu cannot read a value of that dtype from C (it has no public bit-level "
                "definition npuemu can decode for certain); create it from Python, which takes the number itself"
                % dtype[len("ACL_"):]), outcome.message
            scalar = nn.aclCreateScalar(1.5, getattr(nn, dtype))
            assert scalar is not None and scalar.value == 1.5, rt.aclGetRecentErrMsg()
            assert nn.aclDestroyScalar(scalar) == 0
        else:
            assert (outcome.result, outcome.message) == ("non-null", "(none)"), (id, outcome.message)
            expected.append("aclScalar %s %r" % (dtype[len("ACL_"):], value))
    assert described == expected, done.stderr
    numeric = set(nn.tensor.DTYPE_NAMES) - {nn.ACL_DT_UNDEFINED, nn.ACL_STRING}
    assert {getattr(nn, dtype) for _, dtype, _, _ in C_SCALARS} == numeric, "every numeric dtype is tried"


def test_a_c_program_returning_without_aclfinalize_gets_the_report_at_exit(built):
    done = run(built["leak_at_exit"])
    path = built["leak_at_exit"] + ".c"
    source = read_text(path)
    assert done.returncode == 0 and done.stdout == "returning\n", done.stdout + done.stderr
    assert "npuemu: 2 resource(s) never released at exit:" in done.stderr, done.stderr
    leaks = LEAK_LINE.findall(done.stderr)
    assert any(re.fullmatch(r"device memory 0x[0-9a-f]+ \(256 bytes\) on device 0, made at %s"
                            % at(path, line_of(source, "exit-malloc")), leak) for leak in leaks), leaks
    assert any(re.fullmatch(r"stream 0x[0-9a-f]+ of device 0, made at %s" % at(path, line_of(source, "exit-stream")),
                            leak) for leak in leaks), leaks


GLOBAL_RELEASE_PROGRAM = r"""#include <cstdio>
#include "acl/acl.h"

// A global RAII object, as many C++ programs keep their runtime: set up in main, released by its
// destructor once main has returned.
struct Environment {
  aclrtStream stream = nullptr;
  void *memory = nullptr;
  bool up = false;
  void start() {
    up = aclInit(nullptr) == 0 && aclrtSetDevice(0) == 0 && aclrtCreateStream(&stream) == 0 &&
         aclrtMalloc(&memory, 1024, ACL_MEM_MALLOC_HUGE_FIRST) == 0;
  }
  ~Environment() {
    if (!up) return;
    const int freed = aclrtFree(memory), destroyed = aclrtDestroyStream(stream);
    const int reset = aclrtResetDevice(0), finalized = aclFinalize();
    std::printf("released %d %d %d %d\n", freed, destroyed, reset, finalized);
  }
} environment;

int main() {
  environment.start();
  std::printf("main returns\n");
  return environment.up ? 0 : 3;
}
"""


def test_what_a_global_destructor_releases_is_no_leak_at_exit(tmp_path):
    """The exit report runs after the program's global destructors: a program that releases everything in one
    reports nothing and keeps its exit status, NPUEMU_SANITIZE_EXITCODE set (it printed what the destructor
    printed, too)."""
    executable = ctoolkit.compile_program(GLOBAL_RELEASE_PROGRAM, tmp_path)
    done = run(executable, NPUEMU_SANITIZE_EXITCODE="9")
    assert (done.returncode, done.stdout, done.stderr) == (0, "main returns\nreleased 0 0 0 0\n", ""), done.stderr


ENVIRONMENT_PROGRAM = r"""#include <cstdio>
#include <cstdlib>
#include "acl/acl.h"

int main() {
  const char *before = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("before %s\n", before != nullptr ? before : "unset");
  const int ret = aclInit(nullptr);
  const char *after = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("aclInit %d, after %s\n", ret, after != nullptr ? after : "unset");
  return aclFinalize();
}
"""


@pytest.mark.parametrize("value", [None, "3"])
def test_starting_the_toolkit_leaves_the_programs_environment_as_it_was(tmp_path, value):
    """The interpreter starts with OPENBLAS_NUM_THREADS=1 (NumPy's BLAS threads would compete with the
    kernels'), but the program, and so its children, see the variable as they had it."""
    executable = ctoolkit.compile_program(ENVIRONMENT_PROGRAM, tmp_path)
    done = run(executable, OPENBLAS_NUM_THREADS=value)
    shown = value or "unset"
    assert (done.returncode, done.stdout) == (0, "before %s\naclInit 0, after %s\n" % (shown, shown)), done.stderr


def test_the_documented_sample_from_c_leaks_nothing(built):
    done = run(built["documented_sample"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["result[0] is: 0.268941", "result[1] is: 0.119203",
                                        "result[2] is: 0.047426", "result[3] is: 0.017986"]
    assert "leak" not in done.stderr.lower(), done.stderr


# ------------------------------------------------------------------------------------------------
# 5. Asynchronous streams

def test_a_c_copy_without_synchronisation_reads_stale_data_and_with_it_the_results(built):
    """gradInput holds 7s before the launch: aclrtMemcpy does not wait for the stream."""
    done = run(built["async_streams"])
    results, values = finished(done), printed_values(done.stdout)
    assert all(results[step].result == "0" for step in ("copy-without-sync", "sync", "copy-after-sync")), results
    assert values["without-sync"] == [7, 7, 7, 7]
    np.testing.assert_allclose(values["after-sync"], log_sigmoid_backward([1, 2, 3, 4]), rtol=1e-6)


def test_a_c_async_copy_round_trip_lands_at_the_synchronisation(built):
    done = run(built["async_streams"])
    results, values = finished(done), printed_values(done.stdout)
    assert all(results[step].result == "0" for step in ("async-to-device", "async-to-host", "async-sync")), results
    assert values["async-before-sync"] == [-1, -1, -1, -1]
    assert values["async-after-sync"] == [10, 20, 30, 40]


# ------------------------------------------------------------------------------------------------
# 6. Callbacks from C

def test_a_c_callback_runs_on_the_c_report_thread_by_the_synchronisation(built):
    """A blocking callback (a C function writing 42 to its userData) launched on a stream a C thread
    subscribed to (its pthread_self) runs on that thread's aclrtProcessReport(1000), which runs the stream up
    to it: by the synchronisation at the latest (the queued value is not read: the callback may write it
    at any time after the launch)."""
    done = run(built["callbacks"])
    results = finished(done)
    for step in ("subscribe", "launch-callback", "sync", "unsubscribe"):
        assert results[step].result == "0", (step, results[step].message)
    assert results["data-after-sync"].result == "42"
    assert results["processed-by-report-thread"].result == "1"


def test_a_null_c_callback_is_rejected_and_named_null(built):
    results = finished(run(built["callbacks"]))
    null_fn = results["launch-null-fn"]
    assert null_fn.result == "100000", null_fn.message
    assert without_prefix(null_fn.message) == ("ACL_ERROR_INVALID_PARAM(100000): aclrtLaunchCallback: fn: "
                                               "expected a callable, found null"), null_fn.message


# A JIT's code for the callback programs below (after their #include <sys/mman.h>).
JIT_CALLBACKS = r"""
// Code made at run time, as a JIT makes it: a page outside every module holding a bare `ret`.
static void *jit_ret_page() {
#if defined(__aarch64__)
  const unsigned char code[] = {0xc0, 0x03, 0x5f, 0xd6};  // ret
#else
  const unsigned char code[] = {0xc3};  // ret (x86-64)
#endif
  void *page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) check(1, "mmap");
  std::memcpy(page, code, sizeof(code));
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) check(1, "mprotect");
  return page;
}

// A new stream of device 0 whose callbacks this thread runs (aclrtProcessReport).
static aclrtStream subscribed_stream() {
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  aclrtStream stream = nullptr;
  check(aclrtCreateStream(&stream), "aclrtCreateStream");
  check(aclrtSubscribeReport(static_cast<uint64_t>(pthread_self()), stream), "aclrtSubscribeReport");
  return stream;
}

// The callbacks queued run, the stream synchronised (reported as "sync"), then all released, the page too.
static void run_callbacks_and_finish(aclrtStream stream, void *page) {
  while (aclrtProcessReport(100) == ACL_SUCCESS) {}
  report_status("sync", aclrtSynchronizeStream(stream));
  aclrtUnSubscribeReport(static_cast<uint64_t>(pthread_self()), stream);
  aclrtDestroyStream(stream);
  munmap(page, 4096);
  aclrtResetDevice(0);
  aclFinalize();
}
"""

WILD_CALLBACK_PROGRAM = c_program(r"""#include <pthread.h>
#include <sys/mman.h>
""" + JIT_CALLBACKS + r"""
static int data_word = 0;  // a module's data: mapped, not executable
static int ran = 0;
static void on_done(void *) { ran = 1; }

int main() {
  aclrtStream stream = subscribed_stream();
  report_status("unmapped", aclrtLaunchCallback(reinterpret_cast<aclrtCallback>(0x10), nullptr,
                                                ACL_CALLBACK_NO_BLOCK, stream));
  report_status("data", aclrtLaunchCallback(reinterpret_cast<aclrtCallback>(&data_word), nullptr,
                                            ACL_CALLBACK_NO_BLOCK, stream));
  std::printf("@@address data %p\n", static_cast<void *>(&data_word));
  // Code made at run time (a JIT's) lies in no module: it is taken too, and runs
  void *page = jit_ret_page();
  report_status("jit", aclrtLaunchCallback(reinterpret_cast<aclrtCallback>(page), nullptr,
                                                    ACL_CALLBACK_NO_BLOCK, stream));
  report_status("function", aclrtLaunchCallback(on_done, nullptr, ACL_CALLBACK_NO_BLOCK, stream));
  run_callbacks_and_finish(stream, page);
  report_status("ran", ran);
  std::printf("@@done\n");
  return 0;
}
""")


def test_a_c_callback_that_points_at_no_code_is_refused_at_the_launch(tmp_path):
    """aclrtLaunchCallback with a function pointer outside executable memory (a stray integer, a global
    variable) is 100000 and a message naming `fn` at the launch, before anything is queued: the report
    thread would have jumped there and crashed. Code outside every module (a JIT's page) and a program's
    function are taken and run."""
    executable = ctoolkit.compile_program(WILD_CALLBACK_PROGRAM, tmp_path, flags=("-g", "-pthread"))
    done = run(executable, NPUEMU_LEAK_CHECK="0")
    results = finished(done)
    address = re.search(r"^@@address data (0x[0-9a-f]+)$", done.stdout, re.M).group(1)
    for id, found in (("unmapped", "0x10"), ("data", address)):
        assert (results[id].result, without_prefix(results[id].message)) == (
            "100000", "ACL_ERROR_INVALID_PARAM(100000): aclrtLaunchCallback: fn: expected a function, found %s "
                      "(not executable memory)" % found), id
    for id in ("jit", "function", "sync"):
        assert results[id].result == "0", (id, results[id].message)
    assert results["ran"].result == "1"


JIT_CALLBACK_KEPT_PROGRAM = c_program(r"""#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
""" + JIT_CALLBACKS + r"""

int main(int argc, char **argv) {
  aclrtStream stream = subscribed_stream();
  void *page = jit_ret_page();
  const aclrtCallback jit = reinterpret_cast<aclrtCallback>(page);
  report_status("first", aclrtLaunchCallback(jit, nullptr, ACL_CALLBACK_NO_BLOCK, stream));  // looked up, kept
  std::printf("@@address jit %p\n", page);
  // The page made writable, no longer executable, at the same address: still taken (kept) ...
  if (mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0) check(1, "mprotect");
  report_status("kept", aclrtLaunchCallback(jit, nullptr, ACL_CALLBACK_NO_BLOCK, stream));
  // ... until a module is loaded: then looked up again
  if (dlopen(argv[1], RTLD_NOW) == nullptr) check(1, "dlopen");
  report_status("after-dlopen", aclrtLaunchCallback(jit, nullptr, ACL_CALLBACK_NO_BLOCK, stream));
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) check(1, "mprotect");  // for the callback queued
  run_callbacks_and_finish(stream, page);
  std::printf("@@done\n");
  return 0;
}
""")


def test_a_c_callback_outside_every_module_is_looked_up_in_the_maps_once_per_page(tmp_path):
    """A callback outside every module (a JIT's page, a ctypes callback's libffi closure) was looked up
    in /proc/self/maps at every launch (0.4 to 0.7 ms each, where a module's function costs a few µs).
    The pages found executable are kept until a module is loaded or unloaded, which shows as the limit
    docs/toolkit.md states: a kept page made non-executable is still taken until then; after a dlopen it
    is refused. (The cost itself is the benchmarks' business.)"""
    library = ctoolkit.compile_program("int nothing_here;\n", tmp_path, name="libempty.so", language="c",
                                       flags=("-shared", "-fPIC"), libraries=())
    executable = ctoolkit.compile_program(JIT_CALLBACK_KEPT_PROGRAM, tmp_path, flags=("-g", "-pthread", "-ldl"))
    done = run(executable, library, NPUEMU_LEAK_CHECK="0", NPUEMU_SANITIZE="off")
    results = finished(done)
    assert results["first"].result == "0", results["first"].message
    assert results["kept"].result == "0", results["kept"].message
    address = re.search(r"^@@address jit (0x[0-9a-f]+)$", done.stdout, re.M).group(1)
    assert (results["after-dlopen"].result, without_prefix(results["after-dlopen"].message)) == (
        "100000", "ACL_ERROR_INVALID_PARAM(100000): aclrtLaunchCallback: fn: expected a function, found %s "
                  "(not executable memory)" % address)
    assert results["sync"].result == "0", results["sync"].message


CALLBACK_NAMES_PROGRAM = c_program(r"""#include <pthread.h>
#include <unistd.h>

namespace app { void on_done(void *) {} }
extern "C" void on_ready(void *) {}
static void unexported(void *) {}  // in no dynamic symbol table

static void *idle(void *) {  // subscribed, never processing reports
  sleep(60);
  return nullptr;
}

int main() {
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  pthread_t idler;
  if (pthread_create(&idler, nullptr, idle, nullptr) != 0) check(1, "pthread_create");
  const struct { const char *id; aclrtCallback fn; } callbacks[] = {
      {"app::on_done", app::on_done}, {"on_ready", on_ready}, {"unexported", unexported}};
  for (const auto &callback : callbacks) {
    aclrtStream stream = nullptr;
    check(aclrtCreateStream(&stream), "aclrtCreateStream");
    check(aclrtSubscribeReport(static_cast<uint64_t>(idler), stream), "aclrtSubscribeReport");
    check(aclrtLaunchCallback(callback.fn, nullptr, ACL_CALLBACK_BLOCK, stream), "aclrtLaunchCallback");
    std::printf("@@address %s %p\n", callback.id, reinterpret_cast<void *>(callback.fn));
    report_status(callback.id, aclrtSynchronizeStream(stream));
    aclrtUnSubscribeReport(static_cast<uint64_t>(idler), stream);
    aclrtDestroyStream(stream);
  }
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  std::fflush(stdout);
  _exit(0);  // the idle thread never ends
}
""")

CALLBACK_NAMES_PYTHON = r'''
import threading
import time
from emulator import runtime as rt

rt.aclInit(None)
rt.aclrtSetDevice(0)
stream, _ = rt.aclrtCreateStream()
idler = threading.Thread(target=time.sleep, args=(60,), daemon=True)
idler.start()
rt.aclrtSubscribeReport(idler.ident, stream)


def on_ready(data):
    pass


rt.aclrtLaunchCallback(on_ready, None, 1, stream)
print(rt.aclrtSynchronizeStream(stream))
print(rt.aclGetRecentErrMsg())
rt.aclrtUnSubscribeReport(idler.ident, stream)
rt.aclrtDestroyStream(stream)
rt.aclrtResetDevice(0)
rt.aclFinalize()
'''


def test_a_c_callback_is_named_by_its_symbol_in_messages_else_by_its_address(tmp_path):
    """A blocking callback nobody processes times out: the message names the task and the callback as
    Python's does for a Python function (`aclrtLaunchCallback(on_ready)`, `<function on_ready at 0x...>`),
    with the C function's (demangled) symbol where the program exports one, else its address."""
    executable = ctoolkit.compile_program(CALLBACK_NAMES_PROGRAM, tmp_path, flags=("-g", "-pthread", "-rdynamic"))
    done = run(executable, NPUEMU_TASK_TIMEOUT="0.2")
    results = finished(done)
    addresses = dict(re.findall(r"^@@address (\S+) 0x([0-9a-f]+)$", done.stdout, re.M))
    for id, name in (("app::on_done", "app::on_done"), ("on_ready", "on_ready"), ("unexported", None)):
        assert results[id].result == "107020", results[id].message
        shown = name if name is not None else "0x" + addresses[id]
        assert "task timeout in aclrtLaunchCallback(%s) on stream" % shown in results[id].message, results[id].message
        assert "the blocking callback <function %sat 0x%s> was not processed" % (
            name + " " if name is not None else "", addresses[id]) in results[id].message, results[id].message
    python, _ = run_program(CALLBACK_NAMES_PYTHON, str(tmp_path), env={**PINNED, "NPUEMU_TASK_TIMEOUT": "0.2"})
    status, message = python.stdout.splitlines()[:2]
    threads = re.compile(r"thread \d+")
    assert status == "107020", python.stdout + python.stderr
    assert threads.sub("thread N", normalised(results["on_ready"].message)) == threads.sub("thread N", normalised(message))


# ------------------------------------------------------------------------------------------------
# 7. Children made by fork()

FORK_PROGRAM = c_program(r"""#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <thread>

static std::atomic<bool> stop(false);

// Children that make no toolkit call: each must end at once with status 0, whether it returns from main
// (the exit functions run) or calls exit.
static int fork_children(int count, int *hung, int *bad) {
  for (int i = 0; i < count; ++i) {
    std::fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
      if (i % 2 == 0) std::exit(0);
      return 1;  // out of main, as a normal end
    }
    int status = 0;
    for (int wait = 0; waitpid(child, &status, WNOHANG) != child; ++wait) {
      if (wait == 300) {  // 3 s: hung
        ++*hung;
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        break;
      }
      usleep(10000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++*bad;
  }
  return 0;
}

int main() {
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  aclrtContext context = nullptr;
  check(aclrtGetCurrentContext(&context), "aclrtGetCurrentContext");
  void *memory = device_memory(64);  // live when the children end: theirs to report, if anyone's
  // Another thread in toolkit calls all along: it holds the interpreter's lock at some of the forks. (Never
  // destroyed: a child that returns from main must not destroy a std::thread it has no thread of.)
  std::thread *busy = new std::thread([context] {
    aclrtSetCurrentContext(context);
    const float host[4] = {1, 2, 3, 4};
    void *device = device_memory(16);
    int64_t dims[2] = {2, 2};
    while (!stop) {
      aclrtMemcpy(device, 16, host, 16, ACL_MEMCPY_HOST_TO_DEVICE);
      aclDestroyTensor(aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, device));
    }
    aclrtFree(device);
  });
  int hung = 0, bad = 0;
  if (fork_children(10, &hung, &bad) != 0) return 0;  // a child, out of main
  // The same from a thread that has made toolkit calls of its own (a host thread with its own Python state)
  int forked_out = 0;
  std::thread forker([context, &hung, &bad, &forked_out] {
    aclrtSetCurrentContext(context);
    int32_t device = -1;
    aclrtGetDevice(&device);
    for (int i = 0; i < 10; ++i) {
      std::fflush(stdout);
      const pid_t child = fork();
      if (child == 0) std::exit(0);
      int status = 0, wait = 0;
      while (waitpid(child, &status, WNOHANG) != child && wait++ < 300) usleep(10000);
      if (wait > 300) {
        ++hung;
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++bad;
    }
    forked_out = 1;
  });
  forker.join();
  stop = true;
  busy->join();
  std::printf("@@children hung %d, not 0: %d, thread %d\n", hung, bad, forked_out);
  aclrtFree(memory);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
""")


def test_children_made_by_fork_that_make_no_call_end_at_once_and_report_nothing(tmp_path):
    """fork() with another thread in toolkit calls, from the main thread and from a thread that made calls:
    each child that makes no toolkit call ends at once with status 0 (by exit or by returning from main),
    reporting nothing of the parent's resources (NPUEMU_SANITIZE_EXITCODE set); the parent's own report at
    exit still works."""
    executable = ctoolkit.compile_program(FORK_PROGRAM, tmp_path, flags=("-g", "-pthread"))
    done = run(executable, NPUEMU_SANITIZE_EXITCODE="9")
    assert "@@children hung 0, not 0: 0, thread 1" in done.stdout, done.stdout + done.stderr
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


# ------------------------------------------------------------------------------------------------
# 8. Pointers to memory the process cannot write or read

WILD_OUT_PROGRAM = c_program(r"""#include <sys/mman.h>
#include <thread>

static void report_text(const char *id, int status, long long value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%d %lld", status, value);
  report(id, text);
}

int main() {
  check(aclInit(nullptr), "aclInit");
  check(aclrtSetDevice(0), "aclrtSetDevice");
  report_status("malloc-wild", aclrtMalloc(reinterpret_cast<void **>(0x10), 64, ACL_MEM_MALLOC_HUGE_FIRST));
  static const void *const read_only = nullptr;  // in a read-only section
  report_status("malloc-read-only", aclrtMalloc(const_cast<void **>(&read_only), 64, ACL_MEM_MALLOC_HUGE_FIRST));
  Lsb lsb;
  aclOpExecutor *executor = nullptr;
  uint64_t size = 0;
  report_status("workspaceSize-wild", aclnnLogSigmoidBackwardGetWorkspaceSize(
      lsb.tensors[0], lsb.tensors[1], lsb.tensors[2], lsb.tensors[3], reinterpret_cast<uint64_t *>(0x20), &executor));
  int64_t *dims = nullptr;
  report_status("viewDimsNum-wild", aclGetViewShape(lsb.tensors[0], &dims, reinterpret_cast<uint64_t *>(0x30)));
  // A page that can be written, then one that cannot: 8 bytes across them are refused, 4 in the first taken
  char *pages = static_cast<char *>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (pages == MAP_FAILED || mprotect(pages + 4096, 4096, PROT_READ) != 0) check(1, "mmap");
  int32_t *last_word = reinterpret_cast<int32_t *>(pages + 4092);
  *last_word = -1;
  int status = aclrtGetDevice(last_word);
  report_text("device-last-word", status, *last_word);
  report_status("offset-across-pages", aclGetViewOffset(lsb.tensors[0], reinterpret_cast<int64_t *>(last_word)));
  munmap(pages, 8192);
  // Out-parameters on the heap and on another thread's stack are written as before
  int64_t *offset = new int64_t(-1);
  status = aclGetViewOffset(lsb.tensors[0], offset);
  report_text("offset-heap", status, *offset);
  delete offset;
  std::thread other([&lsb] {
    int64_t local = -1;
    const int status = aclGetViewOffset(lsb.tensors[0], &local);
    report_text("offset-thread-stack", status, local);
    report_status("offset-thread-wild", aclGetViewOffset(lsb.tensors[0], reinterpret_cast<int64_t *>(0x40)));
  });
  other.join();
  std::printf("@@done\n");
  return 0;
}
""".replace("int main() {", LSB_C + "\nint main() {", 1))


def test_c_out_parameters_at_memory_the_process_cannot_write_are_refused_with_a_message(tmp_path):
    """A wild out-parameter (unmapped, read-only, or running into a read-only page) is the layer's code for an
    invalid argument and a message naming it, before the call does anything, as an unreadable input array is;
    never a crash. Good ones (heap, another thread's stack, the end of a page) are written as before."""
    executable = ctoolkit.compile_program(WILD_OUT_PROGRAM, tmp_path, flags=("-g", "-pthread"))
    done = run(executable)
    results = finished(done)
    assert "leak" not in done.stderr, done.stderr
    expected = {
        "malloc-wild": ("100000", "ACL_ERROR_INVALID_PARAM(100000): aclrtMalloc: devPtr: expected 8 writable bytes "
                                  "at 0x10, found memory the process cannot write"),
        "workspaceSize-wild": ("161002", "AclNN_Parameter_Error(EZ1001): aclnnLogSigmoidBackwardGetWorkspaceSize: "
                                         "workspaceSize: expected 8 writable bytes at 0x20, found memory the process "
                                         "cannot write"),
        "viewDimsNum-wild": ("161002", "AclNN_Parameter_Error(EZ1001): aclGetViewShape: viewDimsNum: expected 8 "
                                       "writable bytes at 0x30, found memory the process cannot write"),
        "offset-thread-wild": ("161002", "AclNN_Parameter_Error(EZ1001): aclGetViewOffset: offset: expected 8 "
                                         "writable bytes at 0x40, found memory the process cannot write"),
        "device-last-word": ("0 0", "(none)"), "offset-heap": ("0 0", "(none)"), "offset-thread-stack": ("0 0", "(none)"),
    }
    for id, (result, message) in expected.items():
        assert (results[id].result, without_prefix(results[id].message)) == (result, message), id
    for id, parameter in (("malloc-read-only", "aclrtMalloc: devPtr"), ("offset-across-pages", "aclGetViewOffset: offset")):
        assert re.fullmatch(r"\S+\(\w+\): %s: expected 8 writable bytes at 0x[0-9a-f]+, found memory the process "
                            r"cannot write" % re.escape(parameter), without_prefix(results[id].message)), id
    assert (results["malloc-read-only"].result, results["offset-across-pages"].result) == ("100000", "161002")


def test_c_values_at_memory_the_process_cannot_read_are_refused_with_a_message(tmp_path):
    """aclCreateScalar reads the value at its pointer, aclCreateTensor its dims: a wild pointer is NULL and a
    message, not a crash."""
    executable = ctoolkit.compile_program(r"""
#include <cstdio>
#include "acl/acl.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"
int main() {
  aclScalar *wild = aclCreateScalar(reinterpret_cast<void *>(16), ACL_FLOAT);
  std::printf("%d\n%s\n", wild == nullptr, aclGetRecentErrMsg());
  const int64_t *dims = reinterpret_cast<const int64_t *>(16);
  aclTensor *tensor = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, nullptr);
  std::printf("%d\n%s\n", tensor == nullptr, aclGetRecentErrMsg());
  return 0;
}
""", tmp_path)
    done = ctoolkit.run_program(executable)
    assert done.returncode == 0, done.stderr
    assert without_prefix(done.stdout).splitlines() == [
        "1", "AclNN_Parameter_Error(EZ1001): aclCreateScalar: value: expected 4 bytes of readable host memory at 0x10, "
             "found unmapped memory",
        "1", "AclNN_Parameter_Error(EZ1001): aclCreateTensor: viewDims: expected 2 readable values at 0x10, found "
             "memory the process cannot read"]


def test_c_strings_at_memory_the_process_cannot_read_are_refused_with_a_message(tmp_path):
    """aclInit / aclnnInit read their `const char *configPath` with strlen: a wild pointer, or a string that
    runs into an unmapped page, crashed the program. Now the pages are checked while the NUL is looked for:
    the layer's invalid-argument code and a message naming the parameter. A good string that crosses into the
    next page, and a long one, are read as before."""
    executable = ctoolkit.compile_program(r"""
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include "acl/acl.h"
#include "aclnn/aclnn_base.h"
static void show(const char *id, int status) {
  const char *message = aclGetRecentErrMsg();
  std::printf("%s %d %s\n", id, status, message ? message : "(none)");
}
int main() {
  show("wild", aclInit(reinterpret_cast<const char *>(0x10)));
  show("aclnn-wild", aclnnInit(reinterpret_cast<const char *>(0x10)));
  char *pages = static_cast<char *>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::memset(pages, 'a', 8192);
  std::strcpy(pages + 4090, "/no-such.json");  // crosses into the second page
  show("across-pages", aclInit(pages + 4090));
  munmap(pages + 4096, 4096);
  show("unterminated", aclInit(pages));
  static char long_path[70000];
  std::memset(long_path, 'b', sizeof long_path - 1);
  show("long", aclInit(long_path));
  show("good", aclInit(nullptr));
  return 0;
}
""", tmp_path)
    done = ctoolkit.run_program(executable)
    assert done.returncode == 0, done.stderr
    lines = {id: status + " " + without_prefix(message)
             for id, status, message in (line.split(" ", 2) for line in done.stdout.splitlines())}
    assert lines["wild"] == ("100000 ACL_ERROR_INVALID_PARAM(100000): aclInit: configPath: expected a NUL-terminated "
                             "string at 0x10, found memory the process cannot read")
    assert lines["aclnn-wild"] == ("161002 AclNN_Parameter_Error(EZ1001): aclnnInit: configPath: expected a "
                                   "NUL-terminated string at 0x10, found memory the process cannot read")
    assert re.fullmatch(r"100000 \S+: aclInit: configPath: expected a NUL-terminated string at 0x[0-9a-f]+, found "
                        r"memory the process cannot read", lines["unterminated"]), lines["unterminated"]
    assert lines["across-pages"].startswith("100003 ") and "no-such.json" in lines["across-pages"]
    assert lines["long"].startswith("100003 ") and "File name too long" in lines["long"]
    assert lines["good"] == "0 (none)"


def test_c_copies_into_read_only_or_unreadable_host_memory_are_107000_not_a_crash(tmp_path):
    """A download into a string literal (read-only data) or into a page the program protected is the
    runtime's invalid-argument code and a message naming `dst`, as an unmapped pointer is; never a crash."""
    executable = ctoolkit.compile_program(r"""
#include <cstdio>
#include <sys/mman.h>
#include "acl/acl.h"
int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void *device = nullptr;
  aclrtMalloc(&device, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMemset(device, 64, 7, 64);
  static const char literal[64] = "read-only data";
  void *guarded = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int ret = aclrtMemcpy(const_cast<char *>(literal), 64, device, 64, ACL_MEMCPY_DEVICE_TO_HOST);
  std::printf("%d\n%s\n", ret, aclGetRecentErrMsg());
  ret = aclrtMemcpy(device, 64, guarded, 64, ACL_MEMCPY_HOST_TO_DEVICE);
  std::printf("%d\n%s\n", ret, aclGetRecentErrMsg());
  std::printf("%s\n", literal);
  aclrtFree(device);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
""", tmp_path)
    done = ctoolkit.run_program(executable)
    assert done.returncode == 0, done.stderr
    lines = without_prefix(done.stdout).splitlines()
    assert lines[0] == lines[2] == "107000", done.stdout
    assert re.fullmatch(r"ACL_ERROR_RT_PARAM_INVALID\(107000\): aclrtMemcpy: dst: expected 64 bytes of writable host "
                        r"memory at 0x[0-9a-f]+, found read-only memory", lines[1]), lines[1]
    assert re.fullmatch(r"ACL_ERROR_RT_PARAM_INVALID\(107000\): aclrtMemcpy: src: expected 64 bytes of readable host "
                        r"memory at 0x[0-9a-f]+, found memory the process cannot read", lines[3]), lines[3]
    assert lines[4] == "read-only data"


DEAD_STACK_PROGRAM = r"""
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <atomic>
#include "acl/acl.h"
static void *device;
static aclrtStream stream, other;
static aclrtContext context;
static char *escaped;  // the address of a buffer of a function that returned
static std::atomic<uint64_t> reporter_id(0);
static std::atomic<int> subscribed(0);
static int callback_results[3];

// Each of these returns before the copy it queued into its own buffer runs (the program forgot to
// synchronise): the synchronisation's own frames are where the buffer was.
__attribute__((noinline)) void download_into_own_buffer(size_t size) {
  char buffer[4096];
  std::memset(buffer, 0, sizeof buffer);
  std::printf("queued %d\n", aclrtMemcpyAsync(buffer, size, device, size, ACL_MEMCPY_DEVICE_TO_HOST, stream));
}
__attribute__((noinline)) void download_rows_into_own_buffer() {
  char buffer[256];
  std::printf("queued %d\n", aclrtMemcpy2dAsync(buffer, 32, device, 16, 16, 4, ACL_MEMCPY_DEVICE_TO_HOST, stream));
}
__attribute__((noinline)) void escape_a_buffer() {
  char buffer[64];
  escaped = buffer;
  __asm__ volatile("" : : "r"(escaped) : "memory");
}

// A callback's own buffer, downloaded into and synchronised within the callback: the program's, alive.
static void on_stream(void *) {
  char buffer[64];
  std::memset(buffer, 0, sizeof buffer);
  callback_results[0] = aclrtMemcpyAsync(buffer, 64, device, 64, ACL_MEMCPY_DEVICE_TO_HOST, other);
  callback_results[1] = aclrtSynchronizeStream(other);
  callback_results[2] = static_cast<unsigned char>(buffer[63]);
}
static void *report_thread(void *) {
  aclrtSetCurrentContext(context);
  reporter_id.store(static_cast<uint64_t>(pthread_self()));
  while (subscribed.load() == 0) sched_yield();
  for (int attempt = 0; attempt < 600 && aclrtProcessReport(1000) != ACL_SUCCESS; ++attempt) {}
  return nullptr;
}

static void synchronise(const char *step) {
  const int ret = aclrtSynchronizeStream(stream);
  std::printf("%s %d\n%s\n", step, ret, ret != 0 ? aclGetRecentErrMsg() : "(none)");
}

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtGetCurrentContext(&context);
  aclrtCreateStream(&stream);
  aclrtCreateStream(&other);
  aclrtMalloc(&device, 4096, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMemset(device, 4096, 0xAB, 4096);
  download_into_own_buffer(4096);
  synchronise("sync-4096");
  download_into_own_buffer(64);
  synchronise("sync-64");
  download_rows_into_own_buffer();
  synchronise("sync-2d");
  escape_a_buffer();
  int ret = aclrtMemcpy(escaped, 64, device, 64, ACL_MEMCPY_DEVICE_TO_HOST);
  std::printf("memcpy %d\n%s\n", ret, aclGetRecentErrMsg());
  char live[64] = {0};  // this function's own buffer: alive until it returns
  std::printf("queued %d\n", aclrtMemcpyAsync(live, 64, device, 64, ACL_MEMCPY_DEVICE_TO_HOST, stream));
  synchronise("sync-live");
  std::printf("live %d\n", static_cast<unsigned char>(live[63]));
  pthread_t reporter;
  pthread_create(&reporter, nullptr, report_thread, nullptr);
  while (reporter_id.load() == 0) sched_yield();
  aclrtSubscribeReport(reporter_id.load(), stream);
  subscribed.store(1);
  aclrtLaunchCallback(on_stream, nullptr, ACL_CALLBACK_BLOCK, stream);
  synchronise("sync-callback");
  pthread_join(reporter, nullptr);
  std::printf("callback %d %d %d\n", callback_results[0], callback_results[1], callback_results[2]);
  aclrtUnSubscribeReport(reporter_id.load(), stream);
  aclrtFree(device);
  aclrtDestroyStream(other);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  return 0;
}
"""


@pytest.mark.parametrize("level", ["full", "off"])
def test_a_c_download_into_a_stack_buffer_whose_function_returned_fails_its_synchronisation_not_the_process(
        tmp_path, level):
    """A function queues a download into its own stack buffer and returns; the caller synchronises. The
    synchronisation's own frames (the toolkit's, libpython's) are now where the buffer was: the copy does
    not write there (that killed the process with SIGSEGV) but fails as a copy into unusable host memory
    does, 507015 at the synchronisation naming the copy, the range and why; a synchronous copy into such a
    buffer is 107000. The program's live buffers are written as before: the caller's own, and a callback's,
    whose frames lie below the call that runs it (aclrtProcessReport)."""
    executable = ctoolkit.compile_program(DEAD_STACK_PROGRAM, tmp_path, flags=("-g", "-pthread"),
                                          libraries=("ascendcl",))
    done = run(executable, NPUEMU_SANITIZE=level)
    assert done.returncode == 0 and "@@done" in done.stdout, "exit %d\n%s\n%s" % (done.returncode, done.stdout,
                                                                                  done.stderr)
    lines = without_prefix(done.stdout).splitlines()
    why = (r"found \[0x[0-9a-f]+, 0x[0-9a-f]+\) on this thread's stack below the frame of the program's call to "
           r"aclrtSynchronizeStream, which is in progress and has its own frames there: a stack buffer whose function "
           r"returned before the copy ran \(keep the buffer alive until the copy has run\)")
    for step, (task, size) in {"sync-4096": ("aclrtMemcpyAsync(4096 bytes)", 4096),
                               "sync-64": ("aclrtMemcpyAsync(64 bytes)", 64),
                               "sync-2d": ("aclrtMemcpy2dAsync(64 bytes)", 112)}.items():
        at = lines.index("%s 507015" % step)
        assert lines[at - 1] == "queued 0", lines
        assert re.fullmatch(r"ACL_ERROR_RT_AICORE_EXCEPTION\(507015\): aclrtSynchronizeStream: the device raised an "
                            r"exception while running queued work: AI Core exception in %s on stream 0x[0-9a-f]+ of "
                            r"device 0 launched at \S+program.cpp:\d+ in download_\w+\([^)]*\): dst: expected %d bytes of "
                            r"writable host memory at 0x[0-9a-f]+, %s" % (re.escape(task), size, why),
                            lines[at + 1]), lines[at + 1]
    memcpy = lines[lines.index("memcpy 107000") + 1]
    assert re.fullmatch(r"ACL_ERROR_RT_PARAM_INVALID\(107000\): aclrtMemcpy: dst: expected 64 bytes of writable host "
                        r"memory at 0x[0-9a-f]+, %s" % why.replace("aclrtSynchronizeStream", "aclrtMemcpy"),
                        memcpy), memcpy
    assert "sync-live 0" in lines and "live 171" in lines, lines
    assert "sync-callback 0" in lines and "callback 0 0 171" in lines, lines
    if level == "off":
        assert "npuemu:" not in done.stderr, done.stderr
        return
    faults = re.findall(r"memcheck: invalid device access: AI Core exception: dst: expected \d+ bytes of writable host "
                        r"memory at 0x[0-9a-f]+, %s\n.*launched at \S+program.cpp:\d+ in download_" % why, done.stderr)
    assert len(faults) == 2, done.stderr  # (the 64-byte download's is the 4096-byte one's again: one site, one report)
    # the bytes the synchronisation's frames changed: the sanitizer's report names the copy and where it was found
    program = re.escape(os.path.join(str(tmp_path), "program.cpp"))
    assert re.search(r"synccheck: host memory in flight: the host changed memory \[0x[0-9a-f]+, 0x[0-9a-f]+\) that "
                     r"aclrtMemcpyAsync\(4096 bytes\) writes before the program synchronised with the copy: .*\n"
                     r".*aclrtMemcpyAsync\(4096 bytes\), launched at %s:\d+ in download_into_own_buffer\(.*\n"
                     r".*found changed when the copy ran, in the call at %s:\d+ in synchronise" % (program, program),
                     done.stderr), done.stderr


LENT_FRAME_PROGRAM = r"""
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ucontext.h>
#include "acl/acl.h"
static void *device;
static aclrtStream stream;
static ucontext_t caller_context, coroutine_context;
static char *lent;  // a live buffer of the function that switched stacks, below the stack switched to
static int results[3];

static void download_into_lent_buffer() {
  std::memset(lent, 0, 64);
  results[0] = aclrtMemcpy(lent, 64, device, 64, ACL_MEMCPY_DEVICE_TO_HOST);
  std::memset(lent, 0, 64);
  results[1] = aclrtMemcpyAsync(lent, 64, device, 64, ACL_MEMCPY_DEVICE_TO_HOST, stream);
  results[2] = aclrtSynchronizeStream(stream);
}
static void on_signal(int) { download_into_lent_buffer(); }

static void report(const char *step) {
  std::printf("%s %d %d %d %d\n", step, results[0], results[1], results[2], static_cast<unsigned char>(lent[63]));
  if (results[0] != 0 || results[1] != 0 || results[2] != 0) std::printf("%s\n", aclGetRecentErrMsg());
}
__attribute__((noinline)) void lend_to_coroutine() {
  char out[64];
  lent = out;
  swapcontext(&caller_context, &coroutine_context);  // the coroutine runs to its end (uc_link returns here)
  report("coroutine");
}
__attribute__((noinline)) void lend_to_signal_handler() {
  char out[64];
  lent = out;
  std::raise(SIGUSR1);  // the handler runs on the alternate stack
  report("sigaltstack");
}

int main() {
  char coroutine_stack[256 * 1024], signal_stack[256 * 1024];  // stacks of main's frame, above the lenders'
  aclInit(nullptr);
  aclrtSetDevice(0);
  aclrtCreateStream(&stream);
  aclrtMalloc(&device, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMemset(device, 64, 0xAB, 64);
  getcontext(&coroutine_context);
  coroutine_context.uc_stack.ss_sp = coroutine_stack;
  coroutine_context.uc_stack.ss_size = sizeof coroutine_stack;
  coroutine_context.uc_link = &caller_context;
  makecontext(&coroutine_context, download_into_lent_buffer, 0);
  lend_to_coroutine();
  stack_t alternate = {};
  alternate.ss_sp = signal_stack;
  alternate.ss_size = sizeof signal_stack;
  sigaltstack(&alternate, nullptr);
  struct sigaction action = {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &action, nullptr);
  lend_to_signal_handler();
  aclrtFree(device);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  std::printf("@@done\n");
  return 0;
}
"""


def test_a_c_download_from_a_stack_in_a_frame_into_a_live_buffer_below_it_is_written(tmp_path):
    """A program switches to a stack that is an array of main's frame (a ucontext coroutine's, a
    sigaltstack's) from a function that lends it a buffer of its own frame, below that stack: a synchronous
    and a queued download into the buffer are written (the buffer is alive; the toolkit's frames lie between
    the program's frame on the switched-to stack and the deepest frame, not below it), with no report."""
    executable = ctoolkit.compile_program(LENT_FRAME_PROGRAM, tmp_path, flags=("-g",), libraries=("ascendcl",))
    done = run(executable, NPUEMU_SANITIZE="full")
    assert done.returncode == 0 and "@@done" in done.stdout, "exit %d\n%s\n%s" % (done.returncode, done.stdout,
                                                                                  done.stderr)
    lines = without_prefix(done.stdout).splitlines()
    assert lines[:2] == ["coroutine 0 0 0 171", "sigaltstack 0 0 0 171"], lines
    assert "npuemu:" not in done.stderr, done.stderr


def test_c_null_storage_dims_with_a_count_are_refused_as_null_view_dims_are(tmp_path):
    """RUNTIME.md: aclCreateTensor returns NULL when dims are NULL with a count above 0, storage as view
    (Python's None storage dims mean the view dims; C's NULL does not); aclInitTensor gives 161001 and
    leaves the tensor as it was. NULL with a count of 0 is a 0-D storage shape."""
    executable = ctoolkit.compile_program(r"""
#include <cstdio>
#include "acl/acl.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"
int main() {
  const int64_t dims[2] = {2, 4};
  aclTensor *refused = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 2, nullptr);
  std::printf("%d\n%s\n", refused == nullptr, aclGetRecentErrMsg());
  aclTensor *tensor = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, nullptr);
  const int64_t other[1] = {8};
  const int ret = aclInitTensor(tensor, other, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 3, nullptr);
  std::printf("%d\n%s\n", ret, aclGetRecentErrMsg());
  int64_t *shape = nullptr;
  uint64_t rank = 0;
  aclGetViewShape(tensor, &shape, &rank);
  std::printf("%llu\n", static_cast<unsigned long long>(rank));
  delete[] shape;
  aclTensor *scalar_storage = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  aclGetStorageShape(scalar_storage, &shape, &rank);
  std::printf("%d %llu\n", scalar_storage != nullptr, static_cast<unsigned long long>(rank));
  delete[] shape;
  aclDestroyTensor(tensor);
  aclDestroyTensor(scalar_storage);
  return 0;
}
""", tmp_path)
    done = ctoolkit.run_program(executable)
    assert done.returncode == 0, done.stderr
    assert without_prefix(done.stdout).splitlines() == [
        "1", "AclNN_Parameter_Error(EZ1001): aclCreateTensor: storageDims: expected a list of dims, found null",
        "161001", "AclNN_Parameter_Error(EZ1001): aclInitTensor: storageDims: expected a list of dims, found null",
        "2", "1 0"]


LATIN1_PATH_PROGRAM = r"""#include <cstdio>
#include "acl/acl.h"

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void *memory = nullptr;
  aclrtMalloc(&memory, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtFree(memory);
  const int again = aclrtFree(memory);
  const char *message = aclGetRecentErrMsg();
  std::printf("%d %s\n", again, message != nullptr ? message : "(null)");
  aclrtResetDevice(0);
  std::printf("%d\n", aclFinalize());
  return 0;
}
"""


def test_a_c_program_in_a_directory_whose_name_is_not_utf8_gets_its_codes_and_its_path_bytes(tmp_path):
    """Built with -g in a directory named in Latin-1 (byte 0xF1): addr2line's output was decoded as strict
    UTF-8, so the double free returned 507000 and aclFinalize too, and the message could not be handed to C.
    Now 107000 with a message whose site is the path's own bytes, and aclFinalize 0."""
    directory = os.path.join(os.fsencode(str(tmp_path)), b"lat\xf1n")
    os.mkdir(directory)
    executable = ctoolkit.compile_program(LATIN1_PATH_PROGRAM, os.fsdecode(directory), flags=("-g",))
    done = subprocess.run([executable], capture_output=True, timeout=120, env=ctoolkit.toolkit_environment(),
                          cwd=directory)
    first, second = done.stdout.split(b"\n")[:2]
    assert first.startswith(b"107000 ") and directory + b"/program.cpp:9 in main" in first, done.stdout + done.stderr
    assert second == b"0" and done.returncode == 0, done.stdout + done.stderr
