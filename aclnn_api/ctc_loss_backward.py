"""aclnnCtcLossBackward: the gradient of the CTC loss with respect to logProbs.

By PyTorch CPU's `_ctc_loss_backward` algorithm: a log-beta recursion per batch item, the log of
the summed alpha*beta per class, then out = (exp(lp) - exp(lcab + nll - lp)) * gradOut for
t < inputLength, 0 beyond. No reduction is applied (any scaling is already in gradOut).

Checks run in the library's order: nulls (161001), the nine shape checks (all 161002, after a
negative dim or a view of more than 2^37 elements, checks.MAX_VIEW_ELEMENTS), then dtypes (161002);
N == 0 succeeds with workspace 0. Target labels and lengths are data: the kernel checks them when it
runs (a bad one is a device fault, never an out-of-bounds read). docs/ops/ctc_loss_backward.md has
the checks in order.
"""
from __future__ import annotations

import functools

import numpy as np

from . import _kernels, checks
from .arrays import aclIntArray
from emulator.dtypes import (ACL_BF16, ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16, ACL_INT16, ACL_INT32, ACL_INT64,
                             item_size)
from .declaration import ErrorInput, IntArrayInput, OpDeclaration, SampleInput, TensorInput, declaration_files
from .operator import KernelLaunch, Workspace, first_phase, second_phase, soc, view
from .ctc_loss import (DTYPES, SCRATCH_SLOTS, TARGET_DTYPES, batch_labels as _labels, check_concatenated_length,
                       check_half_limits, check_padded_width, check_time_steps, declared_targets,
                       extended_labels as _extended, item_reads, log_alpha, max_floor0, random_labels)
from .tensor import aclTensor

OP = "aclnnCtcLossBackward"
# DTYPES (of logProbs), TARGET_DTYPES and SCRATCH_SLOTS are aclnnCtcLoss's, as are the checks the
# two operators share (imported above).


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
    """The nine shape checks of the library, in order."""
    checks.valid_shapes(gradOut=gradOut, logProbs=logProbs, targets=targets, negLogLikelihood=negLogLikelihood,
                        logAlpha=logAlpha, out=out)
    check_time_steps(logProbs)
    _check_ranks(gradOut, negLogLikelihood, logProbs, logAlpha, targets, out)
    t, n, c = logProbs.view_dims
    if not 0 <= blank < c:
        checks.fail("blank: expected 0 <= blank < C = %d (logProbs dim 2), found %d" % (c, blank))
    max_target_length = max_floor0(targetLengths)
    alpha_width = logAlpha.view_dims[2]
    half = (alpha_width - 1) // 2 if alpha_width > 0 else 0  # the library's C++ division, truncating
    if max_target_length > half:
        checks.fail("S of targets must be smaller than half of alphaLength: targetLengths: expected a max <= "
                    "(A - 1) / 2 = %d for logAlpha dim 2 A = %d, found %d" % (half, alpha_width, max_target_length))
    if alpha_width == 0 and n > 0:  # the library would read past logAlpha: an empty target needs 2*0+1 entries
        checks.fail("logAlpha: expected dim 2 A >= 1 (the one entry of an empty target) for N = %d batch items, "
                    "found 0" % n)
    check_padded_width(targets, max_target_length)
    _check_batch(n, [("gradOut dim 0", gradOut.view_dims[0]), ("out dim 1", out.view_dims[1]),
                     ("negLogLikelihood dim 0", negLogLikelihood.view_dims[0]),
                     ("logAlpha dim 0", logAlpha.view_dims[0]), ("inputLengths size", len(inputLengths)),
                     ("targetLengths size", len(targetLengths))]
                 + ([("targets dim 0", targets.view_dims[0])] if targets.rank == 2 else []))
    for name, size in (("out dim 0", out.view_dims[0]), ("logAlpha dim 1", logAlpha.view_dims[1])):
        if size != t:
            checks.fail("Check max time failed: %s: expected T = %d of logProbs (dim 0), found %d" % (name, t, size))
    if max_floor0(inputLengths) > t:
        checks.fail("Check max time failed: inputLengths: expected values <= T = %d, found max %d"
                    % (t, max_floor0(inputLengths)))
    if out.view_dims[2] != c:
        checks.fail("Check symbolSet failed: out dim 2: expected C = %d of logProbs (dim 2), found %d"
                    % (c, out.view_dims[2]))
    check_concatenated_length(targets, targetLengths)
    # The library's last check, out shape == logProbs shape, is implied by the rank, batch, time and
    # symbolSet checks above.


def _check_dtypes(gradOut: aclTensor, logProbs: aclTensor, targets: aclTensor, negLogLikelihood: aclTensor,
                  logAlpha: aclTensor, out: aclTensor) -> None:
    chip = soc().family
    checks.dtype_in("logProbs", logProbs, DTYPES.on(chip), chip)
    checks.same_dtype("gradOut", gradOut, "logProbs", logProbs)
    checks.dtype_in("targets", targets, TARGET_DTYPES)
    checks.same_dtype("negLogLikelihood", negLogLikelihood, "logProbs", logProbs)
    checks.same_dtype("logAlpha", logAlpha, "logProbs", logProbs)
    checks.same_dtype("out", out, "logProbs", logProbs)
    _, n, c = logProbs.view_dims
    check_half_limits(logProbs, n, c, logAlpha.view_dims[2], chip)


def _reads(logProbs: aclTensor, targets: aclTensor, inputLengths: aclIntArray, targetLengths: aclIntArray) -> dict:
    """What the kernel reads of logProbs and targets (item_reads) and of logAlpha (_alpha_boxes)."""
    reads = item_reads(logProbs.view_dims[2], targets, inputLengths, targetLengths)
    reads["logAlpha"] = functools.partial(_alpha_boxes, inputLengths.values, targetLengths.values)
    return reads


def _alpha_boxes(input_lengths: tuple, target_lengths: tuple) -> list:
    """Of logAlpha (N, T, A), item b's [b, t, s] for t < L_b and s <= 2 S_b only: the rest of its width A
    is padding, as are its rows t >= L_b."""
    return [((b, b + 1), (0, max(length, 0)), (0, 2 * max(count, 0) + 1))
            for b, (length, count) in enumerate(zip(input_lengths, target_lengths))]


def workspace_layout(slots: int, label_width: int, data_type: int) -> tuple:
    """(labels, label classes, classes, beta, lcab) byte sizes, in workspace order, for `slots`
    batch items at once. As int64: the extended label sequence (targets cast to INT64, as the
    library does on the device), the index of each label among the item's distinct classes, and
    those classes (at most max targetLength + 1: the labels and the blank). In the compute type
    (fp64 for DOUBLE, else fp32): two rows of log beta, and lcab of each distinct class (lcab is
    -inf for every other class). Int64 first keeps every part aligned to its element size. Each
    slot's rows start on a cache line of their own (the kernels' slot stride)."""
    compute = item_size(ACL_DOUBLE if data_type == ACL_DOUBLE else ACL_FLOAT)
    row, classes = _kernels.ctc_slot_stride(label_width), _kernels.ctc_slot_stride((label_width + 1) // 2)
    return (slots * row * 8, slots * row * 8, slots * classes * 8, slots * 2 * row * compute, slots * classes * compute)


@first_phase(OP)
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
    label_width = 2 * max_floor0(targetLengths) + 1  # l' and beta rows; logAlpha is read up to here
    sizes = workspace_layout(slots, label_width, logProbs.data_type)
    offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
    return KernelLaunch(
        _kernels.ctc_loss_backward,
        (view("gradOut", gradOut), view("logProbs", logProbs), view("targets", targets),
         view("negLogLikelihood", negLogLikelihood), view("logAlpha", logAlpha), view("out", out),
         list(inputLengths.values), list(targetLengths.values), blank, zero_infinity, slots, label_width,
         *(Workspace(offset, size) for offset, size in zip(offsets, sizes)), list(sizes)),
        workspace_size=sum(sizes), in_place=(("out", "logProbs"),),
        reads=_reads(logProbs, targets, inputLengths, targetLengths))


aclnnCtcLossBackward = second_phase(OP)


# ------------------------------------------------------------------------------------------------
# Declaration: a float64 alpha-beta recursion (Graves et al. 2006) as the reference; the alpha
# half is aclnnCtcLoss's

def forward(lp: np.ndarray, labels: list, input_lengths: list, blank: int, width: int) -> tuple:
    """(nll (N), log alpha (N, T, width)): the forward pass a caller hands over (aclnnCtcLoss's
    float64 reference); NaN where unused, so that a kernel reading there shows up."""
    return log_alpha(lp, labels, input_lengths, blank, width, fill=np.nan)


def reference(v: dict) -> np.ndarray:
    lp, la, nll, grad = v["logProbs"], v["logAlpha"], v["negLogLikelihood"], v["gradOut"]
    T, N, C = lp.shape
    out = np.zeros_like(lp)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for b, labels in enumerate(_labels(v["targets"], v["targetLengths"])):
            length = v["inputLengths"][b]
            if length == 0 or (v["zeroInfinity"] and nll[b] == np.inf):
                continue
            ext = _extended(labels, v["blank"])
            K = len(ext)
            skip = np.zeros(K, dtype=bool)
            skip[:K - 2] = ext[2:] != ext[:-2]
            beta = np.full((length, K), -np.inf)
            last = max(K - 2, 0)
            beta[length - 1, last:] = lp[length - 1, b, ext[last:]]
            for t in range(length - 2, -1, -1):
                following = beta[t + 1]
                one = np.append(following[1:], -np.inf)
                two = np.where(skip, np.concatenate([following[2:], [-np.inf, -np.inf]])[:K], -np.inf)
                beta[t] = np.logaddexp(np.logaddexp(following, one), two) + lp[t, b, ext]
            for t in range(length):
                lcab = np.full(C, -np.inf)
                np.logaddexp.at(lcab, ext, la[b, t, :K] + beta[t])
                out[t, b] = (np.exp(lp[t, b]) - np.exp(lcab + nll[b] - lp[t, b])) * grad[b]
    return out


def _sample(label: str, rng: np.random.Generator, T: int, C: int, blank: int, labels: list, input_lengths: list,
            padded: bool = True, target_dtype: int = ACL_INT64, width: int = 0, zero_infinity: bool = False,
            exact_alpha: bool = False) -> SampleInput:
    """Log-probabilities, their true forward (logAlpha of the NPU's width round_up(2S+1, 8), or
    PyTorch's 2S+1), targets whose padding holds an invalid label (C + 3) the kernel must not read;
    float targets are label + 0.25 (the cast to INT64 truncates)."""
    N = len(labels)
    logits = rng.normal(size=(T, N, C)) * 2
    lp = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))
    longest = max([len(l) for l in labels] + [0])
    alpha_width = 2 * longest + 1 if exact_alpha else -(-(2 * longest + 1) // 8) * 8
    nll, alpha = forward(lp, labels, input_lengths, blank, alpha_width)
    targets = declared_targets(labels, C, padded, width, target_dtype)
    return SampleInput(label, {
        "gradOut": TensorInput(rng.uniform(0.5, 2.0, size=N)), "logProbs": TensorInput(lp),
        "targets": TensorInput(targets, target_dtype), "inputLengths": IntArrayInput(tuple(input_lengths)),
        "targetLengths": IntArrayInput(tuple(len(l) for l in labels)), "negLogLikelihood": TensorInput(nll),
        "logAlpha": TensorInput(alpha), "blank": blank, "zeroInfinity": zero_infinity,
        "out": TensorInput(np.full(lp.shape, np.nan))})


def sample_inputs(rng: np.random.Generator) -> list:
    medium_lengths = list(rng.integers(1, 7, 8))
    samples = [
        _sample("T4 N2 C5", rng, 4, 5, 0, random_labels(rng, [2, 1], 5, 0), [4, 3], width=3),
        _sample("concatenated int32, blank last", rng, 8, 6, 5, [np.array([2, 2]), np.array([1, 3, 3, 4]),
                                                                 np.array([0])], [8, 8, 3], padded=False,
                target_dtype=ACL_INT32, exact_alpha=True),
        _sample("float targets, blank in the middle", rng, 6, 5, 2, random_labels(rng, [3, 1, 2], 5, 2), [6, 2, 5],
                target_dtype=ACL_FLOAT, width=4),
        _sample("infinite nll zeroed", rng, 5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]), np.array([2])],
                [2, 3, 5], zero_infinity=True),
        _sample("T30 N8 C20", rng, 30, 20, 0, random_labels(rng, medium_lengths, 20, 0),
                list(rng.integers(20, 31, 8))),
        _sample("empty batch", rng, 3, 4, 0, [], []),
    ]
    return samples + [samples[k].with_layout(layout) for k in (0, 4) for layout in ("transposed", "strided", "offset")]


F, H, B, D, I32, I16 = ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT32, ACL_INT16
NAMES = ("gradOut", "logProbs", "targets", "inputLengths", "targetLengths", "negLogLikelihood", "logAlpha", "out")
FLOATS = ("gradOut", "logProbs", "negLogLikelihood", "logAlpha", "out")


def _half_limit(n: int, c: int, a: int, dtype: int = H) -> dict:
    """Changes that make a call of N = n, C = c, logAlpha width a in `dtype`."""
    return {"gradOut": {"shape": (n,), "dtype": dtype}, "logProbs": {"shape": (1, n, c), "dtype": dtype},
            "targets": {"shape": (n, 1)}, "negLogLikelihood": {"shape": (n,), "dtype": dtype},
            "logAlpha": {"shape": (n, 1, a), "dtype": dtype}, "out": {"shape": (1, n, c), "dtype": dtype},
            "inputLengths": IntArrayInput((1,) * n), "targetLengths": IntArrayInput((1,) * n)}


ERRORS = (  # on the first sample: T 4, N 2, C 5, targets [2, 3], logAlpha [2, 4, 8], lengths [4, 3] and [2, 1]
    *(ErrorInput("null " + name, {name: None}, 161001, "%s: expected an acl" % name) for name in NAMES),
    ErrorInput("blank not an int64", {"blank": "0"}, 161002, "blank: expected an int64"),
    ErrorInput("zeroInfinity not a bool", {"zeroInfinity": 2}, 161002, "zeroInfinity: expected a bool"),
    ErrorInput("T zero", {"logProbs": {"shape": (0, 2, 5)}}, 161002, "exceeds dimension size (0)"),
    ErrorInput("gradOut rank", {"gradOut": {"shape": (2, 1)}}, 161002, "gradOut: expected 1 dims, found 2"),
    ErrorInput("negLogLikelihood rank", {"negLogLikelihood": {"shape": ()}}, 161002,
               "negLogLikelihood: expected 1 dims, found 0"),
    ErrorInput("logProbs rank", {"logProbs": {"shape": (4, 10)}}, 161002, "logProbs: expected 3 dims"),
    ErrorInput("logAlpha rank", {"logAlpha": {"shape": (2, 32)}}, 161002, "logAlpha: expected 3 dims"),
    ErrorInput("targets rank", {"targets": {"shape": (2, 3, 1)}}, 161002, "targets: expected 1 or 2 dims"),
    ErrorInput("out rank", {"out": {"shape": (4, 2, 5, 1)}}, 161002, "out: expected 3 dims"),
    ErrorInput("blank negative", {"blank": -1}, 161002, "blank: expected 0 <= blank < C"),
    ErrorInput("blank is C", {"blank": 5}, 161002, "blank: expected 0 <= blank < C = 5"),
    ErrorInput("logAlpha too narrow", {"logAlpha": {"shape": (2, 4, 4)}}, 161002,
               "S of targets must be smaller than half of alphaLength"),
    ErrorInput("targets too narrow", {"targets": {"shape": (2, 1)}}, 161002, "targets: expected dim 1 >= max(targetLengths)"),
    ErrorInput("batch of gradOut", {"gradOut": {"shape": (3,)}}, 161002, "Check batchSize failed: gradOut dim 0"),
    ErrorInput("batch of out", {"out": {"shape": (4, 3, 5)}}, 161002, "Check batchSize failed: out dim 1"),
    ErrorInput("batch of inputLengths", {"inputLengths": IntArrayInput((4, 3, 1))}, 161002,
               "Check batchSize failed: inputLengths size"),
    ErrorInput("batch of targets", {"targets": {"shape": (3, 3)}}, 161002, "Check batchSize failed: targets dim 0"),
    ErrorInput("time of out", {"out": {"shape": (5, 2, 5)}}, 161002, "Check max time failed: out dim 0"),
    ErrorInput("time of logAlpha", {"logAlpha": {"shape": (2, 3, 8)}}, 161002, "Check max time failed: logAlpha dim 1"),
    ErrorInput("inputLengths over T", {"inputLengths": IntArrayInput((5, 3))}, 161002,
               "Check max time failed: inputLengths: expected values <= T = 4, found max 5"),
    ErrorInput("symbolSet", {"out": {"shape": (4, 2, 6)}}, 161002, "Check symbolSet failed: out dim 2"),
    ErrorInput("concatenated targets", {"targets": {"shape": (4,)}, "logProbs": {"dtype": I32}}, 161002,
               "targets: expected dim 0 == sum(targetLengths) = 3"),
    ErrorInput("logProbs dtype", {"logProbs": {"dtype": I32}}, 161002, "logProbs: expected a dtype in"),
    ErrorInput("gradOut dtype", {"gradOut": {"dtype": D}}, 161002, "gradOut: expected dtype FLOAT (the dtype of logProbs)"),
    ErrorInput("targets dtype", {"targets": {"dtype": I16}}, 161002, "targets: expected a dtype in"),
    ErrorInput("negLogLikelihood dtype", {"negLogLikelihood": {"dtype": H}}, 161002, "negLogLikelihood: expected dtype"),
    ErrorInput("logAlpha dtype", {"logAlpha": {"dtype": B}}, 161002, "logAlpha: expected dtype"),
    ErrorInput("out dtype", {"out": {"dtype": D}}, 161002, "out: expected dtype"),
    ErrorInput("f16 on 910", {name: {"dtype": H} for name in FLOATS}, 161002,
               "logProbs: expected a dtype in [FLOAT, DOUBLE] on Ascend910", chip="Ascend910"),
    ErrorInput("C over the f16 limit", _half_limit(1, 200001, 3), 161002, "not supported now: expected C <= 200000",
               chip="Ascend910_93"),
    ErrorInput("N over the bf16 limit on 910_93", _half_limit(8181, 2, 3, B), 161002, "N <= 8180", chip="Ascend910_93"),
    ErrorInput("(A-1)/2 over the f16 limit", _half_limit(1, 2, 2003), 161002, "(A-1)/2 <= 1000", chip="Ascend910B"),
)

DECLARATION = OpDeclaration(
    name=OP, first_phase=aclnnCtcLossBackwardGetWorkspaceSize, second_phase=aclnnCtcLossBackward, dtypes=DTYPES,
    reference=reference, sample_inputs=sample_inputs, error_inputs=ERRORS, output="out",
    shape_checked=("gradOut", "logProbs", "targets", "negLogLikelihood", "logAlpha", "out"),
    **declaration_files("ctc_loss_backward"))
