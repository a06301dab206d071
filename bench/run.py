"""`make bench`: every npuemu operator (the five backwards and their forwards) against PyTorch CPU and
this machine's memory bandwidth.

For each operator (cases.py), size, dtype and thread count: npuemu's whole two-phase call on device
tensors prepared beforehand, the PyTorch CPU path a user would run on the same data, and a
STREAM-like triad moving the same bytes, timed in turns to a time budget (medians). npuemu's
result is checked against PyTorch's (a benchmark of a wrong result is worthless). Large cases also
get their peak memory measured in a fresh process, and are timed on each vector instruction set
the machine has down to AVX2 (vector_isa.py). Writes bench/RESULTS.md and prints it.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import subprocess
import sys
import time
from typing import Optional

import numpy as np

import acl
import aclnn_api as nn
import emulator
from aclnn_api import _kernels
from aclnn_api.kernel_info import describe_plan

import c_path
import roofline
import sanitizer_cost
import vector_isa
from cases import LOG_SIGMOID, OPERATORS, Case, Operator, Size, output_elements
from data import DTYPE_LABEL, FLOAT_DTYPES, TOLERANCE, BenchDevice, decode
from memory import run_child
from report import Result, merge, render
from roofline import Ceiling
from timing import BUDGETS, QUICK, InCache, NpuemuCall, Triad, interleaved_medians, profile_text

HERE = os.path.dirname(os.path.abspath(__file__))
THREADS = (1, 2)
COMPARE_CHUNK = 1 << 22
STALL = 2.0     # a contender this many times slower with 2 threads than with 1 is flagged


def log(text: str) -> None:
    print(text, flush=True)


# PyTorch's OpenMP runtime (libgomp) keeps an idle worker spinning for 300000 pauses after each
# parallel call, about 7 ms on this machine: long enough to sit on a core that the next contender's
# threads (npuemu's, the triad's) need. A short spin still keeps PyTorch's workers awake between the
# back-to-back calls of its own bursts, and lets them sleep before the next contender starts, as
# npuemu's pool does. Read when PyTorch loads; a value the user set is kept.
GOMP_SPINCOUNT = "20000"


def load_torch(disabled: bool):
    if disabled:
        return None
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", GOMP_SPINCOUNT)
    try:
        import torch
    except ImportError:
        return None
    return torch


def cpu_fields(cpuinfo: str) -> dict:
    """The first processor's fields of /proc/cpuinfo text, by name ('model name', 'cpu family', ...)."""
    fields: dict = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the end of the first processor
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def threads_per_core(cpu: dict) -> str:
    """Logical CPUs per core as the (virtual) machine reports them (/proc/cpuinfo's siblings over its
    cpu cores). At 2, the kernels' two threads share one core's vector units, which caps what two
    threads can gain on the compute-bound rows; a VM may also hide that its vCPUs are siblings."""
    try:
        return str(int(cpu["siblings"]) // int(cpu["cpu cores"]))
    except (KeyError, ValueError, ZeroDivisionError):
        return "not reported"


def machine_info(torch) -> dict:
    with open("/proc/cpuinfo") as cpuinfo:
        cpu = cpu_fields(cpuinfo.read())
    model = cpu.get("model name", "unknown")
    memory = "unknown"
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal"):
                memory = "%.1f GiB" % (int(line.split()[1]) / (1 << 20))
    return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "CPU": model,
            # VMs name different generations alike ("AMD EPYC" for Zen 4 and Zen 5): these tell them apart
            "CPU family, model, stepping": ", ".join(cpu.get(k, "?") for k in ("cpu family", "model", "stepping")),
            "L2 per core (sizes the in-cache cuts)": "%d KiB" % (roofline.default_l2() >> 10),
            "cores": os.cpu_count(), "logical CPUs per core (as reported)": threads_per_core(cpu),
            "memory": memory,
            "PyTorch": torch.__version__ if torch else "not installed",
            "NumPy": np.__version__, "Python": platform.python_version(),
            "emulated chip": emulator.settings().soc_name, "kernels": _kernels.build_info(),
            # measured once per process: a row that is off in one run only may owe it to this
            "kernels' memory plan": describe_plan(_kernels.memory_plan()),
            "sanitizer (NPUEMU_SANITIZE) of the npuemu columns": emulator.settings().sanitize,
            "load average at start": "%.2f %.2f %.2f" % os.getloadavg(), "commit": git_commit()}


def git_commit() -> str:
    """The commit the benchmarked tree is at ("+ changes" when it has uncommitted ones), or "unknown".
    RESULTS.md itself does not count: a run rewrites it, and the next run measures the same code."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
                                ":(top,exclude)bench/RESULTS.md"], cwd=HERE, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" + changes" if dirty.stdout.strip() else "")


# ---------------------------------------------------------------------------------------------
# data in PyTorch


def torch_tensor(torch, raw: np.ndarray, dtype: int):
    """The host array as a PyTorch tensor of the same dtype, sharing its memory."""
    if dtype == nn.ACL_BF16:
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw)


def torch_dtype(torch, dtype: int):
    return {nn.ACL_FLOAT: torch.float32, nn.ACL_FLOAT16: torch.float16, nn.ACL_BF16: torch.bfloat16,
            nn.ACL_DOUBLE: torch.float64}[dtype]


def torch_reference(torch, op: Operator, case: Case, tensors: dict) -> np.ndarray:
    """PyTorch's result in float32 on the case's (rounded) inputs: the result a float32 compute gives."""
    upcast = {k: v.float() if v.is_floating_point() else v for k, v in tensors.items()}
    out = torch.empty(case.output[1], dtype=torch.float32)
    op.torch_setup(upcast, case.attrs, out)()
    return out.numpy()


def numpy_values(case: Case, host: dict) -> dict:
    return {name: decode(host[name], source.dtype) for name, source in case.inputs.items()}


# ---------------------------------------------------------------------------------------------
# checks


def compare(raw: np.ndarray, dtype: int, expected: np.ndarray) -> str:
    """'ok' when every element is within the documented tolerance of the reference, relative to the
    element plus the output's RMS: |actual - expected| <= tol * (|expected| + rms). The RMS term
    (rather than an absolute 1) keeps the check meaningful for outputs much smaller than 1."""
    tol = TOLERANCE[dtype]
    actual_flat, expected_flat = raw.reshape(-1), expected.reshape(-1)
    squares, count = 0.0, 0
    for start in range(0, expected_flat.size, COMPARE_CHUNK):
        e = expected_flat[start:start + COMPARE_CHUNK].astype(np.float64)
        e = e[np.isfinite(e)]
        squares, count = squares + float(np.dot(e, e)), count + e.size
    rms = (squares / count) ** 0.5 if count else 0.0
    bad, worst = 0, 0.0
    for start in range(0, actual_flat.size, COMPARE_CHUNK):
        a = decode(actual_flat[start:start + COMPARE_CHUNK], dtype)
        e = expected_flat[start:start + COMPARE_CHUNK].astype(np.float64)
        with np.errstate(invalid="ignore"):
            error = np.abs(a - e)
            fine = (error <= tol * (np.abs(e) + rms)) | (a == e) | (np.isnan(a) & np.isnan(e))
        bad += int((~fine).sum())
        worst = max(worst, float(error[np.isfinite(error)].max(initial=0.0)))
    if bad:
        return "**WRONG**: %d of %d off (max error %.3g, tolerance %g × (|ref| + %.3g))" % (
            bad, actual_flat.size, worst, tol, rms)
    return "ok"


def validate_references(ops: list, torch) -> list:
    """Each PyTorch path against the NumPy float64 formula, in float64 on the 4x4 and 1e5 cases."""
    lines = []
    for op in ops:
        for size in op.sizes[:2]:
            case = op.build(size, nn.ACL_DOUBLE)
            values = {name: decode(source.materialize(), source.dtype) for name, source in case.inputs.items()}
            expected = op.numpy_reference(values, case.attrs)
            out = torch.empty(case.output[1], dtype=torch.float64)
            op.torch_setup({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in values.items()}, case.attrs, out)()
            with np.errstate(invalid="ignore"):
                error = np.abs(out.numpy() - expected) / (1 + np.abs(expected))
            worst = float(np.nanmax(error))
            verdict = "ok" if worst < 1e-10 and np.array_equal(np.isnan(out.numpy()), np.isnan(expected)) else "**MISMATCH**"
            extra = op.check_inputs(values, case.attrs) if op.check_inputs else ""
            if extra:
                verdict = "**MISMATCH**"
            lines.append("%s %s: %s (max relative difference %.1e)%s"
                         % (op.name, size.shape, verdict, worst, "; " + extra if extra else ""))
    return lines


# ---------------------------------------------------------------------------------------------
# one case


class CaseRunner:
    """One operator, size and dtype: data made once, then timed for each thread count."""

    def __init__(self, op: Operator, size: Size, dtype: int, torch, budget):
        self.op, self.size, self.dtype, self.torch, self.budget = op, size, dtype, torch, budget
        self.case = op.build(size, dtype)
        self.host = {name: source.materialize() for name, source in self.case.inputs.items()}
        self.tensors = self.torch_out = None
        if torch is not None:
            self.tensors = {name: torch_tensor(torch, raw, self.case.inputs[name].dtype) for name, raw in self.host.items()}
            self.torch_out = torch.empty(self.case.output[1], dtype=torch_dtype(torch, dtype))
        self._reference: Optional[np.ndarray] = None

    def reference(self) -> Optional[np.ndarray]:
        """PyTorch's result computed in float32, or without PyTorch the NumPy float64 formula where
        it is a fair reference (None elsewhere)."""
        if self._reference is None:
            if self.torch is not None:
                self._reference = torch_reference(self.torch, self.op, self.case, self.tensors)
            elif self.size.label in self.op.float64_check_sizes:
                self._reference = self.op.numpy_reference(numpy_values(self.case, self.host), self.case.attrs)
        return self._reference

    def check(self, raw: np.ndarray) -> str:
        expected = self.reference()
        if expected is None:
            return "unchecked (no PyTorch)"
        return compare(raw, self.dtype, expected)

    def npuemu_call(self, device: BenchDevice) -> tuple:
        """(the whole two-phase call on `device`, its output) with the case's data uploaded."""
        tensors = {name: device.upload(raw.shape, self.case.inputs[name].dtype, [(0, raw)]).tensor
                   for name, raw in self.host.items()}
        out_name, shape = self.case.output
        out = device.output(shape, self.dtype)
        tensors[out_name] = out.tensor
        attrs = {k: device.int_array(v) if isinstance(v, list) else v for k, v in self.case.attrs.items()}
        return NpuemuCall(device, self.op.first_phase(), self.op.second_phase(), self.op.npuemu_args(tensors, attrs)), out

    def run(self, threads: int) -> tuple[Optional[Result], str]:
        """(result, '') or (None, why the case was skipped)."""
        emulator.configure(threads=threads)
        device = BenchDevice()
        try:
            call, out = self.npuemu_call(device)
            if call.status != 0:
                return None, "npuemu returns %d: %s" % (call.status, call.message)
            check = self.check(device.read_raw(out))
            # The triad runs in the kernels' pool: size it to the configured count, as npuemu's
            # launches do, so that the two never disagree about the pool.
            _kernels.set_threads(threads)
            contenders = {"npuemu": call}
            if self.torch is not None:
                self.torch.set_num_threads(threads)
                contenders["torch"] = self.op.torch_setup(self.tensors, self.case.attrs, self.torch_out)
            triad = Triad(self.case.bytes_moved)
            contenders["triad"] = triad
            probe = InCacheProbe(self, device, threads) if self.size.large else None
            if probe is not None and probe.ready:
                contenders.update(probe.contenders())
            medians, calls = interleaved_medians(contenders, self.budget)
            if _kernels.threads() != threads:
                raise RuntimeError("kernel pool has %d threads, expected %d" % (_kernels.threads(), threads))
            return Result(self.op.name, self.size, self.dtype, threads, medians["npuemu"], medians.get("torch"),
                          medians["triad"], triad.nbytes, self.case.bytes_moved, calls, check,
                          self.dtype in self.op.torch_upcasts,
                          ceiling=probe.ceiling(medians) if probe is not None else None), ""
        finally:
            device.close()


class InCacheProbe:
    """The compute ceiling of a large case (roofline.py): its kernel on two in-cache cuts of the case,
    the larger twice the smaller, whole two-phase calls on `device`, timed as two more contenders of
    the row's interleaved rounds (same thread count, same load from other users)."""

    LARGER, SMALLER = "in cache", "in cache, half"

    def __init__(self, runner: CaseRunner, device: BenchDevice, threads: int):
        self.bytes_per_element = runner.case.bytes_moved / runner.op.work(runner.case)
        self.work_unit = runner.op.work_unit
        self.calls: dict = {}
        self.sizes, self.why_not = self.plan(runner.op, runner.size, runner.dtype, threads)
        for label, in_cache_size in zip((self.LARGER, self.SMALLER), self.sizes):
            if self.why_not:
                break
            sub = CaseRunner(runner.op, in_cache_size, runner.dtype, None, runner.budget)
            call, _ = sub.npuemu_call(device)
            if call.status != 0:
                self.why_not = "npuemu returns %d on %s: %s" % (call.status, in_cache_size.shape, call.message)
            self.calls[label] = (InCache(call, roofline.IN_CACHE_BURST), runner.op.work(sub.case))

    @staticmethod
    def plan(op: Operator, size: Size, dtype: int, threads: int, l2: Optional[int] = None) -> tuple[tuple, str]:
        """((larger, smaller) in-cache Sizes, '') or ((), why there are none), for this machine's L2
        or the `l2` bytes given."""
        if op.in_cache is None:
            return (), op.in_cache_why_not or "no in-cache form of %s" % op.name
        l2 = l2 or roofline.default_l2()
        unit_bytes = op.build(op.in_cache(size, 1), dtype).bytes_moved
        why_not = "one row (%d bytes) per thread does not fit twice in half an L2 of %d bytes" % (unit_bytes, l2)
        chosen: tuple = ()
        for share in (roofline.L2_SHARE, roofline.L2_SHARE_STRETCHED):
            units = roofline.in_cache_units(unit_bytes, threads, l2, share)
            if units is None:
                break
            sizes = tuple(op.in_cache(size, n) for n in units)
            smallest = output_elements(op.build(sizes[1], dtype))
            if roofline.kernel_participants(smallest, threads) < threads:
                why_not = "the smaller in-cache call (%s, %d elements) would not use %d threads" % (
                    sizes[1].shape, smallest, threads)
                continue
            chosen = sizes
            if units[0] // threads >= roofline.UNITS_PER_THREAD:
                break
        return (chosen, "") if chosen else ((), why_not)

    @property
    def ready(self) -> bool:
        return not self.why_not

    def contenders(self) -> dict:
        return {label: contender for label, (contender, _) in self.calls.items()}

    def ceiling(self, medians: dict) -> Ceiling:
        if not self.ready:
            return roofline.not_measured(self.why_not, self.bytes_per_element)
        (larger, larger_n), (smaller, smaller_n) = self.calls[self.LARGER], self.calls[self.SMALLER]
        per_element = roofline.seconds_per_element(medians[self.LARGER], medians[self.SMALLER], larger_n, smaller_n)
        shapes = tuple(s.shape for s in self.sizes)
        if per_element is None:
            return Ceiling(shapes, None, self.bytes_per_element, min(larger.timed, smaller.timed),
                           "noise: the larger in-cache call was not slower than the smaller one", self.work_unit)
        return Ceiling(shapes, per_element, self.bytes_per_element, min(larger.timed, smaller.timed),
                       unit=self.work_unit)


def sanitizer_costs(ops: list, sizes: list, quick: bool) -> list:
    """(operator, shape, dtype, {level: median seconds}) of float32 cases at each sanitizer level, 2 threads."""
    rows = []
    emulator.configure(threads=max(THREADS))
    for op in ops:
        for size in op.sizes:
            if size.label not in sizes or size.label not in sanitizer_cost.SIZES or not op.available():
                continue
            runner = CaseRunner(op, size, nn.ACL_FLOAT, None, QUICK if quick else BUDGETS[size.label])
            device = BenchDevice()
            try:
                call, _ = runner.npuemu_call(device)
                if call.status == 0:
                    medians, _ = interleaved_medians(sanitizer_cost.contenders(call), runner.budget)
                    rows.append((op.name, size.shape, "float32", medians))
                    log("  %s %s: %s" % (op.name, size.shape, ", ".join(
                        "%s %.1f µs" % (level, seconds * 1e6) for level, seconds in medians.items())))
            finally:
                sanitizer_cost.restore(emulator.settings())
                device.close()
    return rows


def isa_costs(runner: CaseRunner, isas: tuple) -> Optional[tuple]:
    """(operator, shape, dtype, {isa: median seconds}, whether every isa gave the same bits) of the
    runner's case on each instruction set of `isas`, 2 threads; None if npuemu rejects the case."""
    threads = max(THREADS)
    emulator.configure(threads=threads)
    device = BenchDevice()
    try:
        call, out = runner.npuemu_call(device)
        if call.status != 0:
            return None
        _kernels.set_threads(threads)
        digests = set()
        nbytes = out.storage_elements * nn.aclDataTypeSize(out.dtype)
        for isa in isas:  # each on an output filled with NaN bytes first, so that a lane left unwritten shows
            assert acl.rt.memset(out.address, nbytes, 0xFF, nbytes) == 0, acl.get_recent_err_msg()
            vector_isa.OnIsa(call, isa)()
            digests.add(hashlib.sha256(device.read_raw(out).tobytes()).digest())
        medians, _ = interleaved_medians(vector_isa.contenders(call, isas), runner.budget)
        return runner.op.name, runner.size.shape, DTYPE_LABEL[runner.dtype], medians, len(digests) == 1
    finally:
        vector_isa.restore(emulator.settings())
        device.close()


def flag_stalls(case_results: list) -> None:
    """Mark a contender that ran STALL times slower with more threads than with one: on a shared
    2-core machine, a thread that waits for a core taken by someone else stalls the whole call (the
    OpenMP barrier of PyTorch spins on its own core meanwhile, so PyTorch suffers most). Such rows
    are kept in the tables, flagged, and left out of the headline."""
    single = next((r for r in case_results if r.threads == 1), None)
    if single is None:
        return
    for r in case_results:
        if r.threads == 1:
            continue
        if r.torch_s and single.torch_s and r.torch_s > STALL * single.torch_s:
            r.stalled.append("torch")
        if r.npuemu_s > STALL * single.npuemu_s:
            r.stalled.append("npuemu")


def describe(result: Result) -> str:
    torch_part = ""
    if result.torch_s:
        torch_part = "torch %8.3f ms  speedup %5.2f×  " % (result.torch_s * 1e3, result.speedup)
    return "  %-5s %-20s %-8s %d thr: npuemu %8.3f ms  %s%6.2f GB/s (%3.0f%% of triad)  %s%s%s" % (
        result.size.label, result.size.shape, DTYPE_LABEL[result.dtype], result.threads, result.npuemu_s * 1e3,
        torch_part, result.gbps, result.percent_of_triad, result.check,
        "  (stalled: %s)" % ", ".join(result.stalled) if result.stalled else "", describe_roofline(result))


def describe_roofline(result: Result) -> str:
    ceiling = result.ceiling
    if ceiling is None:
        return ""
    if ceiling.gbps is None:
        return "\n      roofline: no compute ceiling (%s)" % ceiling.why_not
    return "\n      roofline: in cache %.2f Gelem/s = %.2f GB/s (%s, %d calls), %s-bound, %.0f%% of attainable" % (
        ceiling.elements_per_s / 1e9, ceiling.gbps, " vs ".join(ceiling.shapes), ceiling.calls, result.bound,
        result.percent_of_attainable)


# ---------------------------------------------------------------------------------------------
# small-call profile


def small_profile(torch, calls: int, budget) -> dict:
    """LogSigmoidBackward 4x4 float32: median of the whole call, its steps, and a cProfile."""
    threads = emulator.settings().threads
    runner = CaseRunner(LOG_SIGMOID, LOG_SIGMOID.sizes[0], nn.ACL_FLOAT, torch, budget)
    device = BenchDevice()
    try:
        tensors = {name: device.upload(raw.shape, runner.case.inputs[name].dtype, [(0, raw)]).tensor
                   for name, raw in runner.host.items()}
        tensors["gradInput"] = device.output(runner.case.output[1], nn.ACL_FLOAT).tensor
        call = NpuemuCall(device, LOG_SIGMOID.first_phase(), LOG_SIGMOID.second_phase(),
                          LOG_SIGMOID.npuemu_args(tensors, {}))
        contenders = {"npuemu": call}
        if torch is not None:
            contenders["torch"] = LOG_SIGMOID.torch_setup(runner.tensors, {}, runner.torch_out)
        medians, _ = interleaved_medians(contenders, budget)
        return {"threads": threads, "median_us": medians["npuemu"] * 1e6,
                "torch_us": medians["torch"] * 1e6 if "torch" in medians else None,
                "steps": call.phase_medians(calls), "calls": calls, "text": profile_text(call, calls)}
    finally:
        device.close()


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Optional[list]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", help="comma-separated operator names (default: all of them)")
    parser.add_argument("--sizes", default="4x4,1e5,large", help="size classes (default: 4x4,1e5,large)")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--no-torch", action="store_true", help="npuemu and triad only")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--no-c-path", action="store_true", help="skip the C path (the toolkit from C++ vs Python)")
    parser.add_argument("--no-sanitizer-cost", action="store_true", help="skip timing each NPUEMU_SANITIZE level")
    parser.add_argument("--no-isa", action="store_true",
                        help="skip timing the large cases on each vector instruction set (widest down to AVX2)")
    parser.add_argument("--quick", action="store_true", help="2 rounds per case: a smoke test, not a measurement")
    parser.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"), help="'-' to write no file")
    return parser.parse_args(argv)


def main(argv: Optional[list] = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    torch = load_torch(args.no_torch)
    info = machine_info(torch)
    names = args.ops.split(",") if args.ops else [op.name for op in OPERATORS]
    unknown = set(names) - {op.name for op in OPERATORS}
    if unknown:
        raise SystemExit("unknown operator(s) %s: expected some of %s" % (sorted(unknown), [op.name for op in OPERATORS]))
    ops = [op for op in OPERATORS if op.name in names]
    sizes = args.sizes.split(",")
    dtypes = [d for d in FLOAT_DTYPES if DTYPE_LABEL[d] in args.dtypes.split(",")]
    threads = tuple(int(t) for t in args.threads.split(","))

    notes = []
    if torch is None:
        notes.append("**PyTorch is not installed** (or --no-torch): npuemu and the triad only; npuemu's results "
                     "are checked against the NumPy float64 formulas (not CtcLoss's large case).")
    validations = []
    if torch is not None:
        log("== PyTorch references against NumPy float64")
        validations = validate_references(ops, torch)
        for line in validations:
            log("  " + line)

    skips, results, memory = [], [], []
    profile = None
    if LOG_SIGMOID in ops and LOG_SIGMOID.available() and "4x4" in sizes:
        log("== small-tensor profile (LogSigmoidBackward 4x4)")
        profile = small_profile(torch, 200 if args.quick else 3000, QUICK if args.quick else BUDGETS["4x4"])
        log("  whole call %.1f µs" % profile["median_us"])

    c_path_lines, c_path_failed = None, False
    if not args.no_c_path:
        log("== C path (the same calls from C++ through the toolkit and from Python)")
        try:
            measured = c_path.measure(c_path.QUICK_ROUNDS if args.quick else c_path.ROUNDS, log)
            c_path_lines = c_path.table_lines(measured)
            c_path_failed = measured.failed
        except RuntimeError as error:  # the toolkit did not build or run: a failure of npuemu's
            c_path_lines, c_path_failed = ["**Failed**: %s" % error], True
        for line in c_path_lines:
            log("  " + line)

    sanitizer_lines = None
    if not args.no_sanitizer_cost:
        log("== sanitizer cost (float32, %d threads, each level in interleaved rounds)" % max(THREADS))
        sanitizer_lines = sanitizer_cost.table_lines(sanitizer_costs(ops, sizes, args.quick))

    isas = () if args.no_isa else vector_isa.timed_isas(_kernels.machine_vector_isa())
    isa_rows = []
    for op in ops:
        if not op.available():
            skips.append("%s: aclnn_api has no %s yet, skipped" % (op.name, op.first_phase_name))
            log("== %s: skipped (aclnn_api has no %s yet)" % (op.name, op.first_phase_name))
            continue
        log("== %s" % op.name)
        for index, size in enumerate(op.sizes):
            if size.label not in sizes:
                continue
            for dtype in dtypes:
                if dtype not in op.dtypes():
                    skips.append("%s %s %s: the operator does not run this dtype on %s (its declaration)" % (
                        op.name, size.shape, DTYPE_LABEL[dtype], emulator.settings().profile.family))
                    continue
                runner = CaseRunner(op, size, dtype, torch, QUICK if args.quick else BUDGETS[size.label])
                rejected, case_results = "", []
                for n in threads:
                    result, rejected = runner.run(n)
                    if result is None:
                        break
                    case_results.append(result)
                    log(describe(result))
                flag_stalls(case_results)
                for r in case_results:
                    if r.stalled:
                        log("  ^ %d threads flagged as stalled (%s more than %.0f× slower than with 1 thread)"
                            % (r.threads, ", ".join(r.stalled), STALL))
                results += case_results
                if rejected:
                    skips.append("%s %s %s: %s" % (op.name, size.shape, DTYPE_LABEL[dtype], rejected))
                    log("  %s %s: skipped, %s" % (size.shape, DTYPE_LABEL[dtype], rejected))
                    continue
                if size.large and isas:
                    row = isa_costs(runner, isas)
                    if row is not None:
                        isa_rows.append(row)
                        log("  %s %s on each instruction set: %s%s" % (size.shape, DTYPE_LABEL[dtype], ", ".join(
                            "%s %.3f ms" % (isa, seconds * 1e3) for isa, seconds in row[3].items()),
                            "" if row[4] else ", DIFFERENT BITS"))
                del runner
                if size.large and not args.no_memory:
                    peak = run_child(op.name, index, dtype)
                    memory.append((op.name, size, dtype, peak))
                    log("  peak memory %s %s: %s" % (size.shape, DTYPE_LABEL[dtype], peak))

    notes.append("Each time is the median over interleaved rounds (npuemu, PyTorch, triad take turns, a burst of "
                 "back-to-back calls each) after warm-up; budgets per size class: %s." % ", ".join(
                     "%s %.1f s (%d to %d rounds%s%s)" % (
                         k, b.seconds, b.min_rounds, b.max_rounds, ", at most %.0f s" % b.cap if b.cap else "",
                         ", bursts of ~%.0f ms" % (b.burst * 1e3) if b.burst else ", one call per round")
                     for k, b in BUDGETS.items())
                 if not args.quick else "--quick: 2 rounds per case, a smoke test, not a measurement.")
    notes.append("Whole run: %.0f s; load average (1, 5, 15 min) at the end: %.2f %.2f %.2f on %d cores."
                 % ((time.perf_counter() - started,) + os.getloadavg() + (os.cpu_count(),)))
    text = render(info, notes, validations, profile, results, skips, memory, threads,
                  {op.name: op.torch_path for op in ops}, c_path_lines, sanitizer_lines,
                  vector_isa.table_lines(isa_rows, isas) if isa_rows else None)
    if args.output != "-":
        previous = ""
        if os.path.exists(args.output):
            with open(args.output) as f:
                previous = f.read()
        with open(args.output, "w") as f:
            f.write(merge(previous, info["CPU"], text))
    log("")
    log(text)
    wrong = ([r for r in results if "WRONG" in r.check] + [v for v in validations if "MISMATCH" in v]
             + [row for row in isa_rows if not row[4]])
    return 1 if wrong or c_path_failed else 0


if __name__ == "__main__":
    sys.exit(main())
