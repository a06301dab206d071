"""aclnnScaledMaskedSoftmaxBackward: the gradient of scaled masked softmax.

For each row of the last axis S2 of [B, N, S1, S2]: p = gradOutput * y, s = sum(p),
out = (p - s * y) * scale, then out = 0 where mask (broadcast over B and N) is true. Computed in
fp32 (fp16/bf16 rounded to nearest-even on output), row sums in a fixed binary-tree order.

Chips follow the library's code, not its docs: the op_api accepts FLOAT, FLOAT16 and BFLOAT16 on
every chip, and the kernel binaries decide what runs: f32/f16/bf16 on Ascend910B, Ascend910_93 and
Ascend950, f32/f16 on Ascend310P, nothing on Ascend910. A valid call that has no kernel fails
after every parameter check with 561003 (kernel not found); an empty one succeeds first, as the
framework skips tiling and kernel selection when the output is empty. A negative dim or a view of
more than 2^37 elements (checks.MAX_VIEW_ELEMENTS) is rejected at the shape step, before the rank
and size rules. docs/ops/scaled_masked_softmax_backward.md has the checks in order.
"""
from __future__ import annotations

import numpy as np

from emulator.errors import AclError

from . import _kernels, checks, status
from emulator.dtypes import (ACL_BF16, ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_FORMAT_FRACTAL_NZ, ACL_INT32,
                             ACL_UINT8, dtype_name, format_name)
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnScaledMaskedSoftmaxBackward"
DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16, ACL_BF16))  # the op_api does not gate dtypes by chip
# The kernel binaries shipped per chip: none for the training series (Ascend910).
KERNEL_DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16), (ACL_BF16,),
                           ("Ascend910B", "Ascend910_93", "Ascend950", "Ascend310P"))
REGBASE_CHIP = "Ascend950"  # no format check and a longer last axis


def last_dim_limit(chip: str) -> int:
    return 8192 if chip == REGBASE_CHIP else 4096


def check_formats(chip: str, named: dict) -> None:
    """Outside Ascend950 no tensor may be stored as FRACTAL_NZ; every other format is accepted."""
    if chip == REGBASE_CHIP:
        return
    for name, tensor in named.items():
        if tensor.format == ACL_FORMAT_FRACTAL_NZ:
            checks.fail("%s: expected a storage format other than FRACTAL_NZ on %s, found %s"
                        % (name, chip, format_name(tensor.format)))


def check_grad_output_shape(grad_output: aclTensor, chip: str) -> None:
    """gradOutput is [B, N, S1, S2] with S2 within the chip's limit."""
    checks.rank_is("gradOutput", grad_output, (4,))
    limit = last_dim_limit(chip)
    if grad_output.view_dims[3] > limit:
        checks.fail("gradOutput: expected a last dim (S2) of at most %d on %s, found %d (shape %s)"
                    % (limit, chip, grad_output.view_dims[3], list(grad_output.view_dims)))


def check_mask_shape(mask: aclTensor, grad_output: aclTensor) -> None:
    """mask is [B|1, N|1, S1, S2]: S1 and S2 exactly, B and N equal or 1."""
    checks.rank_is("mask", mask, (4,))
    batch, heads, rows, cols = grad_output.view_dims
    found = list(mask.view_dims)
    if (found[2], found[3]) != (rows, cols):
        checks.fail("mask: expected its last two dims to be gradOutput's [%d, %d], found %s (shape %s)"
                    % (rows, cols, found[2:], found))
    if found[0] not in (batch, 1) or found[1] not in (heads, 1):
        checks.fail("mask: expected dims 0 and 1 to be gradOutput's (%d, %d) or 1, found (%d, %d) (shape %s)"
                    % (batch, heads, found[0], found[1], found))


def check_kernel_exists(name: str, data_type: int, kernel: str, kernels: ChipDtypes, chip: str) -> None:
    """The step after tiling: a chip without a binary of `kernel` for the dtype of tensor `name` (the
    `kernels` table) fails with 561003. Both softmax operators end their checks with it."""
    available = kernels.on(chip)
    if data_type not in available:
        raise AclError(status.ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                       "%s: expected a dtype with a %s kernel on %s (%s), found %s"
                       % (name, kernel, chip, ", ".join(dtype_name(d) for d in available) or "none",
                          dtype_name(data_type)))


def fp32_attribute(scale: float) -> float:
    """The double attribute as the kernel holds it: rounded to fp32 (huge values become inf)."""
    with np.errstate(over="ignore"):
        return float(np.float32(scale))


@first_phase(OP)
def aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(gradOutput: aclTensor, y: aclTensor, mask: aclTensor,
                                                     scale: float, fixTriuMask: bool, out: aclTensor):
    checks.not_null(gradOutput=gradOutput, y=y, mask=mask, out=out)
    # C passes a double and a bool: their types are fixed before the library checks anything.
    scale = checks.float_attr("scale", scale)
    fix_triu_mask = checks.bool_attr("fixTriuMask", fixTriuMask)
    chip = soc().family
    allowed = DTYPES.on(chip)
    checks.dtype_in("gradOutput", gradOutput, allowed)
    checks.dtype_in("y", y, allowed)
    checks.dtype_in("out", out, allowed)
    checks.dtype_is("mask", mask, ACL_BOOL, "a mask")
    checks.same_dtype("y", y, "gradOutput", gradOutput)
    checks.same_dtype("out", out, "gradOutput", gradOutput)
    check_formats(chip, {"gradOutput": gradOutput, "y": y, "mask": mask, "out": out})
    checks.valid_shapes(gradOutput=gradOutput, y=y, mask=mask, out=out)
    check_grad_output_shape(gradOutput, chip)
    checks.same_shape("y", y, "gradOutput", gradOutput)
    checks.same_shape("out", out, "gradOutput", gradOutput)
    check_mask_shape(mask, gradOutput)
    if fix_triu_mask:
        checks.fail("fixTriuMask: expected false (the upper-triangular mask is not supported), found true")
    if out.is_empty:
        return None
    check_kernel_exists("gradOutput", gradOutput.data_type, "ScaledMaskedSoftmaxGradV2", KERNEL_DTYPES, chip)
    shape = gradOutput.view_dims
    return KernelLaunch(_kernels.scaled_masked_softmax_backward,
                        (view("gradOutput", gradOutput), view("y", y), view("mask", mask, shape),
                         view("out", out), fp32_attribute(scale)), units="rows",
                        in_place=(("out", "gradOutput"), ("out", "y")))  # the mask is read as the row is written


aclnnScaledMaskedSoftmaxBackward = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def reference(v: dict) -> np.ndarray:
    """(p - sum(p) * y) * fp32(scale), p = gradOutput * y; 0 where the (broadcast) mask is set."""
    p = v["gradOutput"] * v["y"]
    out = (p - p.sum(axis=-1, keepdims=True) * v["y"]) * fp32_attribute(v["scale"])
    return np.where(np.broadcast_to(v["mask"], out.shape), 0.0, out)


def _sample(label: str, shape: tuple, mask_shape: tuple, scale: float, rng: np.random.Generator) -> SampleInput:
    """gradOutput ~ N(0, 1), y ~ U(0, 1), a mask with ~30% set."""
    return SampleInput(label, {
        "gradOutput": TensorInput(rng.normal(size=shape)), "y": TensorInput(rng.uniform(0.0, 1.0, size=shape)),
        "mask": TensorInput(rng.random(mask_shape) < 0.3, ACL_BOOL), "scale": scale, "fixTriuMask": False,
        "out": TensorInput(np.full(shape, np.nan))})


SHAPES = (  # label: gradOutput shape, mask shape, scale
    ("2x3x4x8", (2, 3, 4, 8), (2, 3, 4, 8), 1.0),
    ("mask B1", (2, 3, 4, 9), (2, 1, 4, 9), 0.125),
    ("mask 1N", (2, 3, 5, 7), (1, 3, 5, 7), -2.5),
    ("mask 11", (2, 2, 3, 33), (1, 1, 3, 33), 0.1),
    ("S2 1", (1, 2, 3, 1), (1, 1, 3, 1), 1.0),
    ("2x4x16x129", (2, 4, 16, 129), (2, 1, 16, 129), 0.5),
    ("empty", (2, 0, 4, 8), (2, 1, 4, 8), 1.0),
    ("empty S2", (1, 1, 2, 0), (1, 1, 2, 0), 1.0),
)


def sample_inputs(rng: np.random.Generator) -> list:
    samples = [_sample(label, shape, mask_shape, scale, rng) for label, shape, mask_shape, scale in SHAPES]
    return samples + [samples[k].with_layout(layout) for k in (1, 3, 5) for layout in ("transposed", "strided", "offset")]


F, H, B, D, NZ = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_FORMAT_FRACTAL_NZ
NAMES = ("gradOutput", "y", "mask", "out")


def _all(shape: tuple, **others: dict) -> dict:
    """Every tensor of `shape`, others changed as given."""
    return {**{name: {"shape": shape} for name in NAMES}, **others}


ERRORS = (
    ErrorInput("null gradOutput", {"gradOutput": None}, 161001, "gradOutput: expected an aclTensor"),
    ErrorInput("null y", {"y": None}, 161001, "y: expected an aclTensor"),
    ErrorInput("null mask", {"mask": None}, 161001, "mask: expected an aclTensor"),
    ErrorInput("null out", {"out": None, "gradOutput": {"dtype": D}}, 161001, "out: expected an aclTensor"),
    ErrorInput("scale not a double", {"scale": "1.0"}, 161002, "scale: expected a double"),
    ErrorInput("fixTriuMask not a bool", {"fixTriuMask": "yes"}, 161002, "fixTriuMask: expected a bool"),
    ErrorInput("gradOutput dtype", {"gradOutput": {"dtype": D}}, 161002, "gradOutput: expected a dtype in"),
    ErrorInput("y dtype", {"y": {"dtype": ACL_INT32}}, 161002, "y: expected a dtype in"),
    ErrorInput("out dtype", {"out": {"dtype": D}}, 161002, "out: expected a dtype in"),
    ErrorInput("mask dtype", {"mask": {"dtype": ACL_UINT8}}, 161002, "mask: expected dtype BOOL"),
    ErrorInput("y not gradOutput's dtype", {"y": {"dtype": H}}, 161002, "y: expected dtype FLOAT"),
    ErrorInput("out not gradOutput's dtype", {"out": {"dtype": B}}, 161002, "out: expected dtype FLOAT"),
    ErrorInput("gradOutput FRACTAL_NZ", {"gradOutput": {"format": NZ}}, 161002,
               "gradOutput: expected a storage format other than FRACTAL_NZ"),
    ErrorInput("mask FRACTAL_NZ", {"mask": {"format": NZ}}, 161002, "mask: expected a storage format other than"),
    ErrorInput("out FRACTAL_NZ", {"out": {"format": NZ}, "y": {"shape": (2, 3, 4)}}, 161002,
               "out: expected a storage format other than"),
    ErrorInput("gradOutput rank", _all((3, 4, 8)), 161002, "gradOutput: expected 4 dims"),
    ErrorInput("gradOutput of 5 dims on 950", _all((1, 2, 3, 4, 8)), 161002, "gradOutput: expected 4 dims",
               chip="Ascend950"),
    ErrorInput("S2 over 4096", _all((1, 1, 1, 4097)), 161002, "gradOutput: expected a last dim (S2) of at most 4096"),
    ErrorInput("S2 over 8192 on 950", _all((1, 1, 1, 8193)), 161002, "at most 8192 on Ascend950", chip="Ascend950"),
    ErrorInput("y shape", {"y": {"shape": (1, 3, 4, 8)}}, 161002, "y: expected the shape of gradOutput"),
    ErrorInput("out shape", {"out": {"shape": (2, 3, 8, 4)}}, 161002, "out: expected the shape of gradOutput"),
    ErrorInput("mask rank", {"mask": {"shape": (3, 4, 8)}}, 161002, "mask: expected 4 dims"),
    ErrorInput("mask S1", {"mask": {"shape": (2, 3, 1, 8)}}, 161002, "mask: expected its last two dims"),
    ErrorInput("mask S2", {"mask": {"shape": (2, 3, 4, 1)}}, 161002, "mask: expected its last two dims"),
    ErrorInput("mask S1 before B", {"mask": {"shape": (4, 3, 1, 8)}}, 161002, "mask: expected its last two dims"),
    ErrorInput("mask B", {"mask": {"shape": (4, 3, 4, 8)}}, 161002, "mask: expected dims 0 and 1"),
    ErrorInput("shapes checked when empty", {**_all((2, 0, 4, 8)), "mask": {"shape": (2, 0, 4, 7)}}, 161002,
               "mask: expected its last two dims"),
    ErrorInput("mask N", {"mask": {"shape": (2, 2, 4, 8)}, "fixTriuMask": True}, 161002, "mask: expected dims 0 and 1"),
    ErrorInput("fixTriuMask true", {"fixTriuMask": True}, 161002, "fixTriuMask: expected false"),
    ErrorInput("fixTriuMask 1 on 950", {"fixTriuMask": 1}, 161002, "fixTriuMask: expected false", chip="Ascend950"),
    ErrorInput("fixTriuMask checked when empty", {**_all((2, 0, 4, 8)), "fixTriuMask": True}, 161002,
               "fixTriuMask: expected false"),
    ErrorInput("no kernel on 910", {}, 561003, "expected a dtype with a ScaledMaskedSoftmaxGradV2 kernel on Ascend910",
               chip="Ascend910"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize, second_phase=aclnnScaledMaskedSoftmaxBackward,
    dtypes=DTYPES, kernel_dtypes=KERNEL_DTYPES, reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS,
    output="out", shape_checked=NAMES, **declaration_files("scaled_masked_softmax_backward"))
