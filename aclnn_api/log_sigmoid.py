"""aclnnLogSigmoid and aclnnLogSigmoidForward: out = log(sigmoid(self)).

The library implements both operators with one body, as this module does: out = min(x, 0) −
log1p(e^−|x|), computed in fp32 (fp16/bf16 rounded to nearest-even on output). The Forward
variant has a third tensor, `buffer`, which the library never null-checks, never validates and
never writes: any buffer, null included, is accepted and left as it is. No rank limit, no format
check; a negative dim or a view of more than 2^37 elements (checks.MAX_VIEW_ELEMENTS) in self or
out is rejected at the shape step; an empty self succeeds with workspace 0 and nothing to run.
docs/ops/log_sigmoid.md has the checks in order.

The module declares both operators (DECLARATIONS): they share the library's source file, one C
header (aclnnop/aclnn_logsigmoid.h), the kernel and the doc page.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _kernels, checks
from emulator.dtypes import ACL_BF16, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnLogSigmoid"
OP_FORWARD = "aclnnLogSigmoidForward"
DTYPES = ChipDtypes((ACL_FLOAT16, ACL_FLOAT), (ACL_BF16,))  # A2, A3 and 950 add BFLOAT16


def plan(op: str, self: aclTensor, out: aclTensor) -> Optional[KernelLaunch]:
    """The body both operators share, checks in the library's order; `op` names the operator in the
    kernel's messages."""
    checks.not_null(self=self, out=out)
    chip = soc().family
    allowed = DTYPES.on(chip)
    checks.dtype_in("self", self, allowed, chip)
    checks.dtype_in("out", out, allowed, chip)
    checks.same_dtype("out", out, "self", self)
    checks.valid_shapes(self=self, out=out)
    checks.same_shape("out", out, "self", self)
    if self.is_empty:
        return None
    return KernelLaunch(_kernels.log_sigmoid, (view("self", self), view("out", out), op))


@first_phase(OP)
def aclnnLogSigmoidGetWorkspaceSize(self: aclTensor, out: aclTensor):
    return plan(OP, self, out)


# `buffer` is an output of the prototype (as in PyTorch's log_sigmoid_forward), so the executor
# lists it among its outputs; it is not looked at, and the kernel never writes it.
@first_phase(OP_FORWARD, outputs=("out", "buffer"))
def aclnnLogSigmoidForwardGetWorkspaceSize(self: aclTensor, out: aclTensor, buffer: Optional[aclTensor]):
    return plan(OP_FORWARD, self, out)


aclnnLogSigmoid = second_phase(OP)
aclnnLogSigmoidForward = second_phase(OP_FORWARD)


# ------------------------------------------------------------------------------------------------
# Declarations

def reference(v: dict) -> np.ndarray:
    x = np.asarray(v["self"], dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def engine_inputs(shape: tuple, rng: np.random.Generator, label: str = "") -> SampleInput:
    return SampleInput(label or "x".join(map(str, shape)), {
        "self": TensorInput(rng.normal(size=shape) * 8), "out": TensorInput(np.full(shape, np.nan))})


def forward_engine_inputs(shape: tuple, rng: np.random.Generator, label: str = "") -> SampleInput:
    """As engine_inputs, with a buffer of self's shape (as the documentation's example has it)."""
    sample = engine_inputs(shape, rng, label)
    return SampleInput(sample.label, dict(sample.args, buffer=TensorInput(np.zeros(shape))))


def samples_of(make: Any, rng: np.random.Generator) -> list:
    small, medium = make((2, 3), rng, "2x3"), make((67, 129), rng, "67x129")
    return ([small, medium, make((), rng, "0-D"), make((1, 2, 1, 2, 1, 2, 1, 2, 3), rng, "9-D")]
            + [s.with_layout(layout, ("self", "out")) for s in (small, medium)
               for layout in ("transposed", "strided", "offset")]
            + [make((3, 0), rng, "empty"), make((0,), rng, "empty-1-D")])


def sample_inputs(rng: np.random.Generator) -> list:
    return samples_of(engine_inputs, rng)


def forward_sample_inputs(rng: np.random.Generator) -> list:
    return samples_of(forward_engine_inputs, rng)


F, H, B, D = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE
# The same checks in both operators (the Forward's buffer has none).
ERRORS = (
    ErrorInput("null self", {"self": None, "out": {"dtype": D}}, 161001, "self: expected an aclTensor"),
    ErrorInput("null out", {"out": None}, 161001, "out: expected an aclTensor"),
    ErrorInput("self dtype", {"self": {"dtype": D}}, 161002, "self: expected a dtype in"),
    ErrorInput("bf16 on 910", {"self": {"dtype": B}, "out": {"dtype": B}}, 161002,
               "self: expected a dtype in [FLOAT16, FLOAT] on Ascend910", chip="Ascend910"),
    ErrorInput("out dtype", {"out": {"dtype": D}}, 161002, "out: expected a dtype in"),
    ErrorInput("out dtype differs", {"out": {"dtype": H}}, 161002, "out: expected dtype FLOAT (the dtype of self)"),
    ErrorInput("out shape", {"out": {"shape": (3, 2)}}, 161002, "out: expected the shape of self"),
)

LOG_SIGMOID = OpDeclaration(
    name=OP, first_phase=aclnnLogSigmoidGetWorkspaceSize, second_phase=aclnnLogSigmoid,
    dtypes=DTYPES, reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS, output="out",
    shape_checked=("self", "out"), engine_inputs=engine_inputs, special_inputs=("self",),
    **declaration_files("log_sigmoid"))

LOG_SIGMOID_FORWARD = OpDeclaration(
    name=OP_FORWARD, first_phase=aclnnLogSigmoidForwardGetWorkspaceSize, second_phase=aclnnLogSigmoidForward,
    dtypes=DTYPES, reference=reference, sample_inputs=forward_sample_inputs, error_inputs=ERRORS, output="out",
    shape_checked=("self", "out"), engine_inputs=forward_engine_inputs, special_inputs=("self",),
    sample="samples/log_sigmoid_forward.py", doc="docs/ops/log_sigmoid.md")

DECLARATIONS = (LOG_SIGMOID, LOG_SIGMOID_FORWARD)
