"""RESULTS.md: headline ratios, one table per operator, peak memory, the small-call profile, the machine."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from data import DTYPE_LABEL
from roofline import Ceiling, attainable, bound

TARGET = 90.0   # % of the attainable rate a large case must reach (the project's speed issue)

SIZE_CLASSES = ("4x4", "1e5", "large")


@dataclass
class Result:
    op: str
    size: object          # cases.Size
    dtype: int
    threads: int
    npuemu_s: float
    torch_s: Optional[float]
    triad_s: float
    triad_bytes: int
    bytes_moved: int
    calls: int           # how many timed calls each median comes from
    check: str            # "ok", "unchecked: ..." or "WRONG: ..."
    torch_upcast: bool
    stalled: list = field(default_factory=list)   # contenders that ran far slower with more threads
    ceiling: Optional[Ceiling] = None              # large cases: the kernel's compute ceiling (roofline.py)

    @property
    def speedup(self) -> Optional[float]:
        return self.torch_s / self.npuemu_s if self.torch_s else None

    @property
    def gbps(self) -> float:
        return self.bytes_moved / self.npuemu_s / 1e9

    @property
    def triad_gbps(self) -> float:
        return self.triad_bytes / self.triad_s / 1e9

    @property
    def percent_of_triad(self) -> float:
        return 100.0 * self.gbps / self.triad_gbps

    @property
    def ceiling_gbps(self) -> Optional[float]:
        return self.ceiling.gbps if self.ceiling is not None else None

    @property
    def bound(self) -> str:
        return bound(self.triad_gbps, self.ceiling_gbps)

    @property
    def attainable_gbps(self) -> float:
        return attainable(self.triad_gbps, self.ceiling_gbps)

    @property
    def percent_of_attainable(self) -> float:
        return 100.0 * self.gbps / self.attainable_gbps

    @property
    def meets_target(self) -> bool:
        return self.percent_of_attainable >= TARGET


def ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return "—"
    value = seconds * 1e3
    for limit, pattern in ((0.1, "%.4f"), (10, "%.3f"), (100, "%.2f")):
        if value < limit:
            return pattern % value
    return "%.1f" % value


def ratio(value: Optional[float]) -> str:
    return "—" if value is None else "%.2f×" % value


def geomean(values: list) -> Optional[float]:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def mib(nbytes: float) -> str:
    value = nbytes / (1 << 20)
    return "%.1f" % value if 0 < value < 10 else "%.0f" % value


def headline(results: list, threads: tuple) -> list:
    """Geometric mean of the speedups of each operator and size class, per thread count."""
    ops = list(dict.fromkeys(r.op for r in results))
    head = "| operator | " + " | ".join("%s, %d thr" % (s, t) for s in SIZE_CLASSES for t in threads) + " |"
    lines = [head, "|" + "---|" * (1 + len(SIZE_CLASSES) * len(threads))]
    for op in ops:
        cells = [ratio(geomean([r.speedup for r in results
                                if r.op == op and r.size.label == s and r.threads == t and not r.stalled]))
                 for s in SIZE_CLASSES for t in threads]
        lines.append("| %s | %s |" % (op, " | ".join(cells)))
    return lines


def op_table(rows: list) -> list:
    lines = ["| size | shape | dtype | threads | npuemu ms | torch ms | speedup | GB/s | triad GB/s | % of triad | calls | check |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        torch_cell = ms(r.torch_s) + (" †" if r.torch_upcast and r.torch_s else "") + (" ⚠" if "torch" in r.stalled else "")
        npuemu_cell = ms(r.npuemu_s) + (" ⚠" if "npuemu" in r.stalled else "")
        lines.append("| %s | %s | %s | %d | %s | %s | %s | %.2f | %.2f | %.0f%% | %d | %s |" % (
            r.size.label, r.size.shape, DTYPE_LABEL[r.dtype], r.threads, npuemu_cell, torch_cell,
            ratio(r.speedup), r.gbps, r.triad_gbps, r.percent_of_triad, r.calls, r.check))
    return lines


def roofline_rows(results: list) -> list:
    """The large rows that took part in the roofline (those timed with a ceiling, measured or not)."""
    return [r for r in results if r.size.label == "large" and r.ceiling is not None]


def verdict(r: Result) -> str:
    """✓ or ✗, the % of the attainable rate, and the bound that applies (⚠: stalled row)."""
    mark = "✓" if r.meets_target else "✗"
    stalled = " ⚠" if r.stalled else ""
    if r.ceiling_gbps is None:
        return "%s %.0f%% of triad, no compute ceiling%s" % (mark, r.percent_of_attainable, stalled)
    return "%s %.0f%% (%s)%s" % (mark, r.percent_of_attainable, r.bound, stalled)


def roofline_headline(results: list) -> list:
    """One line per large case (operator, shape, dtype): each thread count's verdict."""
    lines, cases = [], {}
    for r in roofline_rows(results):
        cases.setdefault((r.op, r.size.shape, r.dtype), []).append(r)
    for (op, shape, dtype), rows in cases.items():
        lines.append("- %s %s %s: %s" % (op, shape, DTYPE_LABEL[dtype], ", ".join(
            "%d thr %s" % (r.threads, verdict(r)) for r in rows)))
    return lines


def roofline_table(rows: list) -> list:
    lines = ["| size | shape | dtype | threads | npuemu GB/s | triad GB/s | in-cache shapes | in-cache calls "
             "| in cache G/s | compute ceiling GB/s | bound | attainable GB/s | %% of attainable | ≥ %.0f%% |" % TARGET,
             "|---|---|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|---|"]
    reasons = []
    for r in rows:
        c = r.ceiling
        if c.gbps is None:
            reasons.append(c.why_not)
            cache_cells = "%s | %s | — | — ¹ | unknown" % (" vs ".join(c.shapes) or "—", c.calls or "—")
        else:
            cache_cells = "%s | %d | %.3f %s | %.2f | %s" % (" vs ".join(c.shapes), c.calls, c.elements_per_s / 1e9,
                                                          c.unit, c.gbps, r.bound)
        lines.append("| %s | %s | %s | %d | %.2f | %.2f | %s | %.2f | %.0f%% | %s |" % (
            r.size.label, r.size.shape, DTYPE_LABEL[r.dtype], r.threads, r.gbps, r.triad_gbps, cache_cells,
            r.attainable_gbps, r.percent_of_attainable, ("✓" if r.meets_target else "✗") + (" ⚠" if r.stalled else "")))
    if reasons:  # the attainable rate is then the triad's: an upper bound
        lines += ["", "¹ no compute ceiling, the triad alone bounds the rate: " + "; ".join(dict.fromkeys(reasons)) + "."]
    return lines


ROOFLINE_NOTE = ("Roofline: attainable = min(triad GB/s, compute ceiling GB/s). The compute ceiling is the same "
                 "kernel, dtype and thread count with its data in L2: the whole two-phase call on the two in-cache "
                 "shapes, timed in the row's own rounds; the difference of their medians over the difference of their "
                 "elements of work (elem: output elements; cell: cells of CtcLoss's alpha lattice) is the kernel's "
                 "cost per element (the call's fixed cost cancels), given in G/s and as GB/s at the large case's "
                 "bytes per element. `compute`: the kernel computes slower than memory "
                 "delivers, so the bandwidth is out of its reach; `memory`: it could go as fast as the triad.")


def memory_table(memory: list) -> list:
    lines = ["| operator | shape | dtype | RSS at start MiB | peak RSS MiB | inputs + output MiB | workspace MiB | budget MiB | within |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for op, size, dtype, m in memory:
        if "error" in m:
            lines.append("| %s | %s | %s | error: %s | | | | | |" % (op, size.shape, DTYPE_LABEL[dtype], m["error"]))
            continue
        data = m["inputs"] + m["output"]
        budget = data + m["workspace"] + m["allowance"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            op, size.shape, DTYPE_LABEL[dtype], mib(m["baseline"]), mib(m["peak"]), mib(data), mib(m["workspace"]), mib(budget),
            "yes" if m["peak"] <= budget else "**no** (+%s MiB)" % mib(m["peak"] - budget)))
    return lines


def render(info: dict, notes: list, validations: list, profile: Optional[dict], results: list, skips: list,
           memory: list, threads: tuple, torch_paths: dict, c_path: Optional[list] = None,
           sanitizer: Optional[list] = None, isas: Optional[list] = None) -> str:
    """The section of RESULTS.md for this run's CPU (merge() puts it beside the other CPUs')."""
    out = [CPU_MARK % info["CPU"], "## %s" % info["CPU"], ""]
    out += ["Generated by `make bench` (`bench/run.py`) on %s (commit %s); see bench/README.md for what is measured."
            % (info["date"], info.get("commit", "unknown")), ""]
    out += ["speedup = PyTorch CPU time / npuemu time on the same data (> 1: npuemu is faster). "
            "The machine is shared and noisy: read the ratios, not the absolute times.", ""]
    out += ["- " + note for note in notes]
    out += ["", "### Headline: speedup over PyTorch CPU (geometric mean over dtypes, stalled rows left out)", ""]
    out += headline(results, threads) if any(r.speedup for r in results) else ["(no PyTorch: no ratios)"]
    if roofline_rows(results):
        out += ["", "### Roofline: large cases at ≥ %.0f%% of the attainable rate (✓) or not (✗)" % TARGET, ""]
        out += roofline_headline(results)
    if skips:
        out += ["", "### Skipped", ""] + ["- " + line for line in skips]
    if validations:
        out += ["", "### PyTorch references checked against NumPy float64", ""]
        out += ["- " + line for line in validations]
    for op in dict.fromkeys(r.op for r in results):
        out += ["", "### %s" % op, "", "PyTorch path: %s" % torch_paths[op], ""]
        out += op_table([r for r in results if r.op == op])
        rows = roofline_rows([r for r in results if r.op == op])
        if rows:
            out += ["", "Roofline of the large cases:", ""] + roofline_table(rows)
    if roofline_rows(results):
        out += ["", ROOFLINE_NOTE]
    if any(r.stalled for r in results):
        out += ["", "⚠ stalled: more than twice as slow with 2 threads as with 1, i.e. a thread waited for a core "
                "that another user's process held (the machine's load average is below). Left out of the headline."]
    if any(r.torch_upcast and r.torch_s for r in results):
        out += ["", "† PyTorch CPU has no kernel for this dtype: the time is its float32 kernel plus the casts a user needs."]
    if memory:
        out += ["", "### Peak memory of the large cases (fresh process, npuemu only, %d threads)" % 2, ""]
        out += ["budget = inputs + output + declared workspace + 64 MiB (interpreter, NumPy, the extension, "
                "256 KiB staging pieces). Device memory is host memory here, so a peak within budget says npuemu "
                "makes no hidden copy of the data.", ""]
        out += memory_table(memory)
    if profile:
        out += ["", "### Small-tensor profile: LogSigmoidBackward 4x4 float32, %d threads" % profile["threads"], ""]
        out += ["Whole two-phase call (GetWorkspaceSize + second phase + synchronize_stream): median **%.1f µs** "
                "(PyTorch's log_sigmoid_backward.grad_input on the same data: %s)." % (
                    profile["median_us"], "%.1f µs" % profile["torch_us"] if profile.get("torch_us") else "—"), ""]
        out += ["| step | median µs |", "|---|---:|"]
        out += ["| %s | %.1f |" % (name, us) for name, us in profile["steps"].items()]
        out += ["", "cProfile of %d calls, top functions by own time (cProfile's overhead inflates the "
                "absolute numbers; the ranking is what matters):" % profile["calls"], "", "```", profile["text"], "```"]
    if c_path:
        out += ["", "### C path: the toolkit from C++ against the same calls from Python", ""] + c_path
    if sanitizer:
        out += ["", "### Sanitizer cost: each NPUEMU_SANITIZE level, the whole call, same run (float32, 2 threads)",
                "", "`full` (the default) tracks order, ranges written and host memory handed to copies; `off` "
                "checks only what the card itself faults on."] + [""] + sanitizer
    if isas:
        out += ["", "### Vector instruction sets: the large cases on each, same run (2 threads)", "",
                "Each case's whole call with the kernels on each instruction set this machine has, from the "
                "widest down to AVX2 (`NPUEMU_VECTOR_ISA`), in interleaved rounds, and its ratio to the next "
                "wider set; ‼ marks a ratio beyond what the width explains (bench/README.md). Each set's output "
                "is compared with the others' bit for bit."] + [""] + isas
    out += ["", "### Machine", ""]
    out += ["| | |", "|---|---|"] + ["| %s | %s |" % (k, v) for k, v in info.items()]
    return "\n".join(out) + "\n"


CPU_MARK = "<!-- npuemu bench: CPU %s -->"
TITLE = ["# npuemu benchmarks", "",
         "One section per CPU the benchmarks ran on, each from the latest `make bench` on that CPU: a run replaces "
         "the section of its own CPU and keeps the others (which may come from older code: each says its date and "
         "commit). The machines are not chosen: a run lands on whatever CPU the session's machine has.", ""]


def sections(text: str) -> dict:
    """{CPU: its section} of a RESULTS.md (empty for a file without CPU sections)."""
    found, cpu, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith(CPU_MARK.split("%s")[0]) and line.endswith(CPU_MARK.split("%s")[1]):
            if cpu is not None:
                found[cpu] = "\n".join(lines).rstrip() + "\n"
            cpu, lines = line[len(CPU_MARK.split("%s")[0]):-len(CPU_MARK.split("%s")[1])], [line]
        elif cpu is not None:
            lines.append(line)
    if cpu is not None:
        found[cpu] = "\n".join(lines).rstrip() + "\n"
    return found


def merge(previous: str, cpu: str, section: str) -> str:
    """RESULTS.md with `section` as the section of `cpu` (first) and the other CPUs' sections of `previous`."""
    kept = [text for other, text in sections(previous).items() if other != cpu]
    return "\n".join(TITLE) + "\n" + "\n".join([section] + kept)

