"""aclnnCtcLossBackward: the cases its declaration does not generate (values across chips, dtypes
and layouts, dtypes, empty batch and every check in the library's order are in
test_operators.py): values against the declaration's float64 reference, cross-checked against
PyTorch's _ctc_loss_backward when torch is installed, across target layouts and dtypes x blank
positions x lengths (zero too) x zeroInfinity x views strided per tensor; targets equal to the
blank; what the rules accept; data faults; the workspace; determinism over many batch items of
mixed lengths; the documentation's sample."""
from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pytest

import acl
import aclnn_api as nn
from aclnn_api import ctc_loss_backward as ctc
import emulator
from support import ALL_SOCS, assert_close, assert_sample_prints, kernel_variants, last_error, npu, representable

try:
    import torch
except ImportError:  # the NumPy reference runs alone
    torch = None

OP = (nn.aclnnCtcLossBackwardGetWorkspaceSize, nn.aclnnCtcLossBackward)
F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
I32, I64, BOOL = nn.ACL_INT32, nn.ACL_INT64, nn.ACL_BOOL
HALF_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")


def dtypes_of(soc: str) -> tuple:
    return (F, H, B, D) if soc in HALF_SOCS else (F, D)


# ------------------------------------------------------------------------------------------------
# The declaration's float64 NumPy reference (the CTC alpha-beta recursion), on lists of labels

def padded(labels: list) -> np.ndarray:
    """Labels as 2-D (padded) targets."""
    rows = np.zeros((len(labels), max([len(l) for l in labels] + [0])), dtype=np.int64)
    for b, l in enumerate(labels):
        rows[b, :len(l)] = l
    return rows


def numpy_forward(lp: np.ndarray, labels: list, input_lengths: list, blank: int) -> tuple:
    """(nll (N), log alpha (N, T, 2*maxS+1)), NaN where unused."""
    return ctc.forward(lp, labels, input_lengths, blank, 2 * max([len(l) for l in labels] + [0]) + 1)


def numpy_backward(grad: np.ndarray, lp: np.ndarray, labels: list, input_lengths: list, nll: np.ndarray,
                   alpha: np.ndarray, blank: int, zero_infinity: bool) -> np.ndarray:
    return ctc.reference({"gradOut": grad, "logProbs": lp, "targets": padded(labels), "inputLengths": input_lengths,
                          "targetLengths": [len(l) for l in labels], "negLogLikelihood": nll, "logAlpha": alpha,
                          "blank": blank, "zeroInfinity": zero_infinity})


# ------------------------------------------------------------------------------------------------
# PyTorch (float64), when installed

def torch_targets(labels: list, padded: bool, width: int) -> "torch.Tensor":
    if padded:
        rows = np.zeros((len(labels), width), dtype=np.int64)
        for b, l in enumerate(labels):
            rows[b, :len(l)] = l
        return torch.from_numpy(rows)
    return torch.from_numpy(np.concatenate([np.asarray(l, dtype=np.int64) for l in labels] + [np.zeros(0, np.int64)]))


def torch_forward(lp, labels, input_lengths, blank) -> tuple:
    nll, alpha = torch.ops.aten._ctc_loss(torch.from_numpy(lp), torch_targets(labels, False, 0), input_lengths,
                                          [len(l) for l in labels], blank, False)
    return nll.numpy().copy(), alpha.numpy().copy()


def torch_backward(grad, lp, labels, padded, width, input_lengths, nll, alpha, blank, zero_infinity) -> np.ndarray:
    return torch.ops.aten._ctc_loss_backward(
        torch.from_numpy(grad), torch.from_numpy(lp), torch_targets(labels, padded, width), input_lengths,
        [len(l) for l in labels], torch.from_numpy(nll), torch.from_numpy(alpha), blank, zero_infinity).numpy()


# ------------------------------------------------------------------------------------------------
# Cases

@dataclass
class Case:
    T: int
    C: int
    blank: int
    labels: list                      # per batch item, int labels
    input_lengths: list
    padded: bool = True               # 2-D (N, target_width) or 1-D concatenated targets
    target_dtype: int = I64
    target_width: Optional[int] = None  # padded width (>= max target length); default max + 2
    alpha_width: str = "round8"       # "round8": the NPU forward's width; "exact": PyTorch's 2*maxS+1
    zero_infinity: bool = False
    layouts: dict = field(default_factory=dict)  # tensor name -> (order of dims outer..inner, gap, offset)
    minus_inf_classes: tuple = ()     # classes (none of the labels) whose logProbs are -inf: NaN gradient

    @property
    def N(self) -> int:
        return len(self.labels)

    @property
    def max_target(self) -> int:
        return max([len(l) for l in self.labels] + [0])

    def alpha_columns(self) -> int:
        exact = 2 * self.max_target + 1
        return exact if self.alpha_width == "exact" else -(-exact // 8) * 8


def random_labels(rng, lengths, C, blank) -> list:
    classes = [c for c in range(C) if c != blank]
    return [rng.choice(classes, size=n).astype(np.int64) for n in lengths]


def _scenarios() -> dict:
    """name -> Case factory(rng). Every label differs from the blank (PyTorch's contract)."""
    strided = {"logProbs": ((1, 0, 2), 1, 5), "out": ((2, 1, 0), 2, 3), "logAlpha": ((2, 0, 1), 1, 2),
               "targets": ((1, 0), 2, 1), "gradOut": ((0,), 2, 1), "negLogLikelihood": ((0,), 3, 0)}
    return {
        "padded-int64-blank-first": lambda r: Case(7, 5, 0, random_labels(r, [2, 3, 0], 5, 0), [7, 6, 5]),
        "concat-int32-blank-last": lambda r: Case(8, 6, 5, [np.array([2, 2]), np.array([1, 3, 3, 4]), np.array([0])],
                                                  [8, 8, 3], padded=False, target_dtype=I32, alpha_width="exact"),
        "padded-float-blank-middle": lambda r: Case(6, 5, 2, random_labels(r, [3, 1, 2], 5, 2), [6, 2, 5],
                                                    target_dtype=F, target_width=4),
        "concat-float16-short-lengths": lambda r: Case(9, 4, 1, random_labels(r, [1, 2, 0, 3], 4, 1), [1, 4, 0, 9],
                                                       padded=False, target_dtype=H),
        "padded-bool": lambda r: Case(5, 3, 2, [np.array([1, 0]), np.array([1]), np.array([0, 0, 1])], [5, 4, 5],
                                      target_dtype=BOOL, alpha_width="exact"),
        "all-targets-empty-2d": lambda r: Case(4, 3, 0, [np.zeros(0, np.int64)] * 2, [4, 2], target_width=2),
        "infinite-nll-zeroed": lambda r: Case(5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]), np.array([2])],
                                              [2, 3, 5], zero_infinity=True),
        "infinite-nll-propagates": lambda r: Case(5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]), np.array([2])],
                                                  [2, 3, 5], padded=False),
        # Rows of several of the kernel's chunks (1024 classes) and whole vectors, labels in each chunk
        # and at its edges, -inf logProbs outside l' (the formula's NaN).
        "wide-rows": lambda r: Case(6, 2600, 0, [np.array([3, 1500, 2599, 1500, 1023]), np.array([1024, 1030, 7])],
                                    [6, 5], minus_inf_classes=(17, 1025, 2598)),
        "strided-padded": lambda r: Case(6, 4, 3, random_labels(r, [2, 1, 3], 4, 3), [6, 5, 4], layouts=strided),
        "strided-concat": lambda r: Case(5, 5, 1, random_labels(r, [2, 2], 5, 1), [5, 3], padded=False,
                                         target_dtype=I32, layouts={**strided, "targets": ((0,), 3, 2)}),
    }


SCENARIOS = _scenarios()


def strided(shape: tuple, order: tuple, gap: int, offset: int) -> dict:
    """Layout whose storage order is `order` (outer to inner dims), innermost step `gap`."""
    strides, step = [0] * len(shape), gap
    for dim in reversed(order):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return {"strides": strides, "offset": offset}


def target_values(case: Case) -> np.ndarray:
    """The targets tensor: padding holds an invalid label (C + 3), which the kernel must not read;
    float targets are label + 0.25 (the cast to INT64 truncates)."""
    if case.padded:
        width = case.target_width if case.target_width is not None else case.max_target + 2
        values = np.full((case.N, width), case.C + 3, dtype=np.int64)
        for b, l in enumerate(case.labels):
            values[b, :len(l)] = l
    else:
        values = np.concatenate([np.asarray(l, dtype=np.int64) for l in case.labels] + [np.zeros(0, np.int64)])
    if case.target_dtype in (F, H):
        return values + 0.25
    if case.target_dtype == BOOL:
        return values.astype(bool)
    return values


@dataclass
class Inputs:
    grad: np.ndarray
    lp: np.ndarray
    nll: np.ndarray
    alpha: np.ndarray  # (N, T, alpha_columns), NaN outside t < L_b, s < 2*S_b + 1


def make_inputs(case: Case, dtype: int, rng) -> Inputs:
    """Inputs as `dtype` holds them (float64 values); nll/logAlpha are the true forward results of
    the rounded logProbs (PyTorch's when installed, else NumPy's, cross-checked)."""
    logits = rng.normal(size=(case.T, case.N, case.C)) * 2
    lp = representable(logits - np.log(np.exp(logits).sum(axis=2, keepdims=True)), dtype)
    lp[:, :, list(case.minus_inf_classes)] = -np.inf
    nll, alpha = numpy_forward(lp, case.labels, case.input_lengths, case.blank)
    if torch is not None:
        torch_nll, torch_alpha = torch_forward(lp, case.labels, case.input_lengths, case.blank)
        np.testing.assert_allclose(nll, torch_nll, rtol=1e-12)
        for b, l in enumerate(case.labels):
            used = (slice(0, case.input_lengths[b]), slice(0, 2 * len(l) + 1))
            np.testing.assert_allclose(alpha[b][used], torch_alpha[b][used], rtol=1e-12)
        nll, alpha = torch_nll, torch_alpha
    padded_alpha = np.full((case.N, case.T, case.alpha_columns()), np.nan)
    for b, l in enumerate(case.labels):
        L, W = case.input_lengths[b], 2 * len(l) + 1
        padded_alpha[b, :L, :W] = alpha[b, :L, :W]
    grad = representable(rng.uniform(0.5, 2.0, size=case.N), dtype)
    return Inputs(grad, lp, representable(nll, dtype), representable(padded_alpha, dtype))


def reference(case: Case, x: Inputs) -> np.ndarray:
    """NumPy float64, cross-checked against PyTorch's _ctc_loss_backward when installed."""
    expected = numpy_backward(x.grad, x.lp, case.labels, case.input_lengths, x.nll, x.alpha, case.blank,
                              case.zero_infinity)
    if torch is not None:
        width = case.target_width if case.target_width is not None else case.max_target + 2
        by_torch = torch_backward(x.grad, x.lp, case.labels, case.padded, width, case.input_lengths, x.nll,
                                  x.alpha, case.blank, case.zero_infinity)
        np.testing.assert_allclose(expected, by_torch, rtol=1e-9, atol=1e-12, equal_nan=True)
    return expected


def run_kernel(device, case: Case, x: Inputs, dtype: int, written: Optional[dict] = None) -> np.ndarray:
    """Both phases on device tensors of the case's layouts; returns `out` (prefilled with NaN, so
    that an element the kernel does not write shows up). `written`: {tensor name: mask of the elements
    uploaded}, for tensors of which nothing else is ever written."""
    def tensor(name, values, tensor_dtype):
        layout = case.layouts.get(name)
        return device.tensor(values, tensor_dtype, written=(written or {}).get(name),
                             **(strided(np.shape(values), *layout) if layout else {}))

    tensors = [tensor("gradOut", x.grad, dtype), tensor("logProbs", x.lp, dtype),
               tensor("targets", target_values(case), case.target_dtype)]
    nll, alpha = tensor("negLogLikelihood", x.nll, dtype), tensor("logAlpha", x.alpha, dtype)
    out = tensor("out", np.full(x.lp.shape, np.nan), dtype)
    input_lengths = nn.aclCreateIntArray(case.input_lengths)
    target_lengths = nn.aclCreateIntArray([len(l) for l in case.labels])
    try:
        ret = device.run(*OP, *(t.tensor for t in tensors), input_lengths, target_lengths, nll.tensor, alpha.tensor,
                         case.blank, case.zero_infinity, out.tensor)
        assert ret == 0, last_error()
        return device.read(out)
    finally:
        nn.aclDestroyIntArray(input_lengths)
        nn.aclDestroyIntArray(target_lengths)


@pytest.mark.parametrize("soc,scenario", list(itertools.product(ALL_SOCS, SCENARIOS)))
def test_values_match_float64_references(soc, scenario):
    rng = np.random.default_rng(zlib.crc32((soc + scenario).encode()))
    case = SCENARIOS[scenario](rng)
    with npu(soc) as device:
        for dtype in dtypes_of(soc):
            x = make_inputs(case, dtype, rng)
            expected = reference(case, x)
            assert_close(run_kernel(device, case, x, dtype), expected, dtype)


def read_masks(labels: list, input_lengths: list, T: int, C: int, targets_shape: tuple, alpha_width: int) -> dict:
    """Where the two CTC kernels read their inputs, by name: logProbs (T, N, C) rows t < L_b of item b,
    its S_b labels of the targets (not a padded row's padding), and logAlpha[b, t, s] for t < L_b and
    s <= 2 S_b (OPS.md §2.2: the rest of the width A is padding)."""
    N = len(labels)
    masks = {"logProbs": np.zeros((T, N, C), bool), "targets": np.zeros(targets_shape, bool),
             "logAlpha": np.zeros((N, T, alpha_width), bool)}
    for b, (l, L) in enumerate(zip(labels, input_lengths)):
        masks["logProbs"][:L, b] = True
        masks["logAlpha"][b, :L, :2 * len(l) + 1] = True
        if len(targets_shape) == 2:
            masks["targets"][b, :len(l)] = True
    if len(targets_shape) == 1:
        masks["targets"][:] = True  # every item's slice
    return masks


def case_read_masks(case: Case) -> dict:
    return read_masks(case.labels, case.input_lengths, case.T, case.C, np.shape(target_values(case)),
                      case.alpha_columns())


@pytest.mark.parametrize("scenario", ["padded-int64-blank-first", "concat-float16-short-lengths", "strided-padded",
                                      "infinite-nll-zeroed"])
def test_inputs_written_only_where_the_kernel_reads_them_give_the_gradient_and_no_report(scenario):
    """logAlpha past t < L_b, s <= 2 S_b, logProbs rows t >= L_b and the padding of targets are never
    written: the gradient is the same, and initcheck reports nothing (the fixture fails on a report)."""
    rng = np.random.default_rng(zlib.crc32(scenario.encode()))
    case = SCENARIOS[scenario](rng)
    with npu() as device:
        x = make_inputs(case, F, rng)
        assert_close(run_kernel(device, case, x, F, written=case_read_masks(case)), reference(case, x), F)


@pytest.mark.parametrize("name,position", [("logAlpha", (1, 3, 2)), ("logProbs", (3, 1, 2)), ("targets", (1, 0))])
@pytest.mark.sanitizer_reports("uninitialised read")
def test_an_input_position_the_kernel_reads_left_unwritten_is_reported(name, position):
    """Item 1 of 'padded-bool' (L = 4, S = 1): its last alpha row's last label state, a class of its last
    logProbs row, its label (BOOL targets: the poison reads as label 1, not a fault)."""
    rng = np.random.default_rng(1)
    case = SCENARIOS["padded-bool"](rng)
    masks = case_read_masks(case)
    assert masks[name][position]
    masks[name][position] = False
    with npu() as device:
        run_kernel(device, case, make_inputs(case, F, rng), F, written=masks)
    (finding,) = emulator.reports()
    assert "aclnnCtcLossBackward reads tensor %s " % name in finding.message and \
        "of which %d byte(s)" % (1 if name == "targets" else 4) in finding.message, finding.message


def test_infinite_nll_gives_zeros_or_nan_as_the_formula_says():
    """Guards the scenarios above: the impossible alignment really has nll = inf."""
    case = SCENARIOS["infinite-nll-propagates"](None)
    x = make_inputs(case, D, np.random.default_rng(0))
    assert x.nll[0] == np.inf and np.isfinite(x.nll[1:]).all()
    assert np.isnan(reference(case, x)[:2, 0]).all()
    zeroed = SCENARIOS["infinite-nll-zeroed"](None)
    assert (reference(zeroed, x)[:, 0] == 0).all()


@pytest.mark.skipif(torch is None, reason="PyTorch defines the behaviour for targets equal to the blank")
def test_targets_equal_to_the_blank_follow_pytorch():
    """A label equal to the blank is outside PyTorch's contract; the kernel still does what
    PyTorch's CPU code does (at t = L-1 the last label's alpha*beta replaces the blank's)."""
    case = Case(6, 4, 1, [np.array([2, 1]), np.array([1, 1, 3]), np.array([1])], [6, 6, 4])
    rng = np.random.default_rng(5)
    with npu("Ascend910B") as device:
        for dtype in (F, D):
            x = make_inputs(case, dtype, rng)
            expected = torch_backward(x.grad, x.lp, case.labels, True, case.max_target + 2, case.input_lengths,
                                      x.nll, x.alpha, case.blank, False)
            assert_close(run_kernel(device, case, x, dtype), expected, dtype)


def test_results_are_bit_identical_across_thread_counts_and_vector_isas():
    rng = np.random.default_rng(11)
    cases = (Case(9, 6, 0, random_labels(rng, rng.integers(0, 5, size=37), 6, 0),
                  [int(v) for v in rng.integers(0, 10, size=37)]),
             SCENARIOS["wide-rows"](rng))  # whole vectors of every instruction set
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu("Ascend910B") as device:
            results.append([run_kernel(device, case, make_inputs(case, dtype, np.random.default_rng(3)), dtype)
                            for case in cases for dtype in (F, H, B)])
    for other in results[1:]:
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(results[0], other))


# ------------------------------------------------------------------------------------------------
# What the first phase's rules allow (each check, in order, is generated from the declaration)

NAMES = ("gradOut", "logProbs", "targets", "inputLengths", "targetLengths", "negLogLikelihood", "logAlpha", "out")
FLOAT_TENSORS = ("gradOut", "logProbs", "negLogLikelihood", "logAlpha", "out")
BASE = {"shape.gradOut": (2,), "shape.logProbs": (4, 2, 5), "shape.targets": (2, 3), "shape.negLogLikelihood": (2,),
        "shape.logAlpha": (2, 4, 8), "shape.out": (4, 2, 5), "dtype.targets": I64, "dtype.floats": F,
        "inputLengths": [4, 3], "targetLengths": [2, 1], "blank": 0, "zeroInfinity": False}


def half_limit(n: int, c: int, a: int) -> dict:
    return {"shape.gradOut": (n,), "shape.logProbs": (1, n, c), "shape.targets": (n, 1),
            "shape.negLogLikelihood": (n,), "shape.logAlpha": (n, 1, a), "shape.out": (1, n, c),
            "inputLengths": [1] * n, "targetLengths": [1] * n, "dtype.floats": H}


ACCEPTED = [  # (soc, overrides): the same sizes and dtypes pass where the rules allow them
    ("Ascend910B", {}), ("Ascend910", {"dtype.floats": D}), ("Ascend310P", {"dtype.targets": BOOL}),
    ("Ascend910B", {"dtype.targets": F, "shape.logAlpha": (2, 4, 5)}), ("Ascend910B", {"dtype.targets": H}),
    ("Ascend910B", {"dtype.targets": I32, "shape.targets": (3,)}), ("Ascend950", half_limit(1, 200001, 3)),
    ("Ascend950", {**half_limit(8181, 2, 3), "dtype.floats": B}), ("Ascend910B", half_limit(8180, 2, 2001)),
    ("Ascend910_93", {**half_limit(1, 200001, 2003), "dtype.floats": F}),
]


def first_phase(device, overrides: dict) -> tuple:
    """GetWorkspaceSize on descriptors of the BASE arguments with `overrides`; (ret, message)."""
    spec = {**BASE, **overrides}
    buffer = device.malloc(64)  # the first phase reads no data
    tensors, arrays = {}, {}
    for name in NAMES:
        if spec.get("null." + name):
            continue
        if name.endswith("Lengths"):
            arrays[name] = nn.aclCreateIntArray(spec[name])
            continue
        dtype = spec.get("dtype." + name, spec["dtype.floats"] if name in FLOAT_TENSORS else None)
        tensors[name] = nn.aclCreateTensor(list(spec["shape." + name]), dtype, None, 0, nn.ACL_FORMAT_ND, None, buffer)
    args = {**tensors, **arrays}
    try:
        size, executor, ret = nn.aclnnCtcLossBackwardGetWorkspaceSize(
            *(args.get(n) for n in NAMES[:7]), spec["blank"], spec["zeroInfinity"], args.get("out"))
        message = last_error()
        if executor is not None:
            nn.aclDestroyAclOpExecutor(executor)
        return ret, message
    finally:
        for tensor in tensors.values():
            nn.aclDestroyTensor(tensor)
        for array in arrays.values():
            nn.aclDestroyIntArray(array)


@pytest.mark.parametrize("soc,overrides", ACCEPTED)
def test_what_the_rules_allow_is_accepted(soc, overrides):
    with npu(soc) as device:
        ret, message = first_phase(device, overrides)
    assert ret == 0, message


# ------------------------------------------------------------------------------------------------
# Empty batch, data faults, workspace

def test_empty_batch_succeeds_with_workspace_zero_and_runs_nothing():
    with npu("Ascend910B") as device:
        tensors = [device.empty(s, F) for s in ((0,), (3, 0, 4))] + [device.tensor(np.zeros((0, 2), np.int64), I64)]
        tensors += [device.empty(s, F) for s in ((0,), (0, 3, 1))]
        out = device.tensor(np.full((3, 0, 4), 1.0), F)
        empty = nn.aclCreateIntArray([])
        size, executor, ret = nn.aclnnCtcLossBackwardGetWorkspaceSize(*(t.tensor for t in tensors[:3]), empty, empty,
                                                                      tensors[3].tensor, tensors[4].tensor, 3, True,
                                                                      out.tensor)
        assert (size, ret) == (0, 0) and executor is not None, last_error()
        assert nn.aclnnCtcLossBackward(None, 0, executor, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        size, executor, ret = nn.aclnnCtcLossBackwardGetWorkspaceSize(*(t.tensor for t in tensors[:3]), empty, empty,
                                                                      tensors[3].tensor, tensors[4].tensor, 4, True,
                                                                      out.tensor)
        assert (ret, executor) == (161002, None) and "blank" in last_error()  # N == 0 still needs blank < C
        nn.aclDestroyIntArray(empty)


FAULTS = [  # (targets values, targets dtype, inputLengths, targetLengths, words): only the data is wrong
    (np.array([[1, 5], [2, 0]]), I64, [4, 4], [2, 1], ["targets", "[0, C = 5)", "found 5", "batch item 0"]),
    (np.array([[1, 2], [-1, 0]]), I32, [4, 4], [2, 1], ["targets", "found -1", "batch item 1"]),
    (np.array([1.5, 2.0, np.nan]), F, [4, 4], [2, 1], ["targets", "nan", "batch item 1"]),
    (np.array([1.0, 5.5, 2.0]), H, [4, 4], [2, 1], ["targets", "found 5.5"]),
    (np.array([[1, 2], [3, 0]]), I64, [-1, 4], [2, 1], ["inputLengths[0]", "found -1"]),
    (np.array([1]), I64, [4, 4], [-1, 2], ["targetLengths[0]", "found -1"]),
    (np.array([[1, 2], [3, 0]]), I64, [4, 4], [2, -3], ["targetLengths[1]", "found -3"]),
]


@pytest.mark.parametrize("targets,target_dtype,input_lengths,target_lengths,words", FAULTS)
def test_bad_labels_and_lengths_fault_at_run_time_without_writing(targets, target_dtype, input_lengths,
                                                                  target_lengths, words):
    rng = np.random.default_rng(2)
    with npu("Ascend910B") as device:
        tensors = [device.tensor(np.ones(2), F), device.tensor(rng.normal(size=(4, 2, 5)), F),
                   device.tensor(targets, target_dtype)]
        nll, alpha = device.tensor(np.ones(2), F), device.tensor(rng.normal(size=(2, 4, 8)), F)
        out = device.tensor(np.full((4, 2, 5), 7.0), F)
        il, tl = nn.aclCreateIntArray(input_lengths), nn.aclCreateIntArray(target_lengths)
        assert device.run(*OP, *(t.tensor for t in tensors), il, tl, nll.tensor, alpha.tensor, 0, False,
                          out.tensor) == 0, last_error()
        assert acl.rt.synchronize_stream(device.stream) == nn.ACL_ERROR_RT_AICORE_EXCEPTION
        message = last_error()
        assert all(w in message for w in words + ["aclnnCtcLossBackward", "expected"]), message
        assert (device.read(out) == 7.0).all()
        nn.aclDestroyIntArray(il)
        nn.aclDestroyIntArray(tl)


def test_the_workspace_is_required_and_really_used():
    rng = np.random.default_rng(4)
    case = Case(5, 4, 0, random_labels(rng, [2, 1, 3], 4, 0), [5, 5, 4])
    x = make_inputs(case, F, rng)
    with npu("Ascend910B") as device:
        tensors = [device.tensor(x.grad, F), device.tensor(x.lp, F), device.tensor(target_values(case), I64),
                   device.tensor(x.nll, F), device.tensor(x.alpha, F), device.empty(x.lp.shape, F)]
        il, tl = nn.aclCreateIntArray(case.input_lengths), nn.aclCreateIntArray([len(l) for l in case.labels])
        args = [t.tensor for t in tensors[:3]] + [il, tl] + [t.tensor for t in tensors[3:5]] + [0, False,
                                                                                                tensors[5].tensor]
        size, executor, ret = nn.aclnnCtcLossBackwardGetWorkspaceSize(*args)
        assert ret == 0 and size > 0
        workspace = device.malloc(size)
        pattern = np.full(size, 0xAB, dtype=np.uint8)
        assert acl.rt.memcpy(workspace, size, pattern.ctypes.data, size, 1) == 0
        assert nn.aclnnCtcLossBackward(workspace, size - 1, executor, device.stream) == 161002
        assert "workspaceSize" in last_error()
        assert nn.aclnnCtcLossBackward(workspace, size, executor, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        after = np.zeros(size, dtype=np.uint8)
        assert acl.rt.memcpy(after.ctypes.data, size, workspace, size, 2) == 0
        assert (after != 0xAB).any()
        assert_close(device.read(tensors[5]), reference(case, x), F)
        nn.aclDestroyIntArray(il)
        nn.aclDestroyIntArray(tl)


# ------------------------------------------------------------------------------------------------
# The documentation's sample

SAMPLE_OUT = """
-0.553218 -0.044196 0.376665 0.147696 0.073080 -16.323618 0.083151 -21.886883 0.178977 0.487385
-0.816072 0.300683 0.231009 0.306634 -0.022243 0.023974 0.065500 0.243290 0.121943 -0.454742
-0.342771 -0.380467 0.284374 0.205831 0.233120 -19.503347 0.149643 -18.550095 0.387012 0.055604
-0.606213 0.069927 0.081970 0.496983 -0.042622 -0.154592 -0.213801 0.446061 0.150981 -0.228688
-0.009786 -0.207031 0.125068 0.066225 0.025558 -28.157124 0.178031 -9.793698 0.194407 0.116124
-0.654252 0.030715 0.776313 0.128003 -0.280742 -0.115891 -0.356447 0.438498 0.039109 -0.005313
-0.188795 0.072171 0.011072 0.031323 0.074274 -33.968689 0.159661 -4.176675 0.466732 0.058724
-0.381767 0.249949 0.381174 0.021991 -0.271329 -0.104519 -0.319213 0.217998 0.432921 -0.227233
-0.250567 0.008026 0.027809 0.120525 0.094232 -21.825390 0.521889 -16.470400 0.291126 0.022535
0.039999 0.081398 0.037531 0.069592 -0.228490 0.038925 0.093554 0.047828 0.200849 -0.381166
-0.282392 -0.041036 -0.084063 0.157615 0.249924 -12.057516 0.563437 -26.276598 0.121020 0.188605
-0.125932 0.055899 0.648625 0.026606 -0.605162 -0.047905 0.060840 -0.371466 0.523614 -0.165137
-0.110154 -0.026713 -0.334584 0.424986 0.046500 -22.625050 0.025931 -15.370849 0.063317 0.446507
-0.058251 0.273651 0.198831 0.099540 -0.513781 -0.048616 0.523457 -0.579660 0.054886 0.049910
-0.047081 0.040129 -0.679700 0.239572 0.447088 -22.183279 0.474639 -15.838266 0.042324 0.043950
-0.088552 0.280130 0.051949 0.151329 -0.394813 -0.494517 0.204048 -0.100816 0.093350 0.297899
-0.113399 0.481555 -0.481977 0.052855 0.061029 -20.188639 0.078308 -17.874496 0.137436 0.387205
-0.333713 0.180992 0.244265 0.177409 -0.268940 -0.308612 0.014554 -0.139491 0.244730 0.188794
-0.482870 0.434743 -0.255683 0.105832 0.198037 -5.557529 0.297780 -32.616436 0.177338 0.238592
-0.643226 0.454844 0.156719 0.153954 -0.122298 0.003539 0.117714 -0.663358 0.470575 0.071497
""".split() + ["0.000000"] * 40


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("ctc_loss_backward", ["out result[%d] is: %s" % (i, v) for i, v in enumerate(SAMPLE_OUT)])


@pytest.mark.parametrize("batch,code", [(0, 0), (1, nn.ACLNN_ERR_PARAM_INVALID)])
def test_a_log_alpha_of_width_0_is_fine_for_an_empty_batch_and_refused_otherwise(batch, code):
    """(A - 1) / 2 truncates as in the library's C++: with A = 0 and no target, an empty batch succeeds
    with nothing to do; a batch item would need the one entry of an empty target, which A = 0 lacks."""
    with npu() as device:
        address = device.malloc(256)
        made = [nn.aclCreateTensor(dims, dtype, None, 0, nn.ACL_FORMAT_ND, None, address) for dims, dtype in (
            ([batch], nn.ACL_FLOAT), ([4, batch, 5], nn.ACL_FLOAT), ([batch, 0], nn.ACL_INT64), ([batch], nn.ACL_FLOAT),
            ([batch, 4, 0], nn.ACL_FLOAT), ([4, batch, 5], nn.ACL_FLOAT))]
        lengths = [nn.aclCreateIntArray([4] * batch), nn.aclCreateIntArray([0] * batch)]
        grad, log_probs, targets, nll, alpha, out = made
        try:
            size, executor, ret = nn.aclnnCtcLossBackwardGetWorkspaceSize(
                grad, log_probs, targets, lengths[0], lengths[1], nll, alpha, 0, False, out)
            assert (ret, size) == (code, 0), last_error()
            if code:
                assert "logAlpha: expected dim 2 A >= 1" in last_error()
            else:
                nn.aclDestroyAclOpExecutor(executor)
        finally:
            for tensor in made:
                nn.aclDestroyTensor(tensor)
            for array in lengths:
                nn.aclDestroyIntArray(array)
