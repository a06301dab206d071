"""aclnnKlDiv: the Kullback-Leibler divergence loss, the forward of aclnnKlDivBackward.

Over B = broadcast(self, target): L = target * (log(target) - self), 0 where target == 0 (logTarget
false), or L = exp(target) * (target - self) (logTarget true); then none (L itself), sum, mean
(sum / numel(B)) or batchmean (sum / B[0], a 0-D input counting as [1], where PyTorch divides by
self.size(0)). Computed in fp32, sums added in a fixed order; the result is rounded to the compute
dtype promote(self, target), then to out's dtype. A reduction outside 0..3 is rejected (161002), as
the library's current code does; aclnnKlDivBackward treats it as none. An empty self or target ends
the checks early: none runs nothing, the other reductions fill out with NaN or 0.
docs/ops/kl_div.md has the checks in order.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import _kernels, checks
from emulator.dtypes import (ACL_BF16, ACL_BOOL, ACL_COMPLEX64, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT8,
                             ACL_INT16, ACL_INT32, ACL_INT64, ACL_UINT8, can_cast, dtype_name)
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .shapes import numel
from .tensor import aclTensor

NONE, MEAN, SUM, BATCHMEAN = 0, 1, 2, 3
REDUCTIONS = {NONE: "none", MEAN: "mean", SUM: "sum", BATCHMEAN: "batchmean"}
OP = "aclnnKlDiv"
# The library's support list (GetDtypeSupportListV2): A2, A3 and 950 add BFLOAT16.
DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16), (ACL_BF16,))


def divisor(reduction: int, shape: Sequence[int]) -> float:
    """What the sum of L is divided by: numel(B) for mean, B[0] for batchmean (B with a 0-D input
    seen as [1], so 1 when both are 0-D), 1 for sum."""
    if reduction == MEAN:
        return float(numel(shape))
    if reduction == BATCHMEAN:
        return float(shape[0]) if len(shape) else 1.0
    return 1.0


def empty_fill(reduction: int, self_shape: Sequence[int]) -> float:
    """The value out gets when self or target is empty: the mean of nothing is NaN, the sum 0, and
    batchmean divides that 0 by self's dim 0 (NaN when it is 0; a 0-D self counts as [1])."""
    if reduction == MEAN or (reduction == BATCHMEAN and len(self_shape) and self_shape[0] == 0):
        return float("nan")
    return 0.0


def _compute_dtype(self: aclTensor, target: aclTensor, out: aclTensor) -> int:
    """promote(self, target), which must exist and be castable to out's dtype."""
    compute = checks.promoted((("self", self), ("target", target)))
    if not can_cast(compute, out.data_type):
        checks.fail("out: expected a dtype that promote(self, target) = %s can be cast to, found %s"
                    % (dtype_name(compute), dtype_name(out.data_type)))
    return compute


@first_phase(OP)
def aclnnKlDivGetWorkspaceSize(self: aclTensor, target: aclTensor, reduction: int, logTarget: bool, out: aclTensor):
    checks.not_null(self=self, target=target, out=out)
    # Python-only: the C signature makes these an int64 and a bool.
    reduction = checks.int_attr("reduction", reduction)
    logTarget = checks.bool_attr("logTarget", logTarget)
    chip = soc().family
    allowed = DTYPES.on(chip)
    named = (("self", self), ("target", target), ("out", out))
    for name, tensor in named:
        checks.dtype_in(name, tensor, allowed, chip)
    compute = _compute_dtype(self, target, out)
    checks.valid_shapes(**dict(named))
    checks.max_rank("self", self, 8)
    checks.max_rank("target", target, 8)  # out's rank is not checked: its shape is, below
    checks.attr_in("reduction", reduction, REDUCTIONS)
    if self.is_empty or target.is_empty:  # before any shape rule: none runs nothing, the others fill out
        if reduction == NONE:
            return None
        return KernelLaunch(_kernels.kl_div_fill, (view("out", out), empty_fill(reduction, self.view_dims)))
    shape = checks.broadcast_pair("self", self, "target", target)  # 0-D broadcasts as [1] would
    if reduction == NONE:
        if out.view_dims != shape:  # two 0-D inputs give a 0-D B, and out must be 0-D too
            checks.fail("out: expected the broadcast shape of self and target %s, found %s"
                        % (list(shape), list(out.view_dims)))
        return KernelLaunch(_kernels.kl_div, (view("out", out), view("self", self, shape), view("target", target, shape),
                                              logTarget, compute))
    checks.one_element("out", out, "reduction " + REDUCTIONS[reduction])
    unsqueezed = shape or (1,)  # both 0-D: B is [1]
    return KernelLaunch(_kernels.kl_div_reduce, (view("out", out), view("self", self, shape),
                                                 view("target", target, shape), logTarget, compute,
                                                 divisor(reduction, unsqueezed)), units="launch")


aclnnKlDiv = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def pointwise(x: np.ndarray, t: np.ndarray, log_target: bool) -> np.ndarray:
    """L over the broadcast shape in float64, with the kernel's t == 0 rule (log(1) in place of log(0))."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if log_target:
            return np.exp(t) * (t - x)
        return t * (np.log(np.where(t == 0, 1.0, t)) - x)


def reference(v: dict) -> np.ndarray:
    """L, or its sum divided by divisor(), in out's shape (without out: B, or [] for a reduction);
    out's own values where nothing runs."""
    x, t, reduction = np.asarray(v["self"]), np.asarray(v["target"]), v["reduction"]
    out = v.get("out")
    if out is None:
        out = np.zeros(np.broadcast_shapes(x.shape, t.shape) if reduction == NONE else ())
    if x.size == 0 or t.size == 0:
        return np.asarray(out) if reduction == NONE else np.full(np.shape(out), empty_fill(reduction, x.shape))
    loss = pointwise(x, t, v["logTarget"])
    if reduction == NONE:
        return loss
    with np.errstate(over="ignore", invalid="ignore"):
        return np.full(np.shape(out), loss.sum() / divisor(reduction, loss.shape or (1,)))


def _sample(label: str, self_shape: tuple, target_shape: tuple, reduction: int, log_target: bool,
            rng: np.random.Generator, out_shape: Optional[tuple] = None) -> SampleInput:
    """self log-probabilities (normal), target probabilities with some zeros (or log-probabilities);
    out initialised to a value no result has, so an output the kernel skips shows."""
    if log_target:
        target = rng.normal(size=target_shape) - 1.0
    else:
        target = rng.uniform(0.0, 2.0, size=target_shape) * (rng.uniform(size=target_shape) > 0.15)
    if out_shape is None:
        out_shape = np.broadcast_shapes(self_shape, target_shape) if reduction == NONE else ()
    return SampleInput(label, {
        "self": TensorInput(rng.normal(size=self_shape) - 1.0), "target": TensorInput(target),
        "reduction": reduction, "logTarget": log_target, "out": TensorInput(np.full(out_shape, -777.0))})


def engine_inputs(shape: tuple, rng: np.random.Generator) -> SampleInput:
    """Element-wise (no broadcast, reduction none), logTarget false: the log path."""
    return _sample("x".join(map(str, shape)), shape, shape, NONE, False, rng)


# The first sample is the one the error inputs change and every reduction value must accept: B and
# out hold one element.
SHAPES = (  # label: self and target shapes, reduction, logTarget, out shape (None: B for none, [] otherwise)
    ("1x1", (1, 1), (1, 1), NONE, False, None),
    ("2x3", (2, 3), (2, 3), NONE, False, None),
    ("self broadcast by target", (1, 5), (4, 5), MEAN, True, (1,)),
    ("target broadcast", (3, 4), (4,), SUM, False, (1, 1)),
    ("leading dims added", (3,), (2, 4, 3), BATCHMEAN, False, None),
    ("0-D self", (), (4, 3), NONE, True, None),
    ("all 0-D", (), (), MEAN, False, (1,)),
    ("all 0-D, none", (), (), NONE, False, None),
    ("8-D", (1, 2, 1, 2, 1, 2, 1, 2), (2, 1, 2, 1, 2, 1, 2, 1), SUM, True, None),
    ("67x129", (67, 129), (67, 129), NONE, False, None),
    ("67x129 batchmean", (67, 129), (67, 129), BATCHMEAN, True, None),
    ("both broadcast", (2, 1, 3), (1, 4, 1), NONE, False, None),
    ("long rows", (5, 3000), (5, 3000), MEAN, False, None),
    ("0-D target", (3, 7), (), NONE, True, None),
    ("0-D target, batchmean", (3, 7), (), BATCHMEAN, False, (1,)),
    ("0-D self, batchmean", (), (5, 3), BATCHMEAN, False, None),
    # rows of 5 whose chunks of 4096 start within rows: target's one row repeated, self gathered
    ("short rows, target broadcast", (4000, 5), (5,), MEAN, False, (1,)),
    ("short rows, self broadcast", (4000, 1), (4000, 5), SUM, True, None),
)
# Labels that start with "empty" write nothing (reduction none); the others fill out.
EMPTY = (
    ("empty", (0, 3), (0, 3), NONE, None),
    ("empty broadcast", (2, 0), (1, 0), NONE, None),
    ("zero-size mean", (0, 3), (0, 3), MEAN, (1,)),
    ("zero-size sum", (3, 0), (3, 0), SUM, None),
    ("zero-size batchmean of dim 0", (0, 2), (0, 2), BATCHMEAN, None),
    ("zero-size batchmean of dim 1", (2, 0), (2, 0), BATCHMEAN, (1, 1)),
    ("zero-size target", (2, 3), (4, 0), SUM, None),
)
LAID_OUT = (2, 9, 10, 11, 12)  # samples also run transposed, strided and offset


def sample_inputs(rng: np.random.Generator) -> list:
    samples = [_sample(label, s, t, r, log_target, rng, out) for label, s, t, r, log_target, out in SHAPES]
    samples += [_sample(label, s, t, r, False, rng, out) for label, s, t, r, out in EMPTY]
    return samples + [samples[k].with_layout(layout) for k in LAID_OUT for layout in ("transposed", "strided", "offset")]


F, H, B, D = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE
NINE = (1,) * 9
ERRORS = (
    ErrorInput("null self", {"self": None}, 161001, "self: expected an aclTensor"),
    ErrorInput("null target", {"target": None}, 161001, "target: expected an aclTensor"),
    ErrorInput("null out", {"out": None, "self": {"dtype": D}}, 161001, "out: expected an aclTensor"),
    ErrorInput("reduction not an int64", {"reduction": 1 << 64}, 161002, "reduction: expected an int64"),
    ErrorInput("reduction a string", {"reduction": "mean"}, 161002, "reduction: expected an int64, found 'mean'"),
    ErrorInput("logTarget not a bool", {"logTarget": 2}, 161002, "logTarget: expected a bool"),
    ErrorInput("self dtype", {"self": {"dtype": D}}, 161002, "self: expected a dtype in"),
    ErrorInput("target dtype", {"target": {"dtype": ACL_INT32}}, 161002, "target: expected a dtype in"),
    ErrorInput("out dtype", {"out": {"dtype": ACL_BOOL}, "target": {"shape": NINE}}, 161002,
               "out: expected a dtype in [FLOAT, FLOAT16, BF16] on Ascend910B, found BOOL"),
    ErrorInput("bf16 on 910", {"self": {"dtype": B}}, 161002, "self: expected a dtype in [FLOAT, FLOAT16] on Ascend910",
               chip="Ascend910"),
    ErrorInput("self rank", {"self": {"shape": NINE}}, 161002, "self: expected at most 8 dims"),
    ErrorInput("target rank", {"target": {"shape": NINE}}, 161002, "target: expected at most 8 dims"),
    ErrorInput("rank checked when self is empty", {"self": {"shape": (0, 3)}, "target": {"shape": NINE}},
               161002, "target: expected at most 8 dims"),
    ErrorInput("reduction above 3", {"reduction": 4}, 161002,
               "reduction: expected 0 (none), 1 (mean), 2 (sum) or 3 (batchmean), found 4"),
    ErrorInput("reduction checked when target is empty", {"reduction": -1, "target": {"shape": (2, 0)}}, 161002,
               "reduction: expected 0 (none), 1 (mean), 2 (sum) or 3 (batchmean), found -1"),
    ErrorInput("self and target", {"self": {"shape": (2, 3)}, "target": {"shape": (4, 3)}}, 161002,
               "self: expected a shape that broadcasts with target [4, 3], found [2, 3]"),
    ErrorInput("out shape for none", {"out": {"shape": (3, 2)}}, 161002,
               "out: expected the broadcast shape of self and target [1, 1], found [3, 2]"),
    ErrorInput("out of two 0-D inputs for none", {"self": {"shape": ()}, "target": {"shape": ()},
                                                  "out": {"shape": (1,)}},
               161002, "out: expected the broadcast shape of self and target [], found [1]"),
    ErrorInput("out of a reduction", {"reduction": MEAN, "out": {"shape": (2,)}}, 161002,
               "out: expected exactly one element for reduction mean, found shape [2]"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnKlDivGetWorkspaceSize, second_phase=aclnnKlDiv,
    dtypes=DTYPES, reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS, output="out",
    shape_checked=("self", "target", "out"), attributes={"reduction": REDUCTIONS},
    engine_inputs=engine_inputs, special_inputs=("self", "target"),
    **declaration_files("kl_div"))
