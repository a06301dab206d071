"""aclnnCtcLoss: the CTC loss of each batch item and the log-alpha table its gradient needs.

By PyTorch CPU's `_ctc_loss` algorithm: the log-alpha recursion per batch item, then
nll = -log(alpha[L-1, 2S] + alpha[L-1, 2S-1]); no reduction (any mean or sum is the caller's).
logAlphaOut is (N, T, A) with the NPU's width A = round_up(2·max targetLength + 1, 8), or
2·max targetLength + 1 on Ascend950, exactly what aclnnCtcLossBackward takes; every position the
recursion does not reach (s > 2S, rows t >= L, an item with L = 0) holds -inf. logProbs may be
unbatched (T, C): N = 1, a 0-D negLogLikelihoodOut and a (1, T, A) logAlphaOut.

Checks run in the library's order: nulls (161001), the shape and value checks (all 161002, after a
negative dim or a view of more than 2^37 elements, checks.MAX_VIEW_ELEMENTS), then dtypes (161002);
N == 0 succeeds with workspace 0. Target labels and negative lengths are data: the kernel checks
them when it runs (a bad one is a device fault, never an out-of-bounds read).
docs/ops/ctc_loss.md has the checks in order and the choices where the library is silent.
"""
from __future__ import annotations

import functools
import itertools
from typing import Optional

import numpy as np

from . import _kernels, checks
from .arrays import aclIntArray
from emulator.dtypes import (ACL_BF16, ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT16, ACL_INT32, ACL_INT64,
                             item_size, dtype_name)
from .declaration import (ChipDtypes, ErrorInput, IntArrayInput, OpDeclaration, SampleInput, TensorInput,
                          declaration_files)
from .operator import KernelLaunch, TensorView, Workspace, first_phase, second_phase, soc, view
from .tensor import aclTensor

OP = "aclnnCtcLoss"
OUTPUTS = ("negLogLikelihoodOut", "logAlphaOut")
DTYPES = ChipDtypes((ACL_FLOAT, ACL_DOUBLE), (ACL_FLOAT16, ACL_BF16))  # of logProbs; A2, A3 and 950 add halves
TARGET_DTYPES = (ACL_INT32, ACL_INT64, ACL_BOOL, ACL_FLOAT, ACL_FLOAT16)  # non-int ones are cast to INT64
HALF_LIMITS = {"C": 200000, "N": 8180, "(A-1)/2": 1000}  # fp16/bf16 on 910B/910_93
HALF_LIMIT_CHIPS = ("Ascend910B", "Ascend910_93")
UNPADDED_WIDTH_CHIPS = ("Ascend950",)  # regbase: logAlpha's width is 2·maxTL + 1 exactly
SCRATCH_SLOTS = 32  # sets of batch items, each with its own scratch, that threads claim in turn


def max_floor0(array: aclIntArray) -> int:
    """The library's max of a length array, at least 0 (an empty or all-negative array gives 0)."""
    return max((0,) + tuple(array.values))


# The checks aclnnCtcLoss and aclnnCtcLossBackward share (each calls them in its own order).

def check_time_steps(logProbs: aclTensor) -> None:
    """T = logProbs' dim 0 is not 0 (the library slices its first time step)."""
    if logProbs.rank >= 1 and logProbs.view_dims[0] == 0:
        checks.fail("logProbs: expected T = dim 0 > 0, found 0 (start (0) + length (1) exceeds dimension size (0)); "
                    "shape %s" % list(logProbs.view_dims))


def check_padded_width(targets: aclTensor, max_target_length: int) -> None:
    """2-D (padded) targets hold the longest target."""
    if targets.rank == 2 and targets.view_dims[1] < max_target_length:
        checks.fail("targets: expected dim 1 >= max(targetLengths) = %d for 2-D (padded) targets, found %d"
                    % (max_target_length, targets.view_dims[1]))


def check_concatenated_length(targets: aclTensor, targetLengths: aclIntArray) -> None:
    """1-D (concatenated) targets hold exactly the targets."""
    if targets.rank == 1 and targets.view_dims[0] != sum(targetLengths.values):
        checks.fail("targets: expected dim 0 == sum(targetLengths) = %d for 1-D (concatenated) targets, found %d"
                    % (sum(targetLengths.values), targets.view_dims[0]))


def check_half_limits(logProbs: aclTensor, n: int, c: int, alpha_width: int, chip: str) -> None:
    """FLOAT16/BFLOAT16 on Ascend910B/910_93: C, N and (A-1)/2 within the kernel's limits."""
    if logProbs.data_type not in (ACL_FLOAT16, ACL_BF16) or chip not in HALF_LIMIT_CHIPS:
        return
    found = {"C": c, "N": n, "(A-1)/2": (alpha_width - 1) // 2}
    for what, limit in HALF_LIMITS.items():
        if found[what] > limit:
            checks.fail("logProbs: %s not supported now: expected %s <= %d with %s on %s, found %d"
                        % (dtype_name(logProbs.data_type), what, limit, dtype_name(logProbs.data_type), chip,
                           found[what]))


def alpha_width(max_target_length: int, chip: str) -> int:
    """A, logAlphaOut's dim 2: 2·maxTL + 1 rounded up to a multiple of 8, except on Ascend950."""
    exact = 2 * max_target_length + 1
    return exact if chip in UNPADDED_WIDTH_CHIPS else -(-exact // 8) * 8


def item_reads(classes: int, targets: aclTensor, inputLengths: aclIntArray, targetLengths: aclIntArray) -> dict:
    """What both kernels read of logProbs (as the kernels see it: T, N, C) and targets, batch item by
    batch item, as KernelLaunch's `reads` takes it: of item b, the rows t < L_b of logProbs (whole: the
    classes of its labels are data), and its S_b labels (padded targets: the first S_b of row b, not the
    padding; concatenated: its slice). A negative length reads nothing: the kernel faults on it first.
    The boxes are made when initcheck asks: making them would double the cost of a first phase."""
    return {"logProbs": functools.partial(_row_boxes, classes, inputLengths.values),
            "targets": functools.partial(_label_boxes, targets.rank == 2, targetLengths.values)}


def _row_boxes(classes: int, input_lengths: tuple) -> list:
    """Of logProbs (T, N, C), the rows t < L_b of each item b."""
    return [((0, max(length, 0)), (b, b + 1), (0, classes)) for b, length in enumerate(input_lengths)]


def _label_boxes(padded: bool, target_lengths: tuple) -> list:
    """Each item's labels: the first S_b of row b of padded targets, its slice of concatenated ones."""
    counts = [max(length, 0) for length in target_lengths]
    if padded:
        return [((b, b + 1), (0, count)) for b, count in enumerate(counts)]
    return [((first, first + count),) for first, count in zip(itertools.accumulate([0] + counts), counts)]


def _logical_dims(logProbs: aclTensor) -> tuple:
    """(T, N, C) of 3-D logProbs, (T, 1, C) of unbatched 2-D ones."""
    dims = logProbs.view_dims
    return dims if len(dims) == 3 else (dims[0], 1, dims[1])


def _check_shapes(logProbs: aclTensor, targets: aclTensor, inputLengths: aclIntArray, targetLengths: aclIntArray,
                  blank: int, negLogLikelihoodOut: aclTensor, logAlphaOut: aclTensor, chip: str) -> None:
    """The library's shape and value checks, in order (all before any dtype check)."""
    checks.valid_shapes(logProbs=logProbs, targets=targets, negLogLikelihoodOut=negLogLikelihoodOut,
                        logAlphaOut=logAlphaOut)
    check_time_steps(logProbs)
    checks.rank_is("logProbs", logProbs, (2, 3))
    t, n, c = _logical_dims(logProbs)
    if not 0 <= blank < c:
        checks.fail("blank: expected 0 <= blank < C = %d (logProbs' last dim), found %d" % (c, blank))
    if len(inputLengths) != n:
        checks.fail("inputLengths: expected N = %d lengths (the batch of logProbs), found %d" % (n, len(inputLengths)))
    if max_floor0(inputLengths) > t:
        checks.fail("inputLengths: expected values <= T = %d (logProbs dim 0), found max %d"
                    % (t, max_floor0(inputLengths)))
    if len(targetLengths) != n:
        checks.fail("targetLengths: expected N = %d lengths (the batch of logProbs), found %d"
                    % (n, len(targetLengths)))
    checks.rank_is("targets", targets, (1, 2))
    max_target_length = max_floor0(targetLengths)
    if targets.rank == 2 and targets.view_dims[0] != n:
        checks.fail("targets: expected dim 0 == N = %d for 2-D (padded) targets, found %d" % (n, targets.view_dims[0]))
    check_padded_width(targets, max_target_length)
    check_concatenated_length(targets, targetLengths)
    expected = (n,) if logProbs.rank == 3 else ()
    if negLogLikelihoodOut.view_dims != expected:
        checks.fail("negLogLikelihoodOut: expected shape %s (%s), found %s"
                    % (list(expected), "N" if expected else "0-D for unbatched logProbs",
                       list(negLogLikelihoodOut.view_dims)))
    expected = (n, t, alpha_width(max_target_length, chip))
    if logAlphaOut.view_dims != expected:
        checks.fail("logAlphaOut: expected shape %s (N, T, A with A = %s for max(targetLengths) = %d on %s), found %s"
                    % (list(expected), "2*max+1" if chip in UNPADDED_WIDTH_CHIPS else "round_up(2*max+1, 8)",
                       max_target_length, chip, list(logAlphaOut.view_dims)))


def _check_dtypes(logProbs: aclTensor, targets: aclTensor, negLogLikelihoodOut: aclTensor, logAlphaOut: aclTensor,
                  chip: str) -> None:
    checks.dtype_in("logProbs", logProbs, DTYPES.on(chip), chip)
    _, n, c = _logical_dims(logProbs)  # the library reads dims 1 and 2 even of 2-D logProbs; N = 1 here
    check_half_limits(logProbs, n, c, logAlphaOut.view_dims[2], chip)
    checks.dtype_in("targets", targets, TARGET_DTYPES)
    checks.same_dtype("negLogLikelihoodOut", negLogLikelihoodOut, "logProbs", logProbs)
    checks.same_dtype("logAlphaOut", logAlphaOut, "logProbs", logProbs)


def workspace_layout(slots: int, label_width: int, data_type: int) -> tuple:
    """(labels, alpha rows) byte sizes, in workspace order, for `slots` batch items at once: the
    extended label sequence as INT64 (targets cast, as the library does on the device), then two
    rows of log alpha in the compute type (fp64 for DOUBLE, else fp32), as the A2/A3 kernel keeps
    its rows in fp32. Int64 first keeps both parts aligned to their element size. Each slot's rows
    start on a cache line of their own (the kernels' slot stride)."""
    compute = item_size(ACL_DOUBLE if data_type == ACL_DOUBLE else ACL_FLOAT)
    stride = _kernels.ctc_slot_stride(label_width)
    return slots * stride * 8, slots * 2 * stride * compute


def _batched_views(logProbs: aclTensor, negLogLikelihoodOut: aclTensor) -> tuple:
    """The kernel's (T, N, C) logProbs and (N) loss views; an unbatched (T, C) call is N = 1."""
    if logProbs.rank == 3:
        return view("logProbs", logProbs), view("negLogLikelihoodOut", negLogLikelihoodOut)
    (t, c), (step_t, step_c) = logProbs.view_dims, logProbs.strides
    return (TensorView("logProbs", logProbs, logProbs.data_type, (t, 1, c), (step_t, 0, step_c), logProbs.offset,
                       logProbs.view_nbytes),
            TensorView("negLogLikelihoodOut", negLogLikelihoodOut, negLogLikelihoodOut.data_type, (1,), (1,),
                       negLogLikelihoodOut.offset, negLogLikelihoodOut.view_nbytes))


@first_phase(OP, outputs=OUTPUTS)
def aclnnCtcLossGetWorkspaceSize(logProbs: aclTensor, targets: aclTensor, inputLengths: aclIntArray,
                                 targetLengths: aclIntArray, blank: int, zeroInfinity: bool,
                                 negLogLikelihoodOut: aclTensor, logAlphaOut: aclTensor):
    checks.not_null(logProbs=logProbs, targets=targets)
    checks.not_null_arrays(inputLengths=inputLengths, targetLengths=targetLengths)
    checks.not_null(negLogLikelihoodOut=negLogLikelihoodOut, logAlphaOut=logAlphaOut)
    blank = checks.int_attr("blank", blank)
    zero_infinity = checks.bool_attr("zeroInfinity", zeroInfinity)
    chip = soc().family
    _check_shapes(logProbs, targets, inputLengths, targetLengths, blank, negLogLikelihoodOut, logAlphaOut, chip)
    _check_dtypes(logProbs, targets, negLogLikelihoodOut, logAlphaOut, chip)
    n = _logical_dims(logProbs)[1]
    if n == 0:
        return None
    slots = min(n, SCRATCH_SLOTS)
    label_width = 2 * max_floor0(targetLengths) + 1  # l' and alpha scratch rows
    sizes = workspace_layout(slots, label_width, logProbs.data_type)
    log_probs, nll = _batched_views(logProbs, negLogLikelihoodOut)
    # No `reads` of outputs: the kernel writes logAlphaOut whole, rows t >= L as -inf too (the A2/A3
    # kernel leaves them unwritten; docs/ops/ctc_loss.md), so initcheck takes all of it as written.
    return KernelLaunch(
        _kernels.ctc_loss,
        (log_probs, view("targets", targets), nll, view("logAlphaOut", logAlphaOut), list(inputLengths.values),
         list(targetLengths.values), blank, zero_infinity, slots, label_width, Workspace(0, sizes[0]),
         Workspace(sizes[0], sizes[1]), list(sizes)),
        workspace_size=sum(sizes), in_place=(),
        reads=item_reads(log_probs.shape[2], targets, inputLengths, targetLengths))


aclnnCtcLoss = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# The float64 reference: PyTorch CPU's _ctc_loss forward, vectorised over the label positions

def extended_labels(labels: np.ndarray, blank: int) -> np.ndarray:
    """l': the blank at even positions, the labels at odd ones."""
    ext = np.full(2 * len(labels) + 1, blank, dtype=np.int64)
    ext[1::2] = labels
    return ext


def batch_labels(targets: np.ndarray, target_lengths: list) -> list:
    """Each batch item's labels, from padded (2-D) or concatenated (1-D) targets, cast to int64
    (floats truncate toward zero, as the library's cast)."""
    targets = np.asarray(targets).astype(np.int64)
    if targets.ndim == 2:
        return [targets[b, :length] for b, length in enumerate(target_lengths)]
    starts = np.cumsum([0] + list(target_lengths))
    return [targets[starts[b]:starts[b + 1]] for b in range(len(target_lengths))]


def _shifted(row: np.ndarray, by: int) -> np.ndarray:
    """The row moved `by` places up (towards larger s), -inf coming in."""
    return np.concatenate([np.full(by, -np.inf), row])[:len(row)]


def log_alpha(lp: np.ndarray, labels: list, input_lengths: list, blank: int, width: int,
              fill: float = -np.inf) -> tuple:
    """(nll (N), log alpha (N, T, width)) of log-probabilities lp (T, N, C), `fill` wherever the
    recursion does not reach. PyTorch's expressions: the max-shifted three-term sum (m = 0 when
    all terms are -inf, so +inf or NaN terms give NaN as there); nll = -ll without zeroInfinity."""
    T, N, _ = lp.shape
    alpha, nll = np.full((N, T, width), fill, dtype=np.float64), np.zeros(N)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for b in range(N):
            ext, length = extended_labels(labels[b], blank), input_lengths[b]
            K = len(ext)
            if length <= 0:
                nll[b] = -0.0 if K == 1 else np.inf
                continue
            skip = np.zeros(K, dtype=bool)
            skip[2:] = ext[2:] != ext[:-2]
            current = np.full(K, -np.inf)
            current[:2] = lp[0, b, ext[:2]]
            alpha[b, 0, :K] = current
            for t in range(1, length):
                one, two = _shifted(current, 1), np.where(skip, _shifted(current, 2), -np.inf)
                m = np.maximum(np.maximum(current, one), two)  # NaN propagates: the sum is NaN anyway
                m = np.where(m == -np.inf, 0.0, m)
                current = np.log(np.exp(current - m) + np.exp(one - m) + np.exp(two - m)) + m + lp[t, b, ext]
                alpha[b, t, :K] = current
            if K == 1:
                nll[b] = -current[0]
            else:
                l1, l2 = current[-1], current[-2]
                m = max(l1, l2) if not (np.isnan(l1) or np.isnan(l2)) else np.nan
                m = 0.0 if m == -np.inf else m
                nll[b] = -(np.log(np.exp(l1 - m) + np.exp(l2 - m)) + m)
    return nll, alpha


def forward_reference(v: dict) -> tuple:
    """(negLogLikelihoodOut, logAlphaOut) in float64, shaped as the call's outputs."""
    lp = np.asarray(v["logProbs"], dtype=np.float64)
    unbatched = lp.ndim == 2
    if unbatched:
        lp = lp[:, None, :]
    labels = batch_labels(v["targets"], v["targetLengths"])
    width = (np.shape(v["logAlphaOut"])[2] if "logAlphaOut" in v  # else the width of the chip in force
             else alpha_width(max([len(l) for l in labels] + [0]), soc().family))
    nll, alpha = log_alpha(lp, labels, v["inputLengths"], v["blank"], width)
    if v["zeroInfinity"]:
        nll = np.where(nll == np.inf, 0.0, nll)
    return (nll.reshape(()) if unbatched else nll), alpha


def reference(v: dict) -> np.ndarray:
    """logAlphaOut (the declaration's output); forward_reference gives both outputs."""
    return forward_reference(v)[1]


# ------------------------------------------------------------------------------------------------
# Declaration

def declared_targets(labels: list, C: int, padded: bool, width: Optional[int], target_dtype: int) -> np.ndarray:
    """A declared sample's targets: (N, width) padded with an invalid label (C + 3) the kernel must
    not read, or the labels concatenated; float targets are label + 0.25 (the cast to INT64
    truncates)."""
    longest = max([len(l) for l in labels] + [0])
    if padded:
        targets = np.full((len(labels), width or longest + 1), C + 3, dtype=np.int64)
        for b, l in enumerate(labels):
            targets[b, :len(l)] = l
    else:
        targets = np.concatenate([np.asarray(l, dtype=np.int64) for l in labels] + [np.zeros(0, np.int64)])
    return targets + 0.25 if target_dtype in (ACL_FLOAT, ACL_FLOAT16) else targets


def _sample(label: str, rng: np.random.Generator, T: int, C: int, blank: int, labels: list, input_lengths: list,
            padded: bool = True, target_dtype: int = ACL_INT64, width: int = 0, zero_infinity: bool = False,
            unbatched: bool = False, log_probs: Optional[np.ndarray] = None) -> SampleInput:
    """Log-probabilities (log-softmax of normal logits, unless given), targets as declared_targets
    makes them, and outputs of the chip in force's width, filled with NaN."""
    N = len(labels)
    if log_probs is None:
        logits = rng.normal(size=(T, N, C)) * 2
        log_probs = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))
    longest = max([len(l) for l in labels] + [0])
    targets = declared_targets(labels, C, padded, width, target_dtype)
    A = alpha_width(longest, soc().family)
    return SampleInput(label, {
        "logProbs": TensorInput(log_probs[:, 0, :] if unbatched else log_probs),
        "targets": TensorInput(targets, target_dtype), "inputLengths": IntArrayInput(tuple(input_lengths)),
        "targetLengths": IntArrayInput(tuple(len(l) for l in labels)), "blank": blank,
        "zeroInfinity": zero_infinity, "negLogLikelihoodOut": TensorInput(np.full(() if unbatched else (N,), np.nan)),
        "logAlphaOut": TensorInput(np.full((N, T, A), np.nan))})


def random_labels(rng: np.random.Generator, lengths: list, C: int, blank: int) -> list:
    """A label sequence of each length, of classes in [0, C) other than the blank."""
    classes = [c for c in range(C) if c != blank]
    return [rng.choice(classes, size=n).astype(np.int64) for n in lengths]


def _extremes(rng: np.random.Generator, T: int, N: int, C: int) -> np.ndarray:
    """Log-probabilities with -inf (log 0), -1e4, -80 and +80 among ordinary values."""
    lp = rng.normal(size=(T, N, C)) - 2.0
    picks = rng.random(size=lp.shape)
    lp[picks < 0.08] = -np.inf
    lp[(picks >= 0.08) & (picks < 0.12)] = -1e4
    lp[(picks >= 0.12) & (picks < 0.16)] = -80.0
    lp[(picks >= 0.16) & (picks < 0.18)] = 80.0
    return lp


def sample_inputs(rng: np.random.Generator) -> list:
    """Valid calls on the chip in force (logAlpha's width depends on it)."""
    medium_lengths = list(rng.integers(1, 7, 8))
    samples = [
        _sample("T4 N2 C5", rng, 4, 5, 0, random_labels(rng, [2, 1], 5, 0), [4, 3], width=3),
        _sample("concatenated int32, blank last", rng, 8, 6, 5, [np.array([2, 2]), np.array([1, 3, 3, 4]),
                                                                 np.array([0])], [8, 8, 3], padded=False,
                target_dtype=ACL_INT32),
        _sample("float targets, blank in the middle", rng, 6, 5, 2, random_labels(rng, [3, 1, 2], 5, 2), [6, 2, 5],
                target_dtype=ACL_FLOAT, width=4),
        _sample("zero lengths", rng, 5, 4, 0, [np.zeros(0, np.int64), np.array([1, 2]), np.zeros(0, np.int64),
                                               np.array([3])], [0, 0, 4, 5], target_dtype=ACL_FLOAT16),
        _sample("impossible alignments, zeroInfinity", rng, 5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]),
                                                                      np.array([2])], [2, 3, 5], zero_infinity=True),
        _sample("impossible alignments, concatenated", rng, 5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]),
                                                                      np.array([2])], [2, 3, 5], padded=False),
        _sample("extreme log-probabilities", rng, 7, 4, 1, random_labels(rng, [2, 3, 1], 4, 1), [7, 6, 7],
                log_probs=_extremes(rng, 7, 3, 4)),
        _sample("unbatched, concatenated", rng, 6, 5, 0, [np.array([3, 1, 1])], [6], padded=False, unbatched=True),
        _sample("unbatched, padded bool", rng, 5, 3, 0, [np.array([1, 1])], [5], target_dtype=ACL_BOOL,
                unbatched=True),
        _sample("T30 N8 C20", rng, 30, 20, 0, random_labels(rng, medium_lengths, 20, 0),
                list(rng.integers(20, 31, 8))),
        _sample("empty batch", rng, 3, 4, 0, [], []),
    ]
    first, unbatched, medium = samples[0], samples[7], samples[9]
    return samples + [s.with_layout(layout) for s in (first, unbatched, medium)
                      for layout in ("transposed", "strided", "offset")]


F, H, B, D, I32, I16 = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT32, ACL_INT16
NAMES = ("logProbs", "targets", "inputLengths", "targetLengths", "negLogLikelihoodOut", "logAlphaOut")
FLOATS = ("logProbs", "negLogLikelihoodOut", "logAlphaOut")


def _half_limit(n: int, c: int, max_target: int, dtype: int = H) -> dict:
    """Changes that make a call of N = n, C = c, T = 1 and max targetLength `max_target` in `dtype`
    (logAlpha's width that of A2/A3)."""
    return {"logProbs": {"shape": (1, n, c), "dtype": dtype}, "targets": {"shape": (n, max_target)},
            "negLogLikelihoodOut": {"shape": (n,), "dtype": dtype},
            "logAlphaOut": {"shape": (n, 1, alpha_width(max_target, "Ascend910B")), "dtype": dtype},
            "inputLengths": IntArrayInput((1,) * n), "targetLengths": IntArrayInput((max_target,) * n)}


ERRORS = (  # on the first sample: T 4, N 2, C 5, targets [2, 3], lengths [4, 3] and [2, 1], logAlpha [2, 4, 8]
    *(ErrorInput("null " + name, {name: None}, 161001, "%s: expected an acl" % name) for name in NAMES),
    ErrorInput("blank not an int64", {"blank": "0"}, 161002, "blank: expected an int64"),
    ErrorInput("zeroInfinity not a bool", {"zeroInfinity": 2}, 161002, "zeroInfinity: expected a bool"),
    ErrorInput("T zero", {"logProbs": {"shape": (0, 2, 5)}}, 161002, "exceeds dimension size (0)"),
    ErrorInput("logProbs rank 4", {"logProbs": {"shape": (4, 2, 5, 2)}}, 161002, "logProbs: expected 2 or 3 dims"),
    ErrorInput("logProbs rank 1", {"logProbs": {"shape": (4,)}}, 161002, "logProbs: expected 2 or 3 dims"),
    ErrorInput("blank negative", {"blank": -1}, 161002, "blank: expected 0 <= blank < C"),
    ErrorInput("blank is C", {"blank": 5}, 161002, "blank: expected 0 <= blank < C = 5"),
    ErrorInput("inputLengths size", {"inputLengths": IntArrayInput((4, 3, 1))}, 161002,
               "inputLengths: expected N = 2 lengths"),
    ErrorInput("inputLengths over T", {"inputLengths": IntArrayInput((5, 3))}, 161002,
               "inputLengths: expected values <= T = 4 (logProbs dim 0), found max 5"),
    ErrorInput("targetLengths size", {"targetLengths": IntArrayInput((2, 1, 1))}, 161002,
               "targetLengths: expected N = 2 lengths"),
    ErrorInput("targets rank", {"targets": {"shape": (2, 3, 1)}}, 161002, "targets: expected 1 or 2 dims"),
    ErrorInput("targets batch", {"targets": {"shape": (3, 3)}}, 161002, "targets: expected dim 0 == N = 2"),
    ErrorInput("targets too narrow", {"targets": {"shape": (2, 1)}}, 161002,
               "targets: expected dim 1 >= max(targetLengths) = 2"),
    ErrorInput("concatenated targets", {"targets": {"shape": (4,)}, "logProbs": {"dtype": I32}}, 161002,
               "targets: expected dim 0 == sum(targetLengths) = 3"),
    ErrorInput("negLogLikelihoodOut shape", {"negLogLikelihoodOut": {"shape": (3,)}}, 161002,
               "negLogLikelihoodOut: expected shape [2] (N), found [3]"),
    ErrorInput("negLogLikelihoodOut 0-D for batched logProbs", {"negLogLikelihoodOut": {"shape": ()}}, 161002,
               "negLogLikelihoodOut: expected shape [2] (N), found []"),
    ErrorInput("logAlphaOut width", {"logAlphaOut": {"shape": (2, 4, 9)}}, 161002,
               "logAlphaOut: expected shape [2, 4, 8]"),
    ErrorInput("logAlphaOut time", {"logAlphaOut": {"shape": (2, 5, 8)}}, 161002,
               "logAlphaOut: expected shape [2, 4, 8]"),
    ErrorInput("logAlphaOut padded width on 950", {"logAlphaOut": {"shape": (2, 4, 8)}}, 161002,
               "logAlphaOut: expected shape [2, 4, 5]", chip="Ascend950"),
    ErrorInput("logProbs dtype", {"logProbs": {"dtype": I32}}, 161002, "logProbs: expected a dtype in"),
    ErrorInput("f16 on 910", {name: {"dtype": H} for name in FLOATS}, 161002,
               "logProbs: expected a dtype in [FLOAT, DOUBLE] on Ascend910", chip="Ascend910"),
    ErrorInput("C over the f16 limit", _half_limit(1, 200001, 1), 161002, "not supported now: expected C <= 200000",
               chip="Ascend910_93"),
    ErrorInput("N over the bf16 limit on 910_93", _half_limit(8181, 2, 1, B), 161002, "N <= 8180",
               chip="Ascend910_93"),
    ErrorInput("(A-1)/2 over the f16 limit", _half_limit(1, 2, 1000), 161002, "(A-1)/2 <= 1000 with FLOAT16 on Ascend910B, found 1003",
               chip="Ascend910B"),
    ErrorInput("targets dtype", {"targets": {"dtype": I16}}, 161002, "targets: expected a dtype in"),
    ErrorInput("negLogLikelihoodOut dtype", {"negLogLikelihoodOut": {"dtype": D}}, 161002,
               "negLogLikelihoodOut: expected dtype FLOAT (the dtype of logProbs)"),
    ErrorInput("logAlphaOut dtype", {"logAlphaOut": {"dtype": B}}, 161002, "logAlphaOut: expected dtype FLOAT"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnCtcLossGetWorkspaceSize, second_phase=aclnnCtcLoss, dtypes=DTYPES,
    reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS, output="logAlphaOut",
    shape_checked=("logProbs", "targets", "negLogLikelihoodOut", "logAlphaOut"),
    **declaration_files("ctc_loss"))
