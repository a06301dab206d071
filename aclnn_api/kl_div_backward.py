"""aclnnKlDivBackward (spec/OPS.md §3, decisions §10 #1-#3).

Over B = broadcast(self, target): grad = -target * gradOutput (logTarget false) or
-exp(target) * gradOutput (logTarget true), times 1 (none, sum), 1/numel(B) (mean) or 1/B[0]
(batchmean), then summed over the broadcast axes back to self's shape and cast to out's dtype.
self's values are never read. Computed in fp32; the four tensors may each have their own dtype.
Any reduction outside 0..3 is treated as none, as the library does.
"""
from __future__ import annotations

from typing import Sequence

from . import _kernels, checks
from emulator.dtypes import ACL_BF16, ACL_FLOAT, ACL_FLOAT16
from .operator import KernelLaunch, first_phase, second_phase, soc, view
from .shapes import numel
from .tensor import aclTensor

REDUCTION_MEAN = 1
REDUCTION_BATCHMEAN = 3
# The library's support lists by SoC family (main op_api); any other chip gets an empty list.
_DTYPES_BY_FAMILY = {
    "Ascend910B": (ACL_FLOAT, ACL_FLOAT16, ACL_BF16),
    "Ascend910_93": (ACL_FLOAT, ACL_FLOAT16, ACL_BF16),
    "Ascend950": (ACL_FLOAT, ACL_FLOAT16, ACL_BF16),
    "Ascend910": (ACL_FLOAT, ACL_FLOAT16),
    "Ascend310P": (ACL_FLOAT, ACL_FLOAT16),
}


def supported_dtypes() -> tuple:
    """(allowed dtypes, chip family) of the emulated chip."""
    family = soc().family
    return _DTYPES_BY_FAMILY.get(family, ()), family


def coefficient(reduction: int, shape: Sequence[int]) -> float:
    """The factor of every element of the broadcast-shaped gradient. An empty B has no element to
    scale, so its factor is 1 rather than a division by zero."""
    count = numel(shape)
    if reduction == REDUCTION_MEAN and count:
        return 1.0 / count
    if reduction == REDUCTION_BATCHMEAN and len(shape) and shape[0]:
        return 1.0 / shape[0]  # dim 0 of broadcast(self, target), not self.size(0) (§10 #3)
    return 1.0  # none, sum, 0-D batchmean, and any other value (§10 #1)


@first_phase("aclnnKlDivBackward")
def aclnnKlDivBackwardGetWorkspaceSize(gradOutput: aclTensor, self: aclTensor, target: aclTensor, reduction: int,
                                       logTarget: bool, out: aclTensor):
    checks.not_null(gradOutput=gradOutput, self=self, target=target, out=out)
    # Python-only: the C signature makes these an int64 and a bool.
    reduction = checks.int_attr("reduction", reduction)
    logTarget = checks.bool_attr("logTarget", logTarget)
    checks.castable("self", self, "out", out)
    allowed, chip = supported_dtypes()
    named = (("gradOutput", gradOutput), ("self", self), ("target", target), ("out", out))
    for name, tensor in named:
        checks.dtype_in(name, tensor, allowed, chip)
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


aclnnKlDivBackward = second_phase("aclnnKlDivBackward")
