"""The C path: the same small calls made from a C++ program through npuemu's C toolkit and from Python,
timed in interleaved rounds of the same run. Target: the C call costs at most the Python call + 3 µs.

The C++ program (c_path.cpp) is built with the documented recipe (g++ -O2, the toolkit root from
`npuemu toolkit path`) and run in the environment set_env.sh gives; it times its calls with
std::chrono::steady_clock on command, so that its bursts and this process's Python bursts take turns
and a spell of load from other users hits both alike. Calls:

- the whole 4x4 float32 LogSigmoidBackward call: aclnnLogSigmoidBackwardGetWorkspaceSize +
  aclnnLogSigmoidBackward on a stream + aclrtSynchronizeStream (the workspace, if any, allocated once);
- a 16-byte host-to-device aclrtMemcpy;
- aclrtGetLastError, almost no Python work behind it: the bridge's fixed cost per call (for reading
  the others; no target).

Python makes the same calls by their C names (aclnn_api, emulator.runtime) on its own tensors with the
same values; both results must be bit-identical. Each figure is the median of all calls of all rounds.

    .venv/bin/python bench/c_path.py          # prints the table (a few seconds)
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import aclnn_api as nn
import emulator
from emulator import runtime as rt

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "c_path.cpp")
TARGET_US = 3.0
LIBRARIES = ("opapi_nn", "opapi_math", "ascendcl", "nnopbase")
ROUNDS, QUICK_ROUNDS = 30, 3
PROGRAM_TIMEOUT = 300   # seconds the C program may live: a hang is a failure, not a stuck bench
BURSTS = {"call": 100, "memcpy": 200, "trivial": 200}   # calls per contender per round
WARMUP = 200
LABELS = {"call": "whole 4×4 LogSigmoidBackward call (GetWorkspaceSize + launch + synchronize)",
          "memcpy": "16-byte aclrtMemcpy, host to device",
          "trivial": "aclrtGetLastError (almost no Python behind it: C − Python is the bridge's own cost)"}
TARGETED = ("call", "memcpy")


class Unavailable(Exception):
    """The C path cannot be measured here (no compiler, no toolkit): the reason."""


@dataclass
class Row:
    call: str
    c_us: float
    python_us: float
    calls: int

    @property
    def difference_us(self) -> float:
        return self.c_us - self.python_us

    @property
    def targeted(self) -> bool:
        return self.call in TARGETED

    @property
    def met(self) -> bool:
        return self.difference_us <= TARGET_US


@dataclass
class Measurement:
    cpu: str
    rows: list = field(default_factory=list)
    check: str = ""            # "ok" or what differs between the C and the Python results
    skipped: str = ""          # why there are no rows
    threads: int = 0
    rounds: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        """The C and the Python results differ, or the C program reported leaks."""
        return not self.skipped and self.check != "ok"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def toolkit_root() -> str:
    try:
        import npuemu_toolkit
        return npuemu_toolkit.root()
    except (ImportError, RuntimeError) as error:
        raise Unavailable("no C toolkit: %s" % error) from None


def build(root: str, directory: str) -> str:
    """c_path.cpp built with the documented recipe and -O2; the executable's path."""
    if shutil.which("g++") is None:
        raise Unavailable("g++ is not installed")
    executable = os.path.join(directory, "c_path")
    command = ["g++", "-std=c++11", "-O2", SOURCE, "-I", os.path.join(root, "include"),
               "-I", os.path.join(root, "include", "aclnnop"), "-I", os.path.join(root, "include", "aclnn"),
               "-L", os.path.join(root, "lib64"), *("-l" + name for name in LIBRARIES), "-o", executable]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError("building the C path failed:\n%s\n%s%s" % (" ".join(command), done.stdout, done.stderr))
    return executable


class CProgram:
    """The running C++ program: set up and warmed up; `burst(name, n)` -> seconds of each of n calls."""

    def __init__(self, root: str, executable: str, threads: int):
        env = dict(os.environ, NPUEMU_THREADS=str(threads))
        self.process = subprocess.Popen(["bash", "-c", 'source "$1/set_env.sh" && exec "$2"', "bash", root, executable],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env, cwd=os.path.dirname(executable))
        self.watchdog = threading.Timer(PROGRAM_TIMEOUT, self.process.kill)
        self.watchdog.daemon = True
        self.watchdog.start()
        words = self._line().split()
        if not words or words[0] != "ready":
            self._fail("did not start: %s" % " ".join(words))
        self.result = np.array([float.fromhex(word) for word in words[1:]], dtype=np.float32)

    def _line(self) -> str:
        line = self.process.stdout.readline()
        if line.startswith("error") or not line:
            self._fail(line.strip() or "exited")
        return line

    def _fail(self, what: str):
        self.watchdog.cancel()
        self.process.kill()
        _, stderr = self.process.communicate()
        raise RuntimeError("the C path program %s\n%s" % (what, stderr))

    def burst(self, name: str, count: int) -> list:
        self.process.stdin.write("%s %d\n" % (name, count))
        self.process.stdin.flush()
        return [int(word) * 1e-9 for word in self._line().split()]

    def close(self) -> str:
        """Ends the program; its stderr (a leak report would be there)."""
        try:
            stdout, stderr = self.process.communicate("quit\n", timeout=60)
        finally:
            self.watchdog.cancel()
        if self.process.returncode != 0 or stdout.strip() != "done":
            raise RuntimeError("the C path program ended with status %d: %s%s" % (self.process.returncode, stdout, stderr))
        return stderr


class PythonCalls:
    """The same calls from Python, by their C names, on tensors with the same values as c_path.cpp's."""

    def __init__(self):
        self.host = [np.float32(1.0) + np.float32(0.125) * np.arange(16, dtype=np.float32),
                     np.float32(-2.0) + np.float32(0.25) * np.arange(16, dtype=np.float32)]
        self.host.append(self.host[1].copy())
        self.copy_source = np.array([1, 2, 3, 4], dtype=np.float32)
        self._check(rt.aclrtSetDevice(0), "aclrtSetDevice")
        self.stream, ret = rt.aclrtCreateStream()
        self._check(ret, "aclrtCreateStream")
        self.dev, self.tensors = [], []
        for k in range(4):
            address, ret = rt.aclrtMalloc(64, rt.status.ACL_MEM_MALLOC_HUGE_FIRST)
            self._check(ret, "aclrtMalloc")
            self.dev.append(address)
            if k < 3:
                self._check(rt.aclrtMemcpy(address, 64, self.host[k].ctypes.data, 64, rt.status.ACL_MEMCPY_HOST_TO_DEVICE),
                            "aclrtMemcpy")
            else:
                self._check(rt.aclrtMemset(address, 64, 0, 64), "aclrtMemset")
            tensor = nn.aclCreateTensor([4, 4], nn.ACL_FLOAT, [4, 1], 0, nn.ACL_FORMAT_ND, [4, 4], address)
            if tensor is None:
                raise RuntimeError("aclCreateTensor: %s" % rt.aclGetRecentErrMsg())
            self.tensors.append(tensor)
        self.copy_target, ret = rt.aclrtMalloc(16, rt.status.ACL_MEM_MALLOC_HUGE_FIRST)
        self._check(ret, "aclrtMalloc")
        self.copy_pointer = self.copy_source.ctypes.data
        self.args = tuple(self.tensors)
        self.workspace, self.workspace_size = None, 0
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*self.args)
        self._check(ret, "aclnnLogSigmoidBackwardGetWorkspaceSize")
        if size:
            self.workspace, ret = rt.aclrtMalloc(size, rt.status.ACL_MEM_MALLOC_HUGE_FIRST)
            self._check(ret, "aclrtMalloc")
            self.workspace_size = size
        self._check(nn.aclnnLogSigmoidBackward(self.workspace, size, executor, self.stream), "aclnnLogSigmoidBackward")
        self._check(rt.aclrtSynchronizeStream(self.stream), "aclrtSynchronizeStream")
        self.calls: dict = {"call": self.call, "memcpy": self.copy, "trivial": self.trivial}

    @staticmethod
    def _check(ret: int, what: str) -> None:
        if ret != 0:
            raise RuntimeError("%s returned %d: %s" % (what, ret, rt.aclGetRecentErrMsg()))

    def call(self) -> None:
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*self.args)
        if ret != 0 or size > self.workspace_size:
            self._check(ret or 1, "aclnnLogSigmoidBackwardGetWorkspaceSize")
        ret = nn.aclnnLogSigmoidBackward(self.workspace if size else None, size, executor, self.stream)
        if ret != 0:
            self._check(ret, "aclnnLogSigmoidBackward")
        ret = rt.aclrtSynchronizeStream(self.stream)
        if ret != 0:
            self._check(ret, "aclrtSynchronizeStream")

    def copy(self) -> None:
        ret = rt.aclrtMemcpy(self.copy_target, 16, self.copy_pointer, 16, rt.status.ACL_MEMCPY_HOST_TO_DEVICE)
        if ret != 0:
            self._check(ret, "aclrtMemcpy")

    def trivial(self) -> None:
        if rt.aclrtGetLastError(rt.status.ACL_RT_THREAD_LEVEL) != 0:
            self._check(1, "aclrtGetLastError")

    def result(self) -> np.ndarray:
        out = np.empty(16, dtype=np.float32)
        self._check(rt.aclrtMemcpy(out.ctypes.data, 64, self.dev[3], 64, rt.status.ACL_MEMCPY_DEVICE_TO_HOST),
                    "aclrtMemcpy")
        return out

    def burst(self, name: str, count: int) -> list:
        fn, clock = self.calls[name], time.perf_counter
        times = []
        for _ in range(count):
            t0 = clock()
            fn()
            times.append(clock() - t0)
        return times

    def close(self) -> None:
        for tensor in self.tensors:
            nn.aclDestroyTensor(tensor)
        for address in self.dev + [self.copy_target] + ([self.workspace] if self.workspace else []):
            rt.aclrtFree(address)
        rt.aclrtDestroyStream(self.stream)
        rt.aclrtResetDevice(0)


def measure(rounds: int = ROUNDS, log: Callable[[str], None] = lambda text: None) -> Measurement:
    """Build and run the C program, time both sides in interleaved rounds. A machine without g++ or
    without the toolkit gives a Measurement with `skipped` set; a failure of either side raises."""
    started = time.perf_counter()
    measurement = Measurement(cpu=cpu_model(), threads=emulator.settings().threads, rounds=rounds)
    try:
        root = toolkit_root()
        with tempfile.TemporaryDirectory(prefix="npuemu-c-path-") as directory:
            log("  building bench/c_path.cpp (g++ -O2)")
            executable = build(root, directory)
            program = CProgram(root, executable, measurement.threads)
            python = None
            try:
                python = PythonCalls()
                for name in BURSTS:  # warm-up, as the C program's
                    python.burst(name, WARMUP)
                expected = python.result()
                measurement.check = "ok" if np.array_equal(program.result.view(np.uint32), expected.view(np.uint32)) \
                    else "**WRONG**: C %s, Python %s" % (program.result.tolist(), expected.tolist())
                samples = {(side, name): [] for side in ("c", "python") for name in BURSTS}
                for index in range(rounds):
                    for name, count in BURSTS.items():
                        order = (("c", program), ("python", python))
                        for side, contender in (order if index % 2 == 0 else order[::-1]):
                            samples[side, name] += contender.burst(name, count)
            finally:
                if python is not None:
                    python.close()
                stderr = program.close()
            if "leak" in stderr.lower():
                measurement.check += "; **the C program reported leaks**: " + stderr.strip()
    except Unavailable as reason:
        measurement.skipped = str(reason)
        return measurement
    for name in BURSTS:
        measurement.rows.append(Row(name, statistics.median(samples["c", name]) * 1e6,
                                    statistics.median(samples["python", name]) * 1e6,
                                    min(len(samples["c", name]), len(samples["python", name]))))
    measurement.seconds = time.perf_counter() - started
    return measurement


def table_lines(m: Measurement) -> list:
    """The "C path" section's body (markdown)."""
    if m.skipped:
        return ["Not measured: %s." % m.skipped]
    lines = ["The same calls from a C++ program through the toolkit (bench/c_path.cpp, g++ -O2, "
             "std::chrono::steady_clock) and from Python by their C names, in interleaved rounds of the same run "
             "(%d rounds, %d threads; median of all calls). CPU: %s. Results of the C and the Python call: %s."
             % (m.rounds, m.threads, m.cpu, m.check), "",
             "| call | C µs | Python µs | C − Python µs | target (≤ +%g µs) | calls |" % TARGET_US,
             "|---|---:|---:|---:|---|---:|"]
    for row in m.rows:
        verdict = ("met" if row.met else "**missed**") if row.targeted else "— (for reading the others)"
        lines.append("| %s | %.2f | %.2f | %+.2f | %s | %d |" % (LABELS[row.call], row.c_us, row.python_us,
                                                                 row.difference_us, verdict, row.calls))
    return lines


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    m = measure(args.rounds, log=lambda text: print(text, file=sys.stderr, flush=True))
    print("## C path\n")
    print("\n".join(table_lines(m)))
    if not m.skipped:
        print("\n(%.1f s, load average %.2f %.2f %.2f on %d cores)" % ((m.seconds,) + os.getloadavg() + (os.cpu_count(),)))
    return 1 if m.failed else 0


if __name__ == "__main__":
    sys.exit(main())
