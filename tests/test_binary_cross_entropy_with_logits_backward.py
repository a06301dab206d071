"""aclnnBinaryCrossEntropyWithLogitsBackward: the cases its declaration does not generate
(single-dtype values across chips and layouts, dtypes, empty inputs and every check are in
test_operators.py): mixed dtypes promoting to fp32 with every reduction and optional weights,
PyTorch autograd, extreme logits, mean's divisor, out in place of target, the shape rules skipped
for an empty self, formats that are free, a destroyed weight, the sample."""
import itertools
import zlib

import numpy as np
import pytest

import aclnn_api as nn
from aclnn_api import binary_cross_entropy_with_logits_backward as bce
import emulator
from emulator.dtypes import dtype_name
from support import assert_close, assert_sample_prints, kernel_variants, last_error, npu, representable

OP = (nn.aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize, nn.aclnnBinaryCrossEntropyWithLogitsBackward)
F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
NONE, MEAN, SUM = 0, 1, 2
NAMES = ("gradOutput", "self", "target", "weightOptional", "posWeightOptional", "out")


def reference(g, x, t, w, p, reduction):
    """The declaration's float64 reference (weights None: all ones)."""
    return bce.reference({"gradOutput": g, "self": x, "target": t, "weightOptional": w, "posWeightOptional": p,
                          "reduction": reduction})


def contiguous(shape):
    return None, 0


def column_major_spaced(shape):
    """Dims reversed in memory, every other element, after an offset: nothing coalesces."""
    strides, step = [], 2
    for dim in shape:
        strides.append(step)
        step *= max(dim, 1)
    return strides, 5


SCENARIOS = {  # name: (self shape, gradOutput shape, weight shape, posWeight shape, layout)
    "full": ((3, 5), (3, 5), (3, 5), (3, 5), contiguous),
    "broadcast": ((2, 3, 4), (3, 1), (4,), (1, 3, 1), contiguous),
    "grad-0-D": ((4, 6), (), (6,), (4, 1), contiguous),
    "grad-[1]": ((4, 6), (1,), (1, 6), (6,), contiguous),
    "strided": ((3, 4, 5), (3, 4, 5), (4, 1), (5,), column_major_spaced),
    "strided-broadcast": ((6, 7), (1, 7), (6, 1), (7,), column_major_spaced),
    "0-D": ((), (), (), (), contiguous),
    "large-dense": ((129, 257), (129, 257), (129, 257), (129, 257), contiguous),
    "large-broadcast": ((129, 257), (129, 257), (257,), (129, 1), contiguous),
}


def random_inputs(rng, shapes):
    """gradOutput, self, target, weight, posWeight values in ranges that exercise every term."""
    g_shape, x_shape, w_shape, p_shape = shapes
    return (rng.normal(size=g_shape) * 2, rng.normal(size=x_shape) * 4, rng.uniform(0, 1, size=x_shape),
            rng.uniform(-1, 2, size=w_shape), rng.uniform(0, 3, size=p_shape))


def run_case(device, values, dtypes, layout, reduction, with_weight=True, with_pos_weight=True):
    """Put the inputs on the device in their dtypes (weights left out when asked), run both phases
    and return (status, out values, the representable inputs the reference must see)."""
    g, x, t, w, p = values
    dg, dx, dt, dw, dp, do = dtypes
    seen = [representable(v, d) for v, d in zip((g, x, t, w, p), (dg, dx, dt, dw, dp))]
    if not with_weight:
        seen[3] = None
    if not with_pos_weight:
        seen[4] = None
    tensors = []
    for value, dtype in zip(seen, (dg, dx, dt, dw, dp)):
        if value is None:
            tensors.append(None)
            continue
        strides, offset = layout(value.shape)
        tensors.append(device.tensor(value, dtype, strides=strides, offset=offset))
    strides, offset = layout(x.shape)
    out = device.empty(x.shape, do, strides=strides, offset=offset)
    handles = [None if t_ is None else t_.tensor for t_ in tensors]
    ret = device.run(*OP, *handles[:5], reduction, out.tensor)
    return ret, (device.read(out) if ret == 0 else None), seen


MIXED = {  # dtypes of gradOutput, self, target, weight, posWeight (None: absent); out = target's
    "Ascend910": [(F, H, H, F, H), (H, F, F, None, H), (H, H, F, H, None), (F, F, H, None, None)],
    "Ascend310P": [(H, F, H, H, F), (F, H, H, F, None)],
    "Ascend910B": [(F, H, H, B, F), (B, F, B, H, H), (H, B, F, None, B), (H, H, H, F, None),
                   (B, B, B, B, H), (F, F, H, None, None), (H, F, B, B, B)],
    "Ascend910_93": [(B, H, F, F, B), (F, B, B, None, None)],
    "Ascend950": [(H, B, H, B, None), (B, B, F, H, F)],
}


def _combo_id(combo):
    return "-".join("none" if d is None else dtype_name(d).lower() for d in combo)


@pytest.mark.parametrize("soc,combo", [(s, c) for s in MIXED for c in MIXED[s]],
                         ids=[s + ":" + _combo_id(c) for s in MIXED for c in MIXED[s]])
def test_mixed_dtypes_promote_to_float32(soc, combo):
    """Inputs of different dtypes compute in f32 (the promotion of any mix); out has target's dtype."""
    dg, dx, dt, dw, dp = combo
    dtypes = (dg, dx, dt, dw or F, dp or F, dt)
    rng = np.random.default_rng(zlib.crc32((soc + str(combo)).encode()))
    with npu(soc) as device:
        for scenario, reduction in itertools.product(("broadcast", "strided-broadcast", "0-D"), (NONE, MEAN, SUM)):
            x_shape, g_shape, w_shape, p_shape, layout = SCENARIOS[scenario]
            values = random_inputs(rng, (g_shape, x_shape, w_shape, p_shape))
            ret, out, seen = run_case(device, values, dtypes, layout, reduction, dw is not None, dp is not None)
            assert ret == 0, last_error()
            assert_close(out, reference(*seen, reduction), dt)


@pytest.mark.parametrize("reduction,with_w,with_p", list(itertools.product((NONE, MEAN, SUM), (True, False), (True, False))))
def test_matches_pytorch_autograd(reduction, with_w, with_p):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(reduction * 4 + with_w * 2 + with_p)
    x_shape = (4, 6)
    g_shape = x_shape if reduction == NONE else ()  # PyTorch's upstream grad: full for none, scalar else
    values = random_inputs(rng, (g_shape, x_shape, (6,), (4, 1)))
    with npu("Ascend910B") as device:
        ret, out, (g, x, t, w, p) = run_case(device, values, (F,) * 6, contiguous, reduction, with_w, with_p)
    assert ret == 0
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        xt, torch.tensor(t), weight=None if w is None else torch.tensor(w),
        pos_weight=None if p is None else torch.tensor(p), reduction=("none", "mean", "sum")[reduction])
    loss.backward(torch.tensor(g))
    assert_close(out, xt.grad.numpy(), F)


def test_extreme_logits_do_not_overflow():
    x = np.array([-1e30, -100.0, -20.0, 0.0, 20.0, 100.0, 1e30, np.inf, -np.inf, np.nan])
    t = np.linspace(0, 1, x.size)
    with npu() as device:
        ret, out, seen = run_case(device, (np.ones_like(x), x, t, np.ones_like(x), np.full_like(x, 2.0)),
                                  (F,) * 6, contiguous, NONE)
        assert ret == 0
        np.testing.assert_allclose(out, reference(*seen, NONE), rtol=1e-6, atol=1e-6, equal_nan=True)
        assert np.isnan(out[-1]) and np.isfinite(out[:-1]).all()


def test_mean_divides_by_the_element_count_of_self():
    with npu() as device:
        ones = np.ones((5, 8))
        ret, out, _ = run_case(device, (np.ones(()), np.zeros((5, 8)), ones, ones, ones), (F,) * 6, contiguous, MEAN)
        assert ret == 0
        np.testing.assert_array_equal(out, np.float32(-0.5) * np.float32(1 / 40))


def test_out_may_be_target_in_place():
    rng = np.random.default_rng(7)
    g, x, t = rng.normal(size=(40, 30)), rng.normal(size=(40, 30)) * 3, rng.uniform(size=(40, 30))
    with npu() as device:
        tensors = [device.tensor(v, B) for v in (g, x, t)]
        assert device.run(*OP, tensors[0].tensor, tensors[1].tensor, tensors[2].tensor, None, None, NONE,
                          tensors[2].tensor) == 0
        seen = [representable(v, B) for v in (g, x, t)]
        assert_close(device.read(tensors[2]), reference(*seen, None, None, NONE), B)


@pytest.mark.parametrize("dtypes", [(H, B, B, F, H, B)], ids=["mixed"])
def test_mixed_dtypes_are_bit_identical_across_thread_counts_and_vector_isas(dtypes):
    rng = np.random.default_rng(3)
    values = random_inputs(rng, ((300, 1), (300, 500), (500,), (300, 500)))
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu() as device:
            ret, out, _ = run_case(device, values, dtypes, contiguous, MEAN)
            assert ret == 0
            results.append(out)
    assert all(np.array_equal(results[0], r, equal_nan=True) for r in results[1:])


def test_empty_self_succeeds_with_workspace_zero_and_writes_nothing():
    with npu() as device:
        empty = device.empty((3, 0), F)
        # shape rules are skipped when self is empty: a 9-D gradOutput and a mismatched weight pass
        grad = device.empty((2,) * 9, F)
        weight = device.empty((5,), H)
        sentinel = device.tensor(np.full((2, 2), 7.0), F)
        size, executor, ret = OP[0](grad.tensor, empty.tensor, empty.tensor, weight.tensor, None, SUM, sentinel.tensor)
        assert (size, ret) == (0, 0) and executor is not None, last_error()
        assert OP[1](None, 0, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(sentinel), 7.0)


def _make(device, shapes, dtypes, formats):
    tensors = []
    for shape, dtype, fmt in zip(shapes, dtypes, formats):
        tensors.append(None if shape is None else device.empty(shape, dtype, fmt=fmt).tensor)
    return tensors


NC1, NCHW, ND = nn.ACL_FORMAT_NC1HWC0, nn.ACL_FORMAT_NCHW, nn.ACL_FORMAT_ND
S = (2, 3)


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
def test_weights_may_be_null_and_formats_of_other_tensors_are_free():
    with npu() as device:
        # all tensors NC1HWC0 pass; gradOutput's and the weights' formats are not checked
        args = _make(device, (S,) * 6, (F,) * 6, (NC1,) * 6)
        assert device.run(*OP, *args[:5], NONE, args[5]) == 0, last_error()
        args = _make(device, (S,) * 6, (F,) * 6, (NCHW, ND, ND, NC1, NCHW, ND))
        assert device.run(*OP, args[0], args[1], args[2], None, None, SUM, args[5]) == 0, last_error()


def test_destroyed_weight_is_rejected():
    with npu() as device:
        args = _make(device, (S,) * 6, (F,) * 6, (ND,) * 6)
        weight = device.empty(S, F).tensor
        nn.aclDestroyTensor(weight)
        device.tensors = [t for t in device.tensors if t.tensor is not weight]
        size, executor, ret = OP[0](args[0], args[1], args[2], weight, None, NONE, args[5])
        assert (ret, executor) == (161002, None)
        assert "weightOptional: expected" in last_error()


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("binary_cross_entropy_with_logits_backward", ["result[0] is: 0.000000", "result[1] is: 0.631059", "result[2] is: 3.075507", "result[3] is: 7.587801"])
