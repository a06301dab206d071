"""aclnnBinaryCrossEntropyWithLogits: binary cross-entropy of logits `self` against `target`.

loss = w·[(1 − t)·x − (1 + (p − 1)·t)·log σ(x)] per element, computed in fp32; reduction 0 writes it
(self's shape), 1 its mean and 2 its sum (one element, added in a fixed order). weight and
posWeight may be null and must broadcast to target's shape; their dtypes are not checked but cast
to the compute dtype promote(self, target). out's dtype must be target's. An empty self succeeds:
nothing runs for none, out is filled with NaN for mean and 0 for sum.
docs/ops/binary_cross_entropy_with_logits.md has the checks in order and the decisions.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _kernels, checks
from emulator.dtypes import (ACL_BF16, ACL_BOOL, ACL_COMPLEX64, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_FORMAT_NCHW,
                             ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64, ACL_UINT8, ACL_UINT16, item_size,
                             dtype_name)
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, Workspace, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnBinaryCrossEntropyWithLogits"
DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16), (ACL_BF16,))  # A2, A3 and 950 add BFLOAT16
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
NONE, MEAN, SUM = 0, 1, 2
# What an empty self gives: mean of nothing is NaN, sum of nothing is 0.
EMPTY_RESULT = {MEAN: float("nan"), SUM: 0.0}
# Weight dtypes the device's cast turns into a float compute dtype (any real-valued one).
CASTABLE = (ACL_BOOL, ACL_UINT8, ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64, ACL_FLOAT16, ACL_BF16, ACL_FLOAT,
            ACL_DOUBLE)
SUM_BLOCK = _kernels.BCE_WITH_LOGITS_SUM_BLOCK  # losses per partial sum (the kernel's fixed order)
ALIGNMENT = 64  # each part of the workspace starts on a cache line


def _check_dtypes(self: aclTensor, target: aclTensor, out: aclTensor) -> None:
    """self, target, out in the chip's list, out's dtype target's; weight and posWeight unchecked."""
    chip = soc().family
    allowed = DTYPES.on(chip)
    for name, tensor in (("self", self), ("target", target), ("out", out)):
        checks.dtype_in(name, tensor, allowed, chip)
    checks.same_dtype("out", out, "target", target)


def _check_shapes(self: aclTensor, target: aclTensor, weights: list, out: aclTensor) -> None:
    """Ranks (self, target, weights), sizes no device could hold, target == self, then each weight
    broadcasts to exactly target's shape (skipped when target is empty, as in the library)."""
    for name, tensor in [("self", self), ("target", target)] + weights:
        checks.max_rank(name, tensor)
    checks.valid_shapes(self=self, target=target, **dict(weights), out=out)
    checks.same_shape("target", target, "self", self)
    if not target.is_empty:
        for name, tensor in weights:
            checks.broadcasts_to(name, tensor, target.view_dims, "target")


def _needs_cast(name: str, tensor: aclTensor, compute: int) -> bool:
    """Whether the weight must be cast into the workspace before the kernel reads it: its dtype is
    not the compute dtype and not one the kernel widens exactly to it (FLOAT16/BFLOAT16 to FLOAT)."""
    dtype = tensor.data_type
    if dtype not in CASTABLE:
        checks.fail("%s: expected a dtype that can be cast to the compute dtype %s (a real number type), found %s"
                    % (name, dtype_name(compute), dtype_name(dtype)))
    return dtype != compute and not (compute == ACL_FLOAT and dtype in (ACL_FLOAT16, ACL_BF16))


def _check_out(out: aclTensor, self: aclTensor, mode: int) -> None:
    if mode == NONE:
        checks.same_shape("out", out, "self", self)
    else:
        checks.one_element("out", out, "reduction %d (%s)" % (mode, REDUCTIONS[mode]))


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


@first_phase(OP)
def aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(
        self: aclTensor, target: aclTensor, weightOptional: Optional[aclTensor],
        posWeightOptional: Optional[aclTensor], reduction: int, out: aclTensor):
    checks.not_null(self=self, target=target, out=out)
    weight = checks.optional_tensor("weightOptional", weightOptional)
    pos_weight = checks.optional_tensor("posWeightOptional", posWeightOptional)
    weights = [(name, t) for name, t in (("weightOptional", weight), ("posWeightOptional", pos_weight))
               if t is not None]
    _check_dtypes(self, target, out)
    mode = checks.attr_in("reduction", reduction, REDUCTIONS)
    _check_shapes(self, target, weights, out)
    if self.is_empty:
        if mode == NONE or out.is_empty:
            return None
        return KernelLaunch(_kernels.binary_cross_entropy_with_logits_fill, (view("out", out), EMPTY_RESULT[mode]))
    compute = checks.promoted([("self", self), ("target", target)])
    casts = {name: _needs_cast(name, tensor, compute) for name, tensor in weights}
    _check_out(out, self, mode)
    # The workspace: each weight that needs it cast to the compute dtype (its own shape, dense),
    # then one fp32 partial sum per SUM_BLOCK losses for mean and sum.
    offset, parts = 0, {}
    for name, tensor in weights:
        if casts[name]:
            parts[name] = Workspace(offset, tensor.numel * item_size(compute))
            offset += _aligned(parts[name].size)
    blocks = 0 if mode == NONE else -(-self.numel // SUM_BLOCK)
    if blocks:
        parts["partials"] = Workspace(offset, blocks * 4)
        offset += _aligned(blocks * 4)
    return KernelLaunch(_kernels.binary_cross_entropy_with_logits,
                        (view("out", out), view("self", self), view("target", target),
                         None if weight is None else view("weightOptional", weight),
                         None if pos_weight is None else view("posWeightOptional", pos_weight),
                         compute, mode, parts.get("weightOptional"), parts.get("posWeightOptional"),
                         parts.get("partials"), blocks),
                        workspace_size=offset, units="elements" if mode == NONE else "launch")


aclnnBinaryCrossEntropyWithLogits = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def losses(x: np.ndarray, t: np.ndarray, w: Optional[np.ndarray], p: Optional[np.ndarray]) -> np.ndarray:
    """float64 loss per element, the kernel's formula (ls = log σ(x), stable), of x's shape."""
    with np.errstate(invalid="ignore", over="ignore"):
        log_sigmoid = np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))
        weighted = log_sigmoid if p is None else (1.0 + (p - 1.0) * t) * log_sigmoid
        loss = (1.0 - t) * x - weighted
        if w is not None:
            loss = w * loss
    return np.broadcast_to(loss, np.shape(x))


def reference(v: dict) -> np.ndarray:
    """The loss (none), or its mean or sum in out's shape; of an empty self: NaN for mean, 0 for sum."""
    loss = losses(v["self"], v["target"], v["weightOptional"], v["posWeightOptional"])
    if v["reduction"] == NONE:
        return loss
    if loss.size == 0:
        value = EMPTY_RESULT[v["reduction"]]
    else:
        value = loss.mean() if v["reduction"] == MEAN else loss.sum()
    return np.full(np.shape(v["out"]), value)


def _sample(label: str, shapes: tuple, reduction: int, rng: np.random.Generator, weights: bool = True,
            scale: float = 4.0, out_shape: Optional[tuple] = None) -> SampleInput:
    x_shape, w_shape, p_shape = shapes
    if out_shape is None:
        out_shape = x_shape if reduction == NONE else (1,)
    return SampleInput(label, {
        "self": TensorInput(rng.normal(size=x_shape) * scale), "target": TensorInput(rng.uniform(0, 1, size=x_shape)),
        "weightOptional": TensorInput(rng.uniform(-1, 2, size=w_shape)) if weights else None,
        "posWeightOptional": TensorInput(rng.uniform(0, 3, size=p_shape)) if weights else None,
        "reduction": reduction, "out": TensorInput(np.full(out_shape, np.nan))})


def engine_inputs(shape: tuple, rng: np.random.Generator) -> SampleInput:
    """Reduction none, weight dense, posWeight broadcast along the rows: self takes the special values.
    target in [0.1, 0.9] and posWeight in [0.5, 2]: at self = −1e30 the loss is 1e30·p·t, a
    difference of two terms of 1e30, as exact as p·t is far from 0."""
    return SampleInput("x".join(map(str, shape)), {
        "self": TensorInput(rng.normal(size=shape) * 4), "target": TensorInput(rng.uniform(0.1, 0.9, size=shape)),
        "weightOptional": TensorInput(rng.uniform(-1, 2, size=shape)),
        "posWeightOptional": TensorInput(rng.uniform(0.5, 2, size=shape[-1:])),
        "reduction": NONE, "out": TensorInput(np.full(shape, np.nan))})


SHAPES = (  # label: self, weight, posWeight shapes; reduction
    # First: the calls of the error inputs and of the generic tests, which give it every reduction:
    # one element, so that the same out is valid for all three.
    ("1x1", ((1, 1), (1, 1), (1,)), NONE),
    ("2x3", ((2, 3), (2, 3), (2, 3)), NONE),
    ("broadcast", ((2, 3, 4), (4,), (1, 3, 1)), MEAN),
    ("0-D", ((), (), ()), SUM),
    ("129x257", ((129, 257), (129, 257), (129, 257)), NONE),
    ("129x257 broadcast", ((129, 257), (257,), (129, 1)), MEAN),
    ("weights 0-D", ((4, 6), (), ()), NONE),
    ("empty", ((0, 3), (0, 3), (3,)), NONE),
)


def sample_inputs(rng: np.random.Generator) -> list:
    samples = [_sample(label, shapes, reduction, rng) for label, shapes, reduction in SHAPES]
    samples += [
        # losses of magnitude about 1, all weights positive: the sum of 33153 of them fits FLOAT16
        SampleInput("129x257 sum", {**_sample("", ((129, 257), (129, 257), (257,)), SUM, rng, scale=1.0).args,
                                    "weightOptional": TensorInput(rng.uniform(0, 1, size=(129, 257)))}),
        _sample("no weights", ((3, 5), (), ()), MEAN, rng, weights=False),
        _sample("mean into [1, 1]", ((5, 7), (7,), (5, 1)), MEAN, rng, out_shape=(1, 1)),
        _sample("sum into 0-D", ((5, 7), (5, 7), ()), SUM, rng, out_shape=()),
        _sample("no elements, mean", ((0, 3), (0, 3), (3,)), MEAN, rng),
        _sample("no elements, sum", ((2, 0), (0,), ()), SUM, rng, out_shape=()),
    ]
    # rows of 5: the kernel computes blocks of whole rows, the weight's one row repeated and posWeight
    # gathered (transposed: every tensor gathered, out scattered); the mean's blocks of 4096 losses
    # start within rows
    short_rows = _sample("short rows broadcast", ((4000, 5), (5,), (4000, 1)), NONE, rng)
    short_mean = _sample("short rows broadcast, mean", ((4000, 5), (5,), (4000, 1)), MEAN, rng)
    return (samples + [samples[k].with_layout(layout) for k in (2, 4, 5) for layout in ("transposed", "strided", "offset")]
            + [short_rows, short_rows.with_layout("transposed"), short_mean, short_mean.with_layout("transposed")])


F, H, B, D, I32, C64, U16, NCHW = (ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT32, ACL_COMPLEX64, ACL_UINT16,
                                   ACL_FORMAT_NCHW)
NINE = (1,) * 9
TENSORS = ("self", "target", "weightOptional", "posWeightOptional", "out")
EMPTY = {name: {"shape": (0, 3)} for name in TENSORS}
ERRORS = (
    ErrorInput("null self", {"self": None}, 161001, "self: expected an aclTensor"),
    ErrorInput("null target", {"target": None, "out": {"dtype": D}}, 161001, "target: expected an aclTensor"),
    ErrorInput("null out", {"out": None, "reduction": 7}, 161001, "out: expected an aclTensor"),
    ErrorInput("self dtype", {"self": {"dtype": D}}, 161002, "self: expected a dtype in [FLOAT, FLOAT16, BF16] on Ascend910B, found DOUBLE"),
    ErrorInput("self bf16 on 910", {"self": {"dtype": B}}, 161002,
               "self: expected a dtype in [FLOAT, FLOAT16] on Ascend910, found BF16", chip="Ascend910"),
    ErrorInput("target dtype", {"target": {"dtype": I32}}, 161002, "target: expected a dtype in"),
    ErrorInput("out dtype", {"out": {"dtype": D}}, 161002, "out: expected a dtype in"),
    ErrorInput("out not target's dtype", {"out": {"dtype": H}}, 161002, "out: expected dtype FLOAT (the dtype of target)"),
    ErrorInput("dtypes checked when self is empty", {**EMPTY, "target": {"shape": (0, 3), "dtype": D}}, 161002,
               "target: expected a dtype in"),
    ErrorInput("reduction", {"reduction": 3}, 161002, "reduction: expected 0 (none), 1 (mean) or 2 (sum), found 3"),
    ErrorInput("reduction negative", {"reduction": -1}, 161002, "reduction: expected 0 (none)"),
    ErrorInput("reduction a string", {"reduction": "mean"}, 161002, "reduction: expected an int64, found 'mean'"),
    ErrorInput("reduction checked when self is empty", {**EMPTY, "reduction": 3}, 161002, "reduction: expected 0"),
    ErrorInput("self rank", {"self": {"shape": NINE}}, 161002, "self: expected at most 8 dims, found 9"),
    ErrorInput("target rank", {"target": {"shape": NINE}}, 161002, "target: expected at most 8 dims"),
    ErrorInput("weight rank", {"weightOptional": {"shape": NINE}}, 161002, "weightOptional: expected at most 8 dims"),
    ErrorInput("posWeight rank", {"posWeightOptional": {"shape": NINE}}, 161002,
               "posWeightOptional: expected at most 8 dims"),
    ErrorInput("ranks checked when self is empty", {**EMPTY, "weightOptional": {"shape": (0,) * 9}}, 161002,
               "weightOptional: expected at most 8 dims"),
    ErrorInput("target shape", {"target": {"shape": (3, 2)}}, 161002, "target: expected the shape of self [1, 1], found [3, 2]"),
    ErrorInput("weight shape", {"weightOptional": {"shape": (2,)}}, 161002,
               "weightOptional: expected a shape that broadcasts to target [1, 1], found [2]"),
    ErrorInput("weight larger than target", {"weightOptional": {"shape": (2, 2, 3)}}, 161002,
               "weightOptional: expected a shape that broadcasts to target [1, 1], found [2, 2, 3]"),
    ErrorInput("posWeight shape", {"posWeightOptional": {"shape": (4, 1)}}, 161002,
               "posWeightOptional: expected a shape that broadcasts to target"),
    ErrorInput("weight dtype", {"weightOptional": {"dtype": C64}}, 161002,
               "weightOptional: expected a dtype that can be cast to the compute dtype FLOAT (a real number type), "
               "found COMPLEX64"),
    ErrorInput("posWeight dtype", {"posWeightOptional": {"dtype": U16}}, 161002,
               "posWeightOptional: expected a dtype that can be cast"),
    ErrorInput("out shape", {"out": {"shape": (2, 1)}}, 161002, "out: expected the shape of self [1, 1], found [2, 1]"),
    ErrorInput("out of two elements for mean", {"reduction": MEAN, "out": {"shape": (2,)}}, 161002,
               "out: expected exactly one element for reduction 1 (mean), found shape [2]"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize,
    second_phase=aclnnBinaryCrossEntropyWithLogits, dtypes=DTYPES, reference=reference,
    sample_inputs=sample_inputs, error_inputs=ERRORS, output="out", shape_checked=TENSORS,
    attributes={"reduction": REDUCTIONS}, engine_inputs=engine_inputs, special_inputs=("self",),
    **declaration_files("binary_cross_entropy_with_logits"))
