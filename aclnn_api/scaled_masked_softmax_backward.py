"""aclnnScaledMaskedSoftmaxBackward (spec/OPS.md §5, decisions §10 #5, #7).

For each row of the last axis S2 of [B, N, S1, S2]: p = gradOutput * y, s = sum(p),
out = (p - s * y) * scale, then out = 0 where mask (broadcast over B and N) is true. Computed in
fp32 (fp16/bf16 rounded to nearest-even on output), row sums in a fixed binary-tree order.

Chips follow the library's code, not its docs (§10): the op_api accepts FLOAT, FLOAT16 and
BFLOAT16 on every chip, and the kernel binaries decide what runs: f32/f16/bf16 on Ascend910B,
Ascend910_93 and Ascend950, f32/f16 on Ascend310P, nothing on Ascend910. A valid call that has no
kernel fails after every parameter check with 561003 (kernel not found); an empty one succeeds
first, as the framework skips tiling and kernel selection when the output is empty.
"""
from __future__ import annotations

import numpy as np

from emulator.errors import AclError

from . import _kernels, checks, status
from emulator.dtypes import ACL_BF16, ACL_BOOL, ACL_FLOAT, ACL_FLOAT16, ACL_FORMAT_FRACTAL_NZ, dtype_name, format_name
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnScaledMaskedSoftmaxBackward"
DATA_DTYPES = (ACL_FLOAT, ACL_FLOAT16, ACL_BF16)
# The kernel binaries shipped per chip (§5.3); the op_api itself does not gate dtypes by chip.
KERNEL_DTYPES = {
    "Ascend910B": DATA_DTYPES,
    "Ascend910_93": DATA_DTYPES,
    "Ascend950": DATA_DTYPES,
    "Ascend310P": (ACL_FLOAT, ACL_FLOAT16),
}
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
    """gradOutput is [B, N, S1, S2] with S2 within the chip's limit (negative dims cannot reach
    here: aclCreateTensor already refuses them)."""
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


def check_kernel_exists(chip: str, data_type: int) -> None:
    """The step after tiling: a chip without a kernel binary for this dtype fails with 561003."""
    available = KERNEL_DTYPES.get(chip, ())
    if data_type not in available:
        raise AclError(status.ACLNN_ERR_INNER_FIND_KERNEL_ERROR,
                       "gradOutput: expected a dtype with a ScaledMaskedSoftmaxGradV2 kernel on %s (%s), found %s"
                       % (chip, ", ".join(dtype_name(d) for d in available) or "none", dtype_name(data_type)))


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
    checks.dtype_in("gradOutput", gradOutput, DATA_DTYPES)
    checks.dtype_in("y", y, DATA_DTYPES)
    checks.dtype_in("out", out, DATA_DTYPES)
    checks.dtype_is("mask", mask, ACL_BOOL, "a mask")
    checks.same_dtype("y", y, "gradOutput", gradOutput)
    checks.same_dtype("out", out, "gradOutput", gradOutput)
    check_formats(chip, {"gradOutput": gradOutput, "y": y, "mask": mask, "out": out})
    check_grad_output_shape(gradOutput, chip)
    checks.same_shape("y", y, "gradOutput", gradOutput)
    checks.same_shape("out", out, "gradOutput", gradOutput)
    check_mask_shape(mask, gradOutput)
    if fix_triu_mask:
        checks.fail("fixTriuMask: expected false (the upper-triangular mask is not supported), found true")
    if out.is_empty:
        return None
    check_kernel_exists(chip, gradOutput.data_type)
    shape = gradOutput.view_dims
    return KernelLaunch(_kernels.scaled_masked_softmax_backward,
                        (view("gradOutput", gradOutput), view("y", y), view("mask", mask, shape),
                         view("out", out), fp32_attribute(scale)))


aclnnScaledMaskedSoftmaxBackward = second_phase(OP)
