"""The corpus of client programs (README.md in this directory): reading each program's header, building
the C and C++ ones against the installed toolkit, running them under the sanitizer and reading its
findings from their stderr. Used by tests/test_client_bugs.py and by measure.py.

A program's header is its leading comment lines (`#` in Python, `//` in C and C++):

    expect: <tool> <kind>     one line per finding it must produce ("expect: none" for a correct program)
    sites: 31, 40             source lines of this file that the findings' sites must name
    output: <line>            a line its stdout must hold (what it computes, with the bug)
    env: NAME=VALUE           a setting it runs with (e.g. NPUEMU_EXECUTION=eager)
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

import ctoolkit  # noqa: E402  (tests/ctoolkit.py: the toolkit's root, its environment, the compilers)

LANGUAGES = {".py": "Python", ".c": "C", ".cpp": "C++"}
NOT_PROGRAMS = {"corpus.py", "measure.py"}
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck", "leakcheck")
KINDS = {
    "memcheck": ("invalid device access", "padding overrun", "misaligned tensor", "destroyed tensor",
                 "overlapping output"),
    "racecheck": ("race",),
    "synccheck": ("missing synchronisation", "host memory in flight", "memory freed while in use",
                  "pending work destroyed"),
    "initcheck": ("uninitialised read",),
    "leakcheck": ("leak",),
}
EXITCODE = 86          # NPUEMU_SANITIZE_EXITCODE of every run: a process that reported anything exits with it
LIBRARIES = ("opapi_nn", "opapi_math", "ascendcl", "nnopbase")
# What a run must not inherit from the caller's environment: it would change what the program reports.
INHERITED = re.compile(r"^(NPUEMU_|ASCEND_GLOBAL_LOG_LEVEL$|ASCEND_SLOG_PRINT_TO_STDOUT$)")


class HeaderError(ValueError):
    """A program whose header cannot be read: the corpus itself is wrong."""


@dataclass(frozen=True)
class Program:
    path: str
    expected: frozenset          # {(tool, kind)}; empty for a control
    sites: tuple                 # line numbers of this file the findings must name
    outputs: tuple               # lines its stdout must hold
    env: tuple = ()              # (NAME, VALUE) it runs with

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def language(self) -> str:
        return LANGUAGES[os.path.splitext(self.path)[1]]

    @property
    def compiled(self) -> bool:
        return self.language != "Python"

    @property
    def control(self) -> bool:
        return not self.expected

    def expected_text(self) -> str:
        return ", ".join("%s %s" % pair for pair in sorted(self.expected)) or "none"


def read_header(path: str) -> Program:
    """The program at `path` with what its header declares (HeaderError if it declares nothing valid)."""
    comment = "#" if path.endswith(".py") else "//"
    expected, sites, outputs, env, said_none = set(), [], [], [], False
    with open(path, encoding="utf-8") as file:
        for line in file:
            stripped = line.strip()
            if not stripped.startswith(comment):
                break
            match = re.match(r"(expect|sites|output|env):\s?(.*)$", stripped[len(comment):].strip())
            if match is None:
                continue
            key, value = match.group(1), match.group(2).rstrip()
            if key == "expect":
                if value == "none":
                    said_none = True
                    continue
                tool, _, kind = value.partition(" ")
                if tool not in TOOLS or kind not in KINDS[tool]:
                    raise HeaderError("%s: unknown finding %r (expected '<tool> <kind>' as the sanitizer prints "
                                      "them, e.g. 'synccheck missing synchronisation')" % (path, value))
                expected.add((tool, kind))
            elif key == "sites":
                sites += [int(number) for number in re.split(r"[,\s]+", value) if number]
            elif key == "output":
                outputs.append(value)
            else:
                name, _, setting = value.partition("=")
                env.append((name.strip(), setting.strip()))
    if said_none == bool(expected):
        raise HeaderError("%s: the header must say either 'expect: none' or one 'expect: <tool> <kind>' per "
                          "finding" % path)
    if said_none and sites:
        raise HeaderError("%s: a control names no sites" % path)
    if expected and not sites:
        raise HeaderError("%s: a buggy program must say which of its lines the report names ('sites:')" % path)
    return Program(path, frozenset(expected), tuple(sites), tuple(outputs), tuple(env))


def programs(directory: str = HERE) -> list:
    """Every program of the corpus, sorted by file name."""
    found = []
    for name in sorted(os.listdir(directory)):
        if name in NOT_PROGRAMS or os.path.splitext(name)[1] not in LANGUAGES or name.startswith("."):
            continue
        found.append(read_header(os.path.join(directory, name)))
    return found


# ------------------------------------------------------------------------------------------------
# Building

def missing_compilers(corpus: Sequence[Program]) -> list:
    """The compilers the corpus needs that this machine lacks."""
    needed = {"gcc" if program.language == "C" else "g++" for program in corpus if program.compiled}
    return sorted(compiler for compiler in needed if shutil.which(compiler) is None)


def build_command(program: Program, executable: str) -> list:
    root = ctoolkit.toolkit_root()
    if program.language == "C":
        compiler, standard = "gcc", "-std=c99"
    else:
        compiler, standard = "g++", "-std=c++11"
    return [compiler, standard, "-g", "-O0", "-Wall", program.path,
            "-I", os.path.join(root, "include"), "-I", os.path.join(root, "include", "aclnnop"),
            "-I", os.path.join(root, "include", "aclnn"), "-L", os.path.join(root, "lib64"),
            *("-l" + library for library in LIBRARIES), "-o", executable]


def build(program: Program, directory: str) -> str:
    """Build a C or C++ program into `directory` with the documented one-line recipe (plus -g, so that
    sites are file:line); returns the executable. A compiler error raises RuntimeError with its output."""
    executable = os.path.join(directory, os.path.splitext(program.name)[0] + "_" + program.language.lower()
                              .replace("+", "x"))
    command = build_command(program, executable)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError("%s\n%s%s" % (" ".join(command), done.stdout, done.stderr))
    return executable


def build_all(corpus: Sequence[Program], directory: str, workers: int = 2) -> dict:
    """{program path: executable, or the RuntimeError that building it raised} of every compiled
    program of `corpus`, built `workers` at a time (one compiler run per program)."""
    compiled = [program for program in corpus if program.compiled]

    def attempt(program: Program):
        try:
            return build(program, directory)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            return RuntimeError("%s did not build: %s" % (program.name, error))

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        executables = list(pool.map(attempt, compiled))
    return {program.path: executable for program, executable in zip(compiled, executables)}


# ------------------------------------------------------------------------------------------------
# Running and reading the findings

@dataclass
class Finding:
    tool: str
    kind: str
    message: str
    sites: list = field(default_factory=list)   # the site texts ("file:line in f <- file:line in g")

    def lines_of(self, name: str) -> set:
        """The line numbers of file `name` that this finding's sites name (any frame of a site)."""
        return {int(line) for path, line in FRAME.findall(" ".join(self.sites)) if os.path.basename(path) == name}


@dataclass
class Run:
    program: Program
    returncode: int
    stdout: str
    stderr: str
    findings: list
    summary: Optional[tuple]     # the kinds the SUMMARY line counts, or None if it printed none

    @property
    def found(self) -> frozenset:
        return frozenset((finding.tool, finding.kind) for finding in self.findings)

    def lines_named(self) -> set:
        named = set()
        for finding in self.findings:
            named |= finding.lines_of(self.program.name)
        return named

    def missing(self) -> frozenset:
        return self.program.expected - self.found

    def undeclared(self) -> frozenset:
        return self.found - self.program.expected

    def sites_missing(self) -> list:
        named = self.lines_named()
        return [line for line in self.program.sites if line not in named]

    def outputs_missing(self) -> list:
        printed = {line.strip() for line in self.stdout.splitlines()}
        return [line for line in self.program.outputs if line.strip() not in printed]

    def detected(self) -> bool:
        """A buggy program: every declared finding, at every declared line."""
        return bool(self.program.expected) and not self.missing() and not self.sites_missing()

    def describe(self) -> str:
        return "%s exited %d\n--- stdout\n%s--- stderr\n%s" % (self.program.name, self.returncode, self.stdout,
                                                              self.stderr)


HEADER = re.compile(r"^========= npuemu: (\w+): ([^:]+): (.*)$")
DETAIL = re.compile(r"^=========     (.*)$")
LEAK = re.compile(r"^npuemu: leak: (.*)$")
SUMMARY = re.compile(r"^========= npuemu: SUMMARY: (\d+) report\(s\) \((.*)\)$")
# A resource line of a finding (what was involved, not where it happened): an allocation or a stream.
RESOURCE = re.compile(r"^(allocation #\d+ |stream 0x)")
# One frame of a site: `path:line in function` (a C++ function may be demangled with a parameter list).
FRAME = re.compile(r"(/[^:<>()\n]*?|[^\s:<>()]+):(\d+) in ")  # an absolute path may hold spaces
# A whole site: frames joined by " <- ", each `path:line in function` or `module+0xoffset[ in function]`.
_FUNCTION = r"(?:<\w+>|[\w:~]+(?:\([^()]*\))?)"
_PATH = r"(?:/[^:<>\n]*?|[^\s:]+)"  # an absolute path may hold spaces (a checkout in "my dir")
_ONE = r"(?:%s:\d+ in %s|%s\+0x[0-9a-f]+(?: in %s)?)" % (_PATH, _FUNCTION, _PATH, _FUNCTION)
SITE = re.compile(r"%s(?: <- %s)*$" % (_ONE, _ONE))


def parse(stderr: str) -> tuple:
    """(findings, summary kinds or None) printed on `stderr`: each `========= npuemu: <tool>: <kind>:` block
    with its site lines (`<role> at <site>`), each `npuemu: leak:` line with the site that made it."""
    findings, summary, current = [], None, None
    for line in stderr.splitlines():
        match = SUMMARY.match(line)
        if match:
            summary = tuple(sorted({re.sub(r"^\d+ ", "", part) for part in match.group(2).split(", ")}))
            current = None
            continue
        match = HEADER.match(line)
        if match and match.group(1) in TOOLS:
            current = Finding(match.group(1), match.group(2), match.group(3))
            findings.append(current)
            continue
        match = DETAIL.match(line)
        if match and current is not None:
            text = match.group(1)
            if " at " in text and not RESOURCE.match(text):
                site = text.rsplit(" at ", 1)[1]
                if SITE.match(site):
                    current.sites.append(site)
            continue
        current = None
        match = LEAK.match(line)
        if match:
            text = match.group(1)
            site = text.rsplit(", made at ", 1)[1] if ", made at " in text else ""
            site = site.split(" (released only by ")[0]
            findings.append(Finding("leakcheck", "leak", text, [site] if site else []))
    return findings, summary


def environment(program: Program, **settings: str) -> dict:
    """The environment of a run: the toolkit's (for C and C++) or this one's, without inherited NPUEMU_*
    settings, with the program's own `env:` lines, then `settings`."""
    base = dict(ctoolkit.toolkit_environment()) if program.compiled else dict(os.environ)
    env = {key: value for key, value in base.items() if not INHERITED.match(key)}
    env.update(program.env)
    env.update(settings)
    return env


def run(program: Program, executable: Optional[str] = None, sanitize: str = "full",
        execution: Optional[str] = None, timeout: float = 120) -> Run:
    """Run `program` (its executable, if compiled) with NPUEMU_SANITIZE=`sanitize` and
    NPUEMU_SANITIZE_EXITCODE=86, in `execution` mode if given."""
    settings = {"NPUEMU_SANITIZE": sanitize, "NPUEMU_SANITIZE_EXITCODE": str(EXITCODE)}
    if execution is not None:
        settings["NPUEMU_EXECUTION"] = execution
    if program.compiled:
        if executable is None:
            raise ValueError("%s must be built first" % program.name)
        command = [executable]
    else:
        command = [sys.executable, program.path]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=HERE,
                          env=environment(program, **settings))
    findings, summary = parse(done.stderr)
    return Run(program, done.returncode, done.stdout, done.stderr, findings, summary)
