"""The C toolkit's surface against its one table (toolkit/npuemu_toolkit/surface.py) and against the
Python runtime, as a C or C++ user meets it: every header compiles alone (C++11, C++17 with the old
ABI, the acl/ ones as C99; the aclnn ones refuse C with an #error), every function has the exact type
its table prototype says, every library exports exactly its table's functions (no symbol versions,
SONAME = file name, the operator libraries need the framework; aclnnKlDiv is libopapi_math's, so its
example links with that library alone), a C program finds every function with
dlopen + dlsym as torch_npu does, set_env.sh sets up the documented environment, `npuemu toolkit`
prints and copies the tree, every enum and constant of the headers has the runtime's value, every
declared operator has its C prototype, and a bad set-up is a clear message, never a crash.

Cases are generated from the table, so a function or header added to it is checked here at once.
Programs are built once per module; the compilers run over many translation units at a time."""
from __future__ import annotations

import ast
import fcntl
import hashlib
import importlib
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
from typing import Optional, Sequence

import pytest

import ctoolkit
from emulator import calls
from aclnn_api.declaration import all_declarations
from npuemu_toolkit import surface
from support import REPO

sys.path.insert(0, os.path.join(REPO, "toolkit"))
import generate  # noqa: E402  (toolkit/generate.py: parse() and values(), as the build uses them)

TABLE = "toolkit/npuemu_toolkit/surface.py"
TIMEOUT = 120

FUNCTIONS = surface.functions()                                        # (header, function), table order
HEADER_PATHS = [path for header in surface.HEADERS for path in (header.path,) + header.aliases]
HEADER_OF_PATH = {path: header for header in surface.HEADERS for path in (header.path,) + header.aliases}
C_HEADERS = [path for path in HEADER_PATHS if path.startswith("acl/")]
CPP_ONLY_HEADERS = [path for path in HEADER_PATHS if HEADER_OF_PATH[path].cpp_only]
LIBRARIES = surface.LIBRARIES
# Symbols a linker may define in any shared object besides its exports.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}
LOG_SIGMOID_BACKWARD_VALUES = ["0.268941", "0.119203", "0.047426", "0.017986"]
# The functions of the one math operator (ops-math; libopapi_math): every other operator is an nn one.
MATH_OPERATOR_FUNCTIONS = {"aclnnKlDiv", "aclnnKlDivGetWorkspaceSize"}

# The language modes every header must compile in: (compiler, flags, source suffix, headers).
HEADER_MODES = {
    "c++11": ("g++", ["-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"], ".cpp", HEADER_PATHS),
    "c++17-old-abi": ("g++", ["-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", "-Wextra", "-Werror", "-c"],
                      ".cpp", HEADER_PATHS),
    "c99": ("gcc", ["-std=c99", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"], ".c", C_HEADERS),
}


# --------------------------------------------------------------------------------------------------
# Helpers


def run(command: Sequence[str], cwd=None, env: Optional[dict] = None,
        timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=None if cwd is None else str(cwd), env=env,
                          capture_output=True, text=True, timeout=timeout)


def unit_name(path: str) -> str:
    """A translation unit's file name (without suffix) for a header path: acl/acl_rt.h -> acl__acl_rt_h."""
    return re.sub(r"\W", "_", path.replace("/", "__"))


def include_flags() -> list:
    """Only the toolkit's include/ root: a header must find its own includes from there."""
    return ["-I", os.path.join(ctoolkit.toolkit_root(), "include")]


def compile_units(compiler: str, flags: Sequence[str], suffix: str, units: dict, directory) -> dict:
    """Compile every source of `units` ({name: source}) as its own translation unit, all in one compiler
    run; {name: diagnostics} of the units that failed (each failing unit compiled again alone, so that
    its diagnostics are its own). Objects, if any, land in `directory`."""
    directory = str(directory)
    paths = {}
    for name, source in units.items():
        paths[name] = os.path.join(directory, name + suffix)
        with open(paths[name], "w", encoding="utf-8") as file:
            file.write(source)
    done = run([compiler, *flags, *include_flags(), *paths.values()], cwd=directory)
    if done.returncode == 0:
        return {}
    failed = {}
    for name, path in paths.items():
        alone = run([compiler, *flags, *include_flags(), path], cwd=directory)
        if alone.returncode != 0:
            failed[name] = " ".join([compiler, *flags, path]) + "\n" + alone.stdout + alone.stderr
    assert failed, "the compiler failed on the batch but on no unit alone:\n" + done.stdout + done.stderr
    return failed


def compile_one(compiler: str, flags: Sequence[str], source: str, path) -> subprocess.CompletedProcess:
    with open(str(path), "w", encoding="utf-8") as file:
        file.write(source)
    return run([compiler, *flags, *include_flags(), str(path)], cwd=os.path.dirname(str(path)))


def all_headers_source() -> str:
    return "".join('#include "%s"\n' % header.path for header in surface.HEADERS)


def library_path(library: str) -> str:
    return os.path.join(ctoolkit.toolkit_root(), "lib64", library + ".so")


def dynamic_section(library: str) -> str:
    done = run(["readelf", "-d", library_path(library)])
    assert done.returncode == 0, done.stderr
    return done.stdout


def needed(library: str) -> list:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic_section(library))


def module_of(values: surface.Values):
    """The Python module a Values run is read from: emulator/status.py -> emulator.status."""
    return importlib.import_module(values.module[:-len(".py")].replace("/", "."))


def value_blocks() -> list:
    """(header, Enum or Constants block) of every header."""
    return [(header, block) for header in surface.HEADERS for block in header.blocks
            if isinstance(block, (surface.Enum, surface.Constants))]


def c_string_array(name: str, items: Sequence[str]) -> str:
    return "static const char *const %s[] = {%s NULL};\n" % (name, "".join('"%s", ' % item for item in items))


def bash_environment(script: str, base: dict) -> dict:
    """The environment `bash -c script` ends with (its last command must be `env -0`)."""
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=TIMEOUT, env=base)
    assert done.returncode == 0, "bash -c %r failed:\n%s" % (script, done.stderr.decode(errors="replace"))
    assert done.stdout, "bash -c %r printed no environment" % script
    pairs = (entry.split(b"=", 1) for entry in done.stdout.split(b"\0") if b"=" in entry)
    return {key.decode(): value.decode() for key, value in pairs}


def clean_base(**extra: str) -> dict:
    """A small login-like environment without the variables set_env.sh sets."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "LANG": "C", **extra}


TOOLKIT_VARIABLES = ("ASCEND_CUSTOM_PATH", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_AICPU_PATH",
                     "ASCEND_OPP_PATH", "TOOLCHAIN_HOME", "LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "CMAKE_PREFIX_PATH")


def toolkit_variables(env: dict) -> dict:
    return {name: env.get(name) for name in TOOLKIT_VARIABLES}


def file_set(root: str) -> set:
    return {os.path.relpath(os.path.join(directory, name), root)
            for directory, _, names in os.walk(root) for name in names}


# --------------------------------------------------------------------------------------------------
# 1. Headers


@pytest.fixture(scope="module")
def header_failures(tmp_path_factory) -> dict:
    """{mode: {header path: diagnostics}} of the headers that do not compile alone in that mode (one
    translation unit per header, one compiler run per mode)."""
    ctoolkit.require_compilers()
    failures = {}
    for mode, (compiler, flags, suffix, paths) in HEADER_MODES.items():
        directory = tmp_path_factory.mktemp("headers_" + mode)
        units = {unit_name(path): '#include "%s"\n' % path for path in paths}
        failed = compile_units(compiler, flags, suffix, units, directory)
        failures[mode] = {path: failed[unit_name(path)] for path in paths if unit_name(path) in failed}
    return failures


@pytest.mark.parametrize("mode,path", [(mode, path) for mode, spec in HEADER_MODES.items() for path in spec[3]])
def test_header_compiles_alone(header_failures, mode, path):
    """A translation unit that includes only this header compiles without a warning: in C++11, in C++17
    with the old std::string ABI (as torch_npu builds), and, for the acl/ headers, in C99."""
    assert path not in header_failures[mode], header_failures[mode][path]


def test_header_modes_cover_the_table():
    """Every header of the table (and each alias under aclnnop/level2/) is compiled alone in C++."""
    assert set(HEADER_MODES["c++11"][3]) == set(HEADER_PATHS)
    assert any(path.startswith("aclnnop/level2/") for path in HEADER_PATHS)
    assert "acl/acl.h" in C_HEADERS and "aclnn/acl_meta.h" in CPP_ONLY_HEADERS


def test_enum_members_are_usable_qualified_by_their_type_in_cxx11(tmp_path):
    """`aclDataType::ACL_FLOAT` and `aclFormat::ACL_FORMAT_ND`, as the documented examples write them,
    compile in C++11."""
    ctoolkit.require_compilers()
    source = ('#include "acl/acl.h"\n#include "aclnn/acl_meta.h"\n'
              "int main() {\n"
              "  aclDataType dataType = aclDataType::ACL_FLOAT;\n"
              "  aclFormat format = aclFormat::ACL_FORMAT_ND;\n"
              "  return dataType == ACL_FLOAT && format == ACL_FORMAT_ND ? 0 : 1;\n"
              "}\n")
    done = compile_one("g++", ["-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"], source,
                       tmp_path / "qualified.cpp")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", CPP_ONLY_HEADERS)
def test_aclnn_header_refuses_c_with_a_clear_error(tmp_path, path):
    """Compiled as C, a C++-only header (aclnn/, the operators') stops first at its own #error that says
    it is C++ only, not at some confusing error further down."""
    ctoolkit.require_compilers()
    done = compile_one("gcc", ["-std=c99", "-fsyntax-only"], '#include "%s"\n' % path, tmp_path / "unit.c")
    output = done.stdout + done.stderr
    assert done.returncode != 0, "C compiled %s:\n%s" % (path, output)
    errors = re.findall(r"^(.+?):\d+:\d+: (?:fatal )?error: (.*)$", output, re.MULTILINE)
    assert errors, output
    where, what = errors[0]
    assert where == os.path.join(ctoolkit.toolkit_root(), "include", path), output
    assert what.startswith("#error") and "C++ only" in what, output


# --------------------------------------------------------------------------------------------------
# 2. Prototypes


def pointer_declaration(number: int, fn: surface.Function) -> str:
    """`aclError (*p0)(void **, size_t, aclrtMemMallocPolicy) = &aclrtMalloc;` from the table's prototype."""
    proto = generate.parse(fn.prototype)
    parameters = ", ".join(param.ctype for param in proto.params) or "void"
    return "%s (*p%d)(%s) = &%s;" % (proto.returns, number, parameters, proto.name)


def test_every_function_has_the_exact_type_of_its_table_prototype(tmp_path):
    """One C++ translation unit that includes every header assigns each function of the table to a
    pointer of the type parsed from its prototype: a parameter or return type that differs from the
    table is a compile error."""
    ctoolkit.require_compilers()
    lines = [pointer_declaration(number, fn) for number, (_, fn) in enumerate(FUNCTIONS)]
    assert len(lines) == len({fn.name for _, fn in FUNCTIONS}) > 0, "the table names a function twice"
    source = all_headers_source() + "\n" + "\n".join(lines) + "\n"
    done = compile_one("g++", ["-std=c++11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"], source,
                       tmp_path / "prototypes.cpp")
    assert done.returncode == 0, done.stdout + done.stderr


def forwarded_parameters(fn) -> Optional[list]:
    """[(Python parameter name, kind of its C parameter)] of a function that forwards to a public call of
    its own name, as the trace and the logs see the call (an adapter's parameters are not that call's):
    the C parameters without the outputs and the counts, in order. None for the others."""
    name = generate.parse(fn.prototype).name
    module, attribute = fn.target.split(":")
    public = calls.find(name)
    if public is None or module.startswith("npuemu_toolkit.") or getattr(importlib.import_module(module),
                                                                         attribute) is not public:
        return None  # no public call, or an adapter (imported only by the bridge) that calls it
    kinds = [kind for kind, _ in generate.kinds(fn) if not kind.startswith("NK_OUT") and kind != "NK_COUNT"]
    names = calls.parameter_names(name)
    assert len(names) == len(kinds), (name, names, kinds)
    return list(zip(names, kinds))


def test_the_parameters_shown_in_hex_are_the_pointers_and_handles_the_c_functions_declare():
    """The trace and the logs show a parameter in hex by its name (emulator.calls.POINTER_PARAMETERS): a
    name is a pointer or a handle (void *, aclrtStream) in every C function that has it, never an integer
    (a device id, a size), and every pointer or handle is named there. aclnn objects are shown by their
    type, whatever the set says."""
    checked, checked_calls = set(), set()
    for _, fn in FUNCTIONS:
        parameters = forwarded_parameters(fn)
        if parameters is None:
            continue
        checked_calls.add(fn.name)
        for name, kind in parameters:
            checked.add(name)
            if kind == "NK_PTR":
                assert name in calls.POINTER_PARAMETERS, (fn.name, name)
            elif kind != "NK_OBJECT":
                assert name not in calls.POINTER_PARAMETERS, (fn.name, name, kind)
    # the others are parameters of calls not exported to C, or exported through an adapter
    others = {name for call in set(calls.all_names()) - checked_calls for name in calls.parameter_names(call)}
    assert calls.POINTER_PARAMETERS <= checked | others, calls.POINTER_PARAMETERS - checked - others


# --------------------------------------------------------------------------------------------------
# 3. Exports


@pytest.fixture(scope="module")
def binutils():
    """nm and readelf, or a skip that says which one is missing."""
    ctoolkit.require_binutils()


def exported_symbols(library: str) -> dict:
    """{name: nm type letter} of what `nm -D --defined-only` lists for the library."""
    done = run(["nm", "-D", "--defined-only", library_path(library)])
    assert done.returncode == 0, done.stderr
    symbols = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            symbols[parts[2]] = parts[1]
    return symbols


@pytest.mark.parametrize("library", LIBRARIES)
def test_library_exports_exactly_its_table_functions(binutils, library):
    """`nm -D --defined-only` lists the functions whose header the table assigns to this library, each
    as a function, and nothing else (no other acl*/Acl* name, no helper of the toolkit's)."""
    symbols = exported_symbols(library)
    expected = {fn.name for header, fn in FUNCTIONS if library in header.libraries}
    exported = set(symbols) - LINKER_SYMBOLS
    assert sorted(expected - exported) == [], "%s does not export these functions of the table" % library
    assert sorted(exported - expected) == [], "%s exports names the table does not give it" % library
    assert {name for name in symbols if name.lower().startswith("acl")} == expected
    assert all(symbols[name] == "T" for name in expected), symbols


@pytest.mark.parametrize("library", LIBRARIES)
def test_library_soname_is_its_file_name(binutils, library):
    """DT_SONAME is libX.so itself (no version suffix): a program linked with -lX needs the file by name."""
    sonames = re.findall(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dynamic_section(library))
    assert sonames == [library + ".so"]


@pytest.mark.parametrize("library", LIBRARIES)
def test_library_has_no_symbol_versions_of_its_own(binutils, library):
    """No version definitions (.gnu.version_d), and no version needs on npuemu's libraries: the exports
    are plain names, as the card's libraries have them, so a program built against either loads."""
    sections = run(["readelf", "-S", "-W", library_path(library)])
    assert sections.returncode == 0, sections.stderr
    assert ".gnu.version_d" not in sections.stdout
    versions = run(["readelf", "-V", "-W", library_path(library)])
    assert versions.returncode == 0, versions.stderr
    assert "Version definition" not in versions.stdout, versions.stdout
    lib64 = set(os.listdir(os.path.join(ctoolkit.toolkit_root(), "lib64")))
    files = re.findall(r"File: (\S+)", versions.stdout)
    assert sorted(set(files) & lib64) == [], versions.stdout


@pytest.mark.parametrize("library,needs", sorted(surface.LIBRARY_NEEDS.items()))
def test_operator_libraries_need_the_framework(binutils, library, needs):
    """libopapi*.so have libnnopbase.so in DT_NEEDED, so that dlopen("libopapi.so") + dlsym finds
    aclCreateTensor too."""
    for need in needs:
        assert need + ".so" in needed(library)


def test_operator_libraries_of_the_table_are_the_documented_ones():
    """The table makes libopapi.so, libopapi_nn.so and libopapi_math.so depend on the framework, and
    gives every operator to libopapi and to its CANN repository's library: aclnnKlDiv (ops-math) to
    libopapi_math, every other operator (ops-nn, aclnnKlDivBackward too) to libopapi_nn."""
    assert {"libopapi", "libopapi_nn", "libopapi_math"} <= set(surface.LIBRARY_NEEDS)
    assert all(needs == ("libnnopbase",) for needs in surface.LIBRARY_NEEDS.values())
    assert surface.NN_LIBRARIES == ("libopapi", "libopapi_nn")
    assert surface.MATH_LIBRARIES == ("libopapi", "libopapi_math")
    assert set(surface.OPERATOR_LIBRARIES) == set(surface.NN_LIBRARIES + surface.MATH_LIBRARIES)
    assert not set(surface.OPERATOR_LIBRARIES) & set(surface.EMPTY_LIBRARIES)
    libraries = {fn.name: header.libraries for header, fn in FUNCTIONS if header in surface.OPERATORS}
    assert {name: where for name, where in libraries.items() if where != surface.NN_LIBRARIES} == {
        name: surface.MATH_LIBRARIES for name in MATH_OPERATOR_FUNCTIONS}
    assert libraries["aclnnKlDivBackward"] == libraries["aclnnKlDivBackwardGetWorkspaceSize"] == surface.NN_LIBRARIES


def test_kl_div_is_exported_by_libopapi_and_libopapi_math_not_libopapi_nn(binutils):
    """nm -D: aclnnKlDiv and aclnnKlDivGetWorkspaceSize are in libopapi.so and libopapi_math.so and not
    in libopapi_nn.so, as CANN ships them; aclnnKlDivBackward's two phases are in libopapi_nn.so (and
    libopapi.so), not in libopapi_math.so."""
    backward = {"aclnnKlDivBackward", "aclnnKlDivBackwardGetWorkspaceSize"}
    exports = {library: exported_symbols(library) for library in ("libopapi", "libopapi_nn", "libopapi_math")}
    assert MATH_OPERATOR_FUNCTIONS | backward <= set(exports["libopapi"])
    assert MATH_OPERATOR_FUNCTIONS <= set(exports["libopapi_math"])
    assert not MATH_OPERATOR_FUNCTIONS & set(exports["libopapi_nn"])
    assert backward <= set(exports["libopapi_nn"])
    assert not backward & set(exports["libopapi_math"])


def test_kl_div_example_links_with_libopapi_math_alone(tmp_path):
    """samples/cpp/kl_div.cpp (aclnnKlDiv's documented example) builds with -lopapi_math -lnnopbase
    -lascendcl, without libopapi_nn, loads no libopapi_nn.so and prints the documented value."""
    ctoolkit.require_compilers()
    with open(os.path.join(REPO, "samples", "cpp", "kl_div.cpp"), encoding="utf-8") as file:
        source = file.read()
    program = ctoolkit.compile_program(source, tmp_path, name="kl_div", libraries=("opapi_math", "nnopbase",
                                                                                   "ascendcl"))
    loaded = run([program], cwd=tmp_path, env=ctoolkit.toolkit_environment(LD_TRACE_LOADED_OBJECTS="1"))
    assert "libopapi_math.so => " in loaded.stdout and "libopapi_nn.so" not in loaded.stdout, loaded.stdout
    done = ctoolkit.run_program(program)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["result[0] is: -6.906180"]


def test_kl_div_example_does_not_link_with_libopapi_nn_alone(tmp_path):
    """The same example linked with -lopapi_nn instead of -lopapi_math fails to link, naming aclnnKlDiv's
    functions: libopapi_nn.so does not export them (it does on no CANN toolkit either)."""
    ctoolkit.require_compilers()
    shutil.copy(os.path.join(REPO, "samples", "cpp", "kl_div.cpp"), str(tmp_path / "kl_div.cpp"))
    root = ctoolkit.toolkit_root()
    done = run(["g++", "-std=c++11", "kl_div.cpp", "-I", os.path.join(root, "include"),
                "-I", os.path.join(root, "include", "aclnnop"), "-I", os.path.join(root, "include", "aclnn"),
                "-L", os.path.join(root, "lib64"), "-lopapi_nn", "-lnnopbase", "-lascendcl", "-o", "kl_div"],
               cwd=tmp_path)
    assert done.returncode != 0, done.stdout + done.stderr
    undefined = set(re.findall(r"undefined reference to \W(\w+)", done.stderr))
    assert undefined == MATH_OPERATOR_FUNCTIONS, done.stderr


@pytest.mark.parametrize("library", LIBRARIES + ("libnpuemu_bridge",))
def test_library_does_not_link_python(binutils, library):
    """No public library, nor the bridge they forward to, needs libpython at load time: a program always
    loads, and a missing Python is a message from the first call (see the bad set-ups below)."""
    assert not [name for name in needed(library) if "python" in name.lower()], needed(library)


# --------------------------------------------------------------------------------------------------
# 4. dlopen + dlsym, as torch_npu finds the operators

DLSYM_PROGRAM = r"""#include <dlfcn.h>
#include <stdio.h>

%s%s
static int check(const char *library, const char *const *names, int *found) {
  void *handle = dlopen(library, RTLD_LAZY | RTLD_GLOBAL);
  int missing = 0;
  if (handle == NULL) {
    printf("missing library %%s: %%s\n", library, dlerror());
    return 1;
  }
  for (; *names != NULL; ++names) {
    if (dlsym(handle, *names) == NULL) {
      printf("missing %%s in %%s\n", *names, library);
      ++missing;
    } else {
      ++*found;
    }
  }
  return missing;
}

int main(void) {
  int found = 0;
  int missing = check("libopapi.so", ACLNN, &found) + check("libascendcl.so", RUNTIME, &found);
  printf("found %%d\n", found);
  return missing == 0 ? 0 : 1;
}
"""


def test_c_program_finds_every_function_with_dlopen_and_dlsym(tmp_path):
    """A C program loads libopapi.so with dlopen(RTLD_LAZY | RTLD_GLOBAL), found through set_env.sh's
    LD_LIBRARY_PATH, and finds every aclnn function of the table with dlsym: the operators and, through
    libopapi's dependency, the framework (aclCreateTensor...). libascendcl.so gives every runtime function."""
    ctoolkit.require_compilers()
    aclnn = [fn.name for header, fn in FUNCTIONS
             if set(header.libraries) & set(surface.OPERATOR_LIBRARIES + surface.FRAMEWORK_LIBRARIES)]
    runtime = [fn.name for header, fn in FUNCTIONS if "libascendcl" in header.libraries]
    assert "aclCreateTensor" in aclnn and "aclnnLogSigmoidBackward" in aclnn and "aclrtMalloc" in runtime
    source = DLSYM_PROGRAM % (c_string_array("ACLNN", aclnn), c_string_array("RUNTIME", runtime))
    program = ctoolkit.compile_program(source, tmp_path, name="finds", language="c", libraries=("dl",))
    done = ctoolkit.run_program(program)
    assert "missing" not in done.stdout, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "found %d" % (len(aclnn) + len(runtime))


# --------------------------------------------------------------------------------------------------
# 5. set_env.sh

@pytest.fixture(scope="module")
def root() -> str:
    """The installed toolkit's root, as `npuemu toolkit path` prints it."""
    return ctoolkit.toolkit_root()


PRELUDES = {"plain": "", "set-eu": "set -eu\n"}


@pytest.mark.parametrize("prelude", list(PRELUDES))
def test_set_env_exports_the_toolkit_environment(root, prelude):
    """Sourced in bash (also under `set -eu`, as a command of its own so that any failing command in it
    would stop the shell) with none of its variables set, set_env.sh exports the root as
    ASCEND_CUSTOM_PATH, ASCEND_HOME_PATH and ASCEND_TOOLKIT_HOME, root/opp as ASCEND_OPP_PATH, and puts
    its directories first in LD_LIBRARY_PATH, PYTHONPATH, PATH and CMAKE_PREFIX_PATH, with no empty
    entry; it leaves no helper of its own behind."""
    script = (PRELUDES[prelude] + 'source "$ROOT/set_env.sh"\n'
              'if declare -F _npuemu_prepend >/dev/null || [ -n "${_npuemu_root:-}" ]; then exit 3; fi\n'
              "env -0\n")
    env = bash_environment(script, clean_base(ROOT=root))
    set_but_empty = bash_environment(script, clean_base(ROOT=root, LD_LIBRARY_PATH="", PYTHONPATH=""))
    assert toolkit_variables(set_but_empty) == toolkit_variables(env)
    top = env["ASCEND_CUSTOM_PATH"]
    assert os.path.isabs(top) and os.path.realpath(top) == os.path.realpath(root)
    assert env["ASCEND_HOME_PATH"] == env["ASCEND_TOOLKIT_HOME"] == env["ASCEND_AICPU_PATH"] == top
    assert env["ASCEND_OPP_PATH"] == top + "/opp"
    assert env["TOOLCHAIN_HOME"] == top + "/toolkit"
    assert env["LD_LIBRARY_PATH"] == ":".join([top + "/lib64", top + "/lib64/plugin/opskernel",
                                               top + "/lib64/plugin/nnengine"])
    assert env["PYTHONPATH"] == ":".join([top + "/python/site-packages", top + "/opp/built-in/op_impl/ai_core/tbe"])
    assert env["PATH"] == top + "/bin:/usr/bin:/bin"
    assert env["CMAKE_PREFIX_PATH"] == top + "/lib64/cmake"
    for name in ("LD_LIBRARY_PATH", "PYTHONPATH", "PATH", "CMAKE_PREFIX_PATH"):
        assert "" not in env[name].split(":"), "%s has an empty entry: %r" % (name, env[name])


@pytest.mark.parametrize("prelude", list(PRELUDES))
def test_set_env_sourced_twice_adds_nothing_twice(root, prelude):
    """Sourcing set_env.sh again changes nothing; entries that were there stay, after the toolkit's."""
    base = clean_base(ROOT=root, LD_LIBRARY_PATH="/opt/other/lib", PYTHONPATH="/opt/other/python",
                      CMAKE_PREFIX_PATH="/opt/other")
    once = bash_environment(PRELUDES[prelude] + 'source "$ROOT/set_env.sh"\nenv -0\n', base)
    twice = bash_environment(PRELUDES[prelude] + 'source "$ROOT/set_env.sh"\nsource "$ROOT/set_env.sh"\nenv -0\n',
                             base)
    assert toolkit_variables(twice) == toolkit_variables(once)
    top = once["ASCEND_CUSTOM_PATH"]
    for name, before in (("LD_LIBRARY_PATH", "/opt/other/lib"), ("PYTHONPATH", "/opt/other/python"),
                         ("CMAKE_PREFIX_PATH", "/opt/other"), ("PATH", "/usr/bin:/bin")):
        entries = twice[name].split(":")
        assert len(entries) == len(set(entries)), "%s repeats an entry: %r" % (name, twice[name])
        assert twice[name].endswith(":" + before) and entries[0].startswith(top + "/"), twice[name]


@pytest.mark.skipif(shutil.which("dash") is None, reason="no dash (Debian's /bin/sh) on this machine")
def test_set_env_in_a_posix_shell_takes_the_root_it_is_given_or_stops_with_a_message(root):
    """dash cannot tell which file it sources: set_env.sh takes NPUEMU_TOOLKIT_ROOT and sets what it sets
    in bash, or without it returns 1 with a message and sets nothing (not the current directory)."""
    base = clean_base(ROOT=root)
    expected = toolkit_variables(bash_environment('source "$ROOT/set_env.sh"\nenv -0\n', base))
    given = subprocess.run(["dash", "-c", 'NPUEMU_TOOLKIT_ROOT="$ROOT" . "$ROOT/set_env.sh"\nenv -0\n'],
                           capture_output=True, timeout=TIMEOUT, env=base)
    assert given.returncode == 0, given.stderr.decode()
    pairs = (entry.split(b"=", 1) for entry in given.stdout.split(b"\0") if b"=" in entry)
    assert toolkit_variables({k.decode(): v.decode() for k, v in pairs}) == expected
    missing = subprocess.run(["dash", "-c", '. "$ROOT/set_env.sh" || echo "returned $?"\n'
                              'echo "ASCEND_CUSTOM_PATH=${ASCEND_CUSTOM_PATH:-unset}"\n'],
                             capture_output=True, timeout=TIMEOUT, env=base, text=True)
    assert missing.stdout.split() == ["returned", "1", "ASCEND_CUSTOM_PATH=unset"], missing.stdout
    assert "NPUEMU_TOOLKIT_ROOT=<root> . <root>/set_env.sh" in missing.stderr, missing.stderr


def test_setenv_bash_gives_the_same_environment(root):
    """`source <root>/bin/setenv.bash` (what some recipes source) sets exactly what set_env.sh sets, also
    under `set -eu` and when either is sourced by a relative path from its own directory."""
    base = clean_base(ROOT=root)
    expected = toolkit_variables(bash_environment('source "$ROOT/set_env.sh"\nenv -0\n', base))
    for script in ('source "$ROOT/bin/setenv.bash"\nenv -0\n',
                   'set -eu\nsource "$ROOT/bin/setenv.bash"\nenv -0\n',
                   'cd "$ROOT/bin"\nsource ./setenv.bash\ncd /\nenv -0\n',
                   'cd "$ROOT"\nsource ./set_env.sh\ncd /\nenv -0\n'):
        assert toolkit_variables(bash_environment(script, base)) == expected, script


def test_set_env_sourced_by_a_relative_path_ignores_cdpath(root, tmp_path):
    """With CDPATH set (a common ~/.bashrc line; it need not be exported), `cd` prints the directory it
    finds, and looks in CDPATH's directories first: the root came out twice, or as another directory."""
    base = clean_base(ROOT=root)
    expected = toolkit_variables(bash_environment('source "$ROOT/set_env.sh"\nenv -0\n', base))
    decoy = tmp_path / "decoy"
    (decoy / os.path.basename(root) / "bin").mkdir(parents=True)
    parent, name = os.path.split(root)
    for cdpath in (".", str(decoy)):
        for script in ('cd "%s"\nCDPATH="%s"\nsource %s/set_env.sh\ncd /\nenv -0\n' % (parent, cdpath, name),
                       'cd "%s"\nCDPATH="%s"\nsource %s/bin/setenv.bash\ncd /\nenv -0\n' % (parent, cdpath, name)):
            assert toolkit_variables(bash_environment(script, base)) == expected, script


# --------------------------------------------------------------------------------------------------
# 6. npuemu toolkit path / install

TREE_FILES = (["set_env.sh", "bin/setenv.bash", "npuemu.info"] + ["include/" + path for path in HEADER_PATHS]
              + ["lib64/%s.so" % library for library in LIBRARIES])


def test_toolkit_path_prints_the_absolute_root_of_a_complete_tree():
    """`npuemu toolkit path` (and `python -m emulator toolkit path`) print the same absolute root, which
    has set_env.sh, bin/setenv.bash, every header of the table (aclnnop/level2/ aliases too) and every
    library."""
    for must in ("include/acl/acl.h", "include/aclnn/acl_meta.h", "include/aclnnop/aclnn_logsigmoid_backward.h",
                 "include/aclnnop/level2/aclnn_logsigmoid_backward.h", "lib64/libascendcl.so", "lib64/libopapi.so"):
        assert must in TREE_FILES
    printed = []
    for command in (ctoolkit.npuemu_command(), [sys.executable, "-m", "emulator"]):
        done = run(command + ["toolkit", "path"])
        assert done.returncode == 0, done.stderr
        printed.append(done.stdout.strip())
    assert printed[0] == printed[1]
    top = printed[0]
    assert os.path.isabs(top)
    missing = [path for path in TREE_FILES if not os.path.isfile(os.path.join(top, path))]
    assert missing == [], "missing from %s" % top


@pytest.fixture(scope="module")
def installed_copy(tmp_path_factory) -> tuple:
    """`npuemu toolkit install DIR` into an existing empty directory, then again over its own copy:
    (DIR, first run, second run)."""
    target = tmp_path_factory.mktemp("install") / "Ascend" / "cann"
    target.mkdir(parents=True)
    first = run(ctoolkit.npuemu_command() + ["toolkit", "install", str(target)])
    second = run(ctoolkit.npuemu_command() + ["toolkit", "install", str(target)])
    return str(target), first, second


def test_toolkit_install_copies_the_tree(installed_copy, root):
    """The copy has every file of the installed tree (into an empty directory, and again over itself)."""
    target, first, second = installed_copy
    for done in (first, second):
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip() == target
    assert file_set(target) == file_set(root) | {"npuemu.python"}
    with open(os.path.join(target, "npuemu.python")) as record:
        assert record.read() == sys.executable + "\n"  # the interpreter that installed it (the venv's)


def test_program_built_against_a_copy_runs_from_the_copy(installed_copy, tmp_path):
    """The documented LogSigmoidBackward example, built with the g++ recipe against the copy (its
    set_env.sh: ASCEND_CUSTOM_PATH and LD_LIBRARY_PATH of the copy), loads the copy's libraries and
    prints the documented values."""
    ctoolkit.require_compilers()
    target = installed_copy[0]
    shutil.copy(os.path.join(REPO, "samples", "cpp", "log_sigmoid_backward.cpp"), str(tmp_path / "example.cpp"))
    base = dict(os.environ)
    for name in ("LD_LIBRARY_PATH", "ASCEND_CUSTOM_PATH"):
        base.pop(name, None)
    env = bash_environment('source "$COPY/set_env.sh"\nenv -0\n', {**base, "COPY": target})
    assert env["ASCEND_CUSTOM_PATH"] == target and env["LD_LIBRARY_PATH"].startswith(target + "/lib64:")
    recipe = ('g++ -std=c++11 example.cpp -I "$ASCEND_CUSTOM_PATH/include" -I "$ASCEND_CUSTOM_PATH/include/aclnnop"'
              ' -I "$ASCEND_CUSTOM_PATH/include/aclnn" -L "$ASCEND_CUSTOM_PATH/lib64" -lopapi_nn -lopapi_math'
              ' -lascendcl -lnnopbase -o example')
    done = run(["bash", "-c", recipe], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = run([str(tmp_path / "example")], cwd=tmp_path, env={**env, "LD_TRACE_LOADED_OBJECTS": "1"})
    for library in ("libopapi_nn.so", "libascendcl.so", "libnnopbase.so", "libnpuemu_bridge.so"):
        assert re.search(re.escape(library) + r" => " + re.escape(target + "/lib64/" + library), loaded.stdout), \
            loaded.stdout
    done = run([str(tmp_path / "example")], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    values = re.findall(r"result\[\d+\] is: (\S+)", done.stdout)
    assert values == LOG_SIGMOID_BACKWARD_VALUES, done.stdout


@pytest.mark.parametrize("place", ["a copy", "an environment"])
def test_a_tree_runs_npuemu_in_the_interpreter_of_where_it_is(bad_setup_program, installed_copy, tmp_path, place):
    """Without NPUEMU_PYTHON, a copy made by `npuemu toolkit install` runs the interpreter it recorded, and a
    tree in an environment's site-packages (a wheel installed there, wherever it was built) that
    environment's python: each named, with where it came from, when it cannot run."""
    if place == "a copy":
        tree = tmp_path / "cann"
        shutil.copytree(installed_copy[0], str(tree), symlinks=True)
        (tree / "npuemu.python").write_text("/nonexistent/bin/python\n")
        named = "/nonexistent/bin/python (recorded in %s/npuemu.python by `npuemu toolkit install`)" % tree
    else:
        environment = tmp_path / "env"
        tree = environment / "lib" / ("python" + sysconfig.get_config_var("VERSION")) / "site-packages" / "npuemu_toolkit" / "cann"
        shutil.copytree(installed_copy[0], str(tree), symlinks=True)
        (tree / "npuemu.python").unlink()
        python = environment / "bin" / ("python" + sysconfig.get_config_var("VERSION"))
        python.parent.mkdir()
        python.write_text("#!/bin/sh\n")
        python.chmod(0o755)
        named = "%s (the environment the toolkit is installed in) is no Python" % python
    env = ctoolkit.toolkit_environment(NPUEMU_PYTHON=None)
    env["LD_LIBRARY_PATH"] = "%s/lib64:%s" % (tree, env.get("LD_LIBRARY_PATH", ""))
    done = ctoolkit.run_program(bad_setup_program, env=env)
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert lines.get("aclInit") == "100001", done.stdout + done.stderr
    assert named in lines.get("aclGetRecentErrMsg", ""), done.stdout


def test_toolkit_install_refuses_a_directory_that_is_no_copy_of_it(tmp_path):
    """A non-empty directory without npuemu's marker is not replaced: exit status 1, a message that
    names it, and every file in it as it was."""
    target = tmp_path / "mine"
    (target / "sub").mkdir(parents=True)
    (target / "notes.txt").write_text("keep me\n")
    (target / "sub" / "data.bin").write_bytes(b"\0\1\2")
    before = {path: open(os.path.join(str(target), path), "rb").read() for path in file_set(str(target))}
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", str(target)])
    assert done.returncode == 1, done.stdout + done.stderr
    assert str(target) in done.stderr and "not" in done.stderr, done.stderr
    after = {path: open(os.path.join(str(target), path), "rb").read() for path in file_set(str(target))}
    assert after == before


def test_toolkit_install_refuses_a_dangling_symbolic_link_naming_where_it_points(tmp_path):
    """It said "File exists" of the link (review H)."""
    link = tmp_path / "cann"
    link.symlink_to(tmp_path / "nowhere" / "cann")
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", str(link)])
    assert (done.returncode, done.stderr) == (1, "npuemu: %s is a symbolic link to %s, which does not exist: make that "
                                                 "directory, or choose another\n" % (link, tmp_path / "nowhere" / "cann"))


def test_toolkit_install_refuses_a_file(tmp_path):
    """A target that is a file is refused with a message (no traceback), and the file is left as it was."""
    target = tmp_path / "a_file"
    target.write_text("keep me\n")
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", str(target)])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and str(target) in done.stderr, done.stderr
    assert target.read_text() == "keep me\n"


INSTALL_FROM = """import sys
from npuemu_toolkit import cli
cli.root = lambda: sys.argv[1]   # the tree `npuemu toolkit path` would print: here a copy of it
sys.exit(cli.main(["install", sys.argv[2]]))
"""


@pytest.mark.parametrize("spelling", ["same-path", "symlink"])
def test_toolkit_install_onto_its_own_source_keeps_the_tree(tmp_path, root, spelling):
    """`npuemu toolkit install "$(npuemu toolkit path)"` (here: `npuemu toolkit` run from a copy, onto that
    copy, by its path or through a symbolic link to it) leaves the tree whole: it may succeed or refuse
    with a message, but it never deletes the toolkit it copies from."""
    source = str(tmp_path / "cann")
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", source])
    assert done.returncode == 0, done.stdout + done.stderr
    target = source
    if spelling == "symlink":
        target = str(tmp_path / "latest")
        os.symlink(source, target)
    done = run([sys.executable, "-c", INSTALL_FROM, source, target])
    assert os.path.isdir(source) and file_set(source) == file_set(root) | {"npuemu.python"}, (
        "installing onto its own source removed it: exit %d\n%s%s" % (done.returncode, done.stdout, done.stderr))
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode != 0:
        assert done.returncode == 1 and done.stderr.startswith("npuemu: "), done.stderr


INSTALL_FAILING_MIDWAY = """import shutil, sys
from npuemu_toolkit import cli
def fill(source, target):  # copies part of the tree, then the disk is full
    shutil.copytree(source + "/include", target + "/include", symlinks=True)
    raise OSError(28, "No space left on device") if sys.argv[2] == "full" else KeyboardInterrupt()
cli.fill = fill
sys.exit(cli.main(["install", sys.argv[1]]))
"""


def changed_earlier_copy(target: str) -> dict:
    """An earlier copy in `target` that the new one differs from: a library and npuemu.python changed, a
    file the new copy lacks; {path: bytes} of every file in it."""
    assert run(ctoolkit.npuemu_command() + ["toolkit", "install", target]).returncode == 0
    with open(os.path.join(target, "lib64", "libascendcl.so"), "ab") as library:
        library.write(b"earlier")
    with open(os.path.join(target, INTERPRETER), "w") as record:
        record.write("/earlier/bin/python\n")
    with open(os.path.join(target, "lib64", "libearlier.so"), "wb") as stale:
        stale.write(b"only in the earlier copy")
    return contents(target)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def contents(top: str) -> dict:
    result = {}
    for path in file_set(top):
        with open(os.path.join(top, path), "rb") as file:
            result[path] = file.read()
    return result


INTERPRETER = "npuemu.python"

# A rename of the switch from the earlier copy to the new one is refused (EBUSY: a mount inside it, say).
INSTALL_NOT_SWITCHED = """import os, sys
from npuemu_toolkit import cli
renamed = [0]
real_replace = os.replace
def replace(source, destination):
    renamed[0] += 1
    if str(renamed[0]) in sys.argv[2].split(","):
        raise OSError(16, "Device or resource busy", source)
    real_replace(source, destination)
cli.os.replace = replace
sys.exit(cli.main(["install", sys.argv[1]]))
"""


@pytest.mark.parametrize("failing", [1, 3])
def test_an_earlier_copy_that_cannot_be_replaced_is_kept_whole(tmp_path, failing):
    """Moving the earlier copy aside failed at its third entry: putting it back removed what had not been
    moved yet, so the earlier copy lost all but two entries. Now files are replaced one by one: a rename
    that fails midway undoes those made before it, and the earlier copy is as it was, every byte."""
    target = str(tmp_path / "cann")
    before = changed_earlier_copy(target)
    done = run([sys.executable, "-c", INSTALL_NOT_SWITCHED, target, str(failing)])
    assert done.returncode == 1 and "Device or resource busy" in done.stderr, done.stdout + done.stderr
    assert contents(target) == before


def test_earlier_files_a_failed_switch_cannot_put_back_are_kept_and_named(tmp_path):
    """The third rename fails (the stale library set aside) and so does the first undo (npuemu.python put
    back): the undo went on, then the install removed DIR/.npuemu-old, the only earlier npuemu.python left,
    and said only "Device or resource busy". Now the file stays there and the message says where."""
    target = str(tmp_path / "cann")
    before = changed_earlier_copy(target)
    done = run([sys.executable, "-c", INSTALL_NOT_SWITCHED, target, "3,4"])
    aside = os.path.join(target, ".npuemu-old")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "putting the earlier copy back failed too" in done.stderr and aside in done.stderr, done.stderr
    kept = contents(aside)
    assert before[INTERPRETER] in kept.values(), "the earlier npuemu.python is gone"
    now = contents(target)
    assert now["lib64/libascendcl.so"] == before["lib64/libascendcl.so"], "the other undo did not run"
    assert not os.path.exists(os.path.join(target, ".npuemu-new"))


# Each time the install copies or renames a file, what a program starting from DIR would find: each file
# watched ({path: [sha256 of the earlier one, of the new one]}, in a JSON file) whole, one or the other.
INSTALL_WATCHED = """import hashlib, json, os, shutil, sys
from npuemu_toolkit import cli
target = sys.argv[1]
with open(sys.argv[2]) as file:
    watched = json.load(file)
seen = []
def look():
    for path, whole in watched.items():
        try:
            with open(os.path.join(target, path), "rb") as file:
                found = hashlib.sha256(file.read()).hexdigest()
        except OSError as error:
            found = str(error)
        if found not in whole:
            seen.append("%s: %s" % (path, found))
def watching(function):
    def call(*args, **kwargs):
        look()
        result = function(*args, **kwargs)
        look()
        return result
    return call
cli.os.replace = watching(os.replace)
cli.shutil.copy2 = watching(shutil.copy2)
code = cli.main(["install", target])
print(json.dumps(seen))
sys.exit(code)
"""


def test_a_program_starting_during_an_install_finds_each_file_whole(tmp_path, root):
    """An install set every entry of the earlier copy aside, then copied the new one in: a program started
    meanwhile from DIR (another CI job) found no lib64, or half a library ("file too short", exit 127).
    Now, whenever the install copies or renames a file, each library, set_env.sh and npuemu.python is
    there, whole: the earlier one or the new one. Files the new copy has as they are stay the same
    files, and the entries the new copy lacks are gone at the end."""
    target = str(tmp_path / "cann")
    earlier = changed_earlier_copy(target)
    inode = os.stat(os.path.join(target, "lib64", "libnnopbase.so")).st_ino
    later = contents(root)
    later[INTERPRETER] = (sys.executable + "\n").encode()
    watched = tmp_path / "watched.json"
    watched.write_text(json.dumps({path: [sha256(earlier[path]), sha256(later[path])] for path in later
                                   if path.startswith("lib64/") or path in ("set_env.sh", INTERPRETER)}))
    done = run([sys.executable, "-c", INSTALL_WATCHED, target, str(watched)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert contents(target) == later
    assert os.stat(os.path.join(target, "lib64", "libnnopbase.so")).st_ino == inode  # identical: not copied


INSTALL_ON_A_FULL_DISK = """import shutil, sys
from npuemu_toolkit import cli
def full(source, target):
    raise OSError(28, "No space left on device", target)
def fill(source, target):  # copies part of the tree, then every file fails, as shutil.copytree reports it
    shutil.copytree(source + "/include", target + "/include", symlinks=True)
    shutil.copytree(source + "/opp", target + "/opp", symlinks=True, copy_function=full)
cli.fill = fill
sys.exit(cli.main(["install", sys.argv[1]]))
"""


@pytest.mark.parametrize("existed", [False, True])
def test_toolkit_install_that_fails_with_no_earlier_copy_leaves_nothing_and_names_the_failure(tmp_path, existed):
    """A full disk with no earlier copy left a partial tree, which the next install refused ("exists and is
    not a copy of npuemu's toolkit"), and the message was shutil.Error's list repr. Now what the copy made
    is removed (DIR itself kept if it was there: a mount point), the message names the errno's text and
    the file, and the next install succeeds."""
    target = tmp_path / "cann" if existed else tmp_path / "opt" / "Ascend" / "cann"  # (parents made too)
    if existed:
        target.mkdir()
        inode = os.stat(str(target)).st_ino
    done = run([sys.executable, "-c", INSTALL_ON_A_FULL_DISK, str(target)])
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.match(r"npuemu: cannot install the toolkit to %s: No space left on device: '%s/opp/\S+'( \(and \d+ "
                    r"more files not copied\))?$" % (re.escape(str(target)), re.escape(str(target))),
                    done.stderr.strip()), done.stderr
    if existed:
        assert os.listdir(str(target)) == [] and os.stat(str(target)).st_ino == inode
    else:
        assert not (tmp_path / "opt").exists()
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", str(target)])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("failure", ["full", "interrupted"])
def test_toolkit_install_keeps_the_directory_itself_and_an_earlier_copy_it_could_not_replace(tmp_path, root, failure):
    """The directory may be one that cannot be removed (a mount point, a volume at /usr/local/Ascend/cann,
    a directory in a read-only parent): the install removed it and made it again, so it failed there
    (EBUSY) after deleting the earlier copy. Now the directory stays the same one, and a copy that fails
    midway (a full disk, Ctrl-C) puts the earlier copy back, with exit status 1 and the reason."""
    target = str(tmp_path / "cann")
    assert run(ctoolkit.npuemu_command() + ["toolkit", "install", target]).returncode == 0
    inode = os.stat(target).st_ino
    with open(os.path.join(target, "npuemu.python"), "w") as record:
        record.write("/earlier/bin/python\n")
    before = file_set(target)
    done = run([sys.executable, "-c", INSTALL_FAILING_MIDWAY, target, failure])
    if failure == "full":
        assert done.returncode == 1 and "No space left on device" in done.stderr, done.stdout + done.stderr
    else:
        assert "KeyboardInterrupt" in done.stderr, done.stdout + done.stderr
    assert file_set(target) == before and os.stat(target).st_ino == inode
    with open(os.path.join(target, "npuemu.python")) as record:
        assert record.read() == "/earlier/bin/python\n"
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", target])
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.stat(target).st_ino == inode and file_set(target) == file_set(root) | {"npuemu.python"}


@pytest.mark.parametrize("earlier", [False, True])
def test_installs_into_one_directory_at_once_take_turns_and_each_leaves_a_whole_copy(tmp_path, root, earlier):
    """Installs at once into one DIR (parallel CI jobs) moved each other's files: one said it succeeded with
    set_env.sh gone, or both failed and the earlier copy stayed hidden in .npuemu-previous-*. Now they take
    turns on a lock of DIR: every one succeeds and the tree is whole."""
    target = str(tmp_path / "cann")
    if earlier:
        assert run(ctoolkit.npuemu_command() + ["toolkit", "install", target]).returncode == 0
    command = ctoolkit.npuemu_command() + ["toolkit", "install", target]
    installs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for install in installs:
        out, err = install.communicate(timeout=300)
        assert install.returncode == 0 and out.strip() == target, out + err
        assert err in ("", "npuemu: waiting for another install into %s to end\n" % target), err
    assert file_set(target) == file_set(root) | {"npuemu.python"}


# An install that signals itself (`kill PID` from a CI runner, a Ctrl-C) at the given calls of a function
# of its copy (shutil.copyfile) or of its switch (os.replace), after the runtime's native threads started:
# the OS may give them the signal. A call number in `refused` fails the rename instead (EBUSY).
INSTALL_SIGNALLED = """import os, shutil, sys
import emulator  # noqa: F401 (its native threads)
from npuemu_toolkit import cli
target, function, signum, at, refused = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
assert len(os.listdir("/proc/self/task")) > 1  # a thread besides this one
module = {"copyfile": shutil, "replace": os}[function]
real = getattr(module, function)
calls = [0]
def call(*args, **kwargs):
    calls[0] += 1
    if str(calls[0]) == refused:
        raise OSError(16, "Device or resource busy", args[0])
    if str(calls[0]) in at.split(","):
        os.kill(os.getpid(), signum)
    return real(*args, **kwargs)
setattr(module, function, call)
sys.exit(cli.main(["install", target]))
"""


def signalled_install(target: str, function: str, signum: int, at: Sequence[int], refused: int = 0):
    return run([sys.executable, "-c", INSTALL_SIGNALLED, target, function, str(int(signum)),
                ",".join(map(str, at)), str(refused)])


def widely_changed_earlier_copy(target: str) -> dict:
    """changed_earlier_copy, with every library changed too: the switch renames a dozen files."""
    changed_earlier_copy(target)
    for name in os.listdir(os.path.join(target, "lib64")):
        path = os.path.join(target, "lib64", name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "ab") as library:
                library.write(b"earlier")
    return contents(target)


def new_copy(root: str) -> dict:
    later = contents(root)
    later[INTERPRETER] = (sys.executable + "\n").encode()
    return later


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda signum: signum.name)
@pytest.mark.parametrize("phase", ["copy", "switch"])
def test_a_signal_stops_the_copy_and_waits_for_the_switch(tmp_path, root, signum, phase):
    """The switch blocked SIGINT, SIGTERM and SIGHUP in its own thread only: the OS gave them to one of the
    runtime's threads, so a SIGTERM killed the install with the earlier copy and the new one mixed in DIR,
    and a Ctrl-C stopped the switch with a traceback. Now a signal during the copy stops it (the new copy's
    hidden directory removed, the earlier copy as it was), and one during the switch waits until the new
    copy is in place; either way the install exits with the signal's status (128 + its number), saying so,
    without a traceback."""
    target = str(tmp_path / "cann")
    earlier = widely_changed_earlier_copy(target)
    function, at = ("copyfile", 5) if phase == "copy" else ("replace", 3)
    done = signalled_install(target, function, signum, [at])
    outcome = "its earlier contents are as they were" if phase == "copy" else "the new copy was put in place first"
    assert (done.returncode, done.stdout, done.stderr) == (128 + signum, "", "npuemu: stopped by %s while installing "
                                                           "the toolkit to %s: %s\n" % (signum.name, target, outcome))
    assert contents(target) == (earlier if phase == "copy" else new_copy(root))
    assert not {".npuemu-new", ".npuemu-old"} & set(os.listdir(target))


@pytest.mark.parametrize("refused", [0, 8])
def test_a_second_ctrl_c_does_not_stop_the_switch_or_its_undo_halfway(tmp_path, root, refused):
    """Two Ctrl-C during the switch: the second stopped the undo the first started, and the cleanup then removed
    the earlier files it had not put back yet (hard-linked in .npuemu-old): DIR was left mixed, the earlier
    versions lost. Now both wait: the switch ends (exit status 130, the new copy in place), or, when one of its
    renames is refused, its undo ends (the earlier copy as it was, every byte, the failure named)."""
    target = str(tmp_path / "cann")
    earlier = widely_changed_earlier_copy(target)
    done = signalled_install(target, "replace", signal.SIGINT, [2, 6] if not refused else [9, 11], refused)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stdout + done.stderr
    if refused:
        assert "Device or resource busy" in done.stderr, done.stderr
        assert contents(target) == earlier
    else:
        assert contents(target) == new_copy(root)


@pytest.mark.parametrize("function, at", [("copyfile", 5), ("replace", 1), ("replace", 2), ("replace", 40)])
def test_the_next_install_takes_up_a_first_install_killed_outright(tmp_path, root, function, at):
    """A first install into DIR killed (SIGKILL) during its switch left some of the new copy's files in DIR but
    not its npuemu.info: the next install refused DIR ("not a copy of npuemu's toolkit"), though the
    documentation says it repairs it. Now the marker is the first file the switch puts in place: the next
    install after one killed anywhere (in the copy, before the switch's first rename, after it, midway)
    makes the copy whole."""
    target = str(tmp_path / "cann")
    done = signalled_install(target, function, signal.SIGKILL, [at])
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    done = run(ctoolkit.npuemu_command() + ["toolkit", "install", target])
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, target, "")
    assert contents(target) == new_copy(root)


def waiting_install(target: str) -> subprocess.Popen:
    """An install into `target`, started while the test holds its lock (as another install copying into
    it would): returned once it says it waits."""
    install = subprocess.Popen(ctoolkit.npuemu_command() + ["toolkit", "install", target], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=ctoolkit.default_sigint)
    assert install.stderr.readline() == "npuemu: waiting for another install into %s to end\n" % target
    return install


@pytest.mark.parametrize("ending", ["copied", "interrupted"])
def test_an_install_waits_for_another_ones_copy_in_progress_without_judging_it(tmp_path, root, ending):
    """An install copying into DIR has not copied its npuemu.info yet: a second install refused DIR ("not a
    copy of npuemu's toolkit") before it ever waited for the lock. Now it waits, and judges DIR once the
    other ends: a whole copy, which it replaces. A Ctrl-C while it waits changes nothing (exit 130)."""
    target = tmp_path / "cann"
    target.mkdir()
    (target / "include").mkdir()  # the other install's copy, half-way
    holder = os.open(str(target), os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        install = waiting_install(str(target))
        if ending == "interrupted":
            install.send_signal(signal.SIGINT)
        else:
            (target / "npuemu.info").write_text("")  # the other install's copy is whole
    finally:
        os.close(holder)
    out, err = install.communicate(timeout=300)
    if ending == "interrupted":
        assert (install.returncode, out, err) == (
            130, "", "npuemu: interrupted while waiting for another install into %s: nothing changed\n" % target)
        assert sorted(os.listdir(str(target))) == ["include"]
    else:
        assert (install.returncode, out.strip(), err) == (0, str(target), "")
        assert file_set(str(target)) == file_set(root) | {"npuemu.python"}


# --------------------------------------------------------------------------------------------------
# 7. The table against the runtime


def header_values() -> dict:
    """{name: (header path, Values)} of every enumerator and constant the headers define."""
    found = {}
    for header, block in value_blocks():
        for name, _ in generate.values(block.values):
            found.setdefault(name, (header.path, block.values))
    return found


def test_every_enum_and_constant_has_the_runtimes_value(tmp_path):
    """A C++ program that includes every header prints each enumerator and constant the table's Enum and
    Constants blocks define; each equals the attribute of the Python module it is read from
    (emulator.status, emulator.dtypes, aclnn_api.status)."""
    ctoolkit.require_compilers()
    names = header_values()
    assert {"ACL_FLOAT", "ACL_FORMAT_ND", "ACL_ERROR_UNINITIALIZE", "ACLNN_ERR_PARAM_NULLPTR",
            "ACL_MEMCPY_HOST_TO_DEVICE"} <= set(names)
    prints = "".join('  std::printf("%s=%%lld\\n", static_cast<long long>(%s));\n' % (name, name) for name in names)
    source = all_headers_source() + "#include <cstdio>\n\nint main() {\n" + prints + "  return 0;\n}\n"
    program = ctoolkit.compile_program(source, tmp_path, name="values", flags=("-Wall", "-Wextra", "-Werror"),
                                       libraries=())
    done = ctoolkit.run_program(program)
    assert done.returncode == 0, done.stdout + done.stderr
    printed = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert list(printed) == list(names)
    wrong = []
    for name, (path, values) in names.items():
        module = module_of(values)
        expected = int(getattr(module, name))
        if int(printed[name]) != expected:
            wrong.append("%s (%s): C %s, %s %d" % (name, path, printed[name], module.__name__, expected))
    assert wrong == []


def test_every_constant_of_the_runtime_is_in_a_header():
    """A C program can name every code, enumerator and flag of emulator/status.py: none is left out of the
    headers. The runtime's own codes, ACL_RT_SUCCESS among them, are #defines of
    acl/error_codes/rt_error_codes.h, as in the card's headers (RUNTIME.md's runtime codes)."""
    from emulator import status
    names = header_values()
    missing = [name for name, value in vars(status).items()
               if name.startswith("ACL_") and type(value) is int and name not in names]
    assert missing == []
    defined = {name for header, block in value_blocks()
               if header.path == "acl/error_codes/rt_error_codes.h" and block.style == "define"
               for name, _ in generate.values(block.values)}
    assert {"ACL_RT_SUCCESS", "ACL_ERROR_RT_PARAM_INVALID", "ACL_ERROR_RT_INTERNAL_ERROR"} <= defined


# The Python calls deliberately not in the C surface (docs/toolkit.md, "Limits"): the dynamic-list address
# setters and the data buffers.
NOT_IN_C = {"aclSetDynamicInputTensorAddr", "aclSetDynamicOutputTensorAddr", "aclSetDynamicTensorAddr",
            "AclSetDynamicInputTensorAddr", "AclSetDynamicOutputTensorAddr", "AclSetDynamicTensorAddr",
            "aclCreateDataBuffer", "aclDestroyDataBuffer", "aclGetDataBufferAddr", "aclGetDataBufferSize",
            "aclGetDataBufferSizeV2"}


@pytest.mark.parametrize("module_name", ["emulator.runtime", "aclnn_api"])
def test_every_call_of_the_python_runtime_has_a_c_prototype(module_name):
    """Every public call of the runtime (acl*, aclrt*) and of the aclnn framework (aclCreate*, aclDestroy*,
    aclGet*, aclSet*, the operators) is a function of the table, but those docs/toolkit.md leaves out: a
    C program calling a getter such as aclGetTensorListSize must link, as it does on the card."""
    module = importlib.import_module(module_name)
    calls = {name for name, value in vars(module).items()
             if name.lower().startswith("acl") and callable(value) and not isinstance(value, type)}
    in_table = {fn.name for _, fn in FUNCTIONS}
    assert sorted(calls - in_table - NOT_IN_C) == [], "add them to %s" % TABLE


@pytest.mark.parametrize("declaration", all_declarations(), ids=lambda d: d.name)
def test_every_declared_operator_has_its_c_prototypes(declaration):
    """Both phases of every operator aclnn_api declares are functions of the table, forwarded to those
    very Python functions, with the Python phases' parameters in order (the first phase's C
    workspaceSize and executor are its outputs)."""
    for name, python in declaration.functions().items():
        fn = surface.function(name)
        assert fn is not None, ("%s has no C prototype: add it to %s (an operator(...) entry of OPERATORS), "
                                "so that the C toolkit exports it" % (name, TABLE))
        header = next(header for header, candidate in FUNCTIONS if candidate is fn)
        assert header.libraries in (surface.NN_LIBRARIES, surface.MATH_LIBRARIES), header.path
        c_names = [param.name for param in generate.parse(fn.prototype).params if param.name not in fn.outputs]
        python_names = list(inspect.signature(python).parameters)
        assert c_names == python_names, ("%s: the C parameters in %s differ from aclnn_api's; make the prototype "
                                         "match" % (name, TABLE))
        module, attribute = fn.target.split(":")
        assert getattr(importlib.import_module(module), attribute) is python, fn.target
    first = surface.function(declaration.first_phase_name)
    assert tuple(first.outputs) == ("workspaceSize", "executor")
    assert [param.name for param in generate.parse(first.prototype).params][-2:] == ["workspaceSize", "executor"]


def test_every_operator_of_the_table_is_declared():
    """The table has no operator that aclnn_api does not declare (it would forward to nothing)."""
    declared = {name for declaration in all_declarations() for name in declaration.functions()}
    in_table = {fn.name for header, fn in FUNCTIONS if header in surface.OPERATORS}
    assert in_table == declared


@pytest.mark.parametrize("header,fn", FUNCTIONS, ids=[fn.name for _, fn in FUNCTIONS])
def test_every_function_forwards_to_a_python_callable(header, fn):
    """The target of every function exists, with as many parameters as the C call passes on (outputs
    and array counts are not passed), so the bridge's start cannot fail on the table."""
    module_name, attribute = fn.target.split(":")
    proto = generate.parse(fn.prototype)
    passed = [param.name for param in proto.params if param.name not in fn.outputs
              and param.name not in set(fn.counts.values())]
    if module_name == surface.ADAPT:  # imports _npuemu_c, which only the bridge makes: read its source
        path = os.path.join(REPO, "toolkit", *module_name.split(".")) + ".py"
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read())
        found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == attribute]
        assert found, "%s has no %s" % (path, attribute)
        assert [arg.arg for arg in found[0].args.args] == passed, fn.target
        return
    target = getattr(importlib.import_module(module_name), attribute, None)
    assert callable(target), "%s is not a callable of the runtime" % fn.target
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: the bridge's call shows
        return
    try:
        signature.bind(*passed)
    except TypeError as error:
        pytest.fail("%s: the C call passes %s, which %s%s cannot take (%s)" % (fn.name, passed, fn.target,
                                                                              signature, error))


# --------------------------------------------------------------------------------------------------
# 8. Bad set-ups

BAD_SETUP_PROGRAM = r"""#include <cstdio>
#include "acl/acl.h"
#include "aclnn/acl_meta.h"

int main() {
  std::printf("aclInit=%d\n", aclInit(nullptr));
  std::printf("aclrtSetDevice=%d\n", aclrtSetDevice(0));
  int64_t shape[1] = {4};
  int64_t strides[1] = {1};
  aclTensor *tensor = aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, nullptr);
  std::printf("aclCreateTensor=%s\n", tensor == nullptr ? "NULL" : "not NULL");
  const char *message = aclGetRecentErrMsg();
  std::printf("aclGetRecentErrMsg=%s\n", message == nullptr ? "(null)" : message);
  return 0;
}
"""


@pytest.fixture(scope="module")
def bad_setup_program(tmp_path_factory) -> str:
    ctoolkit.require_compilers()
    return ctoolkit.compile_program(BAD_SETUP_PROGRAM, tmp_path_factory.mktemp("bad_setup"), name="starts")


def fresh_venv_python(directory) -> str:
    """The python of a new venv without npuemu (made from the base interpreter, without pip)."""
    venv = os.path.join(str(directory), "venv")
    base = getattr(sys, "_base_executable", sys.executable)
    done = run([base, "-m", "venv", "--without-pip", venv])
    assert done.returncode == 0, done.stdout + done.stderr
    return os.path.join(venv, "bin", "python")


def hidden_numpy(directory) -> str:
    """A directory whose numpy package fails to import, as another project's on PYTHONPATH may."""
    hiding = os.path.join(str(directory), "other project")
    os.makedirs(os.path.join(hiding, "numpy"))
    with open(os.path.join(hiding, "numpy", "__init__.py"), "w") as module:
        module.write('raise ImportError("the numpy of another project")\n')
    return hiding


BAD_SETUPS = {
    "missing-python": lambda tmp: ({"NPUEMU_PYTHON": "/nonexistent/bin/python"}, "/nonexistent/bin/python"),
    "python-without-npuemu": lambda tmp: (lambda python: ({"NPUEMU_PYTHON": python}, python))(fresh_venv_python(tmp)),
    "numpy-hidden-by-pythonpath": lambda tmp: ({}, hidden_numpy(tmp)),
    "missing-libpython": lambda tmp: ({"NPUEMU_LIBPYTHON": "/nonexistent/libpython3.11.so.1.0"},
                                      "/nonexistent/libpython3.11.so.1.0"),
    "no-shared-libpython": lambda tmp: ({"NPUEMU_LIBPYTHON": ""}, "--enable-shared"),
    # variables CPython reads as it starts: checked first (PYTHONHOME, PYTHONPLATLIBDIR), or named when it fails
    "missing-pythonhome": lambda tmp: ({"PYTHONHOME": "/nonexistent"}, "PYTHONHOME=/nonexistent"),
    "bad-pythonplatlibdir": lambda tmp: ({"PYTHONPLATLIBDIR": "bogus"}, "PYTHONPLATLIBDIR=bogus"),
    "bad-pythonioencoding": lambda tmp: ({"PYTHONIOENCODING": "bogus"}, "PYTHONIOENCODING=bogus"),
}


@pytest.mark.parametrize("setup", list(BAD_SETUPS))
def test_bad_setup_fails_every_call_with_one_clear_message(bad_setup_program, tmp_path, setup):
    """With the toolkit's environment and a missing interpreter, an interpreter without npuemu, a
    missing libpython or none at all, the program's calls return ACL_ERROR_UNINITIALIZE (100001),
    aclCreateTensor gives NULL, aclGetRecentErrMsg says which interpreter or libpython failed and what
    to do, stderr has that message once, and main returns normally: no abort, no signal."""
    changes, named = BAD_SETUPS[setup](tmp_path)
    env = ctoolkit.toolkit_environment(**changes)
    if setup == "python-without-npuemu":  # nothing of the checkout on its path either
        root = ctoolkit.toolkit_root()
        env["PYTHONPATH"] = ":".join(entry for entry in env.get("PYTHONPATH", "").split(":")
                                     if entry.startswith(root))
    if setup == "numpy-hidden-by-pythonpath":  # npuemu is found; NumPy is not the environment's
        env["PYTHONPATH"] = named + ":" + env.get("PYTHONPATH", "")
    done = ctoolkit.run_program(bad_setup_program, env=env)
    assert done.returncode == 0, "exit status %d\n%s%s" % (done.returncode, done.stdout, done.stderr)
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert lines.get("aclInit") == "100001", done.stdout + done.stderr
    assert lines.get("aclrtSetDevice") == "100001", done.stdout
    assert lines.get("aclCreateTensor") == "NULL", done.stdout
    message = lines.get("aclGetRecentErrMsg", "(null)")
    assert message != "(null)" and named in message, message
    assert re.search(r"/\S*python", message), "the message names no interpreter or libpython: " + message
    assert any(advice in message for advice in ("NPUEMU_PYTHON", "--enable-shared", "pip install", "PYTHONPATH",
                                                "unset")), message
    if setup == "numpy-hidden-by-pythonpath":  # the advice names the cause, not a reinstall
        assert "unset PYTHONPATH" in message and "NPUEMU_PYTHON" not in message, message
    if setup in ("missing-pythonhome", "bad-pythonplatlibdir"):  # found before CPython prints its path configuration
        assert "unset PYTHONHOME" in message and "Python path configuration" not in done.stderr, done.stderr
    assert done.stderr.count(message) == 1, done.stderr


def test_an_empty_npuemu_python_is_unset(bad_setup_program):
    """NPUEMU_PYTHON= (empty) was taken as an interpreter named "", which "does not exist": as every
    NPUEMU_* setting, empty is unset, and the toolkit's own interpreter runs."""
    done = ctoolkit.run_program(bad_setup_program, env=ctoolkit.toolkit_environment(NPUEMU_PYTHON=""))
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert (lines.get("aclInit"), lines.get("aclrtSetDevice")) == ("0", "0"), done.stdout + done.stderr


# A tree and a package of different builds: the fingerprint of the interface between them (toolkit/CMakeLists.txt)

CORE = os.path.join("lib64", "libnpuemu_python.so")


def patched(path: str, old: bytes, new: bytes) -> None:
    """Replace every occurrence of `old` in the file at `path` with `new` (of the same length)."""
    with open(path, "rb") as file:
        data = file.read()
    assert len(old) == len(new) and old in data, "%s holds no %r" % (path, old)
    with open(path, "wb") as file:
        file.write(data.replace(old, new))


def tree_of_another_build(installed_copy, tmp_path, copied: bool, old: bytes, new: bytes) -> str:
    """A copy of the tree whose core has `new` where this build's has `old`: as a core another build compiled.
    `copied`: made by `npuemu toolkit install` (npuemu.python kept), else as the package's own tree (none)."""
    tree = tmp_path / "cann"
    shutil.copytree(installed_copy[0], str(tree), symlinks=True)
    if not copied:
        (tree / INTERPRETER).unlink()
    patched(str(tree / CORE), old, new)
    return str(tree)


def run_from(tree: str, program: str) -> tuple:
    """Run `program` with the libraries of `tree`: ({printed name: value}, the run)."""
    env = ctoolkit.toolkit_environment(NPUEMU_PYTHON=None)
    env["LD_LIBRARY_PATH"] = "%s/lib64:%s" % (tree, env.get("LD_LIBRARY_PATH", ""))
    done = ctoolkit.run_program(program, env=env)
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line), done


def assert_start_refused(lines: dict, done: subprocess.CompletedProcess) -> str:
    """Every call failed as a start that failed does (100001, NULL), its reason on stderr once: the reason."""
    assert done.returncode == 0, "exit status %d\n%s%s" % (done.returncode, done.stdout, done.stderr)
    assert (lines.get("aclInit"), lines.get("aclrtSetDevice"), lines.get("aclCreateTensor")) == \
        ("100001", "100001", "NULL"), done.stdout + done.stderr
    message = lines.get("aclGetRecentErrMsg", "")
    assert done.stderr.count(message) == 1, done.stderr
    return message


def advised_command(message: str, tree: str) -> list:
    """The install command the message advises for a copy, as words."""
    found = re.search(r"`(\S+ -m emulator toolkit install \S+)`", message)
    assert found, message
    command = shlex.split(found.group(1))
    assert command == [sys.executable, "-m", "emulator", "toolkit", "install", tree], message
    return command


def test_the_tree_and_the_package_of_one_build_have_one_interface_fingerprint(root):
    """The build compiles its interface fingerprint into the tree's core, writes it into the package
    (npuemu_toolkit._interface) and names it in the tree's npuemu.info."""
    from npuemu_toolkit import _interface
    assert re.fullmatch(r"[0-9a-f]{16}", _interface.FINGERPRINT), _interface.FINGERPRINT
    with open(os.path.join(root, CORE), "rb") as core:
        assert _interface.FINGERPRINT.encode() in core.read()
    with open(os.path.join(root, "npuemu.info")) as info:
        assert "interface %s" % _interface.FINGERPRINT in info.read()


@pytest.mark.parametrize("copied", [True, False], ids=["a copy", "the package's own tree"])
def test_a_tree_of_another_build_refuses_to_start_naming_both_builds_and_what_to_do(
        bad_setup_program, installed_copy, tmp_path, copied):
    """A copy made by `npuemu toolkit install` and cached while the package was upgraded ran the new package
    through its old core: a name it lacked was found by luck, with the advice to reinstall npuemu (the
    copy stayed as it was), and a convention changed without a name removed garbled the calls. Now the
    core compares its interface fingerprint with the package's before it looks anything up: every call
    returns 100001 (NULL from the creators), and the message names both builds (npuemu version and
    fingerprint), the tree and the interpreter, and says what to do: for a copy, install it again with
    that interpreter's npuemu (which then starts), for the package's own tree, reinstall npuemu."""
    from emulator import __version__
    from npuemu_toolkit._interface import FINGERPRINT
    other = "0123456789abcdef" if FINGERPRINT != "0123456789abcdef" else "fedcba9876543210"
    tree = tree_of_another_build(installed_copy, tmp_path, copied, FINGERPRINT.encode(), other.encode())
    lines, done = run_from(tree, bad_setup_program)
    message = assert_start_refused(lines, done)
    assert ("npuemu's C toolkit in %s (npuemu %s, interface %s) and the npuemu package of %s (npuemu %s, interface "
            "%s) are of different builds" % (tree, __version__, other, sys.executable, __version__, FINGERPRINT)
            in message), message
    if not copied:
        assert "reinstall npuemu in the environment of %s" % sys.executable in message, message
        return
    assert "reinstall" not in message, message
    assert run(advised_command(message, tree)).returncode == 0
    lines, done = run_from(tree, bad_setup_program)
    assert (lines.get("aclInit"), lines.get("aclrtSetDevice")) == ("0", "0"), done.stdout + done.stderr


def test_a_copy_older_than_the_interface_check_is_refused_by_the_package(bad_setup_program, installed_copy, tmp_path):
    """A copy whose core predates the check compares nothing: the package's adapters refuse it as they are
    imported (by the absence of _npuemu_c.interface_fingerprint), before it is used, with the same advice."""
    tree = tree_of_another_build(installed_copy, tmp_path, True, b"interface_fingerprint", b"interface_fingerprinX")
    lines, done = run_from(tree, bad_setup_program)
    message = assert_start_refused(lines, done)
    assert "npuemu's C toolkit in %s is of a build older than the npuemu package of %s" % (tree, sys.executable) \
        in message, message
    advised_command(message, tree)


NO_FREE_DESCRIPTOR_PROGRAM = r"""#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>
#include <vector>
#include "acl/acl.h"

int main(int argc, char **argv) {
  std::vector<int> held;
  for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) held.push_back(fd);
  for (int free = argc > 1 ? std::atoi(argv[1]) : 0; free > 0 && !held.empty(); --free) {  // left free
    close(held.back());
    held.pop_back();
  }
  std::printf("aclInit=%d\n", aclInit(nullptr));
  const char *message = aclGetRecentErrMsg();
  std::printf("aclGetRecentErrMsg=%s\n", message == nullptr ? "(null)" : message);
  for (int fd : held) close(fd);
  std::printf("again=%d\n", aclInit(nullptr));
  std::printf("aclrtSetDevice=%d\n", aclrtSetDevice(0));
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
"""


@pytest.mark.parametrize("free", [0, 1, 3])
def test_a_start_with_every_file_descriptor_in_use_names_the_cause_and_is_tried_again(tmp_path, free):
    """The first call with every file descriptor in use: pyvenv.cfg could not be opened, silently, and the
    toolkit said the interpreter "is no Python installation: reinstall npuemu", a start that failed for
    good. With one free, the interpreter ran out halfway ("Failed to import the site module"), for good
    too. Now the message names the file (or the descriptors Python needs), the errno's text and the limit,
    and the next call, with descriptors free again, starts the toolkit (docs/toolkit.md, "When it cannot
    start")."""
    ctoolkit.require_compilers()
    program = ctoolkit.compile_program(NO_FREE_DESCRIPTOR_PROGRAM, tmp_path, name="descriptors")
    done = subprocess.run(["prlimit", "--nofile=64", program, str(free)], capture_output=True, text=True, timeout=120,
                          env=ctoolkit.toolkit_environment(), cwd=str(tmp_path))
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert lines.get("aclInit") == "100001", done.stdout + done.stderr
    message = lines.get("aclGetRecentErrMsg", "")
    cause = (r"cannot open /.+?: Too many open files" if free == 0 else  # (a path may hold spaces)
             r"Python needs 8 free file descriptors to start, found %d \(Too many open files\)" % free)
    assert re.search(cause, message) and "ulimit -n" in message, message
    assert "reinstall" not in message and done.stderr.count(message) == 1, done.stderr
    assert (lines.get("again"), lines.get("aclrtSetDevice")) == ("0", "0"), done.stdout + done.stderr


# ------------------------------------------------------------------------------------------------
# A Python host: the toolkit joins the interpreter that loaded it

def test_a_python_host_shares_its_interpreter_with_the_toolkit(tmp_path):
    """A Python program that loads libascendcl.so with ctypes gets the same runtime it imports: a device
    set through C is the current device of the Python thread, a C call's message is in the thread's
    messages, and the leak report names the Python line that called C."""
    program = tmp_path / "host.py"
    program.write_text(textwrap.dedent('''
        import ctypes, sys
        lib = ctypes.CDLL(sys.argv[1] + "/lib64/libascendcl.so")
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        assert lib.aclInit(None) == 0 and lib.aclrtSetDevice(0) == 0
        import acl
        print("device", acl.rt.get_device())
        print("bad", lib.aclrtSetDevice(99), acl.get_recent_err_msg().split(": ", 1)[1])
        memory = ctypes.c_void_p()
        print("malloc", lib.aclrtMalloc(ctypes.byref(memory), 64, 0))
    '''))
    done = subprocess.run([sys.executable, str(program), ctoolkit.toolkit_root()], capture_output=True, text=True,
                          timeout=120, env=ctoolkit.toolkit_environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "device (0, 0)", "bad 107001 aclrtSetDevice: deviceId: expected a device id in [0, 8), found 99", "malloc 0"]
    assert "leak: device memory" in done.stderr and "host.py:10 in <module>" in done.stderr, done.stderr


# A C host's own handler of SIGTERM (set with libc's signal(), unknown to Python), then an install run in
# its Python, then a SIGTERM: the handler must still be the program's.
INSTALL_UNDER_A_C_HANDLER = """import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None)
HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
got = []
on_term = HANDLER(got.append)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, HANDLER]
libc.signal(signal.SIGTERM, on_term)
from npuemu_toolkit import cli
assert cli.main(["install", sys.argv[1]]) == 0
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.2)
print("handled", got)
"""


def test_an_install_leaves_a_handler_the_program_set_outside_python_as_it_was(tmp_path):
    """Python does not know a handler set in C (getsignal() says SIG_DFL): the install "restored" SIG_DFL
    over it, and the program's next SIGTERM killed it. Such a signal is now left alone."""
    done = run([sys.executable, "-c", INSTALL_UNDER_A_C_HANDLER, str(tmp_path / "cann")])
    assert done.returncode == 0 and "handled [15]" in done.stdout, (done.returncode, done.stdout, done.stderr)
