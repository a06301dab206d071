"""aclnnBinaryCrossEntropyWithLogitsBackward: the gradient of binary_cross_entropy_with_logits
with respect to self.

out = ((p·t + 1 − t)·σ(x) − p·t)·g·w, times 1/numel(self) for reduction "mean", computed in fp32
and rounded to nearest-even into out's dtype. gradOutput, weight and posWeight broadcast to self's
shape (weight and posWeight may be null: all ones). out's dtype must be target's; the compute dtype
is the promotion of all inputs. Only `out` has a rank limit (the library's quirk: its rank helper
skips the const inputs); empty self skips the shape rules and succeeds with workspace 0 and
nothing to run, but a negative dim or a view of more than 2^37 elements
(checks.MAX_VIEW_ELEMENTS) is rejected whatever self is. reduction must be 0, 1 or 2.
docs/ops/binary_cross_entropy_with_logits_backward.md has the checks in order.
"""
from __future__ import annotations

from typing import Optional


import numpy as np

from . import _kernels, checks
from emulator.dtypes import (ACL_BF16, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_FORMAT_NCHW, ACL_INT32, can_cast,
                             dtype_name)
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnBinaryCrossEntropyWithLogitsBackward"
DTYPES = ChipDtypes((ACL_FLOAT16, ACL_FLOAT), (ACL_BF16,))  # A2, A3 and 950 add BFLOAT16
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
NONE, MEAN = 0, 1


def _check_dtypes(inputs: list, out: aclTensor, target: aclTensor) -> None:
    chip = soc().family
    allowed = DTYPES.on(chip)
    for name, tensor in inputs:
        checks.dtype_in(name, tensor, allowed, chip)
    checks.dtype_in("out", out, allowed, chip)
    checks.same_dtype("out", out, "target", target)


def _check_shapes(self: aclTensor, target: aclTensor, out: aclTensor, broadcast: list) -> None:
    """Skipped by the caller when self is empty (the library returns before them)."""
    checks.same_shape("target", target, "self", self)
    checks.same_shape("out", out, "self", self)
    for name, tensor in broadcast:
        checks.broadcasts_to(name, tensor, self.view_dims, "self")


def _check_promotion(inputs: list, out: aclTensor) -> int:
    """The compute dtype: promote(self, target), then gradOutput, weight, posWeight (if given)."""
    compute = checks.promoted(inputs)
    if not can_cast(compute, out.data_type):
        checks.fail("out: expected a dtype that the compute dtype %s can be cast to, found %s"
                    % (dtype_name(compute), dtype_name(out.data_type)))
    return compute


@first_phase(OP)
def aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(
        gradOutput: aclTensor, self: aclTensor, target: aclTensor, weightOptional: Optional[aclTensor],
        posWeightOptional: Optional[aclTensor], reduction: int, out: aclTensor):
    checks.not_null(gradOutput=gradOutput, self=self, target=target, out=out)
    weight = checks.optional_tensor("weightOptional", weightOptional)
    pos_weight = checks.optional_tensor("posWeightOptional", posWeightOptional)
    weights = [(name, t) for name, t in (("weightOptional", weight), ("posWeightOptional", pos_weight))
               if t is not None]
    checks.max_rank("out", out)
    _check_dtypes([("gradOutput", gradOutput), ("self", self), ("target", target)] + weights, out, target)
    checks.same_format("target", target, "self", self)
    checks.same_format("out", out, "self", self)
    checks.valid_shapes(gradOutput=gradOutput, self=self, target=target, **dict(weights), out=out)
    if not self.is_empty:
        _check_shapes(self, target, out, [("gradOutput", gradOutput)] + weights)
    mode = checks.attr_in("reduction", reduction, REDUCTIONS)
    if self.is_empty:
        return None
    _check_promotion([("self", self), ("target", target), ("gradOutput", gradOutput)] + weights, out)
    shape = self.view_dims
    # The kernel loads each operand from its own dtype into fp32: the same values as a cast to the
    # promoted dtype, since within {f16, bf16, f32} any mix promotes to f32.
    scale = 1.0 / max(1, self.numel) if mode == MEAN else 1.0
    return KernelLaunch(_kernels.binary_cross_entropy_with_logits_backward,
                        (view("out", out), view("gradOutput", gradOutput, shape), view("self", self),
                         view("target", target),
                         None if weight is None else view("weightOptional", weight, shape),
                         None if pos_weight is None else view("posWeightOptional", pos_weight, shape),
                         scale))


aclnnBinaryCrossEntropyWithLogitsBackward = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def _sigmoid(x: np.ndarray) -> np.ndarray:
    """float64 logistic function that neither overflows nor loses the tails."""
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def reference(v: dict) -> np.ndarray:
    """d/dx of w·[−p·t·log σ(x) − (1−t)·log(1−σ(x))], times g (and 1/numel for mean)."""
    x, t, g = v["self"], v["target"], v["gradOutput"]
    w = 1.0 if v["weightOptional"] is None else v["weightOptional"]
    p = 1.0 if v["posWeightOptional"] is None else v["posWeightOptional"]
    s = _sigmoid(x)
    with np.errstate(invalid="ignore"):
        grad = w * ((1.0 - t) * s - p * t * (1.0 - s)) * g
    if v["reduction"] == MEAN:
        grad = grad / max(1, np.size(x))
    return np.broadcast_to(grad, np.shape(x))


def _sample(label: str, shapes: tuple, reduction: int, rng: np.random.Generator, weights: bool = True) -> SampleInput:
    x_shape, g_shape, w_shape, p_shape = shapes
    return SampleInput(label, {
        "gradOutput": TensorInput(rng.normal(size=g_shape) * 2), "self": TensorInput(rng.normal(size=x_shape) * 4),
        "target": TensorInput(rng.uniform(0, 1, size=x_shape)),
        "weightOptional": TensorInput(rng.uniform(-1, 2, size=w_shape)) if weights else None,
        "posWeightOptional": TensorInput(rng.uniform(0, 3, size=p_shape)) if weights else None,
        "reduction": reduction, "out": TensorInput(np.full(x_shape, np.nan))})


def engine_inputs(shape: tuple, rng: np.random.Generator) -> SampleInput:
    """Weight dense, posWeight broadcast along the rows, gradOutput a scalar (reduction mean): self
    takes the special values."""
    return _sample("x".join(map(str, shape)), (shape, (), shape, shape[-1:]), MEAN, rng)


SHAPES = (  # label: self, gradOutput, weight, posWeight shapes
    ("2x3", ((2, 3), (2, 3), (2, 3), (2, 3))),
    ("broadcast", ((2, 3, 4), (3, 1), (4,), (1, 3, 1))),
    ("gradOutput 0-D", ((4, 6), (), (6,), (4, 1))),
    ("gradOutput [1]", ((4, 6), (1,), (1, 6), (6,))),
    ("0-D", ((), (), (), ())),
    ("129x257", ((129, 257), (129, 257), (129, 257), (129, 257))),
    ("129x257 broadcast", ((129, 257), (129, 257), (257,), (129, 1))),
    ("empty", ((0, 3), (0, 3), (0, 3), (0, 3))),
)


def sample_inputs(rng: np.random.Generator) -> list:
    samples = [_sample(label, shapes, i % 3, rng) for i, (label, shapes) in enumerate(SHAPES)]
    samples.append(_sample("no weights", ((3, 5), (3, 5), (), ()), MEAN, rng, weights=False))
    # rows of 5 (the kernel computes blocks of whole rows): gradOutput and posWeight gathered, the
    # weight's one row repeated; transposed, every tensor gathered and out scattered
    short_rows = _sample("short rows broadcast", ((4000, 5), (4000, 1), (5,), (4000, 1)), NONE, rng)
    return (samples + [samples[k].with_layout(layout) for k in (1, 5, 6) for layout in ("transposed", "strided", "offset")]
            + [short_rows, short_rows.with_layout("transposed")])


F, H, B, D, I32, NCHW = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT32, ACL_FORMAT_NCHW
NINE = (1,) * 9
TENSORS = ("gradOutput", "self", "target", "weightOptional", "posWeightOptional", "out")
ERRORS = (
    ErrorInput("null gradOutput", {"gradOutput": None}, 161001, "gradOutput: expected an aclTensor"),
    ErrorInput("null self", {"self": None}, 161001, "self: expected an aclTensor"),
    ErrorInput("null target", {"target": None, "out": {"dtype": D}}, 161001, "target: expected an aclTensor"),
    ErrorInput("null out", {"out": None}, 161001, "out: expected an aclTensor"),
    ErrorInput("out rank", {"out": {"shape": NINE}, "self": {"dtype": D}}, 161002, "out: expected at most 8 dims"),
    ErrorInput("gradOutput dtype", {"gradOutput": {"dtype": D}}, 161002, "gradOutput: expected a dtype in"),
    ErrorInput("self dtype", {"self": {"dtype": I32}}, 161002, "self: expected a dtype in"),
    ErrorInput("target dtype", {"target": {"dtype": D}, "out": {"dtype": D}}, 161002, "target: expected a dtype in"),
    ErrorInput("weight dtype", {"weightOptional": {"dtype": D}}, 161002, "weightOptional: expected a dtype in"),
    ErrorInput("posWeight dtype", {"posWeightOptional": {"dtype": D}}, 161002, "posWeightOptional: expected a dtype in"),
    ErrorInput("weight bf16 on 910", {"weightOptional": {"dtype": B}}, 161002,
               "weightOptional: expected a dtype in [FLOAT16, FLOAT] on Ascend910", chip="Ascend910"),
    ErrorInput("out dtype", {"out": {"dtype": D}}, 161002, "out: expected a dtype in"),
    ErrorInput("out not target's dtype", {"out": {"dtype": H}}, 161002, "out: expected dtype FLOAT (the dtype of target)"),
    ErrorInput("dtypes checked when self is empty", {**{name: {"shape": (0, 3)} for name in TENSORS},
                                                     "weightOptional": {"shape": (0, 3), "dtype": D}},
               161002, "weightOptional: expected a dtype in"),
    ErrorInput("target format", {"target": {"format": NCHW}}, 161002, "target: expected the format of self"),
    ErrorInput("out format", {"out": {"format": NCHW}, "gradOutput": {"shape": (2,)}}, 161002,
               "out: expected the format of self"),
    ErrorInput("target shape", {"target": {"shape": (3, 2)}}, 161002, "target: expected the shape of self"),
    ErrorInput("out shape", {"out": {"shape": (2, 1)}}, 161002, "out: expected the shape of self"),
    ErrorInput("gradOutput shape", {"gradOutput": {"shape": (2, 2, 3)}}, 161002,
               "gradOutput: expected a shape that broadcasts to self [2, 3], found [2, 2, 3]"),
    ErrorInput("gradOutput not broadcastable", {"gradOutput": {"shape": (2,)}}, 161002,
               "gradOutput: expected a shape that broadcasts to self [2, 3], found [2]"),
    ErrorInput("gradOutput of 9 dims", {"gradOutput": {"shape": NINE}}, 161002,
               "gradOutput: expected a shape that broadcasts to self"),
    ErrorInput("weight shape", {"weightOptional": {"shape": (2,)}}, 161002, "weightOptional: expected a shape"),
    ErrorInput("posWeight shape", {"posWeightOptional": {"shape": (4, 1)}, "reduction": 5}, 161002,
               "posWeightOptional: expected a shape"),
    ErrorInput("reduction", {"reduction": -1}, 161002, "reduction: expected 0 (none), 1 (mean) or 2 (sum), found -1"),
    ErrorInput("reduction a string", {"reduction": "mean"}, 161002, "reduction: expected an int64, found 'mean'"),
    ErrorInput("reduction checked when self is empty", {**{name: {"shape": (0, 3)} for name in TENSORS}, "reduction": 3},
               161002, "reduction: expected 0 (none)"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize,
    second_phase=aclnnBinaryCrossEntropyWithLogitsBackward, dtypes=DTYPES, reference=reference,
    sample_inputs=sample_inputs, error_inputs=ERRORS, output="out",
    shape_checked=TENSORS,
    attributes={"reduction": REDUCTIONS}, engine_inputs=engine_inputs, special_inputs=("self",),
    **declaration_files("binary_cross_entropy_with_logits_backward"))
