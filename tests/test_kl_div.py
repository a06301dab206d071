"""aclnnKlDiv: the cases its declaration does not generate (single-dtype values across chips and
layouts, accepted dtypes, "empty" inputs that write nothing and every check in order are in
test_operators.py): the library's unit tests one by one; PyTorch's kl_div in float64 across dtype
combinations x chips x layouts x reductions x logTarget; extreme inputs; the rounding to the compute
dtype; the empty-input fills; the out shapes each reduction accepts; the batchmean divisor and the
reduction range; sums bit-identical across threads, instruction sets and layouts, and accurate over
2^29 terms; the forward, then aclnnKlDivBackward on its output, against autograd; kernels that
refuse broken contracts (their stops are in test_kernel_stops.py); the sample."""
import itertools
import warnings
import zlib

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import _kernels, kl_div
from test_kl_div_backward import LAYOUTS, layout  # the backward's views
from support import (ALL_SOCS, TOLERANCE, assert_close, assert_sample_prints, kernel_variants, last_error, npu,
                     representable)

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast"),  # 1e30 as FLOAT16: inf
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]  # NaN fill of integer tensors

OP = (nn.aclnnKlDivGetWorkspaceSize, nn.aclnnKlDiv)
BACKWARD = (nn.aclnnKlDivBackwardGetWorkspaceSize, nn.aclnnKlDivBackward)
F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
BF16_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")
NAMES = {0: "none", 1: "mean", 2: "sum", 3: "batchmean"}
EXPECTED = -6.906180  # the doc example's mean (the sum is -55.249443)


# ---------------------------------------------------------------- helpers


def out_shape_of(x, t, reduction):
    return np.broadcast_shapes(np.shape(x), np.shape(t)) if reduction == 0 else ()


def run_kl_div(device, x, t, reduction, log_target, dtypes=(F, F, F), kind="contiguous", out_shape=None,
               fill=-777.0):
    """Both phases on (self, target, out) laid out as `kind`; returns out's values."""
    x, t = np.asarray(x, dtype=np.float64), np.asarray(t, dtype=np.float64)
    out_shape = out_shape_of(x, t, reduction) if out_shape is None else out_shape
    xs = device.tensor(x, dtypes[0], *layout(x.shape, kind))
    ts = device.tensor(t, dtypes[1], *layout(t.shape, kind))
    out = device.tensor(np.full(out_shape, fill), dtypes[2], *layout(out_shape, kind))
    ret = device.run(*OP, xs.tensor, ts.tensor, reduction, log_target, out.tensor)
    assert ret == 0, last_error()
    return device.read(out)


def first_phase(device, shapes, dtypes, reduction=0, log_target=False, fmt=nn.ACL_FORMAT_ND):
    """The first phase's status on tensors of (self, target, out) shapes and dtypes (None: null)."""
    tensors = [None if shape is None else device.tensor(np.zeros(shape), dtype, fmt=fmt).tensor
               for shape, dtype in zip(shapes, dtypes)]
    size, executor, ret = OP[0](tensors[0], tensors[1], reduction, log_target, tensors[2])
    if executor is not None:
        nn.aclDestroyAclOpExecutor(executor)
    return ret


def compute_dtype(a, b):
    return a if a == b else F


def tolerance_dtype(dtypes):
    """The looser of the compute dtype's and out's tolerances."""
    return max((compute_dtype(dtypes[0], dtypes[1]), dtypes[2]), key=TOLERANCE.get)


def inputs(rng, self_shape, target_shape, log_target, dtypes):
    x = representable(rng.normal(size=self_shape) - 1.0, dtypes[0])
    if log_target:
        t = rng.normal(size=target_shape) - 1.0
    else:
        t = rng.uniform(0.0, 2.0, size=target_shape) * (rng.uniform(size=target_shape) > 0.2)
    return x, representable(t, dtypes[1])


def torch_kl_div(x, t, reduction, log_target):
    """F.kl_div in float64, batchmean divided by dim 0 of B (a 0-D input as [1]) as the library does
    (PyTorch divides by self.size(0), by nothing for a 0-D self)."""
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mean's "divides by both the batch size and the support size"
        loss = torch.nn.functional.kl_div(torch.tensor(x), torch.tensor(t), reduction=NAMES[reduction],
                                          log_target=log_target).numpy()
    if reduction == 3:
        shape = np.broadcast_shapes(np.shape(x), np.shape(t)) or (1,)
        loss = loss * (np.shape(x)[0] if np.ndim(x) else 1) / shape[0]
    return loss


# ---------------------------------------------------------------- the library's unit tests

U8, I8, I16, I32, I64, BOOL, C64 = (nn.ACL_UINT8, nn.ACL_INT8, nn.ACL_INT16, nn.ACL_INT32, nn.ACL_INT64, nn.ACL_BOOL,
                                    nn.ACL_COMPLEX64)
UNIT_TESTS = {  # name: (self, target, out) shapes (None: null), their dtypes, reduction, logTarget, format, status
    "case_003_double": (((3, 5), (3, 5), (3, 5)), (D, D, D), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_004_uint8": (((5, 3, 5),) * 3, (U8, U8, F), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_005_int8": (((3, 5),) * 3, (I8, I8, F), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_006_int16": (((3, 3, 5),) * 3, (I16, I16, F), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_007_int32": (((3, 5),) * 3, (I32, I32, F), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_008_int64": (((3, 5),) * 3, (I64, I64, F), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_009_bool": (((3, 5),) * 3, (BOOL, BOOL, F), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_010_complex64": (((3, 5),) * 3, (C64, C64, C64), 0, False, nn.ACL_FORMAT_ND, 161002),
    "case_011_nullptr self": ((None, (10, 3, 5, 24), (10, 3, 5, 24)), (F,) * 3, 0, True, nn.ACL_FORMAT_ND, 161001),
    "case_011_nullptr target": (((10, 3, 5, 24), None, (10, 3, 5, 24)), (F,) * 3, 0, True, nn.ACL_FORMAT_ND, 161001),
    "case_011_nullptr out": (((10, 3, 5, 24), (10, 3, 5, 24), None), (F,) * 3, 0, True, nn.ACL_FORMAT_ND, 161001),
    "case_012_empty": (((3, 1, 0, 5),) * 3, (F,) * 3, 0, True, nn.ACL_FORMAT_ND, 0),
    "case_013_max_dim": (((1, 2, 1, 2, 1, 2, 1, 2, 1),) * 3, (F,) * 3, 0, True, nn.ACL_FORMAT_ND, 161002),
    "case_015_broadcast_failed": (((3, 4, 6, 3), (3, 4, 6, 4), (3, 4, 6, 3)), (F, H, F), 0, True, nn.ACL_FORMAT_ND,
                                  161002),
    "case_016_out_not_equal_broadcast": (((3, 4, 6, 3), (3, 4, 6, 1), (3, 4, 6, 5)), (F,) * 3, 0, True,
                                         nn.ACL_FORMAT_ND, 161002),
    "case_017_reduction_mean": (((3, 5, 2, 4), (3, 5, 2, 4), ()), (F,) * 3, 1, False, nn.ACL_FORMAT_ND, 0),
    "case_018_reduction_sum": (((1, 2, 3, 4, 5), (1, 2, 3, 4, 5), ()), (F,) * 3, 2, False, nn.ACL_FORMAT_NCDHW, 0),
    "case_022_empty_sum": (((1, 0), (1, 0), ()), (F,) * 3, 1, False, nn.ACL_FORMAT_ND, 0),
    "case_023_empty_mean": (((0,), (0,), ()), (F,) * 3, 2, False, nn.ACL_FORMAT_ND, 0),
    "case_024_1D_mean": (((2,), (2,), ()), (F,) * 3, 1, False, nn.ACL_FORMAT_ND, 0),
    "case_025_0D_mean": (((), (), ()), (F,) * 3, 1, False, nn.ACL_FORMAT_ND, 0),
}


@pytest.mark.parametrize("case", list(UNIT_TESTS))
def test_the_library_unit_tests(case):
    """The harness's chip (Ascend910B), its shapes, dtypes and attributes: the same status. (The
    library's case_022 "empty_sum" passes mean and case_023 "empty_mean" passes sum; so do we.)"""
    shapes, dtypes, reduction, log_target, fmt, status = UNIT_TESTS[case]
    with npu("Ascend910B") as device:
        ret = first_phase(device, shapes, dtypes, reduction, log_target, fmt)
    assert ret == status, last_error()
    if status != 0:
        assert "expected" in last_error() or status == 161001


def test_the_unit_tests_that_succeed_also_compute():
    """The successful unit-test shapes run both phases and give PyTorch's values."""
    rng = np.random.default_rng(25)
    with npu("Ascend910B") as device:
        for case in ("case_017_reduction_mean", "case_018_reduction_sum", "case_024_1D_mean", "case_025_0D_mean"):
            shapes, _, reduction, log_target, _, _ = UNIT_TESTS[case]
            x, t = inputs(rng, shapes[0], shapes[1], log_target, (F, F, F))
            actual = run_kl_div(device, x, t, reduction, log_target, out_shape=shapes[2])
            assert_close(actual, torch_kl_div(x, t, reduction, log_target), F)
        np.testing.assert_array_equal(run_kl_div(device, np.zeros((1, 0)), np.zeros((1, 0)), 1, False), np.nan)
        np.testing.assert_array_equal(run_kl_div(device, np.zeros(0), np.zeros(0), 2, False), 0.0)


# ---------------------------------------------------------------- values against PyTorch

CASES = {  # name: (self shape, target shape)
    "same shape": ((3, 5), (3, 5)),
    "self broadcast by target": ((1, 5), (4, 5)),
    "target broadcast": ((3, 4), (4,)),
    "leading dims added": ((3,), (2, 4, 3)),
    "both broadcast": ((2, 1, 3), (1, 4, 1)),
    "0-D self": ((), (4, 3)),
    "0-D target": ((4, 3), ()),
    "all 0-D": ((), ()),
    "8-D": ((1, 2, 1, 2, 1, 2, 1, 2), (2, 1, 2, 1, 2, 1, 2, 1)),
    "rows over chunks": ((3, 5000), (1, 5000)),
}


def dtype_combos(soc):
    """(self, target, out) dtypes: compute FLOAT16 into FLOAT, mixed inputs (compute FLOAT) into a
    16-bit out, and on the chips with BFLOAT16 a bf16 result rounded again into FLOAT16."""
    combos = [(F, F, F), (H, H, F), (H, F, H), (F, H, F)]
    return combos + ([(B, B, H), (B, H, F), (H, B, B), (B, B, B)] if soc in BF16_SOCS else [])


@pytest.mark.parametrize("soc,case", [(s, c) for s in ALL_SOCS for c in CASES])
def test_values_match_pytorch_kl_div_for_every_reduction_dtype_and_layout(soc, case):
    rng = np.random.default_rng(zlib.crc32((soc + case).encode()))
    self_shape, target_shape = CASES[case]
    with npu(soc) as device:
        for n, dtypes in enumerate(dtype_combos(soc)):
            kind = LAYOUTS[(n + len(case)) % len(LAYOUTS)]
            for reduction, log_target in itertools.product(NAMES, (False, True)):
                x, t = inputs(rng, self_shape, target_shape, log_target, dtypes)
                actual = run_kl_div(device, x, t, reduction, log_target, dtypes, kind)
                expected = torch_kl_div(x, t, reduction, log_target)
                assert actual.shape == expected.shape, (dtypes, reduction)
                try:
                    assert_close(actual, expected, tolerance_dtype(dtypes))
                except AssertionError as error:
                    raise AssertionError("%s %s log_target=%s: %s" % (dtypes, NAMES[reduction], log_target,
                                                                      error)) from None


def test_the_doc_example_and_its_sum():
    x, t = np.arange(8.0).reshape(4, 2), np.array([1, 1, 1, 2, 2, 2, 3, 3.0]).reshape(4, 2)
    with npu() as device:
        mean = run_kl_div(device, x, t, 1, False, out_shape=(1,))
        total = run_kl_div(device, x, t, 2, False, out_shape=(1,))
    assert "%f" % mean[0] == "%f" % EXPECTED
    np.testing.assert_allclose(total, [-55.249443], rtol=1e-7)  # an fp32 sum: within an ulp or so


EXTREMES = np.array([-1e4, -80.0, -1.0, -0.0, 0.0, 0.5, 1.0, 80.0, 1e4, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("dtype", [F, H, B])
def test_extreme_inputs_match_the_float64_formula(dtype):
    """Every pair of ±1e4, ±80, ±inf, NaN, ±0 ...: self down the rows, target across, logTarget both.
    Rounded to the dtype (overflow is inf there too), NaN exactly where the formula gives NaN."""
    x, t = EXTREMES[:, None], EXTREMES[None, :]
    with npu("Ascend910B") as device:
        for log_target in (False, True):
            actual = run_kl_div(device, x, t, 0, log_target, (dtype,) * 3)
            expected = representable(kl_div.pointwise(representable(x, dtype), representable(t, dtype), log_target),
                                     dtype)
            assert np.array_equal(np.isnan(actual), np.isnan(expected)), log_target
            finite = ~np.isnan(expected)
            assert_close(actual[finite], expected[finite], dtype)


def test_extreme_inputs_match_pytorch_except_at_target_plus_inf():
    """PyTorch computes xlogy(t, t) - t·x: at t = +inf that is inf - inf·x (NaN for x >= 0) where
    t·(log t - x) is +inf. Everywhere else the two agree, NaN and infinities included."""
    x, t = EXTREMES[:, None], EXTREMES[None, :]
    with npu("Ascend910B") as device:
        for log_target in (False, True):
            actual = run_kl_div(device, x, t, 0, log_target)
            with np.errstate(over="ignore"):
                expected = torch_kl_div(np.broadcast_to(x, (12, 12)).copy(), np.broadcast_to(t, (12, 12)).copy(), 0,
                                        log_target).astype(np.float32)
            agree = np.ones(expected.shape, bool) if log_target else ~np.isposinf(np.broadcast_to(t, (12, 12)))
            assert np.array_equal(np.isnan(actual[agree]), np.isnan(expected[agree]))
            finite = agree & ~np.isnan(expected)
            assert_close(actual[finite], expected[finite], F)
        inf_target = run_kl_div(device, np.array([-3.0, 0.0, 3.0]), np.array([np.inf] * 3), 0, False)
    np.testing.assert_array_equal(inf_target, [np.inf] * 3)


def test_target_zero_gives_zero_and_a_negative_target_nan():
    x = np.array([-2.0, 0.0, 5.0, 1e4, np.inf, -1.0, -1.0])
    t = np.array([0.0, -0.0, 0.0, 0.0, 0.0, -1e-3, -5.0])
    with npu() as device:
        actual = run_kl_div(device, x, t, 0, False)
        summed = run_kl_div(device, x[:4], t[:4], 2, False)
    np.testing.assert_array_equal(actual[:4], 0.0)
    assert np.isnan(actual[4:]).all()  # 0 · inf, then the log of a negative number
    np.testing.assert_array_equal(summed, 0.0)


@pytest.mark.parametrize("log_target", [False, True])
def test_sums_propagate_nan_and_infinities(log_target):
    big = 1e4 if log_target else np.inf  # e^1e4 overflows to inf
    with npu() as device:
        for reduction in (1, 2, 3):
            nan = run_kl_div(device, np.array([0.5, np.nan, 1.0]), np.array([0.5, 0.5, 0.5]), reduction, log_target)
            plus = run_kl_div(device, np.array([0.5, -1.0, 1.0]), np.array([0.5, big, 0.5]), reduction, log_target)
            both = run_kl_div(device, np.array([np.inf, -np.inf]), np.array([0.5, 0.5]), reduction, log_target)
            assert np.isnan(nan) and np.isposinf(plus) and np.isnan(both), (reduction, nan, plus, both)


# ---------------------------------------------------------------- the compute dtype

@pytest.mark.parametrize("reduction", [0, 2, 1])
def test_the_result_is_rounded_to_the_compute_dtype_then_to_outs(reduction):
    """FLOAT16 inputs into a FLOAT out hold fp16 values; BFLOAT16 inputs into a FLOAT16 out are the
    bf16 result rounded again; FLOAT16 with BFLOAT16 computes in FLOAT, rounded once into out."""
    rng = np.random.default_rng(40 + reduction)
    x, t = rng.normal(size=(37, 41)) * 3, rng.uniform(0.0, 3.0, size=(37, 41))
    with npu("Ascend910B") as device:
        for log_target in (False, True):
            run = lambda dtypes: run_kl_div(device, x, t, reduction, log_target, dtypes)
            half_in_float = run((H, H, F))
            np.testing.assert_array_equal(half_in_float, representable(half_in_float, H))
            np.testing.assert_array_equal(run((H, H, H)), half_in_float)
            bf16_in_float = run((B, B, F))
            np.testing.assert_array_equal(bf16_in_float, representable(bf16_in_float, B))
            np.testing.assert_array_equal(run((B, B, H)), representable(bf16_in_float, H))
            mixed_in_float = run((H, B, F))
            assert not np.array_equal(mixed_in_float, representable(mixed_in_float, H))  # fp32 values, not fp16
            np.testing.assert_array_equal(run((H, B, H)), representable(mixed_in_float, H))
            np.testing.assert_array_equal(run((H, B, B)), representable(mixed_in_float, B))


# ---------------------------------------------------------------- empty inputs, out shapes, divisors

EMPTY_INPUTS = (((0, 3), (0, 3)), ((3, 0), (3, 0)), ((2, 3), (4, 0)), ((), (0,)), ((0,), ()), ((0, 2), (1, 2)))


@pytest.mark.parametrize("out_dtype", [F, H, B])
def test_empty_inputs_fill_out_with_nan_or_zero_in_every_element(out_dtype):
    """mean: NaN; sum: 0; batchmean: NaN when self's dim 0 is 0, else 0 (0-D self: 0). No shape
    rule applies (self [2, 3] with target [4, 0] passes), and out of any shape gets the value in
    every element (none of out's elements: nothing)."""
    with npu("Ascend910B") as device:
        for (self_shape, target_shape), reduction in itertools.product(EMPTY_INPUTS, (1, 2, 3)):
            expected = np.nan if reduction == 1 or (reduction == 3 and self_shape[:1] == (0,)) else 0.0
            for out_shape in ((), (1,), (2, 2), (0,)):
                actual = run_kl_div(device, np.zeros(self_shape), np.zeros(target_shape), reduction, False,
                                    (F, F, out_dtype), out_shape=out_shape, fill=5.0)
                np.testing.assert_array_equal(actual, np.full(out_shape, expected),
                                              err_msg="%s %s %s" % (self_shape, target_shape, NAMES[reduction]))


def test_empty_inputs_with_none_leave_out_untouched_and_check_no_shape():
    with npu() as device:
        for (self_shape, target_shape), out_shape in itertools.product(EMPTY_INPUTS, ((), (7,), (3, 0))):
            actual = run_kl_div(device, np.zeros(self_shape), np.zeros(target_shape), 0, True, out_shape=out_shape,
                                fill=5.0)
            np.testing.assert_array_equal(actual, np.full(out_shape, 5.0))


def test_the_workspace_is_always_zero():
    with npu() as device:
        for shapes, reduction in (((((3, 4), (3, 4), (3, 4))), 0), (((3, 4), (4,), ()), 1), (((0, 4), (0, 4), ()), 1),
                                  (((0, 4), (0, 4), (0, 4)), 0)):
            x, t, out = (device.tensor(np.ones(s), F).tensor for s in shapes)
            size, executor, ret = OP[0](x, t, reduction, False, out)
            assert (size, ret) == (0, 0), last_error()
            nn.aclDestroyAclOpExecutor(executor)


def test_a_reduction_accepts_any_out_of_exactly_one_element():
    """CheckReduceOutShape: [], [1], [1, 1] and a 9-D [1, ..., 1] (out's rank is never checked) all
    get the result; [2] and [0] do not hold exactly one element."""
    x, t = np.array([[0.5, -1.0], [2.0, 0.0]]), np.array([[0.25, 1.0], [0.5, 2.0]])
    with npu() as device:
        results = [run_kl_div(device, x, t, 2, False, out_shape=shape).reshape(-1)
                   for shape in ((), (1,), (1, 1), (1,) * 9)]
        for shape in ((2,), (0,), (1, 2)):
            assert first_phase(device, ((2, 2), (2, 2), shape), (F,) * 3, 2) == 161002
            assert "out: expected exactly one element for reduction sum, found shape" in last_error()
        assert first_phase(device, ((2, 2), (2, 2), (1,) * 9), (F,) * 3, 0) == 161002  # none: out is B
    assert all(r.tobytes() == results[0].tobytes() for r in results)
    np.testing.assert_allclose(results[0], kl_div.pointwise(x, t, False).sum(), rtol=1e-6)


def test_none_with_two_0d_inputs_needs_a_0d_out():
    with npu() as device:
        assert first_phase(device, ((), (), ()), (F,) * 3) == 0
        assert first_phase(device, ((), (), (1,)), (F,) * 3) == 161002
        assert "out: expected the broadcast shape of self and target [], found [1]" in last_error()
        assert first_phase(device, ((), (1,), (1,)), (F,) * 3) == 0  # one 0-D input: B is the other's shape
        assert first_phase(device, ((), (1,), ()), (F,) * 3) == 161002
        np.testing.assert_allclose(run_kl_div(device, np.array(-0.5), np.array(2.0), 0, False),
                                   2.0 * (np.log(2.0) + 0.5), rtol=1e-6)


@pytest.mark.parametrize("self_shape,target_shape,divisor", [
    ((3,), (2, 4, 3), 2),        # target adds a leading dim: B[0] = 2 (PyTorch: 3)
    ((1, 4), (5, 4), 5),         # target widens self's dim 0 (PyTorch: 1)
    ((), (5, 3), 5),             # 0-D self (PyTorch: no division)
    ((3, 7), (), 3),
    ((), (), 1),                 # both 0-D: B = [1]
])
def test_batchmean_divides_the_sum_by_dim0_of_the_broadcast_shape(self_shape, target_shape, divisor):
    """The fp32 sum divided in double, rounded once: exactly the sum's result / divisor in fp32,
    and mean exactly the sum / numel(B)."""
    rng = np.random.default_rng(divisor)
    x, t = rng.normal(size=self_shape), rng.uniform(0.1, 2.0, size=target_shape)
    with npu() as device:
        total = run_kl_div(device, x, t, 2, False)
        batchmean = run_kl_div(device, x, t, 3, False)
        mean = run_kl_div(device, x, t, 1, False)
    count = int(np.prod(np.broadcast_shapes(np.shape(x), np.shape(t))))
    assert batchmean == np.float32(np.float64(total) / divisor)
    assert mean == np.float32(np.float64(total) / count)


@pytest.mark.parametrize("reduction", [4, 5, -1, 6, 2 ** 40, -(2 ** 63)])
def test_reduction_outside_0_to_3_is_rejected_unlike_the_backward(reduction):
    with npu() as device:
        assert first_phase(device, ((2, 2),) * 3, (F,) * 3, reduction) == 161002
        assert ("reduction: expected 0 (none), 1 (mean), 2 (sum) or 3 (batchmean), found %d" % reduction
                in last_error())
        grad, x, t, out = (device.tensor(np.full((2, 2), 2.0), F) for _ in range(4))
        assert device.run(*BACKWARD, grad.tensor, x.tensor, t.tensor, reduction, False, out.tensor) == 0
        np.testing.assert_array_equal(device.read(out), np.full((2, 2), -4.0))  # treated as none there


def test_broadcasting_is_checked_after_the_reduction_and_before_out():
    with npu() as device:
        assert first_phase(device, ((2, 3), (4, 3), (9,)), (F,) * 3, 7) == 161002
        assert "reduction: expected" in last_error()
        assert first_phase(device, ((2, 3), (4, 3), (9,)), (F,) * 3, 1) == 161002
        assert "self: expected a shape that broadcasts with target [4, 3], found [2, 3]" in last_error()


# ---------------------------------------------------------------- order of the sums

def test_sums_are_bit_identical_across_threads_instruction_sets_and_layouts():
    rng = np.random.default_rng(3)
    cases = [((300, 500), (300, 500), (F, F, F), 2, False),
             ((1, 700), (90, 700), (B, H, F), 1, True),
             ((3, 1, 700), (50, 1), (H, H, H), 3, False),
             ((), (400, 90), (B, B, B), 1, True),
             ((200, 1), (1, 333), (H, F, B), 2, False)]
    for self_shape, target_shape, dtypes, reduction, log_target in cases:
        x, t = inputs(rng, self_shape, target_shape, log_target, dtypes)
        results = []
        for settings in kernel_variants():
            emulator.configure(**settings)
            with npu("Ascend910B") as device:
                results.append(run_kl_div(device, x, t, reduction, log_target, dtypes))
        emulator.configure(threads=2, vector_isa="auto")
        with npu("Ascend910B") as device:
            for kind in LAYOUTS[1:]:  # the order is that of B's indices, not of memory
                results.append(run_kl_div(device, x, t, reduction, log_target, dtypes, kind))
        assert all(r.tobytes() == results[0].tobytes() for r in results[1:]), (self_shape, target_shape)
        assert_close(results[0], torch_kl_div(x, t, reduction, log_target), tolerance_dtype(dtypes))


def test_rounding_to_the_compute_dtype_inside_the_element_wise_pass_is_bit_identical_everywhere():
    """None with a compute dtype narrower than out's rounds in the vector loop: every instruction
    set and thread count gives the same bits, special values (NaN payloads, overflow) included."""
    rng = np.random.default_rng(17)
    x = np.concatenate([np.repeat(EXTREMES, 12), rng.normal(size=40000) * 30])
    t = np.concatenate([np.tile(EXTREMES, 12), rng.uniform(0.0, 1e3, size=40000)])
    for dtypes, log_target in (((H, H, F), False), ((B, B, H), False), ((H, H, B), True), ((B, B, F), True)):
        results = []
        for settings in kernel_variants():
            emulator.configure(**settings)
            with npu("Ascend910B") as device:
                results.append(run_kl_div(device, x, t, 0, log_target, dtypes, "offset"))
        assert all(r.tobytes() == results[0].tobytes() for r in results[1:]), dtypes


@pytest.mark.parametrize("log_target", [False, True])
def test_a_sum_of_2_to_the_29_terms_is_accurate_and_the_same_on_1_and_2_threads(log_target):
    """self [2^15, 1] with target [1, 2^14]: 131072 chunks, in groups of two (more than 2^16 chunks).
    The float64 value is known in closed form: Σ_ij f(t_j) - g(t_j)·x_i."""
    rng = np.random.default_rng(29)
    x = representable(rng.normal(size=(1 << 15, 1)) - 1.0, F)
    t = representable(rng.normal(size=(1, 1 << 14)) - 1.0 if log_target else rng.uniform(0.0, 2.0, size=(1, 1 << 14)),
                      F)
    weight = np.exp(t) if log_target else t
    own = weight * (t if log_target else np.log(np.where(t == 0, 1.0, t)))
    exact = x.size * own.sum() - weight.sum() * x.sum()
    results = []
    for threads in (1, 2):
        emulator.configure(threads=threads)
        with npu() as device:
            results.append(run_kl_div(device, x, t, 2, log_target))
    assert results[0].tobytes() == results[1].tobytes()
    magnitude = x.size * np.abs(own).sum() + np.abs(weight).sum() * np.abs(x).sum()  # >= Σ|L|
    assert abs(results[0] - exact) <= 1e-7 * magnitude, (float(results[0]), exact, magnitude)


def test_an_element_has_the_same_value_stored_or_summed():
    """The sum of one element is that element as reduction none computes it."""
    x, t = EXTREMES[:, None], EXTREMES[None, :]
    with npu() as device:
        for log_target in (False, True):
            stored = run_kl_div(device, x, t, 0, log_target)
            for i, j in itertools.product(range(0, 12, 3), range(12)):
                summed = run_kl_div(device, x[i], t[0, j], 2, log_target)
                assert (np.isnan(summed) and np.isnan(stored[i, j])) or summed == stored[i, j], (i, j)


# ---------------------------------------------------------------- forward, then the backward

FORWARD_BACKWARD = {  # shapes where PyTorch's batchmean divisor is the library's
    "same shape": ((4, 6), (4, 6)),
    "self broadcast by target": ((4, 1), (4, 6)),
    "target broadcast": ((3, 4), (4,)),
}


@pytest.mark.parametrize("case", list(FORWARD_BACKWARD))
def test_forward_then_backward_on_its_output_matches_autograd(case):
    """out = aclnnKlDiv(x, t), then aclnnKlDivBackward(gradOutput = that very out tensor): the
    gradient of ½·Σ loss² with respect to x, as torch autograd computes it end to end."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    self_shape, target_shape = FORWARD_BACKWARD[case]
    with npu("Ascend910B") as device:
        for reduction, log_target in itertools.product(NAMES, (False, True)):
            x, t = inputs(rng, self_shape, target_shape, log_target, (F, F, F))
            xs, ts = device.tensor(x, F), device.tensor(t, F)
            loss = device.tensor(np.full(out_shape_of(x, t, reduction), np.nan), F)
            assert device.run(*OP, xs.tensor, ts.tensor, reduction, log_target, loss.tensor) == 0, last_error()
            grad = device.tensor(np.full(self_shape, np.nan), F)
            assert device.run(*BACKWARD, loss.tensor, xs.tensor, ts.tensor, reduction, log_target, grad.tensor) == 0, \
                last_error()
            tx = torch.tensor(x, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = torch.nn.functional.kl_div(tx, torch.tensor(t), reduction=NAMES[reduction],
                                                      log_target=log_target)
            (0.5 * (expected ** 2).sum()).backward()
            assert_close(device.read(loss), expected.detach().numpy(), F)
            assert_close(device.read(grad), tx.grad.numpy(), F)


# ---------------------------------------------------------------- broken contracts

def view(array, dtype=F):
    return (array.ctypes.data, dtype, array.shape, tuple(s // array.itemsize for s in array.strides))


def test_a_broken_contract_is_a_runtime_error():
    a, one = np.zeros((4, 4), np.float32), np.zeros(1, np.float32)
    calls = [lambda: _kernels.kl_div(view(a[:2]), view(a), view(a), False, F),          # out not of B
             lambda: _kernels.kl_div(view(a), view(a[:2]), view(a), False, F),          # self not of B
             lambda: _kernels.kl_div(view(a), view(a), view(a.view(np.int32), nn.ACL_INT32), False, F),
             lambda: _kernels.kl_div(view(a), view(a), view(a), False, D),              # no DOUBLE compute
             lambda: _kernels.kl_div_reduce(view(a[:2]), view(a), view(a), False, F, 1.0),  # out of 8 elements
             lambda: _kernels.kl_div_reduce(view(one), view(a[:0]), view(a[:0]), False, F, 1.0)]  # empty B
    for call in calls:
        with pytest.raises(RuntimeError, match="aclnnKlDiv"):
            call()


# ---------------------------------------------------------------- the sample

def test_sample_prints_the_documented_value_and_leaks_nothing():
    assert_sample_prints("kl_div", ["result[0] is: %f" % EXPECTED])
