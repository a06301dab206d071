"""aclnnKlDivBackward: the cases its declaration does not generate (single-dtype values across
chips and layouts, dtypes, empty inputs and every check are in test_operators.py): mixed dtypes
with every reduction and logTarget over broadcast shapes, PyTorch's kl_div autograd where it
computes the same thing, the library's rules for reduction values and the batchmean divisor,
accepted corner shapes, bit-identical broadcast reductions across thread counts, the sample."""
import itertools
import warnings
import zlib

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import kl_div_backward
from support import ALL_SOCS, assert_close, assert_sample_prints, kernel_variants, last_error, npu, representable

OP = (nn.aclnnKlDivBackwardGetWorkspaceSize, nn.aclnnKlDivBackward)
F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
BF16_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")
REDUCTIONS = (0, 1, 2, 3, 6)  # none, mean, sum, batchmean, and a value outside 0..3 (none)


# ---------------------------------------------------------------- the float64 reference

def reference(grad, self_shape, target, reduction, log_target):
    """The declaration's reference: -(target or exp(target)) * gradOutput * coefficient over B,
    summed back to self's shape."""
    return kl_div_backward.reference({"gradOutput": grad, "self": np.zeros(self_shape), "target": target,
                                      "reduction": reduction, "logTarget": log_target})


# ---------------------------------------------------------------- cases

CASES = {  # name: (self shape, target shape, gradOutput shape)
    "same shape": ((3, 5), (3, 5), (3, 5)),
    "self broadcast by target": ((1, 5), (4, 5), (4, 5)),
    "gradOutput smaller": ((4, 1), (4, 6), (1, 6)),
    "target broadcast": ((3, 4), (4,), (3, 4)),
    "leading dims added": ((3,), (2, 4, 3), (2, 4, 3)),
    "leading and widened dims": ((1, 3, 1), (2, 5, 3, 4), (5, 1, 4)),
    "both broadcast": ((2, 1, 3), (1, 4, 1), (1,)),
    "0-D gradOutput": ((2, 3), (2, 3), ()),
    "0-D self": ((), (4, 3), (4, 3)),
    "all 0-D": ((), (), ()),
    "8-D": ((1, 2, 1, 2, 1, 2, 1, 2), (2, 1, 2, 1, 2, 1, 2, 1), (2, 2, 1, 1, 2, 2, 1, 1)),
    "reduce many rows": ((1, 40), (70, 40), (70, 1)),
}


def layout(shape, kind):
    """(strides, offset) of a view of `shape`: dense, column-major, offset, or every other element."""
    dense = nn.tensor.contiguous_strides(shape)
    if kind == "transposed":
        strides, step = [], 1
        for dim in shape:
            strides.append(step)
            step *= max(dim, 1)
        return tuple(strides), 0
    if kind == "offset":
        return dense, 5
    if kind == "strided":
        return tuple(2 * s for s in dense), 3
    return dense, 0


LAYOUTS = ("contiguous", "transposed", "offset", "strided")


def dtype_combos(soc):
    """(gradOutput, self, target, out) dtypes that differ (one dtype for all is generated)."""
    return [(H, F, H, F), (F, H, H, H)] + ([(B, H, F, B), (H, B, B, F)] if soc in BF16_SOCS else [])


def inputs(rng, case, dtypes, log_target):
    self_shape, target_shape, grad_shape = CASES[case]
    grad = representable(rng.normal(size=grad_shape) * 2, dtypes[0])
    target = representable(rng.normal(size=target_shape) * (1 if log_target else 3), dtypes[2])
    return self_shape, grad, target


def run_case(device, self_shape, grad, target, reduction, log_target, dtypes, kind="contiguous"):
    """Both phases on tensors laid out as `kind`; returns out's values."""
    go = device.tensor(grad, dtypes[0], *layout(grad.shape, kind))
    x = device.tensor(np.full(self_shape, 0.5), dtypes[1], *layout(self_shape, kind))
    t = device.tensor(target, dtypes[2], *layout(target.shape, kind))
    out = device.tensor(np.full(self_shape, np.nan), dtypes[3], *layout(self_shape, kind))
    ret = device.run(*OP, go.tensor, x.tensor, t.tensor, reduction, log_target, out.tensor)
    assert ret == 0, last_error()
    return device.read(out)


# ---------------------------------------------------------------- values

@pytest.mark.parametrize("soc,case", [(s, c) for s in ALL_SOCS for c in CASES])
def test_mixed_dtypes_with_every_reduction_match_the_reference(soc, case):
    rng = np.random.default_rng(zlib.crc32((soc + case).encode()))
    with npu(soc) as device:
        for n, dtypes in enumerate(dtype_combos(soc)):
            kind = LAYOUTS[(n + len(case)) % len(LAYOUTS)]
            for reduction, log_target in itertools.product(REDUCTIONS, (False, True)):
                self_shape, grad, target = inputs(rng, case, dtypes, log_target)
                actual = run_case(device, self_shape, grad, target, reduction, log_target, dtypes, kind)
                expected = reference(grad, self_shape, target, reduction, log_target)
                assert actual.shape == tuple(self_shape)
                assert_close(actual, expected, dtypes[3])


def test_self_values_are_never_read():
    rng = np.random.default_rng(7)
    grad, target = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    with npu() as device:
        results = []
        for fill in (0.0, np.nan, np.inf):
            go, t = device.tensor(grad, F), device.tensor(target, F)
            x = device.tensor(np.full((3, 4), fill), F)
            out = device.empty((3, 4), F)
            assert device.run(*OP, go.tensor, x.tensor, t.tensor, 2, False, out.tensor) == 0
            results.append(device.read(out))
    assert all(np.array_equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("reduction", [4, 6, -1, 2 ** 40])
def test_reduction_outside_0_to_3_is_none(reduction):
    grad, target = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.5, -1.0], [2.0, 0.25]])
    with npu() as device:
        actual = run_case(device, (1, 2), grad, target, reduction, False, (F,) * 4)
    np.testing.assert_array_equal(actual, [[-(0.5 + 6.0), -(-2.0 + 1.0)]])


def test_batchmean_divides_by_dim0_of_the_broadcast_shape():
    """self (3, 1) with target (2, 3, 4): CANN divides by B[0] = 2, PyTorch would use 3."""
    grad, target = np.ones((2, 3, 4)), np.ones((2, 3, 4))
    with npu() as device:
        actual = run_case(device, (3, 1), grad, target, 3, False, (F,) * 4)
    np.testing.assert_array_equal(actual, np.full((3, 1), -8 / 2))


def test_extreme_targets_propagate_inf_and_nan():
    target = np.array([100.0, -100.0, np.inf, -np.inf, np.nan, 0.0])
    grad = np.array([1.0, 1.0, 1.0, 1.0, 1.0, np.inf])
    with npu() as device:
        for log_target in (False, True):
            actual = run_case(device, (6,), grad, target, 0, log_target, (F,) * 4)
            with np.errstate(over="ignore", invalid="ignore"):
                expected = reference(grad, (6,), target, 0, log_target).astype(np.float32)
            np.testing.assert_array_equal(actual, expected)


# ---------------------------------------------------------------- PyTorch where it agrees

def torch_agrees(self_shape, shape, reduction):
    """PyTorch's batchmean divides by self.size(0) (and not at all for 0-D self); CANN by B[0]."""
    if reduction != 3:
        return True
    if len(self_shape) == 0:
        return len(shape) == 0
    return len(self_shape) == len(shape) and self_shape[0] == shape[0]


@pytest.mark.parametrize("case", list(CASES))
def test_matches_pytorch_kl_div_autograd(case):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    self_shape, target_shape, grad_shape = CASES[case]
    shape = np.broadcast_shapes(self_shape, target_shape)
    names = {0: "none", 1: "mean", 2: "sum", 3: "batchmean"}
    with npu("Ascend910B") as device:
        for reduction, log_target in itertools.product(names, (False, True)):
            grad = rng.normal(size=grad_shape if reduction == 0 else ())
            target = rng.normal(size=target_shape)
            actual = run_case(device, self_shape, grad, target, reduction, log_target, (F,) * 4)
            x = torch.zeros(self_shape, dtype=torch.float64, requires_grad=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loss = torch.nn.functional.kl_div(x, torch.tensor(target), reduction=names[reduction],
                                                  log_target=log_target)
            loss.backward(torch.tensor(np.broadcast_to(grad, loss.shape)))
            expected = x.grad.numpy()
            if not torch_agrees(self_shape, shape, reduction):  # same up to the batchmean divisor
                expected = expected * (self_shape[0] if self_shape else 1) / shape[0]
            assert_close(actual, expected, F)


# ---------------------------------------------------------------- empty tensors

def test_non_empty_self_with_empty_broadcast_shape_gets_zeros():
    """self (1, 3) with target (0, 3): every output element is a sum of no terms."""
    with npu() as device:
        for reduction in (1, 3):
            actual = run_case(device, (1, 3), np.zeros((0, 3)), np.zeros((0, 3)), reduction, False, (F, F, F, H))
            np.testing.assert_array_equal(actual, np.zeros((1, 3)))


# ---------------------------------------------------------------- accepted corner cases

S = (2, 3)


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
def test_accepted_shapes_and_dtypes_pass_every_check():
    """The counterparts of the rejections above: what the rules allow does pass."""
    accepted = [  # soc, dtypes, shapes of gradOutput/self/target/out
        ("Ascend910", (H, F, H, F), (S,) * 4),                 # mixed within the list
        ("Ascend310P", (F, H, F, H), ((3,), (2, 1), (3,), (2, 1))),
        ("Ascend950", (B, F, H, B), ((), (1,) * 8, (2,) * 8, (1,) * 8)),
    ]
    for soc, dtypes, shapes in accepted:
        with npu(soc) as device:
            go, x, t, out = [device.empty(s, d) for d, s in zip(dtypes, shapes)]
            assert device.run(*OP, go.tensor, x.tensor, t.tensor, 3, True, out.tensor) == 0, last_error()


# ---------------------------------------------------------------- determinism and the sample

def test_results_are_bit_identical_across_thread_counts_and_vector_isas():
    rng = np.random.default_rng(3)
    cases = [((1, 500), rng.normal(size=(300, 1)), rng.normal(size=(300, 500)), (F,) * 4),
             ((3, 1, 700), rng.normal(size=(3, 50, 700)), rng.normal(size=(50, 1)), (F, B, H, F)),
             ((), rng.normal(size=(400,)), rng.normal(size=(90, 400)), (B, B, B, B)),
             ((200, 1), rng.normal(size=(200, 300)), rng.normal(size=(1, 300)), (H, F, B, F)),
             ((300, 200), rng.normal(size=(300, 200)), rng.normal(size=(300, 200)), (B, F, F, H))]
    for self_shape, grad, target, dtypes in cases:
        results = []
        for settings in kernel_variants():
            emulator.configure(**settings)
            with npu("Ascend910B") as device:
                results.append(run_case(device, self_shape, grad, target, 1, True, dtypes))
        assert all(r.tobytes() == results[0].tobytes() for r in results[1:]), self_shape
        grad, target = representable(grad, dtypes[0]), representable(target, dtypes[2])
        assert_close(results[0], reference(grad, self_shape, target, 1, True), dtypes[3])


def test_summing_along_or_across_the_innermost_axis_adds_in_the_same_order():
    """self (1, N) sums rows of B (runs of outputs at once), self (N, 1) sums along B's innermost
    axis (one output at a time): with the data transposed, each output adds the same terms in the
    same order, so the bits agree."""
    rng = np.random.default_rng(11)
    grad, target = rng.normal(size=(2600, 300)) * 100, rng.normal(size=(2600, 300))  # 2600 terms: blocks of 1024
    with npu() as device:
        across = run_case(device, (1, 300), grad, target, 2, False, (F,) * 4)
        along = run_case(device, (300, 1), grad.T.copy(), target.T.copy(), 2, False, (F,) * 4)
    assert across.reshape(-1).tobytes() == along.reshape(-1).tobytes()


@pytest.mark.parametrize("reduction,expected", [(2, -float(1 << 25)), (1, -1.0), (3, -1.0)])
def test_a_sum_of_more_terms_than_an_fp32_running_sum_can_count_is_exact(reduction, expected):
    """2^25 terms of 1 (a stride-0 target over one element): a running fp32 sum stops at 2^24 (a term
    below half its ulp), which gave half the gradient; blocks combined pairwise give it whole."""
    with npu() as device:
        one, zero = device.tensor(np.ones(()), F), device.tensor(np.zeros(()), F)
        target = nn.aclCreateTensor([1 << 25], F, [0], 0, nn.ACL_FORMAT_ND, [1], one.address)
        out = device.tensor(np.zeros(()), F)
        try:
            assert device.run(*OP, one.tensor, zero.tensor, target, reduction, False, out.tensor) == 0
            assert float(device.read(out)) == expected
        finally:
            nn.aclDestroyTensor(target)


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("kl_div_backward",
                         ["resultData[%d] is: %f" % (i, v) for i, v in enumerate([-4, -9, -25, -64])])
