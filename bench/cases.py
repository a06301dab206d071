"""The benchmark's case table: one `Operator` entry per aclnn operator.

An entry says how to build a case's inputs (deterministic `Source`s, see data.py, named by the
operator's parameters), how to call npuemu's first phase on device tensors, and what a PyTorch CPU
user runs for the same gradient (the fastest path: the aten backward op with out= where one exists,
else the composite of tensor ops with preallocated outputs). The operator's phases, its dtypes on
the emulated chip and the NumPy float64 reference that checks the PyTorch path once come from its
declaration (aclnn_api/declaration.py), not from here. PyTorch is imported only inside the torch
functions, so npuemu-only runs never load it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

import aclnn_api as nn
import emulator
from aclnn_api.declaration import OpDeclaration, all_declarations

from data import SEED, Source, bernoulli, normal, random_source, representable, rng, softmax_rows, uniform


@dataclass(frozen=True)
class Size:
    label: str                   # size class: "4x4", "1e5" or "large"
    shape: str                   # what the tables show
    params: dict = field(default_factory=dict, hash=False)

    @property
    def large(self) -> bool:
        return self.label == "large"


@dataclass
class Case:
    op: "Operator"
    size: Size
    dtype: int
    inputs: dict                 # aclnn parameter name -> Source (device tensors, uploaded in this order)
    output: tuple                # (aclnn parameter name, shape); its dtype is the case's dtype
    attrs: dict                  # host arguments; int lists become aclIntArray for npuemu
    reads: tuple                 # inputs the math must read (bytes moved = these + the output, once each)

    @property
    def output_bytes(self) -> int:
        return int(np.prod(self.output[1], dtype=np.int64)) * nn.aclDataTypeSize(self.dtype)

    @property
    def input_bytes(self) -> int:
        return sum(source.nbytes for source in self.inputs.values())

    @property
    def bytes_moved(self) -> int:
        return sum(self.inputs[name].nbytes for name in self.reads) + self.output_bytes


def output_elements(case: Case) -> int:
    """The output's element count: the work of a kernel that computes each output element once."""
    return int(np.prod(case.output[1], dtype=np.int64))


@dataclass(frozen=True)
class Operator:
    name: str
    sizes: tuple
    build: Callable[[Size, int], Case]
    npuemu_args: Callable[[dict, dict], tuple]             # (device tensors incl. output, host attrs) -> first-phase args
    torch_setup: Callable[[dict, dict, Any], Callable]     # (torch inputs, attrs, out) -> the timed call
    torch_path: str                                        # what the PyTorch column runs
    torch_upcasts: tuple = ()                              # dtypes PyTorch CPU lacks: run in float32 with casts
    check_inputs: Optional[Callable[[dict, dict], str]] = None  # extra torch check of derived inputs
    # Size classes where, without PyTorch, npuemu (float32 compute) is checked against the float64
    # formula with the spec tolerance. Not CTC's large case: float32 log-space recursions over
    # T = 400 steps drift by ~1e-3 relative from float64, in the real kernel as in PyTorch's.
    float64_check_sizes: tuple = ("4x4", "1e5", "large")
    # The large size cut to `units` rows of its inner layout, for the compute ceiling in cache
    # (roofline.py): same kernel, dtype and per-element work. None: the operator has no such form.
    in_cache: Optional[Callable[[Size, int], Size]] = None
    in_cache_why_not: str = ""                             # when in_cache is None: why
    # The kernel's work in a case, in units a compute ceiling counts per second (roofline.py):
    # its output elements, unless its work is not one step per output element.
    work: Callable[[Case], int] = output_elements
    work_unit: str = "elem"

    @property
    def declaration(self) -> Optional[OpDeclaration]:
        return DECLARATIONS.get("aclnn" + self.name)

    @property
    def first_phase_name(self) -> str:
        return "aclnn%sGetWorkspaceSize" % self.name

    def available(self) -> bool:
        return self.declaration is not None

    def first_phase(self) -> Callable:
        return self.declaration.first_phase

    def second_phase(self) -> Callable:
        return self.declaration.second_phase

    def dtypes(self) -> tuple:
        """The dtypes the operator accepts and runs on the emulated chip (NPUEMU_SOC)."""
        family = emulator.settings().profile.family
        return tuple(d for d in self.declaration.dtypes.on(family) if self.declaration.runs(family, d))

    def numpy_reference(self, values: dict, attrs: dict) -> np.ndarray:
        """The declaration's float64 reference of float64 inputs and the host attributes."""
        return self.declaration.reference({**values, **attrs})


DECLARATIONS = {d.name: d for d in all_declarations()}


def _torch():
    import torch
    return torch


def _quiet():
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


def _fixed_source(values: np.ndarray, dtype: int) -> Source:
    """A tensor of given values (small host-side data: targets, a buffer)."""
    values = np.asarray(values)
    rows = values.reshape(-1, values.shape[-1] if values.ndim else 1)
    return Source(values.shape, dtype, lambda block, start, count: rows[start:start + count])


def rows_of_last_dim(size: Size, units: int) -> Size:
    """`units` rows of the shape's last dimension: an element-wise kernel does the same work per
    element, and a broadcast operand (BCE's posWeight, one per class) keeps its layout."""
    width = size.params["shape"][-1]
    return Size("in-cache", "%dx%d" % (units, width), {"shape": (units, width)})


def heads_of_rows(size: Size, units: int) -> Size:
    """[1, H, units, S2] of a [B, H, S1, S2] softmax: rows of the same length, and each mask row
    ([B, 1, S1, S2]) shared by the H heads as in the large case."""
    _, heads, _, width = size.params["shape"]
    shape = (1, heads, units, width)
    return Size("in-cache", "x".join(map(str, shape)), {"shape": shape})


ELEMENTWISE_SIZES = (
    Size("4x4", "4x4", {"shape": (4, 4)}),
    Size("1e5", "316x316", {"shape": (316, 316)}),
    Size("large", "4096x4096", {"shape": (4096, 4096)}),
)

# ---------------------------------------------------------------------------------------------
# LogSigmoidBackward: gradInput = gradOutput / (1 + e^self); `buffer` is never read by aclnn, and
# PyTorch reads the forward's buffer exp(-|x|) in place of recomputing it.


def build_log_sigmoid(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    inputs = {"gradOutput": random_source("lsb.grad", shape, dtype, normal()),
              "self": random_source("lsb.self", shape, dtype, normal(3.0)),
              "buffer": _fixed_source(np.zeros(1), dtype)}
    return Case(LOG_SIGMOID, size, dtype, inputs, ("gradInput", shape), {}, ("gradOutput", "self"))


def torch_log_sigmoid(t: dict, attrs: dict, out):
    torch = _torch()
    buffer = torch.ops.aten.log_sigmoid_forward(t["self"])[1]   # what the forward pass saved
    backward = torch.ops.aten.log_sigmoid_backward.grad_input
    return lambda: backward(t["gradOutput"], t["self"], buffer, grad_input=out)



LOG_SIGMOID = Operator(
    "LogSigmoidBackward", ELEMENTWISE_SIZES, build_log_sigmoid,
    lambda t, a: (t["gradOutput"], t["self"], t["buffer"], t["gradInput"]),
    torch_log_sigmoid,
    "aten.log_sigmoid_backward.grad_input(grad, x, buffer, grad_input=out)",
    in_cache=rows_of_last_dim)

# ---------------------------------------------------------------------------------------------
# LogSigmoid (the forward): out = min(x, 0) - log1p(e^-|x|), at the backward's sizes. PyTorch CPU
# has no forward that writes only out: its kernel also writes the buffer e^-|x| that its backward
# reads. The fastest honest path is aten.log_sigmoid_forward.output with both preallocated
# (F.logsigmoid and aten.log_sigmoid.out allocate that buffer on every call); it writes twice the
# bytes npuemu does, which the PyTorch column includes.


def build_forward_log_sigmoid(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    inputs = {"self": random_source("ls.self", shape, dtype, normal(3.0))}
    return Case(FORWARD_LOG_SIGMOID, size, dtype, inputs, ("out", shape), {}, ("self",))


def torch_forward_log_sigmoid(t: dict, attrs: dict, out):
    torch = _torch()
    x = t["self"]
    buffer = torch.empty_like(x)
    forward = torch.ops.aten.log_sigmoid_forward.output
    return lambda: forward(x, output=out, buffer=buffer)


FORWARD_LOG_SIGMOID = Operator(
    "LogSigmoid", ELEMENTWISE_SIZES, build_forward_log_sigmoid,
    lambda t, a: (t["self"], t["out"]),
    torch_forward_log_sigmoid,
    "aten.log_sigmoid_forward.output(x, output=out, buffer=buffer), both preallocated (also writes buffer = e^-|x|)",
    in_cache=rows_of_last_dim)

# ---------------------------------------------------------------------------------------------
# BinaryCrossEntropyWithLogitsBackward, reduction none, weight (full shape) and posWeight (one
# per class, broadcast along the last dim as PyTorch users pass it).


def build_bce(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    inputs = {"gradOutput": random_source("bce.grad", shape, dtype, normal()),
              "self": random_source("bce.self", shape, dtype, normal(2.0)),
              "target": random_source("bce.target", shape, dtype, uniform(0.0, 1.0)),
              "weightOptional": random_source("bce.weight", shape, dtype, uniform(0.5, 1.5)),
              "posWeightOptional": random_source("bce.posWeight", shape[-1:], dtype, uniform(0.5, 2.0))}
    return Case(BCE, size, dtype, inputs, ("out", shape), {"reduction": 0},
                ("gradOutput", "self", "target", "weightOptional", "posWeightOptional"))


def torch_bce(t: dict, attrs: dict, out):
    """PyTorch's own formula (FunctionsManual binary_cross_entropy_with_logits_backward), with
    preallocated scratch: ((p·t + 1 − t)·σ(x) − p·t)·grad·weight."""
    torch = _torch()
    x, target, grad, weight, pos_weight = (t[k] for k in ("self", "target", "gradOutput", "weightOptional",
                                                          "posWeightOptional"))
    pt, coefficient = torch.empty_like(x), torch.empty_like(x)

    def run():
        torch.mul(target, pos_weight, out=pt)
        torch.sub(pt, target, out=coefficient).add_(1)
        torch.sigmoid(x, out=out)
        return out.mul_(coefficient).sub_(pt).mul_(grad).mul_(weight)
    return run



BCE = Operator(
    "BinaryCrossEntropyWithLogitsBackward", ELEMENTWISE_SIZES, build_bce,
    lambda t, a: (t["gradOutput"], t["self"], t["target"], t["weightOptional"], t["posWeightOptional"], a["reduction"],
                  t["out"]),
    torch_bce,
    "composite: mul, sub, add_, sigmoid, mul_, sub_, mul_, mul_ (out= and preallocated scratch)",
    in_cache=rows_of_last_dim)

# ---------------------------------------------------------------------------------------------
# BinaryCrossEntropyWithLogits, reduction none, with the backward case's weight (full shape) and
# posWeight (one per class): the loss per element.


def build_forward_bce(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    inputs = {"self": random_source("bce.self", shape, dtype, normal(2.0)),
              "target": random_source("bce.target", shape, dtype, uniform(0.0, 1.0)),
              "weightOptional": random_source("bce.weight", shape, dtype, uniform(0.5, 1.5)),
              "posWeightOptional": random_source("bce.posWeight", shape[-1:], dtype, uniform(0.5, 2.0))}
    return Case(FORWARD_BCE, size, dtype, inputs, ("out", shape), {"reduction": 0},
                ("self", "target", "weightOptional", "posWeightOptional"))


def torch_forward_bce(t: dict, attrs: dict, out):
    """What a PyTorch user calls; it has no out= variant, so its result is copied into out."""
    torch = _torch()
    x, target, weight, pos_weight = (t[k] for k in ("self", "target", "weightOptional", "posWeightOptional"))
    loss = torch.nn.functional.binary_cross_entropy_with_logits
    return lambda: out.copy_(loss(x, target, weight=weight, pos_weight=pos_weight, reduction="none"))


FORWARD_BCE = Operator(
    "BinaryCrossEntropyWithLogits", ELEMENTWISE_SIZES, build_forward_bce,
    lambda t, a: (t["self"], t["target"], t["weightOptional"], t["posWeightOptional"], a["reduction"], t["out"]),
    torch_forward_bce,
    "F.binary_cross_entropy_with_logits(x, t, weight, pos_weight, reduction='none'), copied into out",
    in_cache=rows_of_last_dim)

# ---------------------------------------------------------------------------------------------
# KlDivBackward, reduction none, logTarget false: out = -target * gradOutput (self is not read).


def build_kl_div(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    inputs = {"gradOutput": random_source("kl.grad", shape, dtype, normal()),
              "self": random_source("kl.self", shape, dtype, normal()),
              "target": random_source("kl.target", shape, dtype, uniform(0.0, 1.0))}
    return Case(KL_DIV, size, dtype, inputs, ("out", shape), {"reduction": 0, "logTarget": False},
                ("gradOutput", "target"))


def torch_kl_div(t: dict, attrs: dict, out):
    torch = _torch()
    target, grad = t["target"], t["gradOutput"]
    return lambda: torch.mul(target, grad, out=out).neg_()



KL_DIV = Operator(
    "KlDivBackward", ELEMENTWISE_SIZES, build_kl_div,
    lambda t, a: (t["gradOutput"], t["self"], t["target"], a["reduction"], a["logTarget"], t["out"]),
    torch_kl_div,
    "composite: torch.mul(target, grad, out=out).neg_()",
    in_cache=rows_of_last_dim)

# ---------------------------------------------------------------------------------------------
# KlDiv, at KlDivBackward's sizes, reduction none, logTarget false: out = target·(log target − self),
# 0 where target is 0. PyTorch's F.kl_div computes xlogy(t, t) − t·x into fresh tensors; the cheaper
# path with the same math writes xlogy into out and subtracts t·x in place (two passes, no allocation).


def build_forward_kl_div(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    inputs = {"self": random_source("klf.self", shape, dtype, normal()),
              "target": random_source("klf.target", shape, dtype, uniform(0.0, 1.0))}
    return Case(FORWARD_KL_DIV, size, dtype, inputs, ("out", shape), {"reduction": 0, "logTarget": False},
                ("self", "target"))


def torch_forward_kl_div(t: dict, attrs: dict, out):
    torch = _torch()
    x, target = t["self"], t["target"]
    return lambda: torch.xlogy(target, target, out=out).addcmul_(target, x, value=-1)


FORWARD_KL_DIV = Operator(
    "KlDiv", ELEMENTWISE_SIZES, build_forward_kl_div,
    lambda t, a: (t["self"], t["target"], a["reduction"], a["logTarget"], t["out"]),
    torch_forward_kl_div,
    "composite: torch.xlogy(target, target, out=out).addcmul_(target, self, value=-1) (F.kl_div allocates)",
    in_cache=rows_of_last_dim)

# ---------------------------------------------------------------------------------------------
# ScaledMaskedSoftmaxBackward: out = (g·y − Σ(g·y)·y)·scale, 0 where mask; mask [B,1,S1,S2].


def build_sms(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    mask_shape = (shape[0], 1) + tuple(shape[2:])
    inputs = {"gradOutput": random_source("sms.grad", shape, dtype, normal()),
              "y": random_source("sms.y", shape, dtype, softmax_rows),
              "mask": random_source("sms.mask", mask_shape, nn.ACL_BOOL, bernoulli(0.15))}
    return Case(SMS, size, dtype, inputs, ("out", shape), {"scale": 0.125, "fixTriuMask": False},
                ("gradOutput", "y", "mask"))


def torch_sms(t: dict, attrs: dict, out):
    torch = _torch()
    grad, y, mask, scale = t["gradOutput"], t["y"], t["mask"], attrs["scale"]
    softmax_backward = torch.ops.aten._softmax_backward_data.out

    def run():
        softmax_backward(grad, y, -1, y.dtype, grad_input=out)
        return out.mul_(scale).masked_fill_(mask, 0)
    return run



SMS = Operator(
    "ScaledMaskedSoftmaxBackward",
    (Size("4x4", "1x1x4x4", {"shape": (1, 1, 4, 4)}),
     Size("1e5", "2x4x96x128", {"shape": (2, 4, 96, 128)}),
     Size("large", "2x8x1024x1024", {"shape": (2, 8, 1024, 1024)}),
     Size("large", "8x16x512x512", {"shape": (8, 16, 512, 512)})),
    build_sms,
    lambda t, a: (t["gradOutput"], t["y"], t["mask"], a["scale"], a["fixTriuMask"], t["out"]),
    torch_sms,
    "aten._softmax_backward_data.out, then mul_(scale), masked_fill_(mask, 0)",
    in_cache=heads_of_rows)

# ---------------------------------------------------------------------------------------------
# ScaledMaskedSoftmax, the forward of the above at its sizes: y = softmax(x·scale, −10000 where
# mask) along the last axis; mask [B,1,S1,S2].


def build_sms_forward(size: Size, dtype: int) -> Case:
    shape = size.params["shape"]
    mask_shape = (shape[0], 1) + tuple(shape[2:])
    inputs = {"x": random_source("smsf.x", shape, dtype, normal(3.0)),
              "mask": random_source("smsf.mask", mask_shape, nn.ACL_BOOL, bernoulli(0.15))}
    return Case(FORWARD_SMS, size, dtype, inputs, ("y", shape), {"scale": 0.125, "fixTriuMask": False}, ("x", "mask"))


def torch_sms_forward(t: dict, attrs: dict, out):
    """The composite a PyTorch user writes, with a preallocated scratch: scale, mask, softmax."""
    torch = _torch()
    x, mask, scale = t["x"], t["mask"], attrs["scale"]
    scores = torch.empty_like(x)
    softmax = torch.ops.aten._softmax.out

    def run():
        torch.mul(x, scale, out=scores).masked_fill_(mask, -10000.0)
        return softmax(scores, -1, False, out=out)
    return run


FORWARD_SMS = Operator(
    "ScaledMaskedSoftmax", SMS.sizes, build_sms_forward,
    lambda t, a: (t["x"], t["mask"], a["scale"], a["fixTriuMask"], t["y"]),
    torch_sms_forward,
    "composite: torch.mul(x, scale, out=scratch), masked_fill_(mask, -10000), aten._softmax.out",
    in_cache=heads_of_rows)

# ---------------------------------------------------------------------------------------------
# CtcLossBackward. Inputs are what a forward pass would hand over: log-probabilities of a fairly
# confident model (each frame favours one label of an alignment of its target), and the true
# logAlpha / negLogLikelihood of those (rounded) log-probabilities, computed here in float64.
# logAlpha has CANN's width A = round_up(2·maxTargetLength + 1, 8); PyTorch reads the same tensor.

CTC_GROUP = 2    # batches whose alpha is computed together (one block of logAlpha: 2·T·A float64)


class CtcData:
    """Targets, lengths and the log-probability rows of one CTC case, plus its forward pass.

    `kept` < C makes a cut of the case (ctc_lattice_cut): the rows are still log-softmaxes over C
    classes, of which the tensor keeps the first `kept` (the labels are among them), so the values
    the recursion reads are distributed as the full case's; `full_lengths` gives every batch item
    the whole T and S instead of lengths drawn below them."""

    def __init__(self, T: int, N: int, C: int, S: int, dtype: int, blank: int = 0, kept: Optional[int] = None,
                 full_lengths: bool = False):
        self.T, self.N, self.C, self.S, self.dtype, self.blank = T, N, C, S, dtype, blank
        self.kept = kept or C
        self.A = -(-(2 * S + 1) // 8) * 8
        g = np.random.default_rng([SEED, T, N, C, S])
        self.target_lengths = np.full(N, S) if full_lengths else g.integers(max(1, S // 2), S + 1, N)
        self.target_lengths[0] = S
        self.input_lengths = np.full(N, T) if full_lengths else g.integers(max(S, 3 * T // 4), T + 1, N)
        self.input_lengths[0] = T
        self.targets = self._labels_without_repeats(g)
        self.path = self._alignment()
        self.nll = np.full(N, np.nan)

    def _labels_without_repeats(self, g: np.random.Generator) -> np.ndarray:
        """Labels 1..kept-1 (0 is blank), no label twice in a row, so that every frame of an
        alignment can carry a label and input length >= target length suffices."""
        labels = np.empty((self.N, self.S), dtype=np.int64)
        labels[:, 0] = g.integers(1, self.kept, self.N)
        for k in range(1, self.S):
            step = g.integers(1, self.kept - 1, self.N)
            labels[:, k] = (labels[:, k - 1] - 1 + step) % (self.kept - 1) + 1
        return labels

    def _alignment(self) -> np.ndarray:
        """path[t, b]: the label frame t of batch b favours (-1 past the input length)."""
        t = np.arange(self.T)[:, None]
        k = np.minimum(t * self.target_lengths[None, :] // self.input_lengths[None, :], self.S - 1)
        path = np.take_along_axis(self.targets.T, k, axis=0)
        return np.where(t < self.input_lengths[None, :], path, -1)

    def log_prob_rows(self, start: int, count: int) -> np.ndarray:
        """Rows start..start+count-1 of logProbs seen as (T·N, C): a log-softmax per row."""
        logits = np.stack([rng("ctc.logProbs", row).standard_normal(self.C) for row in range(start, start + count)])
        rows = np.arange(start, start + count)
        favoured = self.path[rows // self.N, rows % self.N]
        boosted = favoured >= 0
        logits[boosted, favoured[boosted]] += math.log(self.C) + 3.0
        shifted = logits - logits.max(axis=1, keepdims=True)
        return (shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))[:, :self.kept]

    def extended_labels(self, b0: int, b1: int) -> np.ndarray:
        """l' of batches b0..b1-1: blank, t1, blank, t2, ..., blank (width 2S+1)."""
        labels = np.full((b1 - b0, 2 * self.S + 1), self.blank, dtype=np.int64)
        labels[:, 1::2] = self.targets[b0:b1]
        return labels

    def alpha(self, b0: int, b1: int) -> np.ndarray:
        """log alpha (b1-b0, T, A) of the rounded log-probabilities, -inf where unused; records nll."""
        T, K = self.T, 2 * self.S + 1
        labels = self.extended_labels(b0, b1)
        lengths, tl = self.input_lengths[b0:b1], self.target_lengths[b0:b1]
        valid = np.arange(K)[None, :] < 2 * tl[:, None] + 1
        skip = np.zeros_like(valid)
        skip[:, 2:] = (labels[:, 2:] != self.blank) & (labels[:, 2:] != labels[:, :-2])
        out = np.full((b1 - b0, T, self.A), -np.inf)
        current = np.full((b1 - b0, K), -np.inf)
        with _quiet():
            for t in range(T):
                rows = representable(self.log_prob_rows(t * self.N + b0, b1 - b0), self.dtype)
                emit = np.take_along_axis(rows, labels, axis=1)
                if t == 0:
                    current[:, :2] = emit[:, :2]
                else:
                    one = np.concatenate([np.full((b1 - b0, 1), -np.inf), current[:, :-1]], axis=1)
                    two = np.concatenate([np.full((b1 - b0, 2), -np.inf), current[:, :-2]], axis=1)
                    current = np.logaddexp(np.logaddexp(current, one), np.where(skip, two, -np.inf)) + emit
                current = np.where(valid, current, -np.inf)
                out[:, t, :K] = np.where((t < lengths)[:, None], current, -np.inf)
        last = out[np.arange(b1 - b0), lengths - 1]
        end = 2 * tl
        self.nll[b0:b1] = -np.logaddexp(last[np.arange(b1 - b0), end], last[np.arange(b1 - b0), end - 1])
        return out

    def negative_log_likelihood(self) -> np.ndarray:
        for b0 in range(0, self.N, CTC_GROUP):
            if np.isnan(self.nll[b0:b0 + CTC_GROUP]).any():
                self.alpha(b0, min(b0 + CTC_GROUP, self.N))
        return self.nll


def build_ctc(size: Size, dtype: int) -> Case:
    p = size.params
    T, N, C, S = p["T"], p["N"], p["C"], p["S"]
    data = CtcData(T, N, C, S, dtype)
    group = min(CTC_GROUP, N)

    def log_alpha_block(block: int, start: int, count: int) -> np.ndarray:
        b0 = start // T
        return data.alpha(b0, b0 + count // T).reshape(count, data.A)

    inputs = {
        "gradOut": random_source("ctc.grad", (N,), dtype, uniform(0.5, 1.5)),
        "logProbs": Source((T, N, C), dtype, lambda block, start, count: data.log_prob_rows(start, count), 8),
        "targets": _fixed_source(data.targets, nn.ACL_INT64),
        "logAlpha": Source((N, T, data.A), dtype, log_alpha_block, T * group),
        "negLogLikelihood": Source((N,), dtype, lambda block, start, count: data.negative_log_likelihood()[None, :]),
    }
    attrs = {"inputLengths": [int(v) for v in data.input_lengths],
             "targetLengths": [int(v) for v in data.target_lengths], "blank": 0, "zeroInfinity": False}
    return Case(CTC, size, dtype, inputs, ("out", (T, N, C)), attrs,
                ("gradOut", "logProbs", "targets", "negLogLikelihood", "logAlpha"))


def torch_ctc(t: dict, attrs: dict, out):
    """aten._ctc_loss_backward.out; CPU has no float16/bfloat16 kernel, so those run in float32
    with the casts a user would need (included in the time)."""
    torch = _torch()
    lengths = (attrs["inputLengths"], attrs["targetLengths"])
    tail = (attrs["blank"], attrs["zeroInfinity"])
    grad, log_probs, targets, nll, log_alpha = (t[k] for k in ("gradOut", "logProbs", "targets", "negLogLikelihood", "logAlpha"))
    if log_probs.dtype in (torch.float32, torch.float64):
        backward = torch.ops.aten._ctc_loss_backward.out
        return lambda: backward(grad, log_probs, targets, *lengths, nll, log_alpha, *tail, out=out)
    backward = torch.ops.aten._ctc_loss_backward.default
    return lambda: out.copy_(backward(grad.float(), log_probs.float(), targets, *lengths, nll.float(),
                                      log_alpha.float(), *tail))



def check_ctc_forward(v: dict, attrs: dict) -> str:
    """Our float64 forward (logAlpha, nll) against aten._ctc_loss on the same log-probabilities."""
    torch = _torch()
    nll, alpha = torch.ops.aten._ctc_loss(torch.from_numpy(v["logProbs"]), torch.from_numpy(v["targets"]),
                                          attrs["inputLengths"], attrs["targetLengths"], attrs["blank"], False)
    errors = [float(np.max(np.abs(nll.numpy() - v["negLogLikelihood"])))]
    for b, length in enumerate(attrs["inputLengths"]):
        width = 2 * attrs["targetLengths"][b] + 1
        ours, theirs = v["logAlpha"][b, :length, :width], alpha.numpy()[b, :length, :width]
        finite = np.isfinite(theirs)
        if not np.array_equal(finite, np.isfinite(ours)):
            return "logAlpha: -inf pattern differs from aten._ctc_loss in batch %d" % b
        errors.append(float(np.max(np.abs(ours[finite] - theirs[finite]), initial=0.0)))
    worst = max(errors)
    return "" if worst < 1e-8 else "forward differs from aten._ctc_loss by %.3g" % worst


CTC = Operator(
    "CtcLossBackward",
    (Size("4x4", "T4 N4 C4 S2", {"T": 4, "N": 4, "C": 4, "S": 2}),
     Size("1e5", "T50 N4 C500 S20", {"T": 50, "N": 4, "C": 500, "S": 20}),
     Size("large", "T400 N64 C5000 S200", {"T": 400, "N": 64, "C": 5000, "S": 200})),
    build_ctc,
    lambda t, a: (t["gradOut"], t["logProbs"], t["targets"], a["inputLengths"], a["targetLengths"],
                  t["negLogLikelihood"], t["logAlpha"], a["blank"], a["zeroInfinity"], t["out"]),
    torch_ctc,
    "aten._ctc_loss_backward.out (float16/bfloat16: in float32 with casts)",
    torch_upcasts=(nn.ACL_FLOAT16, nn.ACL_BF16), check_inputs=check_ctc_forward, float64_check_sizes=("4x4", "1e5"),
    in_cache_why_not="its work is not proportional to the bytes it moves (alpha-beta recursions over T·S per batch, "
                     "an exp per output element over T·C), and one batch's logProbs alone (T·C) exceeds an L2")

# ---------------------------------------------------------------------------------------------
# CtcLoss (the forward) at CtcLossBackward's sizes, on the same log-probabilities and targets. Its
# output here is logAlphaOut (the declaration's), of the chip's width A; PyTorch runs
# aten._ctc_loss (what F.ctc_loss(reduction='none') runs) and puts its log_alpha into the same
# width with -inf where the recursion does not reach (rows t >= L too, which PyTorch leaves unset),
# a copy and a fill inside the timed call.


def build_ctc_forward(size: Size, dtype: int) -> Case:
    from aclnn_api.ctc_loss import alpha_width
    p = size.params
    T, N, C, S = p["T"], p["N"], p["C"], p["S"]
    data = CtcData(T, N, C, S, dtype, kept=p.get("kept"), full_lengths=p.get("full_lengths", False))
    A = alpha_width(S, emulator.settings().profile.family)
    inputs = {
        "logProbs": Source((T, N, data.kept), dtype, lambda block, start, count: data.log_prob_rows(start, count), 8),
        "targets": _fixed_source(data.targets, nn.ACL_INT64),
        "negLogLikelihoodOut": random_source("ctcf.nll", (N,), dtype, uniform(0.0, 1.0)),  # written, not read
    }
    attrs = {"inputLengths": [int(v) for v in data.input_lengths],
             "targetLengths": [int(v) for v in data.target_lengths], "blank": 0, "zeroInfinity": False}
    return Case(FORWARD_CTC, size, dtype, inputs, ("logAlphaOut", (N, T, A)), attrs, ("logProbs", "targets"))


def torch_ctc_forward(t: dict, attrs: dict, out):
    """aten._ctc_loss (float16/bfloat16: in float32 with the casts), its log_alpha copied into `out`'s
    width and -inf filled where the recursion does not reach (the mask is made outside the call)."""
    torch = _torch()
    lengths, blank = (attrs["inputLengths"], attrs["targetLengths"]), attrs["blank"]
    N, T, A = out.shape
    K = 2 * max(attrs["targetLengths"]) + 1
    unreached = torch.ones((N, T, A), dtype=torch.bool)
    for b, (L, S) in enumerate(zip(*lengths)):
        unreached[b, :L, :2 * S + 1] = False
    log_probs, targets = t["logProbs"], t["targets"]
    upcast = log_probs.dtype not in (torch.float32, torch.float64)

    def run():
        _, alpha = torch.ops.aten._ctc_loss(log_probs.float() if upcast else log_probs, targets, *lengths, blank,
                                            attrs["zeroInfinity"])
        out[:, :, :K].copy_(alpha)
        out.masked_fill_(unreached, float("-inf"))
    return run


# The forward's work is its alpha lattice, one log-space step per (t, s) of each batch item: L·(2S+1)
# cells for an item of input length L and target length S, whatever C is (the step gathers one
# class of row t). Its compute ceiling counts cells, on a cut that keeps what a cell costs (the
# distribution of the values it reads, no label repeated, the same share of the lattice still -inf
# while t < S) and fits an L2: batch items of a quarter of T and S, at full length, on 64 of the
# large case's classes. Its rows of 64 classes are dense where the large case's 5000 are read at
# 2S+1 places: the gathers' misses are exactly what the ceiling must not contain.
CTC_CUT_DIVISOR = 4
CTC_CUT_CLASSES = 64


def ctc_lattice_cells(case: Case) -> int:
    """Cells of the alpha lattices of a CTC case: sum of L·(2S+1) over its batch items."""
    return sum(L * (2 * S + 1) for L, S in zip(case.attrs["inputLengths"], case.attrs["targetLengths"]))


def ctc_lattice_cut(size: Size, units: int) -> Size:
    """`units` batch items of the large case's recursion, each T/4 steps of S/4 labels at full length."""
    p = size.params
    T, S = p["T"] // CTC_CUT_DIVISOR, p["S"] // CTC_CUT_DIVISOR
    return Size("in-cache", "T%d N%d C%d S%d" % (T, units, CTC_CUT_CLASSES, S),
                {"T": T, "N": units, "C": p["C"], "S": S, "kept": CTC_CUT_CLASSES, "full_lengths": True})


FORWARD_CTC = Operator(
    "CtcLoss",
    CTC.sizes,
    build_ctc_forward,
    lambda t, a: (t["logProbs"], t["targets"], a["inputLengths"], a["targetLengths"], a["blank"], a["zeroInfinity"],
                  t["negLogLikelihoodOut"], t["logAlphaOut"]),
    torch_ctc_forward,
    "aten._ctc_loss (as F.ctc_loss(reduction='none')), log_alpha copied into the NPU width, -inf where unreached "
    "(float16/bfloat16: in float32 with casts)",
    torch_upcasts=(nn.ACL_FLOAT16, nn.ACL_BF16), float64_check_sizes=("4x4", "1e5"),
    in_cache=ctc_lattice_cut, work=ctc_lattice_cells, work_unit="cell")

OPERATORS = (LOG_SIGMOID, FORWARD_LOG_SIGMOID, BCE, FORWARD_BCE, KL_DIV, FORWARD_KL_DIV, SMS, FORWARD_SMS, CTC, FORWARD_CTC)
BY_NAME = {op.name: op for op in OPERATORS}
