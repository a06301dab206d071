"""aclnnCtcLoss: the cases its declaration does not generate (logAlphaOut's values across chips,
dtypes and layouts, the dtypes, the empty batch and every check in the library's order are in
test_operators.py): the library's 17 unit tests; both outputs against the float64 reference
(PyTorch's _ctc_loss when installed, cross-checking the NumPy one) across target layouts and
dtypes x blank positions x lengths (zero too) x zeroInfinity x unbatched x views strided per tensor
x extreme log-probabilities, on every chip with its logAlpha width; -inf in every padding
position and nothing written outside the views; bit-identity with PyTorch in FLOAT and DOUBLE;
the forward's outputs fed to aclnnCtcLossBackward against PyTorch autograd; what the rules accept;
data faults; the workspace (the kernel's stops are in test_kernel_stops.py); the documentation's
example (A2/A3 width 16, Ascend950 width 11) and the training sample."""
from __future__ import annotations

import dataclasses
import itertools
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api import _kernels, ctc_loss as ctc, ctc_loss_backward as ctc_backward
from test_ctc_loss_backward import FAULTS, dtypes_of, random_labels, read_masks, strided, target_values  # the backward's
from support import (ALL_SOCS, SANITIZED, assert_close, decode, kernel_variants, last_error, npu, representable,
                     run_sample)

try:
    import torch
except ImportError:  # the NumPy reference runs alone
    torch = None

OP = (nn.aclnnCtcLossGetWorkspaceSize, nn.aclnnCtcLoss)
BACKWARD = (nn.aclnnCtcLossBackwardGetWorkspaceSize, nn.aclnnCtcLossBackward)
F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
I8, I32, I64, BOOL = nn.ACL_INT8, nn.ACL_INT32, nn.ACL_INT64, nn.ACL_BOOL
HALF_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")


def width_on(soc: str, max_target: int) -> int:
    return 2 * max_target + 1 if soc == "Ascend950" else -(-(2 * max_target + 1) // 8) * 8


# ------------------------------------------------------------------------------------------------
# Cases

@dataclass
class Case:
    T: int
    C: int
    blank: int
    labels: list                       # per batch item, int labels
    input_lengths: list
    padded: bool = True                # 2-D (N, target_width) or 1-D concatenated targets
    target_dtype: int = I64
    target_width: Optional[int] = None   # padded width (>= max target length); default max + 2
    zero_infinity: bool = False
    unbatched: bool = False            # logProbs (T, C), nll 0-D, logAlpha (1, T, A)
    extremes: bool = False             # log-probabilities with +-80, -1e4, +-inf and NaN among them
    layouts: dict = field(default_factory=dict)  # tensor name -> (order of dims outer..inner, gap, offset)

    @property
    def N(self) -> int:
        return len(self.labels)

    @property
    def max_target(self) -> int:
        return max([len(l) for l in self.labels] + [0])


def _scenarios() -> dict:
    """name -> Case factory(rng). Every label differs from the blank (PyTorch's contract)."""
    strided = {"logProbs": ((1, 0, 2), 1, 5), "logAlphaOut": ((2, 0, 1), 1, 2), "targets": ((1, 0), 2, 1),
               "negLogLikelihoodOut": ((0,), 3, 2)}
    return {
        "padded-int64-blank-first": lambda r: Case(7, 5, 0, random_labels(r, [2, 3, 0], 5, 0), [7, 6, 5]),
        "concat-int32-blank-last": lambda r: Case(8, 6, 5, [np.array([2, 2]), np.array([1, 3, 3, 4]), np.array([0])],
                                                  [8, 8, 3], padded=False, target_dtype=I32),
        "padded-float-blank-middle": lambda r: Case(6, 5, 2, random_labels(r, [3, 1, 2], 5, 2), [6, 2, 5],
                                                    target_dtype=F, target_width=4),
        "concat-float16-zero-lengths": lambda r: Case(9, 4, 1, random_labels(r, [1, 2, 0, 3, 2], 4, 1),
                                                      [1, 4, 0, 9, 0], padded=False, target_dtype=H),
        "padded-bool": lambda r: Case(5, 3, 2, [np.array([1, 0]), np.array([1]), np.array([0, 0, 1])], [5, 4, 5],
                                      target_dtype=BOOL),
        "all-targets-empty-2d": lambda r: Case(4, 3, 0, [np.zeros(0, np.int64)] * 2, [4, 2], target_width=2),
        "repeated-labels": lambda r: Case(9, 4, 0, [np.array([1, 1, 1]), np.array([2, 2]), np.array([3, 3, 1, 1])],
                                          [9, 3, 8]),
        "impossible-zeroed": lambda r: Case(5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]), np.array([2])],
                                            [2, 3, 5], zero_infinity=True),
        "impossible-kept": lambda r: Case(5, 5, 0, [np.array([1, 2, 3]), np.array([4, 4]), np.array([2])],
                                          [2, 3, 5], padded=False),
        "extremes": lambda r: Case(8, 5, 0, random_labels(r, [2, 3, 1, 0], 5, 0), [8, 7, 8, 6], extremes=True),
        "extremes-zeroed": lambda r: Case(8, 5, 3, random_labels(r, [3, 1, 2], 5, 3), [8, 8, 5], extremes=True,
                                          zero_infinity=True, padded=False),
        "unbatched-concat": lambda r: Case(6, 5, 0, [np.array([3, 1, 1])], [6], padded=False, unbatched=True),
        "unbatched-padded-zero-length": lambda r: Case(4, 3, 1, [np.array([2])], [0], unbatched=True),
        "strided-padded": lambda r: Case(6, 4, 3, random_labels(r, [2, 1, 3], 4, 3), [6, 5, 4], layouts=strided),
        "strided-concat": lambda r: Case(5, 5, 1, random_labels(r, [2, 2], 5, 1), [5, 3], padded=False,
                                         target_dtype=I32, layouts={**strided, "targets": ((0,), 3, 2)}),
        "strided-unbatched": lambda r: Case(6, 7, 6, [np.array([1, 5, 2])], [5], unbatched=True, padded=False,
                                            layouts={"logProbs": ((1, 0), 2, 3), "logAlphaOut": ((1, 2, 0), 2, 1),
                                                     "targets": ((0,), 2, 1)}),
    }


SCENARIOS = _scenarios()


def log_probs(case: Case, dtype: int, rng) -> np.ndarray:
    """(T, N, C) log-softmax of normal logits, as `dtype` holds them; with `extremes`, about a fifth
    of them replaced by -inf, -1e4, -80 or +80, and a few of batch item 0's by +inf and NaN (which
    spread to the rest of its alpha)."""
    logits = rng.normal(size=(case.T, case.N, case.C)) * 2
    lp = logits - np.log(np.exp(logits).sum(axis=2, keepdims=True))
    if case.extremes:
        picks = rng.random(size=lp.shape)
        for (low, high), value in zip(((0, .06), (.06, .1), (.1, .15), (.15, .2)), (-np.inf, -1e4, -80.0, 80.0)):
            lp[(picks >= low) & (picks < high)] = value
        lp[case.T // 2, 0, :2] = np.inf, np.nan
    return representable(lp, dtype)


def reference(case: Case, lp: np.ndarray, width: int) -> tuple:
    """(nll, logAlpha) in float64, shaped as the call's outputs: the declaration's NumPy reference,
    cross-checked against PyTorch's _ctc_loss (log_alpha padded to `width` with -inf) when installed."""
    values = {"logProbs": lp[:, 0, :] if case.unbatched else lp, "targets": target_values(case),
              "inputLengths": case.input_lengths, "targetLengths": [len(l) for l in case.labels],
              "blank": case.blank, "zeroInfinity": case.zero_infinity,
              "logAlphaOut": np.zeros((case.N, case.T, width))}
    nll, alpha = ctc.forward_reference(values)
    if torch is not None:
        by_torch_nll, by_torch_alpha = torch_forward(case, lp, width)
        np.testing.assert_allclose(np.reshape(nll, -1), by_torch_nll, rtol=1e-12, atol=1e-12, equal_nan=True)
        np.testing.assert_allclose(alpha, by_torch_alpha, rtol=1e-12, atol=1e-12, equal_nan=True)
    return nll, alpha


def torch_forward(case: Case, lp: np.ndarray, width: int, torch_dtype=None) -> tuple:
    """PyTorch's (nll, log_alpha padded to `width` with -inf at every position it leaves unset) of
    (T, N, C) log-probabilities, zeroInfinity applied as F.ctc_loss does."""
    lengths = [len(l) for l in case.labels]
    targets = torch.from_numpy(np.concatenate([np.asarray(l, np.int64) for l in case.labels] + [np.zeros(0, np.int64)]))
    tensor = torch.from_numpy(lp) if torch_dtype is None else torch.from_numpy(lp).to(torch_dtype)
    nll, alpha = torch.ops.aten._ctc_loss(tensor, targets, case.input_lengths, lengths, case.blank, False)
    nll = nll.double().numpy()
    if case.zero_infinity:
        nll = np.where(nll == np.inf, 0.0, nll)
    padded = np.full((case.N, case.T, width), -np.inf)
    for b, length in enumerate(lengths):
        L = case.input_lengths[b]
        padded[b, :L, :2 * length + 1] = alpha[b, :L, :2 * length + 1].double().numpy()
    return nll, padded


@dataclass
class Outputs:
    nll: np.ndarray
    alpha: np.ndarray
    outside_views_untouched: bool


def untouched_outside(device, t) -> bool:
    """Every storage element of `t` outside its view still holds the NaN it was made with."""
    raw = np.zeros(t.storage_elements, dtype=nn.NUMPY_TYPES[t.dtype])
    assert acl.rt.memcpy(raw.ctypes.data, raw.nbytes, t.address, raw.nbytes, 2) == 0
    outside = np.ones(t.storage_elements, dtype=bool)
    if 0 not in t.shape:
        outside[t.offset + sum(np.indices(t.shape)[i] * s for i, s in enumerate(t.strides))] = False
    return bool(np.isnan(decode(raw, t.dtype)[outside]).all())


def run_forward(device, case: Case, lp: np.ndarray, dtype: int, width: int, layouts: Optional[dict] = None,
                written: Optional[dict] = None) -> Outputs:
    """Both phases on device tensors of the case's layouts; outputs prefilled with NaN, so that an
    element the kernel does not write shows up. `written`: {tensor name: mask of the elements uploaded},
    for tensors of which nothing else is ever written."""
    layouts = case.layouts if layouts is None else layouts

    def tensor(name, values, tensor_dtype):
        layout = layouts.get(name)
        return device.tensor(values, tensor_dtype, written=(written or {}).get(name),
                             **(strided(np.shape(values), *layout) if layout else {}))

    x = tensor("logProbs", lp[:, 0, :] if case.unbatched else lp, dtype)
    targets = tensor("targets", target_values(case), case.target_dtype)
    nll = tensor("negLogLikelihoodOut", np.full(() if case.unbatched else (case.N,), np.nan), dtype)
    alpha = tensor("logAlphaOut", np.full((case.N, case.T, width), np.nan), dtype)
    input_lengths = nn.aclCreateIntArray(case.input_lengths)
    target_lengths = nn.aclCreateIntArray([len(l) for l in case.labels])
    try:
        ret = device.run(*OP, x.tensor, targets.tensor, input_lengths, target_lengths, case.blank, case.zero_infinity,
                         nll.tensor, alpha.tensor)
        assert ret == 0, last_error()
        return Outputs(device.read(nll), device.read(alpha),
                       untouched_outside(device, nll) and untouched_outside(device, alpha))
    finally:
        nn.aclDestroyIntArray(input_lengths)
        nn.aclDestroyIntArray(target_lengths)


def padding_mask(case: Case, width: int) -> np.ndarray:
    """True at every logAlpha position the recursion does not reach: s > 2S, t >= L."""
    mask = np.ones((case.N, case.T, width), dtype=bool)
    for b, l in enumerate(case.labels):
        mask[b, :max(case.input_lengths[b], 0), :2 * len(l) + 1] = False
    return mask


@pytest.mark.parametrize("soc,scenario", list(itertools.product(ALL_SOCS, SCENARIOS)))
def test_both_outputs_match_float64_references_with_minus_inf_padding(soc, scenario):
    rng = np.random.default_rng(zlib.crc32((soc + scenario).encode()))
    case = SCENARIOS[scenario](rng)
    width = width_on(soc, case.max_target)
    with npu(soc) as device:
        for dtype in dtypes_of(soc):
            lp = log_probs(case, dtype, rng)
            expected_nll, expected_alpha = reference(case, lp, width)
            got = run_forward(device, case, lp, dtype, width)
            assert got.nll.shape == np.shape(expected_nll) and got.alpha.shape == expected_alpha.shape
            assert_close(got.nll, expected_nll, dtype)
            assert_close(got.alpha, expected_alpha, dtype)
            assert (got.alpha[padding_mask(case, width)] == -np.inf).all()
            assert got.outside_views_untouched


def forward_read_masks(case: Case) -> dict:
    """Where the forward's kernel reads logProbs (rows t < L_b of item b; unbatched: (T, C)) and targets."""
    masks = read_masks(case.labels, case.input_lengths, case.T, case.C, np.shape(target_values(case)), 1)
    if case.unbatched:
        masks["logProbs"] = masks["logProbs"][:, 0, :]
    return {name: masks[name] for name in ("logProbs", "targets")}


@pytest.mark.parametrize("scenario", ["padded-int64-blank-first", "concat-float16-zero-lengths", "strided-padded",
                                      "unbatched-padded-zero-length", "strided-unbatched"])
def test_inputs_written_only_where_the_kernel_reads_them_give_both_outputs_and_no_report(scenario):
    """logProbs rows t >= L_b and the padding of targets past targetLengths[b] are never written: the
    outputs are the same, and initcheck reports nothing (the fixture fails on a report)."""
    rng = np.random.default_rng(zlib.crc32(scenario.encode()))
    case = SCENARIOS[scenario](rng)
    width = width_on("Ascend910B", case.max_target)
    with npu("Ascend910B") as device:
        lp = log_probs(case, F, rng)
        expected_nll, expected_alpha = reference(case, lp, width)
        got = run_forward(device, case, lp, F, width, written=forward_read_masks(case))
        assert_close(got.nll, expected_nll, F)
        assert_close(got.alpha, expected_alpha, F)


@pytest.mark.parametrize("name,position", [("logProbs", (4, 2, 0)), ("targets", (2, 2))])
@pytest.mark.sanitizer_reports("uninitialised read")
def test_an_input_position_the_kernel_reads_left_unwritten_is_reported(name, position):
    """'padded-bool': the blank's class in the last row item 2 reads (L = 5), its last label (S = 3; BOOL
    targets: the poison reads as label 1, not a fault)."""
    case = SCENARIOS["padded-bool"](None)
    masks = forward_read_masks(case)
    assert masks[name][position]
    masks[name][position] = False
    with npu("Ascend910B") as device:
        run_forward(device, case, log_probs(case, F, np.random.default_rng(2)), F, width_on("Ascend910B", 3),
                    written=masks)
    (finding,) = emulator.reports()
    assert "aclnnCtcLoss reads tensor %s " % name in finding.message and \
        "of which %d byte(s)" % (1 if name == "targets" else 4) in finding.message, finding.message


def test_log_alpha_out_is_written_whole_rows_past_the_input_length_too():
    """The kernel writes every position of logAlphaOut (-inf where the recursion does not reach, rows
    t >= L included, unlike the A2/A3 kernel), and initcheck takes all of it as written: a never-written
    logAlphaOut read back whole after the forward reports nothing."""
    case = SCENARIOS["padded-int64-blank-first"](np.random.default_rng(3))  # L = 7, 6, 5 of T = 7
    width = width_on("Ascend910B", case.max_target)
    with npu("Ascend910B") as device:
        x, targets = device.tensor(log_probs(case, F, np.random.default_rng(4)), F), \
            device.tensor(target_values(case), case.target_dtype)
        nll = device.empty((case.N,), F)
        alpha = device.tensor(np.zeros((case.N, case.T, width)), F, written=np.zeros((case.N, case.T, width), bool))
        il, tl = nn.aclCreateIntArray(case.input_lengths), nn.aclCreateIntArray([len(l) for l in case.labels])
        try:
            assert device.run(*OP, x.tensor, targets.tensor, il, tl, case.blank, False, nll.tensor, alpha.tensor) == 0
            values = device.read(alpha)
        finally:
            nn.aclDestroyIntArray(il)
            nn.aclDestroyIntArray(tl)
    assert (values[padding_mask(case, width)] == -np.inf).all() and (values[2, 5:] == -np.inf).all()


def test_the_scenarios_reach_what_they_claim():
    """Guards the scenarios above: an impossible alignment has nll = +inf (0 with zeroInfinity), the
    extremes give NaN and +-inf somewhere, an empty target with no frame has nll -0 (PyTorch's) and a
    non-empty one +inf."""
    rng = np.random.default_rng(0)
    kept, zeroed = SCENARIOS["impossible-kept"](rng), SCENARIOS["impossible-zeroed"](rng)
    lp = log_probs(kept, D, rng)
    nll = reference(kept, lp, 8)[0]
    assert nll[0] == np.inf and np.isfinite(nll[1:]).all()
    assert reference(zeroed, lp, 8)[0][0] == 0
    extremes = SCENARIOS["extremes"](rng)
    nll, alpha = reference(extremes, log_probs(extremes, D, rng), 8)
    assert np.isnan(alpha).any() and (alpha == np.inf).any() and np.isfinite(nll).any()
    empty = SCENARIOS["concat-float16-zero-lengths"](rng)
    nll, _ = reference(empty, log_probs(empty, D, rng), 8)
    assert nll[2] == 0 and np.signbit(nll[2]) and nll[4] == np.inf


@pytest.mark.skipif(torch is None, reason="PyTorch's CPU _ctc_loss defines the bits")
@pytest.mark.parametrize("scenario", ["padded-int64-blank-first", "concat-int32-blank-last", "repeated-labels",
                                      "extremes", "strided-padded"])
def test_float_and_double_results_are_pytorchs_bit_for_bit(scenario):
    """Same expressions in the same order, the same std::exp / std::log: FLOAT is PyTorch's float32
    result and DOUBLE its float64 one, exactly (logAlpha where PyTorch sets it, and nll)."""
    rng = np.random.default_rng(zlib.crc32(scenario.encode()))
    case = SCENARIOS[scenario](rng)
    width = width_on("Ascend910B", case.max_target)
    with npu("Ascend910B") as device:
        for dtype, torch_dtype in ((F, torch.float32), (D, torch.float64)):
            lp = log_probs(case, dtype, rng)
            got = run_forward(device, case, lp, dtype, width)
            nll, alpha = torch_forward(case, lp, width, torch_dtype)
            assert np.array_equal(got.nll, nll, equal_nan=True)
            assert np.array_equal(got.alpha, alpha, equal_nan=True)


def test_results_are_bit_identical_across_thread_counts_and_vector_isas():
    rng = np.random.default_rng(11)
    case = Case(9, 6, 0, random_labels(rng, rng.integers(0, 5, size=37), 6, 0),
                [int(v) for v in rng.integers(0, 10, size=37)])
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu("Ascend910B") as device:
            outputs = [run_forward(device, case, log_probs(case, dtype, np.random.default_rng(3)), dtype, 16)
                       for dtype in (F, B)]
            results.append([o.nll for o in outputs] + [o.alpha for o in outputs])
    for other in results[1:]:
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(results[0], other))


@pytest.mark.parametrize("chip", ALL_SOCS)
def test_declaration_samples_give_both_outputs(chip):
    """The declaration's samples (test_operators.py checks logAlphaOut): negLogLikelihoodOut too."""
    from aclnn_api.declaration import reference_args
    from support import Call, rounded
    emulator.configure(soc=chip)
    samples = ctc.sample_inputs(np.random.default_rng(zlib.crc32(chip.encode())))
    with npu(chip) as device:
        for sample in samples:
            for dtype in dtypes_of(chip):
                call = Call(device, sample, dtype)
                assert device.run(*OP, *call.args()) == 0, last_error()
                nll = device.read(call.tensors["negLogLikelihoodOut"])
                call.close()
                expected, _ = ctc.forward_reference(reference_args(sample, lambda arg: rounded(arg, dtype)))
                assert nll.shape == np.shape(expected), sample.label
                assert_close(nll, expected, dtype)


# ------------------------------------------------------------------------------------------------
# logAlphaOut's width, and unbatched calls

DOC_LOG_PROBS = np.array([
    -1.0894, -2.7162, -0.9764, -1.9126, -2.6162, -2.0684, -2.4871, -2.0866, -1.7205, -0.7187,
    -2.4423, -1.2017, -1.4653, -1.1821, -2.5942, -2.467, -2.7257, -1.4135, -2.1042, -0.7248,
    -3.7759, -1.3742, -1.2549, -1.5807, -1.4562, -1.3826, -1.8995, -1.8527, -0.9493, -2.8895,
    -1.6316, -2.6603, -2.5014, -0.6992, -1.8609, -1.9269, -2.235, -0.8073, -1.8906, -1.8947,
    -0.3468, -2.5855, -2.0723, -2.7147, -3.6668, -0.9541, -1.7258, -2.0693, -1.6378, -2.1531,
    -3.5386, -3.483, -0.2532, -2.0557, -3.3261, -1.148, -1.808, -0.8244, -3.2414, -3.1909,
    -0.8866, -0.754, -4.4312, -3.4634, -2.6, -1.2785, -1.8347, -3.3122, -0.762, -2.8349,
    -1.4975, -1.3865, -0.9645, -3.8171, -2.0939, -2.3536, -2.0773, -1.4981, -0.8372, -2.0938,
    -1.2186, -0.8285, -2.9399, -2.1159, -2.362, -2.3139, -0.6503, -2.7249, -1.234, -3.7927,
    -0.7143, -2.5084, -3.2826, -2.6651, -1.1334, -1.6965, -1.9728, -2.3849, -1.6052, -0.9554,
    -1.6384, -1.2596, -2.168, -1.8476, -1.3866, -3.0455, -0.5737, -2.5339, -2.1118, -1.6681,
    -2.4675, -2.8842, -0.4329, -3.6266, -1.6925, -3.1023, -2.7696, -1.2755, -0.647, -2.4143,
    -2.0107, -2.0912, -1.3053, -0.8557, -3.0683, -1.2872, -3.6523, -1.6703, -2.7596, -0.8063,
    -2.4633, -1.2959, -1.6153, -2.3072, -1.0705, -3.0543, -0.6473, -1.165, -2.9025, -2.771,
    -3.5519, -2.04, -1.8667, -1.4289, -0.805, -1.4602, -0.7452, -1.5754, -3.1624, -3.1247,
    -1.4677, -1.2725, -2.9575, -1.8883, -1.2513, -1.2164, -1.5894, -2.2217, -2.3714, -1.211,
    -2.0843, -0.6515, -1.4252, -2.9402, -2.7964, -1.5261, -2.5471, -1.7167, -1.9846, -0.9488,
    -1.4847, -1.7093, -1.4095, -1.7293, -1.7675, -0.9203, -4.2299, -1.874, -1.4076, -1.6671,
    -1.9052, -0.833, -2.1839, -2.2459, -1.6193, -2.9108, -1.2114, -1.4616, -1.7297, -1.433,
    -2.2656, -0.7878, -1.8533, -1.8711, -2.0349, -2.2457, -2.1395, -1.4509, -0.7538, -2.6381,
    -0.8078, -2.1054, -2.6703, -1.1108, -3.3867, -1.7774, -1.8426, -1.9473, -1.3293, -1.3273,
    -1.349, -1.9842, -2.5357, -2.2161, -0.88, -1.5412, -1.8003, -2.7603, -0.8606, -2.0066,
    -1.8342, -2.2741, -1.8348, -1.5833, -0.9877, -3.5196, -2.3361, -0.9124, -0.9307, -2.5531,
    -1.4862, -1.2153, -1.4453, -3.4462, -1.5625, -2.6455, -1.4153, -1.3079, -1.1568, -2.2897,
]).reshape(12, 4, 5)
DOC_TARGETS = [np.array([1, 2]), np.array([2, 2, 2]), np.array([4]), np.array([4, 1, 4, 2, 2])]
DOC_CASE = Case(12, 5, 0, DOC_TARGETS, [10, 10, 10, 10], target_width=7)
DOC_NLL_FLOAT64 = [10.199941, 12.484356, 14.900618, 9.359571]  # the spec's reference, from the listed decimals
DOC_NLL_PRINTED = ["10.199942", "12.484356", "14.900619", "9.359571"]  # FLOAT: PyTorch's float32 result


def doc_targets() -> np.ndarray:
    """The example's padded targets (4, 7), padding as the documentation lists it."""
    return np.array([[1, 2, 1, 1, 2, 4, 1], [2, 2, 2, 2, 2, 2, 3], [4, 2, 1, 4, 3, 1, 4], [4, 1, 4, 2, 2, 2, 3]])


def test_the_documentation_example_on_a2_a3_and_950_widths():
    """Width 16 on A2/A3 (and 910, 310P), 11 on Ascend950: the same losses and the same alpha values,
    the wider tensor -inf beyond column 10; each chip refuses the other's width."""
    lp = representable(DOC_LOG_PROBS, F)
    results = {}
    for soc, width, other in (("Ascend910B", 16, 11), ("Ascend910_93", 16, 11), ("Ascend950", 11, 16),
                              ("Ascend910", 16, 11), ("Ascend310P", 16, 11)):
        with npu(soc) as device:
            results[soc] = run_forward(device, DOC_CASE, lp, F, width)
            x, t = device.tensor(lp, F), device.tensor(doc_targets(), I64)
            nll, alpha = device.empty((4,), F), device.empty((4, 12, other), F)
            il, tl = nn.aclCreateIntArray([10] * 4), nn.aclCreateIntArray([2, 3, 1, 5])
            _, executor, ret = nn.aclnnCtcLossGetWorkspaceSize(x.tensor, t.tensor, il, tl, 0, False, nll.tensor,
                                                               alpha.tensor)
            assert ret == 161002 and "logAlphaOut: expected shape [4, 12, %d]" % width in last_error()
            nn.aclDestroyIntArray(il)
            nn.aclDestroyIntArray(tl)
    narrow, wide = results["Ascend950"], results["Ascend910B"]
    assert narrow.alpha.shape == (4, 12, 11) and wide.alpha.shape == (4, 12, 16)
    assert np.array_equal(narrow.nll, wide.nll) and np.array_equal(narrow.alpha, wide.alpha[:, :, :11])
    assert (wide.alpha[:, :, 11:] == -np.inf).all() and (wide.alpha[:, 10:] == -np.inf).all()
    assert all(np.array_equal(r.alpha, wide.alpha) for soc, r in results.items() if soc != "Ascend950")
    assert ["%f" % v for v in wide.nll] == DOC_NLL_PRINTED
    np.testing.assert_allclose(wide.nll, DOC_NLL_FLOAT64, rtol=1e-4, atol=1e-4)
    expected_nll, expected_alpha = reference(DOC_CASE, lp, 16)
    assert_close(wide.nll, expected_nll, F)
    assert_close(wide.alpha, expected_alpha, F)


def test_unbatched_logprobs_give_the_batch_of_one():
    """(T, C) logProbs: nll 0-D and logAlpha (1, T, A), the values of the (T, 1, C) call."""
    rng = np.random.default_rng(8)
    case = Case(7, 6, 0, [np.array([1, 4, 4])], [7], padded=False, unbatched=True)
    batched = Case(7, 6, 0, [np.array([1, 4, 4])], [7], padded=False)
    with npu("Ascend910B") as device:
        for dtype in (F, H, D):
            lp = log_probs(case, dtype, rng)
            one, many = run_forward(device, case, lp, dtype, 8), run_forward(device, batched, lp, dtype, 8)
            assert one.nll.shape == () and one.alpha.shape == (1, 7, 8)
            assert np.array_equal(one.nll.reshape(1), many.nll) and np.array_equal(one.alpha, many.alpha)


# ------------------------------------------------------------------------------------------------
# Forward -> backward, end to end

def torch_gradient(case: Case, lp: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """d(sum_b weights_b * F.ctc_loss(reduction='none')_b) / d logProbs by PyTorch autograd, float64."""
    tensor = torch.tensor(lp, requires_grad=True)
    targets = torch.from_numpy(np.concatenate([np.asarray(l, np.int64) for l in case.labels] + [np.zeros(0, np.int64)]))
    losses = torch.nn.functional.ctc_loss(tensor, targets, case.input_lengths, [len(l) for l in case.labels],
                                          case.blank, reduction="none", zero_infinity=case.zero_infinity)
    (losses * torch.from_numpy(weights)).sum().backward()
    return tensor.grad.numpy()


def numpy_gradient(case: Case, lp: np.ndarray, weights: np.ndarray, nll: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """aclnnCtcLossBackward's float64 reference on given forward outputs."""
    return ctc_backward.reference({"gradOut": weights, "logProbs": lp, "targets": target_values(case),
                                   "inputLengths": case.input_lengths, "targetLengths": [len(l) for l in case.labels],
                                   "negLogLikelihood": nll, "logAlpha": alpha, "blank": case.blank,
                                   "zeroInfinity": case.zero_infinity})


def forward_then_backward(device, case: Case, lp: np.ndarray, weights: np.ndarray, dtype: int, width: int,
                          forward_zero_infinity: bool = False) -> tuple:
    """aclnnCtcLoss, then aclnnCtcLossBackward on its very output tensors; (gradient, nll, logAlpha).
    The case's zeroInfinity goes to the backward; the forward's (default false) keeps the raw +inf
    loss the backward needs to zero an impossible item, as PyTorch's graph does."""
    x, targets = device.tensor(lp, dtype), device.tensor(target_values(case), case.target_dtype)
    nll, alpha = device.empty((case.N,), dtype), device.empty((case.N, case.T, width), dtype)
    grad_out, out = device.tensor(weights, dtype), device.tensor(np.full(lp.shape, np.nan), dtype)
    il, tl = nn.aclCreateIntArray(case.input_lengths), nn.aclCreateIntArray([len(l) for l in case.labels])
    try:
        assert device.run(*OP, x.tensor, targets.tensor, il, tl, case.blank, forward_zero_infinity, nll.tensor,
                          alpha.tensor) == 0, last_error()
        assert device.run(*BACKWARD, grad_out.tensor, x.tensor, targets.tensor, il, tl, nll.tensor, alpha.tensor,
                          case.blank, case.zero_infinity, out.tensor) == 0, last_error()
        return device.read(out), device.read(nll), device.read(alpha)
    finally:
        nn.aclDestroyIntArray(il)
        nn.aclDestroyIntArray(tl)


CHAIN_SCENARIOS = ["padded-int64-blank-first", "concat-int32-blank-last", "padded-float-blank-middle",
                   "concat-float16-zero-lengths", "repeated-labels", "impossible-zeroed", "impossible-kept"]


@pytest.mark.parametrize("soc,scenario", list(itertools.product(("Ascend910B", "Ascend950", "Ascend910"),
                                                                CHAIN_SCENARIOS)))
def test_the_forwards_outputs_give_the_backward_pytorchs_autograd_gradient(soc, scenario):
    """gradOut = per-item weights ('none'), or 1 / (N * max(S_b, 1)) as a 'mean' reduction scales;
    zeroInfinity to the backward only (see forward_then_backward). FLOAT and DOUBLE end to end
    against PyTorch autograd of F.ctc_loss (NumPy's chain without PyTorch); FLOAT16 / BFLOAT16 store
    nll and logAlpha in 16 bits, whose rounding the gradient inherits (as on the device): against
    the float64 backward of those stored values."""
    rng = np.random.default_rng(zlib.crc32((soc + scenario).encode()))
    case = SCENARIOS[scenario](rng)
    width = width_on(soc, case.max_target)
    lengths = np.array([max(len(l), 1) for l in case.labels], dtype=np.float64)
    with npu(soc) as device:
        for dtype, weights in itertools.product(dtypes_of(soc), (rng.uniform(0.5, 2.0, case.N),
                                                                 1.0 / (case.N * lengths))):
            weights = representable(weights, dtype)
            lp = log_probs(case, dtype, rng)
            grad, nll, alpha = forward_then_backward(device, case, lp, weights, dtype, width)
            if dtype in (F, D):
                if torch is not None:
                    expected = torch_gradient(case, lp, weights)
                else:
                    raw = dataclasses.replace(case, zero_infinity=False)  # the forward's outputs, +inf kept
                    expected = numpy_gradient(case, lp, weights, *reference(raw, lp, width))
            else:
                expected = numpy_gradient(case, lp, weights, nll, alpha)
            assert_close(grad, expected, dtype)


def test_a_loss_zeroed_by_the_forward_no_longer_zeroes_its_gradient():
    """zeroInfinity in the forward replaces the impossible item's +inf by 0 in negLogLikelihoodOut;
    fed that 0, the backward's zeroInfinity (which tests for +inf) no longer applies and the item's
    rows are exp(lp) * gradOut (its alphas are all -inf): the formula, as on the device. Hence
    forward_then_backward's default."""
    rng = np.random.default_rng(9)
    case = SCENARIOS["impossible-zeroed"](rng)
    lp, weights = log_probs(case, D, rng), np.array([0.5, 1.0, 2.0])
    with npu("Ascend910B") as device:
        grad, nll, _ = forward_then_backward(device, case, lp, weights, D, 8, forward_zero_infinity=True)
        zeroed, _, _ = forward_then_backward(device, case, lp, weights, D, 8)
    assert nll[0] == 0
    L = case.input_lengths[0]
    np.testing.assert_allclose(grad[:L, 0], np.exp(lp[:L, 0]) * 0.5, rtol=1e-12)
    assert (grad[L:, 0] == 0).all() and (zeroed[:, 0] == 0).all()
    np.testing.assert_array_equal(grad[:, 1:], zeroed[:, 1:])


@pytest.mark.skipif(torch is None, reason="compares with PyTorch autograd")
def test_an_unbatched_forward_feeds_the_backward_through_batched_views():
    """The backward takes 3-D logProbs and a 1-D negLogLikelihood: views (T, 1, C) and (1,) of the
    unbatched forward's buffers (no copy) give PyTorch's gradient of the unbatched loss."""
    rng = np.random.default_rng(21)
    case = Case(8, 5, 0, [np.array([2, 3, 3])], [7], padded=False, unbatched=True)
    lp = log_probs(case, F, rng)
    with npu("Ascend910B") as device:
        x, targets = device.tensor(lp[:, 0, :], F), device.tensor(target_values(case), I64)
        nll, alpha = device.empty((), F), device.empty((1, 8, 8), F)
        il, tl = nn.aclCreateIntArray([7]), nn.aclCreateIntArray([3])
        assert device.run(*OP, x.tensor, targets.tensor, il, tl, 0, False, nll.tensor, alpha.tensor) == 0
        x3 = nn.aclCreateTensor([8, 1, 5], F, [5, 5, 1], 0, nn.ACL_FORMAT_ND, [40], x.address)
        nll1 = nn.aclCreateTensor([1], F, [1], 0, nn.ACL_FORMAT_ND, [1], nll.address)
        grad_out, out = device.tensor(np.ones(1), F), device.empty((8, 1, 5), F)
        assert device.run(*BACKWARD, grad_out.tensor, x3, targets.tensor, il, tl, nll1, alpha.tensor, 0, False,
                          out.tensor) == 0, last_error()
        grad = device.read(out)
        for made in (x3, nll1):
            nn.aclDestroyTensor(made)
        nn.aclDestroyIntArray(il)
        nn.aclDestroyIntArray(tl)
    tensor = torch.tensor(lp[:, 0, :], requires_grad=True)
    torch.nn.functional.ctc_loss(tensor, torch.tensor([2, 3, 3]), [7], [3], 0, reduction="none").backward()
    assert_close(grad[:, 0, :], tensor.grad.numpy(), F)


# ------------------------------------------------------------------------------------------------
# The library's unit tests (test_aclnn_ctc_loss.cpp; SoC 910B; T=12, N=4, C=5, S=7, A=16; DOUBLE)

UT_T, UT_N, UT_C, UT_S, UT_A = 12, 4, 5, 7, 16
UT_BASE = {"shape.logProbs": (UT_T, UT_N, UT_C), "shape.targets": (UT_N, UT_S), "shape.negLogLikelihoodOut": (UT_N,),
           "shape.logAlphaOut": (UT_N, UT_T, UT_A), "dtype.logProbs": D, "dtype.targets": I64,
           "dtype.negLogLikelihoodOut": D, "dtype.logAlphaOut": D, "inputLengths": [UT_T] * UT_N,
           "targetLengths": [UT_S] * UT_N, "blank": 0, "zeroInfinity": False}
TENSORS = ("logProbs", "targets", "negLogLikelihoodOut", "logAlphaOut")

UNIT_TESTS = {  # case -> (changes to the valid base, expected status, words of the message)
    "logprobs_is_empty_tensor_normal": ({"shape.logProbs": (UT_T, 0, UT_C), "shape.targets": (0, 0),
                                         "inputLengths": [], "targetLengths": [], "shape.negLogLikelihoodOut": (0,),
                                         "shape.logAlphaOut": (0, UT_T, 8)}, 0, []),
    "output_is_null": ({"null.negLogLikelihoodOut": True}, 161001, ["negLogLikelihoodOut"]),
    "input_is_null": ({"null.logProbs": True}, 161001, ["logProbs"]),
    "logprobs_dtype_error": ({"dtype.logProbs": I8}, 161002, ["logProbs", "INT8"]),
    "negLogLikelihood_dtype_error": ({"dtype.negLogLikelihoodOut": I8}, 161002, ["negLogLikelihoodOut", "INT8"]),
    "logAlpha_dtype_error": ({"dtype.logAlphaOut": I8}, 161002, ["logAlphaOut", "INT8"]),
    "targets_dtype_error": ({"dtype.targets": I8}, 161002, ["targets", "INT8"]),
    "logprobs_first_dim_0_error": ({"shape.logProbs": (0, UT_N, UT_C)}, 161002, ["logProbs", "dimension size (0)"]),
    "logProbs_dimnum_not_3_error": ({"shape.logProbs": (UT_T, UT_N, UT_C, 2)}, 161002, ["logProbs", "2 or 3 dims"]),
    "blank_greater_than_C_error": ({"blank": UT_C + 1}, 161002, ["blank", "C = 5", "found 6"]),
    "inputLengths_maxvalue_greater_than_T_error": ({"inputLengths": [UT_T + 1, UT_T, UT_T, UT_T]}, 161002,
                                                   ["inputLengths", "T = 12", "found max 13"]),
    "targetLengths_size_not_N_error": ({"targetLengths": [UT_S] * 5}, 161002, ["targetLengths", "N = 4", "found 5"]),
    "target_second_dim_less_than_targetMaxLength_error": ({"targetLengths": [UT_S + 1, UT_S, UT_S, UT_S]}, 161002,
                                                          ["targets", "dim 1 >= max(targetLengths) = 8", "found 7"]),
    "target_1_dim_size_not_sumtargetlengths_error": ({"shape.targets": (4 * UT_S + 1,)}, 161002,
                                                     ["targets", "sum(targetLengths) = 28", "found 29"]),
    "target_shape_isnot_1or2_error": ({"shape.targets": (UT_N, UT_S, 2)}, 161002, ["targets", "1 or 2 dims"]),
    "outNegLogLikelihood_shape_not_N_error": ({"shape.negLogLikelihoodOut": (UT_N + 1,)}, 161002,
                                              ["negLogLikelihoodOut", "[4]", "found [5]"]),
    "outLogAlpha_shape_error": ({"shape.logAlphaOut": (UT_N, UT_T, UT_A + 1)}, 161002,
                                ["logAlphaOut", "[4, 12, 16]", "found [4, 12, 17]"]),
}


def describe_and_plan(device, overrides: dict, base: dict = UT_BASE) -> tuple:
    """GetWorkspaceSize on descriptors of `base` with `overrides` (the first phase reads no data);
    (status, workspace size, message)."""
    spec = {**base, **overrides}
    buffer = device.malloc(64)
    made, arrays = {}, {}
    for name in TENSORS:
        if not spec.get("null." + name):
            made[name] = nn.aclCreateTensor(list(spec["shape." + name]), spec["dtype." + name], None, 0,
                                            nn.ACL_FORMAT_ND, None, buffer)
    for name in ("inputLengths", "targetLengths"):
        arrays[name] = nn.aclCreateIntArray(spec[name])
    try:
        size, executor, ret = nn.aclnnCtcLossGetWorkspaceSize(
            made.get("logProbs"), made.get("targets"), arrays["inputLengths"], arrays["targetLengths"], spec["blank"],
            spec["zeroInfinity"], made.get("negLogLikelihoodOut"), made.get("logAlphaOut"))
        message = last_error()
        if executor is not None:
            if ret == 0 and size == 0:  # nothing to run: the executor still runs (as nothing) and is used up
                assert nn.aclnnCtcLoss(None, 0, executor, device.stream) == 0
            else:
                nn.aclDestroyAclOpExecutor(executor)
        return ret, size, message
    finally:
        for tensor in made.values():
            nn.aclDestroyTensor(tensor)
        for array in arrays.values():
            nn.aclDestroyIntArray(array)


@pytest.mark.parametrize("name", list(UNIT_TESTS))
def test_the_librarys_unit_tests(name):
    changes, code, words = UNIT_TESTS[name]
    with npu("Ascend910B") as device:
        ret, size, message = describe_and_plan(device, changes)
    assert ret == code, message
    if code == 0:
        assert size == 0
    for word in words + (["expected", "found"] if code == 161002 else []):
        assert word in message, message


def test_the_unit_tests_base_is_valid():
    with npu("Ascend910B") as device:
        ret, size, message = describe_and_plan(device, {})
    assert ret == 0 and size > 0, message


SMALL = {"shape.logProbs": (4, 2, 5), "shape.targets": (2, 3), "shape.negLogLikelihoodOut": (2,),
         "shape.logAlphaOut": (2, 4, 8), "dtype.logProbs": F, "dtype.targets": I64, "dtype.negLogLikelihoodOut": F,
         "dtype.logAlphaOut": F, "inputLengths": [4, 3], "targetLengths": [2, 1], "blank": 0, "zeroInfinity": False}


def sized(n: int, c: int, max_target: int, dtype: int, soc: str = "Ascend910B", unbatched: bool = False) -> dict:
    """A call of N = n, C = c, T = 1 and max targetLength `max_target` in `dtype`, widths of `soc`."""
    changes = {"shape.logProbs": (1, c) if unbatched else (1, n, c), "shape.targets": (n, max_target),
               "shape.negLogLikelihoodOut": () if unbatched else (n,),
               "shape.logAlphaOut": (n, 1, width_on(soc, max_target)), "inputLengths": [1] * n,
               "targetLengths": [max_target] * n}
    return {**changes, **{"dtype." + name: dtype for name in ("logProbs", "negLogLikelihoodOut", "logAlphaOut")}}


ACCEPTED = [  # (soc, changes to SMALL): what the rules allow
    ("Ascend910", {"dtype.logProbs": D, "dtype.negLogLikelihoodOut": D, "dtype.logAlphaOut": D}),
    ("Ascend310P", {"dtype.targets": BOOL}), ("Ascend910B", {"dtype.targets": F}),
    ("Ascend910B", {"dtype.targets": H}), ("Ascend910B", {"dtype.targets": I32, "shape.targets": (3,)}),
    ("Ascend910B", {"inputLengths": [-1, 3]}),                 # negative lengths are data (checked at run time)
    ("Ascend910B", {"targetLengths": [3, -1], "shape.targets": (2,)}),  # the plain sum, negatives included
    ("Ascend910B", {"targetLengths": [-2, -1], "shape.targets": (2, 0), "shape.logAlphaOut": (2, 4, 8)}),
    ("Ascend910B", sized(1, 200000, 1, H)), ("Ascend910B", sized(8180, 2, 1, B)),
    ("Ascend910B", sized(1, 2, 999, H)),                        # A = 2000: (A - 1) / 2 = 999
    ("Ascend910_93", {**sized(1, 200001, 1000, F)}),            # the limits are for FLOAT16 / BFLOAT16 only
    ("Ascend950", sized(8181, 200001, 1000, B, "Ascend950")),  # and on 910B / 910_93 only
    ("Ascend910B", sized(1, 200000, 1, H, unbatched=True)),    # unbatched: C is dim 1
    ("Ascend950", {"shape.logAlphaOut": (2, 4, 5)}),
]


@pytest.mark.parametrize("soc,changes", ACCEPTED)
def test_what_the_rules_allow_is_accepted(soc, changes):
    with npu(soc) as device:
        ret, _, message = describe_and_plan(device, changes, SMALL)
    assert ret == 0, message


REJECTED = [  # (soc, changes to SMALL, words): beyond the declaration's error inputs
    ("Ascend910B", sized(1, 2, 1000, H), ["(A-1)/2 <= 1000", "found 1003"]),  # maxTL 1000: A = 2008
    ("Ascend910B", sized(1, 200001, 1, B, unbatched=True), ["C <= 200000", "found 200001"]),
    ("Ascend910B", {"shape.logProbs": (4, 5), "shape.negLogLikelihoodOut": (2,)}, ["inputLengths", "N = 1"]),
    ("Ascend910B", {"shape.logProbs": (4, 5), "inputLengths": [4], "targetLengths": [2], "shape.targets": (1, 3),
                    "shape.logAlphaOut": (1, 4, 8)}, ["negLogLikelihoodOut", "expected shape []", "found [2]"]),
    ("Ascend910B", {"shape.logAlphaOut": (2, 4, 5)}, ["logAlphaOut", "[2, 4, 8]", "round_up(2*max+1, 8)"]),
    ("Ascend910B", {"shape.logProbs": (4, 2, 0)}, ["blank", "C = 0"]),
    ("Ascend910B", {"shape.logProbs": (4, 2, 5), "shape.logAlphaOut": (2, 4, -8)}, ["logAlphaOut", "dims >= 0"]),
    ("Ascend910B", {"shape.targets": (2, 3), "dtype.logProbs": I32, "targetLengths": [2, 4]},
     ["targets", "dim 1 >= max(targetLengths) = 4"]),         # a shape error before a dtype error
]


@pytest.mark.parametrize("soc,changes,words", REJECTED)
def test_what_the_rules_refuse_is_refused(soc, changes, words):
    with npu(soc) as device:
        ret, _, message = describe_and_plan(device, changes, SMALL)
    assert ret == 161002, message
    for word in words + ["expected", "found"]:
        assert word in message, message


# ------------------------------------------------------------------------------------------------
# Data faults, workspace

@pytest.mark.parametrize("targets,target_dtype,input_lengths,target_lengths,words", FAULTS)
def test_bad_labels_and_lengths_fault_at_run_time_without_writing(targets, target_dtype, input_lengths,
                                                                  target_lengths, words):
    rng = np.random.default_rng(2)
    with npu("Ascend910B") as device:
        x, t = device.tensor(rng.normal(size=(4, 2, 5)), F), device.tensor(targets, target_dtype)
        nll, alpha = device.tensor(np.full(2, 7.0), F), device.tensor(np.full((2, 4, 8), 7.0), F)
        il, tl = nn.aclCreateIntArray(input_lengths), nn.aclCreateIntArray(target_lengths)
        assert device.run(*OP, x.tensor, t.tensor, il, tl, 0, False, nll.tensor, alpha.tensor) == 0, last_error()
        assert acl.rt.synchronize_stream(device.stream) == nn.ACL_ERROR_RT_AICORE_EXCEPTION
        message = last_error()
        assert all(w in message for w in words + ["aclnnCtcLoss", "expected"]), message
        assert (device.read(nll) == 7.0).all() and (device.read(alpha) == 7.0).all()
        nn.aclDestroyIntArray(il)
        nn.aclDestroyIntArray(tl)


def test_the_workspace_is_required_and_really_used():
    rng = np.random.default_rng(4)
    case = Case(5, 4, 0, random_labels(rng, [2, 1, 3], 4, 0), [5, 5, 4])
    lp = log_probs(case, F, rng)
    with npu("Ascend910B") as device:
        x, t = device.tensor(lp, F), device.tensor(target_values(case), I64)
        nll, alpha = device.empty((3,), F), device.empty((3, 5, 8), F)
        il, tl = nn.aclCreateIntArray(case.input_lengths), nn.aclCreateIntArray([len(l) for l in case.labels])
        size, executor, ret = nn.aclnnCtcLossGetWorkspaceSize(x.tensor, t.tensor, il, tl, 0, False, nll.tensor,
                                                              alpha.tensor)
        # Per item: 7 labels (int64), then two fp32 alpha rows of 7; each padded to 16 elements, so
        # that no cache line holds two slots' scratch.
        assert ret == 0 and size == 3 * 16 * 8 + 3 * 2 * 16 * 4
        workspace = device.malloc(size)
        pattern = np.full(size, 0xAB, dtype=np.uint8)
        assert acl.rt.memcpy(workspace, size, pattern.ctypes.data, size, 1) == 0
        assert nn.aclnnCtcLoss(workspace, size - 1, executor, device.stream) == 161002
        assert "workspaceSize" in last_error()
        assert nn.aclnnCtcLoss(workspace, size, executor, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        after = np.zeros(size, dtype=np.uint8)
        assert acl.rt.memcpy(after.ctypes.data, size, workspace, size, 2) == 0
        assert (after != 0xAB).any()
        expected_nll, expected_alpha = reference(case, lp, 8)
        assert_close(device.read(nll), expected_nll, F)
        assert_close(device.read(alpha), expected_alpha, F)
        nn.aclDestroyIntArray(il)
        nn.aclDestroyIntArray(tl)


def test_an_empty_batch_succeeds_with_workspace_zero_and_writes_nothing():
    with npu("Ascend950") as device:
        x, t = device.empty((3, 0, 4), F), device.tensor(np.zeros(0, np.int64), I64)
        nll, alpha = device.empty((0,), F), device.empty((0, 3, 1), F)
        empty = nn.aclCreateIntArray([])
        size, executor, ret = nn.aclnnCtcLossGetWorkspaceSize(x.tensor, t.tensor, empty, empty, 3, True, nll.tensor,
                                                              alpha.tensor)
        assert (size, ret) == (0, 0) and executor is not None, last_error()
        assert nn.aclnnCtcLoss(None, 0, executor, device.stream) == 0
        assert acl.rt.synchronize_stream(device.stream) == 0
        size, executor, ret = nn.aclnnCtcLossGetWorkspaceSize(x.tensor, t.tensor, empty, empty, 4, True, nll.tensor,
                                                              alpha.tensor)
        assert (ret, executor) == (161002, None) and "blank" in last_error()  # N == 0 still needs blank < C
        nn.aclDestroyIntArray(empty)


def test_the_kernel_refuses_a_workspace_of_another_layout():
    """The first phase's plan is the kernel's contract: npuemu's own bug, reported as internal."""
    lp, targets = np.zeros((2, 1, 3), np.float32), np.array([[1]], np.int64)
    nll, alpha = np.zeros(1, np.float32), np.zeros((1, 2, 8), np.float32)
    ws = np.zeros(256, np.uint8)
    view = lambda a, dtype: (a.ctypes.data, dtype, a.shape, tuple(s // a.itemsize for s in a.strides))
    with pytest.raises(RuntimeError, match="aclnnCtcLoss: workspace: expected the layout"):
        _kernels.ctc_loss(view(lp, F), view(targets, I64), view(nll, F), view(alpha, F), [2], [1], 0, False, 1, 3,
                          ws.ctypes.data, ws.ctypes.data + 64, [24, 20])


# ------------------------------------------------------------------------------------------------
# The samples

def test_sample_prints_the_documented_example():
    """samples/ctc_loss.py (the A2/A3 example): the four losses (the spec's float64 values within the
    FLOAT tolerance; PyTorch's float32 digits exactly), then logAlphaOut (4, 12, 16) in order,
    -inf at every padding position, the rest within the FLOAT tolerance of the float64 reference;
    no sanitizer report."""
    done = run_sample("ctc_loss")
    assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 + 768
    assert lines[:4] == ["negLoglikelihoodOut result[%d] is: %s" % (i, v) for i, v in enumerate(DOC_NLL_PRINTED)]
    np.testing.assert_allclose([float(v) for v in DOC_NLL_PRINTED], DOC_NLL_FLOAT64, rtol=1e-4, atol=1e-4)
    prefixes = ["logAlphaOut result[%d] is: " % i for i in range(768)]
    assert all(line.startswith(prefix) for line, prefix in zip(lines[4:], prefixes))
    printed = np.array([float(line[len(prefix):]) for line, prefix in zip(lines[4:], prefixes)]).reshape(4, 12, 16)
    _, expected = reference(DOC_CASE, representable(DOC_LOG_PROBS, F), 16)
    assert (printed[padding_mask(DOC_CASE, 16)] == -np.inf).all()
    np.testing.assert_allclose(printed, expected, rtol=1e-4, atol=2e-6)  # %f prints 6 decimals


@pytest.mark.parametrize("check", ["default", "--finite-differences"])
def test_training_sample_feeds_the_forward_to_the_backward_and_checks_the_gradient(check):
    """samples/ctc_loss_training.py: PyTorch autograd when installed (else, and with the option,
    finite differences of aclnnCtcLoss); also on Ascend950, whose width the backward reads, by either
    of its names."""
    import os
    import subprocess
    import sys
    from support import REPO
    for soc in ("Ascend910B", "Ascend950", "Ascend910_95"):
        done = subprocess.run([sys.executable, os.path.join(REPO, "samples", "ctc_loss_training.py")]
                              + ([check] if check != "default" else []), capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, NPUEMU_SOC=soc, **SANITIZED))
        assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == 4 + 240 + 1
        against = ("PyTorch autograd" if torch is not None and check == "default"
                   else "central finite differences of aclnnCtcLoss")
        assert lines[-1].startswith("gradient vs " + against) and lines[-1].endswith(": ok"), lines[-1]
