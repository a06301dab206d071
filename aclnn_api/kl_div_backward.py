"""aclnnKlDivBackward: the gradient of the KL-divergence loss with respect to self.

Over B = broadcast(self, target): grad = -target * gradOutput (logTarget false) or
-exp(target) * gradOutput (logTarget true), times 1 (none, sum), 1/numel(B) (mean) or 1/B[0]
(batchmean: dim 0 of the broadcast shape, as the library does, where PyTorch divides by
self.size(0)), then summed over the broadcast axes back to self's shape and cast to out's dtype.
self's values are never read. Computed in fp32; the four tensors may each have their own dtype.
Any int64 reduction outside 0..3 is treated as none, as the library's code does. A negative dim or
a view of more than 2^37 elements (checks.MAX_VIEW_ELEMENTS) is rejected at the shape step.
docs/ops/kl_div_backward.md has the checks in order.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import _kernels, checks
from emulator.dtypes import ACL_BF16, ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT32
from .declaration import ChipDtypes, ErrorInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .shapes import numel
from .tensor import aclTensor

REDUCTION_MEAN = 1
REDUCTION_BATCHMEAN = 3
OP = "aclnnKlDivBackward"
# The library's support lists (main op_api): A2, A3 and 950 add BFLOAT16.
DTYPES = ChipDtypes((ACL_FLOAT, ACL_FLOAT16), (ACL_BF16,))


def coefficient(reduction: int, shape: Sequence[int]) -> float:
    """The factor of every element of the broadcast-shaped gradient. An empty B has no element to
    scale, so its factor is 1 rather than a division by zero."""
    count = numel(shape)
    if reduction == REDUCTION_MEAN and count:
        return 1.0 / count
    if reduction == REDUCTION_BATCHMEAN and len(shape) and shape[0]:
        return 1.0 / shape[0]  # dim 0 of broadcast(self, target), not self.size(0) 
    return 1.0  # none, sum, 0-D batchmean, and any other value


@first_phase(OP)
def aclnnKlDivBackwardGetWorkspaceSize(gradOutput: aclTensor, self: aclTensor, target: aclTensor, reduction: int,
                                       logTarget: bool, out: aclTensor):
    checks.not_null(gradOutput=gradOutput, self=self, target=target, out=out)
    # Python-only: the C signature makes these an int64 and a bool.
    reduction = checks.int_attr("reduction", reduction)
    logTarget = checks.bool_attr("logTarget", logTarget)
    checks.castable("self", self, "out", out)
    chip = soc().family
    allowed = DTYPES.on(chip)
    named = (("gradOutput", gradOutput), ("self", self), ("target", target), ("out", out))
    for name, tensor in named:
        checks.dtype_in(name, tensor, allowed, chip)
    checks.valid_shapes(**dict(named))
    for name, tensor in named:
        checks.max_rank(name, tensor, 8)
    shape = checks.broadcast_pair("self", self, "target", target)
    checks.broadcasts_to("gradOutput", gradOutput, shape, "broadcast(self, target)")
    checks.same_shape("out", out, "self", self)
    if self.is_empty:
        return None
    return KernelLaunch(_kernels.kl_div_backward,
                        (view("out", out), view("gradOutput", gradOutput, shape), view("target", target, shape),
                         coefficient(reduction, shape), logTarget))


aclnnKlDivBackward = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration

def reference(v: dict) -> np.ndarray:
    """-(target or exp(target)) * gradOutput * coefficient over B, summed back to self's shape."""
    self_shape = np.shape(v["self"])
    grad, target = v["gradOutput"], v["target"]
    shape = np.broadcast_shapes(self_shape, np.shape(target), np.shape(grad))
    with np.errstate(over="ignore", invalid="ignore"):
        weight = np.exp(target) if v["logTarget"] else target
        full = -np.broadcast_to(weight, shape) * np.broadcast_to(grad, shape) * coefficient(v["reduction"], shape)
    full = full.sum(axis=tuple(range(len(shape) - len(self_shape))))
    widened = tuple(i for i, d in enumerate(self_shape) if d == 1 and full.shape[i] != 1)
    return full.sum(axis=widened, keepdims=True).reshape(self_shape)


def _sample(label: str, self_shape: tuple, target_shape: tuple, grad_shape: tuple, reduction: int, log_target: bool,
            rng: np.random.Generator) -> SampleInput:
    return SampleInput(label, {
        "gradOutput": TensorInput(rng.normal(size=grad_shape) * 2), "self": TensorInput(np.full(self_shape, 0.5)),
        "target": TensorInput(rng.normal(size=target_shape) * (1 if log_target else 3)),
        "reduction": reduction, "logTarget": log_target, "out": TensorInput(np.full(self_shape, np.nan))})


def engine_inputs(shape: tuple, rng: np.random.Generator) -> SampleInput:
    """Element-wise (no broadcast), logTarget true: target takes the special values."""
    return _sample("x".join(map(str, shape)), shape, shape, shape, 0, True, rng)


SHAPES = (  # label: self, target, gradOutput shapes
    ("2x3", (2, 3), (2, 3), (2, 3)),
    ("self broadcast by target", (1, 5), (4, 5), (4, 5)),
    ("gradOutput smaller", (4, 1), (4, 6), (1, 6)),
    ("target broadcast", (3, 4), (4,), (3, 4)),
    ("leading and widened dims", (1, 3, 1), (2, 5, 3, 4), (5, 1, 4)),
    ("0-D gradOutput", (2, 3), (2, 3), ()),
    ("0-D self", (), (4, 3), (4, 3)),
    ("8-D", (1, 2, 1, 2, 1, 2, 1, 2), (2, 1, 2, 1, 2, 1, 2, 1), (2, 2, 1, 1, 2, 2, 1, 1)),
    ("reduce many rows", (1, 40), (70, 40), (70, 1)),
    ("67x129", (67, 129), (67, 129), (67, 129)),
    ("empty", (0, 3), (0, 3), (0, 3)),
    ("empty broadcast", (2, 0), (1, 0), (2, 0)),
)
REDUCTIONS = (0, 1, 2, 3, 6)  # none, mean, sum, batchmean, and a value outside 0..3 (none)


def sample_inputs(rng: np.random.Generator) -> list:
    samples = [_sample(label, *shapes, REDUCTIONS[i % 5], i % 2 == 1, rng) for i, (label, *shapes) in enumerate(SHAPES)]
    return samples + [samples[k].with_layout(layout) for k in (1, 4, 9) for layout in ("transposed", "strided", "offset")]


F, H, B, D, I32 = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT32
NINE = (1,) * 9
ERRORS = (
    ErrorInput("null gradOutput", {"gradOutput": None}, 161001, "gradOutput: expected an aclTensor"),
    ErrorInput("null self", {"self": None}, 161001, "self: expected an aclTensor"),
    ErrorInput("null target", {"target": None}, 161001, "target: expected an aclTensor"),
    ErrorInput("null out", {"out": None, "gradOutput": {"dtype": D}}, 161001, "out: expected an aclTensor"),
    ErrorInput("reduction not an int64", {"reduction": 1 << 64}, 161002, "reduction: expected an int64"),
    ErrorInput("reduction a string", {"reduction": "mean"}, 161002, "reduction: expected an int64, found 'mean'"),
    ErrorInput("logTarget not a bool", {"logTarget": 2}, 161002, "logTarget: expected a bool"),
    ErrorInput("self not castable to out", {"out": {"dtype": ACL_BOOL}}, 161002,
               "self: expected a dtype that can be cast to out's BOOL"),
    ErrorInput("gradOutput dtype", {"gradOutput": {"dtype": D}}, 161002, "gradOutput: expected a dtype in"),
    ErrorInput("self dtype", {"self": {"dtype": I32}}, 161002, "self: expected a dtype in"),
    ErrorInput("target dtype", {"target": {"dtype": D}}, 161002, "target: expected a dtype in"),
    ErrorInput("out dtype", {"out": {"dtype": D}, "gradOutput": {"shape": NINE}}, 161002, "out: expected a dtype in"),
    ErrorInput("bf16 on 910", {"gradOutput": {"dtype": B}}, 161002, "gradOutput: expected a dtype in [FLOAT, FLOAT16] on Ascend910",
               chip="Ascend910"),
    ErrorInput("gradOutput rank", {"gradOutput": {"shape": NINE}}, 161002, "gradOutput: expected at most 8 dims"),
    ErrorInput("self rank", {"self": {"shape": NINE}}, 161002, "self: expected at most 8 dims"),
    ErrorInput("target rank", {"target": {"shape": NINE}}, 161002, "target: expected at most 8 dims"),
    ErrorInput("out rank", {"out": {"shape": NINE}}, 161002, "out: expected at most 8 dims"),
    ErrorInput("rank checked when self is empty", {"gradOutput": {"shape": NINE}, "self": {"shape": (0, 3)},
                                                   "target": {"shape": (0, 3)}, "out": {"shape": (0, 3)}},
               161002, "gradOutput: expected at most 8 dims"),
    ErrorInput("self and target", {"target": {"shape": (4, 3)}}, 161002,
               "self: expected a shape that broadcasts with target [4, 3]"),
    ErrorInput("gradOutput to B", {"gradOutput": {"shape": (4, 3)}}, 161002,
               "gradOutput: expected a shape that broadcasts to broadcast(self, target) [2, 3], found [4, 3]"),
    ErrorInput("gradOutput of a higher rank", {"gradOutput": {"shape": (2, 2, 3)}}, 161002,
               "gradOutput: expected a shape that broadcasts to broadcast(self, target) [2, 3], found [2, 2, 3]"),
    ErrorInput("out shape", {"out": {"shape": (3, 2)}}, 161002, "out: expected the shape of self"),
    ErrorInput("out shape checked when self is empty", {"gradOutput": {"shape": (0, 3)}, "self": {"shape": (0, 3)},
                                                        "target": {"shape": (0, 3)}, "out": {"shape": (3, 0)}},
               161002, "out: expected the shape of self [0, 3], found [3, 0]"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnKlDivBackwardGetWorkspaceSize, second_phase=aclnnKlDivBackward,
    dtypes=DTYPES, reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS, output="out",
    shape_checked=("gradOutput", "self", "target", "out"), engine_inputs=engine_inputs, special_inputs=("target",),
    **declaration_files("kl_div_backward"))
