"""The narrower instruction sets' code: each large case timed on every vector instruction set this
machine has, from the widest down to AVX2 (NPUEMU_VECTOR_ISA's values), in interleaved rounds of one
run, each as a ratio to the next wider set.

A `make bench` on an AVX-512 machine otherwise never runs the AVX2 code that machines without AVX-512
(many CI runners) take, and three defects of it that made ScaledMaskedSoftmax and its backward 4-7x
slower than AVX-512 stayed invisible (docs/performance.md, "On AVX2 machines"). Half the vector width
explains up to about 2x where a kernel computes, and about 1x where memory bounds it; a ratio beyond
that is the narrower code's own defect. The outputs of every instruction set are compared bit for bit
(results never depend on the vector width).

The instruction set is switched between rounds on the kernels themselves (`_kernels.set_vector_isa`,
what the settings hand them at each launch), so one device and one set of tensors serve every set."""
from __future__ import annotations

from typing import Callable

from aclnn_api import _kernels
from emulator.config import VECTOR_ISAS

NARROWEST = "avx2"
UNEXPLAINED = 2.5   # a ratio to the next wider set above this is more than the width explains (‼)


def timed_isas(widest: str) -> tuple:
    """The instruction sets to time on a machine whose widest is `widest`: from it down to AVX2, or
    none when there is nothing narrower to compare it with."""
    order = [isa for isa in VECTOR_ISAS if isa != "auto"]
    if widest not in order or order.index(widest) >= order.index(NARROWEST):
        return ()
    return tuple(order[order.index(widest):order.index(NARROWEST) + 1])


class OnIsa:
    """A call made with the kernels on instruction set `isa`."""

    def __init__(self, call: Callable[[], None], isa: str):
        self.call, self.isa = call, isa

    def __call__(self) -> None:
        _kernels.set_vector_isa(self.isa)
        self.call()


def contenders(call: Callable[[], None], isas: tuple) -> dict:
    return {isa: OnIsa(call, isa) for isa in isas}


def restore(settings) -> None:
    """The kernels' instruction set as the settings in force have it."""
    _kernels.set_vector_isa(settings.vector_isa)


def table_lines(rows: list, isas: tuple) -> list:
    """rows: (operator, shape, dtype, {isa: seconds}, same bits) -> Markdown lines, each set's time
    also as a ratio to the next wider set's (the width, or the BF16 extension, is what differs)."""
    pairs = list(zip(isas[1:], isas))
    lines = ["| operator | size | dtype | " + " | ".join("%s ms" % isa for isa in isas) + " | "
             + " | ".join("%s / %s" % pair for pair in pairs) + " | same bits |",
             "|---|---|---|" + "---:|" * (len(isas) + len(pairs)) + "---|"]
    for op, shape, dtype, medians, same in rows:
        ratios = [medians[narrower] / medians[wider] for narrower, wider in pairs]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            op, shape, dtype, " | ".join("%.3f" % (medians[isa] * 1e3) for isa in isas),
            " | ".join("%.2f%s" % (r, " ‼" if r > UNEXPLAINED else "") for r in ratios),
            "yes" if same else "**NO**"))
    return lines
