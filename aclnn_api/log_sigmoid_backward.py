"""aclnnLogSigmoidBackward: the gradient of logsigmoid.

gradInput = gradOutput / (1 + e^self), computed in fp32 (fp16/bf16 rounded to nearest-even on
output). `buffer` is only required to be non-null: the library never reads it. No rank limit, no
format check; a negative dim or a view of more than 2^37 elements (checks.MAX_VIEW_ELEMENTS) in
gradOutput, self or gradInput is rejected at the shape step; empty gradOutput or self succeeds
with workspace 0 and nothing to run. docs/ops/log_sigmoid_backward.md has the checks in order.
"""
from __future__ import annotations

import numpy as np

from . import _kernels, checks
from emulator.dtypes import ACL_BF16, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnLogSigmoidBackward"
DTYPES = ChipDtypes((ACL_FLOAT16, ACL_FLOAT), (ACL_BF16,))  # A2, A3 and 950 add BFLOAT16


@first_phase(OP)
def aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput: aclTensor, self: aclTensor, buffer: aclTensor,
                                            gradInput: aclTensor):
    checks.not_null(gradOutput=gradOutput, self=self, buffer=buffer, gradInput=gradInput)
    chip = soc().family
    allowed = DTYPES.on(chip)
    checks.dtype_in("gradOutput", gradOutput, allowed, chip)
    checks.dtype_in("self", self, allowed, chip)
    checks.same_dtype("gradInput", gradInput, "gradOutput", gradOutput)
    checks.same_dtype("gradInput", gradInput, "self", self)
    checks.valid_shapes(gradOutput=gradOutput, self=self, gradInput=gradInput)
    checks.same_shape("gradOutput", gradOutput, "gradInput", gradInput)
    checks.same_shape("self", self, "gradInput", gradInput)
    if gradOutput.is_empty or self.is_empty:
        return None
    return KernelLaunch(_kernels.log_sigmoid_backward,
                        (view("gradOutput", gradOutput), view("self", self), view("gradInput", gradInput)))


aclnnLogSigmoidBackward = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def reference(v: dict) -> np.ndarray:
    with np.errstate(over="ignore"):
        return v["gradOutput"] / (1.0 + np.exp(v["self"]))


def engine_inputs(shape: tuple, rng: np.random.Generator, label: str = "") -> SampleInput:
    return SampleInput(label or "x".join(map(str, shape)), {
        "gradOutput": TensorInput(rng.normal(size=shape) * 2), "self": TensorInput(rng.normal(size=shape) * 8),
        "buffer": TensorInput(np.zeros(1)), "gradInput": TensorInput(np.full(shape, np.nan))})


def sample_inputs(rng: np.random.Generator) -> list:
    small, medium = engine_inputs((2, 3), rng, "2x3"), engine_inputs((67, 129), rng, "67x129")
    return ([small, medium, engine_inputs((), rng, "0-D"), engine_inputs((1, 2, 1, 2, 1, 2, 1, 2, 3), rng, "9-D")]
            + [s.with_layout(layout, ("gradOutput", "self", "gradInput"))
               for s in (small, medium) for layout in ("transposed", "strided", "offset")]
            + [engine_inputs((3, 0), rng, "empty"), engine_inputs((0,), rng, "empty-1-D")])


F, H, B, D = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE
ERRORS = (
    ErrorInput("null gradOutput", {"gradOutput": None, "self": {"dtype": D}}, 161001, "gradOutput: expected an aclTensor"),
    ErrorInput("null self", {"self": None}, 161001, "self: expected an aclTensor"),
    ErrorInput("null buffer", {"buffer": None}, 161001, "buffer: expected an aclTensor"),
    ErrorInput("null gradInput", {"gradInput": None}, 161001, "gradInput: expected an aclTensor"),
    ErrorInput("gradOutput dtype", {"gradOutput": {"dtype": D}}, 161002, "gradOutput: expected a dtype in"),
    ErrorInput("bf16 on 910", {name: {"dtype": B} for name in ("gradOutput", "self", "buffer", "gradInput")},
               161002, "gradOutput: expected a dtype in [FLOAT16, FLOAT] on Ascend910", chip="Ascend910"),
    ErrorInput("self dtype", {"self": {"dtype": D}}, 161002, "self: expected a dtype in"),
    ErrorInput("gradInput dtype", {"gradInput": {"dtype": H}}, 161002, "gradInput: expected dtype FLOAT"),
    ErrorInput("gradOutput shape", {"gradOutput": {"shape": (3, 2)}, "buffer": {"dtype": D}}, 161002,
               "gradOutput: expected the shape of gradInput"),
    ErrorInput("self shape", {"self": {"shape": (2, 1)}}, 161002, "self: expected the shape of gradInput"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnLogSigmoidBackwardGetWorkspaceSize, second_phase=aclnnLogSigmoidBackward,
    dtypes=DTYPES, reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS, output="gradInput",
    shape_checked=("gradOutput", "self", "gradInput"), engine_inputs=engine_inputs, special_inputs=("self",),
    **declaration_files("log_sigmoid_backward"))
