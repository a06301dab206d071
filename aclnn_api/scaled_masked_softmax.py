"""aclnnScaledMaskedSoftmax: softmax of scaled, masked scores along the last axis, as in fused attention.

For each row of the last axis S2 of x [B, N, S1, S2]: z = scale * x, z = -10000 where mask
(broadcast over B and N) is true, y = exp(z - max z) / sum exp(z - max z). Computed in fp32 (for
FLOAT16 the product scale * x is rounded to fp16 first, as the kernel multiplies in fp16), output
rounded to nearest-even; the row's max and sum in a fixed binary-tree order.

Follows the library's code where it and its docs differ: a null x, mask or y is 561103
(ACLNN_ERR_INNER_NULLPTR), not the documented 161001. The op_api accepts FLOAT, FLOAT16 and
BFLOAT16 on every chip; kernel binaries exist only for Ascend910B, Ascend910_93 and Ascend950, so a
valid non-empty call on Ascend910 or Ascend310P fails after every check with 561003 (kernel not
found). y's shape is checked last, as the inner API's shape inference does. A negative dim or a
view of more than 2^37 elements (checks.MAX_VIEW_ELEMENTS) is rejected at the rank step, before
the rank rule. docs/ops/scaled_masked_softmax.md has the checks in order.
"""
from __future__ import annotations

import numpy as np

from emulator.resource import live

from . import _kernels, checks, status
from emulator.dtypes import ACL_BF16, ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT32, ACL_UINT8
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .scaled_masked_softmax_backward import check_kernel_exists, fp32_attribute, last_dim_limit
from .tensor import aclTensor

OP = "aclnnScaledMaskedSoftmax"
DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16, ACL_BF16))  # the op_api does not gate dtypes by chip
# The kernel binaries shipped per chip (ScaledMaskedSoftmaxV2): none for Ascend910 and Ascend310P.
KERNEL_DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16, ACL_BF16), (), ("Ascend910B", "Ascend910_93", "Ascend950"))
MASKED_VALUE = -10000.0  # what a masked position's score becomes (not -inf)


def not_null(**tensors: object) -> None:
    """Each named argument is a live aclTensor: null is 561103, as the library's code maps its null
    check to ACLNN_ERR_INNER_NULLPTR (its docs say 161001); a destroyed one or another object 161002."""
    for name, tensor in tensors.items():
        if type(tensor) is not aclTensor or not tensor.alive:
            live(aclTensor, name, tensor, null_code=status.ACLNN_ERR_INNER_NULLPTR)


def check_mask_dims(mask: aclTensor, x: aclTensor) -> None:
    """mask is [B|1, N|1, S1, S2]: dims 0 and 1 equal to x's or 1 (in that order), then S1 and S2."""
    found = list(mask.view_dims)
    for dim in (0, 1):
        if found[dim] not in (x.view_dims[dim], 1):
            checks.fail("mask: expected dim %d to be x's %d or 1, found %d (shape %s)"
                        % (dim, x.view_dims[dim], found[dim], found))
    if found[2:] != list(x.view_dims[2:]):
        checks.fail("mask: expected its last two dims to be x's %s, found %s (shape %s)"
                    % (list(x.view_dims[2:]), found[2:], found))


def check_last_dim(x: aclTensor, chip: str) -> None:
    """0 < S2 <= 4096 (8192 on Ascend950): unlike the backward, an empty last axis is an error."""
    limit = last_dim_limit(chip)
    cols = x.view_dims[3]
    if not 0 < cols <= limit:
        checks.fail("x: expected a last dim (S2) in (0, %d] on %s, found %d (shape %s)"
                    % (limit, chip, cols, list(x.view_dims)))


@first_phase(OP)
def aclnnScaledMaskedSoftmaxGetWorkspaceSize(x: aclTensor, mask: aclTensor, scale: float, fixTriuMask: bool,
                                             y: aclTensor):
    not_null(x=x, mask=mask, y=y)
    # C passes a double and a bool: their types are fixed before the library checks anything.
    scale = checks.float_attr("scale", scale)
    fix_triu_mask = checks.bool_attr("fixTriuMask", fixTriuMask)
    chip = soc().family
    allowed = DTYPES.on(chip)
    checks.dtype_in("x", x, allowed)
    checks.dtype_is("mask", mask, ACL_BOOL, "a mask")
    checks.dtype_in("y", y, allowed)
    checks.same_dtype("y", y, "x", x)
    checks.valid_shapes(x=x, mask=mask, y=y)
    for name, tensor in (("x", x), ("mask", mask), ("y", y)):
        checks.rank_is(name, tensor, (4,))
    check_mask_dims(mask, x)
    check_last_dim(x, chip)
    if fix_triu_mask:
        checks.fail("fixTriuMask: expected false (the upper-triangular mask is not supported), found true")
    # What the library's inner API checks next (its shape inference), then what it skips when empty.
    checks.same_shape("y", y, "x", x)
    if y.is_empty:
        return None
    check_kernel_exists("x", x.data_type, "ScaledMaskedSoftmaxV2", KERNEL_DTYPES, chip)
    return KernelLaunch(_kernels.scaled_masked_softmax,
                        (view("x", x), view("mask", mask, x.view_dims), view("y", y), fp32_attribute(scale)),
                        units="rows")


aclnnScaledMaskedSoftmax = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def reference(v: dict) -> np.ndarray:
    """softmax(where(mask, -10000, x * fp32(scale))) along the last axis, in float64.

    The fp16 rounding of the product for FLOAT16 is not modelled: the samples' scales are powers of
    two, whose products are exact in fp16 (tests/test_scaled_masked_softmax.py checks other scales
    against a reference that rounds)."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = v["x"] * fp32_attribute(v["scale"])
        z = np.where(np.broadcast_to(v["mask"], z.shape), MASKED_VALUE, z)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _sample(label: str, shape: tuple, mask_shape: tuple, scale: float, rng: np.random.Generator,
            masked: float = 0.3) -> SampleInput:
    """x ~ N(0, 3^2), a mask with a share `masked` set."""
    return SampleInput(label, {
        "x": TensorInput(rng.normal(scale=3.0, size=shape)),
        "mask": TensorInput(rng.random(mask_shape) < masked, ACL_BOOL), "scale": scale, "fixTriuMask": False,
        "y": TensorInput(np.full(shape, np.nan))})


SHAPES = (  # label: x shape, mask shape, scale (powers of two: see reference), share masked
    ("2x3x4x8", (2, 3, 4, 8), (2, 3, 4, 8), 1.0, 0.3),
    ("mask B1", (2, 3, 4, 9), (2, 1, 4, 9), 0.125, 0.3),
    ("mask 1N", (2, 3, 5, 7), (1, 3, 5, 7), -2.0, 0.3),
    ("mask 11", (2, 2, 3, 33), (1, 1, 3, 33), 0.5, 0.3),
    ("S2 1", (1, 2, 3, 1), (1, 1, 3, 1), 1.0, 0.3),
    ("mostly masked", (1, 2, 8, 5), (1, 2, 8, 5), 4.0, 0.85),
    ("2x4x16x129", (2, 4, 16, 129), (2, 1, 16, 129), 0.25, 0.3),
    ("empty", (2, 0, 4, 8), (2, 1, 4, 8), 1.0, 0.3),
    ("empty S1", (1, 2, 0, 5), (1, 1, 0, 5), 1.0, 0.3),
)


def sample_inputs(rng: np.random.Generator) -> list:
    samples = [_sample(label, shape, mask_shape, scale, rng, masked)
               for label, shape, mask_shape, scale, masked in SHAPES]
    return samples + [samples[k].with_layout(layout)
                      for k in (1, 3, 6) for layout in ("transposed", "strided", "offset")]


F, H, B, D = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE
NAMES = ("x", "mask", "y")
INNER_NULLPTR = status.ACLNN_ERR_INNER_NULLPTR


def _shapes(x: tuple, mask: tuple = None) -> dict:
    """x (and mask, by default of x's shape) changed to the shapes given; y stays as it was."""
    return {"x": {"shape": x}, "mask": {"shape": mask or x}}


ERRORS = (
    ErrorInput("null x", {"x": None}, INNER_NULLPTR, "x: expected an aclTensor"),
    ErrorInput("null mask", {"mask": None}, INNER_NULLPTR, "mask: expected an aclTensor"),
    ErrorInput("null y", {"y": None, "x": {"dtype": D}}, INNER_NULLPTR, "y: expected an aclTensor"),
    ErrorInput("scale not a double", {"scale": "1.0"}, 161002, "scale: expected a double"),
    ErrorInput("fixTriuMask not a bool", {"fixTriuMask": "yes"}, 161002, "fixTriuMask: expected a bool"),
    ErrorInput("x dtype", {"x": {"dtype": ACL_INT32}}, 161002, "x: expected a dtype in"),
    ErrorInput("mask dtype", {"mask": {"dtype": ACL_UINT8}}, 161002, "mask: expected dtype BOOL"),
    ErrorInput("y dtype", {"y": {"dtype": D}}, 161002, "y: expected a dtype in"),
    ErrorInput("y not x's dtype", {"y": {"dtype": H}}, 161002, "y: expected dtype FLOAT"),
    ErrorInput("x rank", {"x": {"shape": (3, 4, 8)}}, 161002, "x: expected 4 dims"),
    ErrorInput("x of 5 dims on 950", {"x": {"shape": (1, 2, 3, 4, 8)}}, 161002, "x: expected 4 dims",
               chip="Ascend950"),
    ErrorInput("mask rank", {"mask": {"shape": (3, 4, 8)}}, 161002, "mask: expected 4 dims"),
    ErrorInput("y rank", {"y": {"shape": (2, 3, 32)}}, 161002, "y: expected 4 dims"),
    ErrorInput("mask B", {"mask": {"shape": (4, 3, 4, 8)}}, 161002, "mask: expected dim 0 to be x's 2 or 1"),
    ErrorInput("mask N", {"mask": {"shape": (2, 2, 1, 8)}}, 161002, "mask: expected dim 1 to be x's 3 or 1"),
    ErrorInput("mask S1", {"mask": {"shape": (2, 3, 1, 8)}}, 161002, "mask: expected its last two dims"),
    ErrorInput("mask S2", {"mask": {"shape": (1, 1, 4, 9)}}, 161002, "mask: expected its last two dims"),
    ErrorInput("S2 0", _shapes((2, 3, 4, 0)), 161002, "x: expected a last dim (S2) in (0, 4096]"),
    ErrorInput("S2 over 4096", _shapes((1, 1, 1, 4097)), 161002, "x: expected a last dim (S2) in (0, 4096]"),
    ErrorInput("S2 over 8192 on 950", _shapes((1, 1, 1, 8193)), 161002, "in (0, 8192] on Ascend950",
               chip="Ascend950"),
    ErrorInput("S2 0 on 950", _shapes((1, 1, 2, 0)), 161002, "in (0, 8192] on Ascend950", chip="Ascend950"),
    ErrorInput("fixTriuMask true", {"fixTriuMask": True}, 161002, "fixTriuMask: expected false"),
    ErrorInput("fixTriuMask 1 on 950", {"fixTriuMask": 1}, 161002, "fixTriuMask: expected false", chip="Ascend950"),
    ErrorInput("fixTriuMask checked when empty", {**_shapes((2, 0, 4, 8), (1, 1, 4, 8)), "fixTriuMask": True},
               161002, "fixTriuMask: expected false"),
    ErrorInput("y shape", {"y": {"shape": (1, 3, 4, 8)}}, 161002, "y: expected the shape of x"),
    ErrorInput("y shape when empty", {**_shapes((2, 0, 4, 8), (2, 1, 4, 8)), "y": {"shape": (2, 0, 4, 9)}}, 161002,
               "y: expected the shape of x"),
    ErrorInput("no kernel on 910", {}, 561003, "expected a dtype with a ScaledMaskedSoftmaxV2 kernel on Ascend910",
               chip="Ascend910"),
    ErrorInput("no kernel on 310P", {"x": {"dtype": H}, "y": {"dtype": H}}, 561003,
               "kernel on Ascend310P (none), found FLOAT16", chip="Ascend310P"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnScaledMaskedSoftmaxGetWorkspaceSize, second_phase=aclnnScaledMaskedSoftmax,
    dtypes=DTYPES, kernel_dtypes=KERNEL_DTYPES, reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS,
    output="y", shape_checked=NAMES, **declaration_files("scaled_masked_softmax"))
