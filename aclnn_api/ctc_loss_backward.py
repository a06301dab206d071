"""aclnnCtcLossBackward (spec/OPS.md §2, decisions §10 #8).

The gradient of the CTC loss with respect to logProbs, by PyTorch CPU's `_ctc_loss_backward`
algorithm: a log-beta recursion per batch item, the log of the summed alpha*beta per class, then
out = (exp(lp) - exp(lcab + nll - lp)) * gradOut for t < inputLength, 0 beyond.

Checks run in the library's order: nulls (161001), the nine shape checks of §2.4, then dtypes (all
161002); N == 0 succeeds with workspace 0. Target labels and lengths are data: the kernel checks
them when it runs (a bad one is a device fault, never an out-of-bounds read).
"""
from __future__ import annotations


from . import _kernels, checks
from .arrays import aclIntArray
from emulator.dtypes import (ACL_BF16, ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT32, ACL_INT64,
                     aclDataTypeSize, dtype_name)
from .operator import KernelLaunch, Workspace, chip_dtypes, first_phase, second_phase, soc, view
from .tensor import aclTensor

TARGET_DTYPES = (ACL_INT32, ACL_INT64, ACL_BOOL, ACL_FLOAT, ACL_FLOAT16)  # non-int ones are cast to INT64
HALF_LIMITS = {"C": 200000, "N": 8180, "(A-1)/2": 1000}  # fp16/bf16 on 910B/910_93 (§2.3)
SCRATCH_SLOTS = 32  # sets of batch items, each with its own scratch, that threads claim in turn


def log_probs_dtypes() -> tuple:
    """FLOAT and DOUBLE; A2, A3 and 950 add FLOAT16 and BFLOAT16."""
    return chip_dtypes((ACL_FLOAT, ACL_DOUBLE), (ACL_FLOAT16, ACL_BF16))


def _max_floor0(array: aclIntArray) -> int:
    """The library's max of a length array, at least 0 (an empty or all-negative array gives 0)."""
    return max((0,) + array.values)


def _check_ranks(gradOut: aclTensor, negLogLikelihood: aclTensor, logProbs: aclTensor, logAlpha: aclTensor,
                 targets: aclTensor, out: aclTensor) -> None:
    checks.rank_is("gradOut", gradOut, (1,))
    checks.rank_is("negLogLikelihood", negLogLikelihood, (1,))
    checks.rank_is("logProbs", logProbs, (3,))
    checks.rank_is("logAlpha", logAlpha, (3,))
    checks.rank_is("targets", targets, (1, 2))
    checks.rank_is("out", out, (3,))


def _check_batch(n: int, named_sizes: list) -> None:
    for name, size in named_sizes:
        if size != n:
            checks.fail("Check batchSize failed: %s: expected the batch size N = %d of logProbs (dim 1), found %d"
                        % (name, n, size))


def _check_shapes(gradOut: aclTensor, logProbs: aclTensor, targets: aclTensor, inputLengths: aclIntArray,
                  targetLengths: aclIntArray, negLogLikelihood: aclTensor, logAlpha: aclTensor, blank: int,
                  out: aclTensor) -> None:
    """The nine shape checks of §2.4, in order."""
    if logProbs.rank >= 1 and logProbs.view_dims[0] == 0:
        checks.fail("logProbs: expected T = dim 0 > 0, found 0 (start (0) + length (1) exceeds dimension size (0)); "
                    "shape %s" % list(logProbs.view_dims))
    _check_ranks(gradOut, negLogLikelihood, logProbs, logAlpha, targets, out)
    t, n, c = logProbs.view_dims
    if not 0 <= blank < c:
        checks.fail("blank: expected 0 <= blank < C = %d (logProbs dim 2), found %d" % (c, blank))
    max_target_length = _max_floor0(targetLengths)
    alpha_width = logAlpha.view_dims[2]
    # Floor division: A = 0 cannot hold even the one entry (2*0+1) of an empty target.
    if max_target_length > (alpha_width - 1) // 2:
        checks.fail("S of targets must be smaller than half of alphaLength: targetLengths: expected a max <= "
                    "(A - 1) / 2 = %d for logAlpha dim 2 A = %d, found %d"
                    % ((alpha_width - 1) // 2, alpha_width, max_target_length))
    if targets.rank == 2 and targets.view_dims[1] < max_target_length:
        checks.fail("targets: expected dim 1 >= max(targetLengths) = %d for 2-D (padded) targets, found %d"
                    % (max_target_length, targets.view_dims[1]))
    _check_batch(n, [("gradOut dim 0", gradOut.view_dims[0]), ("out dim 1", out.view_dims[1]),
                     ("negLogLikelihood dim 0", negLogLikelihood.view_dims[0]),
                     ("logAlpha dim 0", logAlpha.view_dims[0]), ("inputLengths size", len(inputLengths)),
                     ("targetLengths size", len(targetLengths))]
                 + ([("targets dim 0", targets.view_dims[0])] if targets.rank == 2 else []))
    for name, size in (("out dim 0", out.view_dims[0]), ("logAlpha dim 1", logAlpha.view_dims[1])):
        if size != t:
            checks.fail("Check max time failed: %s: expected T = %d of logProbs (dim 0), found %d" % (name, t, size))
    if _max_floor0(inputLengths) > t:
        checks.fail("Check max time failed: inputLengths: expected values <= T = %d, found max %d"
                    % (t, _max_floor0(inputLengths)))
    if out.view_dims[2] != c:
        checks.fail("Check symbolSet failed: out dim 2: expected C = %d of logProbs (dim 2), found %d"
                    % (c, out.view_dims[2]))
    if targets.rank == 1 and targets.view_dims[0] != sum(targetLengths.values):
        checks.fail("targets: expected dim 0 == sum(targetLengths) = %d for 1-D (concatenated) targets, found %d"
                    % (sum(targetLengths.values), targets.view_dims[0]))
    # The library's last check, out shape == logProbs shape, is implied by the rank, batch, time and
    # symbolSet checks above.


def _check_dtypes(gradOut: aclTensor, logProbs: aclTensor, targets: aclTensor, negLogLikelihood: aclTensor,
                  logAlpha: aclTensor, out: aclTensor) -> None:
    allowed, chip = log_probs_dtypes()
    checks.dtype_in("logProbs", logProbs, allowed, chip)
    checks.same_dtype("gradOut", gradOut, "logProbs", logProbs)
    checks.dtype_in("targets", targets, TARGET_DTYPES)
    checks.same_dtype("negLogLikelihood", negLogLikelihood, "logProbs", logProbs)
    checks.same_dtype("logAlpha", logAlpha, "logProbs", logProbs)
    checks.same_dtype("out", out, "logProbs", logProbs)
    if logProbs.data_type in (ACL_FLOAT16, ACL_BF16) and soc().family in ("Ascend910B", "Ascend910_93"):
        _, n, c = logProbs.view_dims
        found = {"C": c, "N": n, "(A-1)/2": (logAlpha.view_dims[2] - 1) // 2}
        for what, limit in HALF_LIMITS.items():
            if found[what] > limit:
                checks.fail("logProbs: %s not supported now: expected %s <= %d with %s on %s, found %d"
                            % (dtype_name(logProbs.data_type), what, limit, dtype_name(logProbs.data_type),
                               soc().family, found[what]))


def workspace_layout(slots: int, label_width: int, data_type: int) -> tuple:
    """(labels, label classes, classes, beta, lcab) byte sizes, in workspace order, for `slots`
    batch items at once. As int64: the extended label sequence (targets cast to INT64, as the
    library does on the device), the index of each label among the item's distinct classes, and
    those classes (at most max targetLength + 1: the labels and the blank). In the compute type
    (fp64 for DOUBLE, else fp32): two rows of log beta, and lcab of each distinct class (lcab is
    -inf for every other class). Int64 first keeps every part aligned to its element size."""
    compute = aclDataTypeSize(ACL_DOUBLE if data_type == ACL_DOUBLE else ACL_FLOAT)
    classes = (label_width + 1) // 2
    return (slots * label_width * 8, slots * label_width * 8, slots * classes * 8,
            slots * 2 * label_width * compute, slots * classes * compute)


@first_phase("aclnnCtcLossBackward")
def aclnnCtcLossBackwardGetWorkspaceSize(gradOut: aclTensor, logProbs: aclTensor, targets: aclTensor,
                                         inputLengths: aclIntArray, targetLengths: aclIntArray,
                                         negLogLikelihood: aclTensor, logAlpha: aclTensor, blank: int,
                                         zeroInfinity: bool, out: aclTensor):
    checks.not_null(gradOut=gradOut, logProbs=logProbs, targets=targets)
    checks.not_null_arrays(inputLengths=inputLengths, targetLengths=targetLengths)
    checks.not_null(negLogLikelihood=negLogLikelihood, logAlpha=logAlpha, out=out)
    blank = checks.int_attr("blank", blank)
    zero_infinity = checks.bool_attr("zeroInfinity", zeroInfinity)
    _check_shapes(gradOut, logProbs, targets, inputLengths, targetLengths, negLogLikelihood, logAlpha, blank, out)
    _check_dtypes(gradOut, logProbs, targets, negLogLikelihood, logAlpha, out)
    n = logProbs.view_dims[1]
    if n == 0:
        return None
    slots = min(n, SCRATCH_SLOTS)
    label_width = 2 * _max_floor0(targetLengths) + 1  # l' and beta rows; logAlpha is read up to here
    sizes = workspace_layout(slots, label_width, logProbs.data_type)
    offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
    return KernelLaunch(
        _kernels.ctc_loss_backward,
        (view("gradOut", gradOut), view("logProbs", logProbs), view("targets", targets),
         view("negLogLikelihood", negLogLikelihood), view("logAlpha", logAlpha), view("out", out),
         list(inputLengths.values), list(targetLengths.values), blank, zero_infinity, slots, label_width,
         *(Workspace(offset, size) for offset, size in zip(offsets, sizes)), list(sizes)),
        workspace_size=sum(sizes))


aclnnCtcLossBackward = second_phase("aclnnCtcLossBackward")
