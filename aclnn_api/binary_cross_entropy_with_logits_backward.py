"""aclnnBinaryCrossEntropyWithLogitsBackward (spec/OPS.md §1).

out = ((p·t + 1 − t)·σ(x) − p·t)·g·w, times 1/numel(self) for reduction "mean", computed in fp32
and rounded to nearest-even into out's dtype. gradOutput, weight and posWeight broadcast to self's
shape (weight and posWeight may be null: all ones). out's dtype must be target's; the compute dtype
is the promotion of all inputs. Only `out` has a rank limit (the library's quirk, §10 #4); empty
self succeeds with workspace 0 and nothing to run.
"""
from __future__ import annotations

from typing import Optional


from . import _kernels, checks
from emulator.dtypes import ACL_BF16, ACL_FLOAT, ACL_FLOAT16, can_cast, dtype_name
from .operator import KernelLaunch, chip_dtypes, first_phase, second_phase, view
from .tensor import aclTensor

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
MEAN = 1


def supported_dtypes() -> tuple:
    """FLOAT16 and FLOAT; A2, A3 and 950 add BFLOAT16."""
    return chip_dtypes((ACL_FLOAT16, ACL_FLOAT), (ACL_BF16,))


def _check_dtypes(inputs: list, out: aclTensor, target: aclTensor) -> None:
    allowed, chip = supported_dtypes()
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


def _check_reduction(reduction) -> int:
    value = checks.int_attr("reduction", reduction)
    if value not in REDUCTIONS:
        checks.fail("reduction: expected 0 (none), 1 (mean) or 2 (sum), found %d" % value)
    return value


def _check_promotion(inputs: list, out: aclTensor) -> int:
    """The compute dtype: promote(self, target), then gradOutput, weight, posWeight (if given)."""
    compute = checks.promoted(inputs)
    if not can_cast(compute, out.data_type):
        checks.fail("out: expected a dtype that the compute dtype %s can be cast to, found %s"
                    % (dtype_name(compute), dtype_name(out.data_type)))
    return compute


@first_phase("aclnnBinaryCrossEntropyWithLogitsBackward")
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
    if not self.is_empty:
        _check_shapes(self, target, out, [("gradOutput", gradOutput)] + weights)
    mode = _check_reduction(reduction)
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


aclnnBinaryCrossEntropyWithLogitsBackward = second_phase("aclnnBinaryCrossEntropyWithLogitsBackward")
