"""aclnnBinaryCrossEntropyWithLogits: the cases its declaration does not generate (single-dtype
values across chips and layouts, dtypes, empty inputs and every check are in test_operators.py):
the library's unit tests one by one, PyTorch across dtypes x chips x layouts x reductions x
optional weights, extreme logits, mixed dtypes and weights cast to the compute dtype, the fixed
order of the sum, the fills of an empty self, the workspace, the forward then the backward against
PyTorch autograd, the sample."""
from __future__ import annotations

import itertools
import zlib
from typing import Optional

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api import binary_cross_entropy_with_logits as bce
from emulator.dtypes import dtype_name
from test_binary_cross_entropy_with_logits_backward import column_major_spaced, contiguous  # the backward's views
from support import (assert_close, assert_rejected, assert_sample_prints, bf16_bits, kernel_variants, last_error, npu,
                     representable)

OP = (nn.aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize, nn.aclnnBinaryCrossEntropyWithLogits)
BACKWARD = (nn.aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize, nn.aclnnBinaryCrossEntropyWithLogitsBackward)
F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
NONE, MEAN, SUM = 0, 1, 2
REDUCTION_NAMES = ("none", "mean", "sum")
CHIP_DTYPES = {"Ascend910": (F, H), "Ascend310P": (F, H), "Ascend910B": (F, H, B), "Ascend910_93": (F, H, B),
               "Ascend950": (F, H, B)}

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]


def out_shape(x_shape: tuple, reduction: int) -> tuple:
    return tuple(x_shape) if reduction == NONE else (1,)


def run_case(device, values: dict, dtypes: dict, reduction: int, layout=contiguous, out=None) -> tuple:
    """Put self, target, weight, posWeight (None: absent) on the device in their dtypes (out: target's
    unless given), run both phases; returns (status, out values, workspace size)."""
    tensors = {}
    for name in ("self", "target", "weight", "posWeight"):
        if values.get(name) is None:
            tensors[name] = None
            continue
        strides, offset = layout(np.shape(values[name]))
        tensors[name] = device.tensor(values[name], dtypes.get(name, dtypes["self"]), strides=strides,
                                      offset=offset).tensor
    x_shape = np.shape(values["self"])
    shape = out_shape(x_shape, reduction) if out is None else out
    strides, offset = layout(shape)
    result = device.empty(shape, dtypes.get("out", dtypes.get("target", dtypes["self"])), strides=strides, offset=offset)
    size, executor, ret = OP[0](tensors["self"], tensors["target"], tensors["weight"], tensors["posWeight"],
                                reduction, result.tensor)
    if ret != 0:
        return ret, None, size
    workspace = device.malloc(size) if size else None
    ret = OP[1](workspace, size, executor, device.stream)
    return ret, (device.read(result) if ret == 0 else None), size


def torch_loss(x, t, w, p, reduction: int) -> np.ndarray:
    """PyTorch's F.binary_cross_entropy_with_logits in float64, in out's shape for mean and sum."""
    torch = pytest.importorskip("torch")
    as_tensor = (lambda v: None if v is None else torch.tensor(np.asarray(v, dtype=np.float64)))
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        as_tensor(x), as_tensor(t), weight=as_tensor(w), pos_weight=as_tensor(p),
        reduction=REDUCTION_NAMES[reduction]).numpy()
    return loss if reduction == NONE else loss.reshape(1)


def seen(values: dict, dtypes: dict) -> dict:
    """The values as the device holds them."""
    return {name: None if v is None else representable(np.asarray(v, dtype=np.float64), dtypes.get(name, dtypes["self"]))
            for name, v in values.items()}


# ------------------------------------------------------------------------------------------------
# The library's unit tests (test_aclnn_binary_cross_entropy_with_logits.cpp, SoC 910B): weight and
# posWeight always given.

UNIT_TESTS = {  # name: (self, target, weight, posWeight shapes; dtype; reduction; out shape; out dtype; status)
    "invalid_double_type": (((5, 5),) * 4, D, 0, (5, 5), D, 161002),
    "default_reduction": (((5, 5),) * 4, F, 1, (1,), F, 0),
    "sum_reduction": (((5, 5),) * 4, F, 2, (1,), F, 0),
    "diff_dtype_of_target_and_out": (((5, 5),) * 4, F, 0, (5, 5), H, 161002),
    "diff_shape_between_target_and_self": (((5, 5), (5, 1, 5), (5, 5), (5, 5)), F, 0, (5, 5), H, 161002),
    "unable_broadcast_between_posweight_and_target": (((5, 2, 5),) * 3 + ((5, 3, 5),), F, 0, (5, 2, 5), F, 161002),
    "empty_tensor_under_none_reduction": (((5, 0, 3),) * 4, F, 0, (5, 0, 3), F, 0),
    "empty_tensor_under_default_reduction": (((5, 0, 3),) * 4, F, 2, (1,), F, 0),
    "empty_tensor_under_sum_reduction": (((5, 0, 3),) * 4, F, 2, (1,), F, 0),
    "input_size_overlimit": (((5, 1, 3, 2, 4, 6, 3, 5, 9),) * 4, F, 2, (1,), F, 161002),
    "null_input": (((5, 2, 5),) * 4, F, 2, (5, 2, 5), F, 161001),
    "null_output": (((5, 2, 5),) * 4, F, 2, None, F, 161001),
    "illegal_reduction": (((5, 5),) * 4, F, 3, (5, 5), F, 161002),
    "wrong_output_shape": (((5, 5),) * 4, F, 1, (1,), F, 0),
}
UNIT_TEST_MESSAGES = {  # what the first failing check says
    "invalid_double_type": "self: expected a dtype in",
    "diff_dtype_of_target_and_out": "out: expected dtype FLOAT (the dtype of target), found FLOAT16",
    "diff_shape_between_target_and_self": "out: expected dtype FLOAT (the dtype of target), found FLOAT16",
    "unable_broadcast_between_posweight_and_target": "posWeightOptional: expected a shape that broadcasts to target",
    "input_size_overlimit": "self: expected at most 8 dims, found 9",
    "null_input": "self: expected an aclTensor",
    "null_output": "out: expected an aclTensor",
    "illegal_reduction": "reduction: expected 0 (none), 1 (mean) or 2 (sum), found 3",
}


@pytest.mark.parametrize("name", UNIT_TESTS)
def test_the_library_unit_test(name):
    shapes, dtype, reduction, out_dims, out_dtype, code = UNIT_TESTS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    values = [rng.normal(size=shape) for shape in shapes]
    with npu("Ascend910B") as device:
        tensors = [device.tensor(v, dtype).tensor for v in values]
        if name == "null_input":
            tensors[0] = None
        out = None if out_dims is None else device.empty(out_dims, out_dtype)
        size, executor, ret = OP[0](*tensors, reduction, None if out is None else out.tensor)
        if code:
            assert_rejected(ret, code, UNIT_TEST_MESSAGES[name])
            assert executor is None
            return
        assert ret == 0, last_error()
        assert OP[1](device.malloc(size) if size else None, size, executor, device.stream) == 0, last_error()
        result = device.read(out)
    if 0 in shapes[0]:  # none: nothing written; sum (all three empty cases with a reduction): 0
        assert result.shape == out_dims and (reduction == NONE or result.tolist() == [0.0])
    else:
        assert_close(result, torch_loss(*(representable(v, dtype) for v in values), reduction), dtype)


# ------------------------------------------------------------------------------------------------
# Against PyTorch: every dtype of every chip, every reduction, with and without each weight, dense
# and strided, broadcast weights

SCENARIOS = {  # name: (self shape, weight shape, posWeight shape)
    "full": ((3, 5), (3, 5), (3, 5)),
    "broadcast": ((2, 3, 4), (4,), (1, 3, 1)),
    "per class": ((6, 7), (6, 1), (7,)),
    "0-D weights": ((4, 6), (), ()),
    "0-D": ((), (), ()),
    "more than one block": ((70, 130), (130,), (70, 1)),
}


def random_values(rng, shapes, scale: float = 4.0) -> dict:
    x_shape, w_shape, p_shape = shapes
    return {"self": rng.normal(size=x_shape) * scale, "target": rng.uniform(0, 1, size=x_shape),
            "weight": rng.uniform(-1, 2, size=w_shape), "posWeight": rng.uniform(0, 3, size=p_shape)}


@pytest.mark.parametrize("chip,dtype", [(c, d) for c, ds in CHIP_DTYPES.items() for d in ds],
                         ids=["%s-%s" % (c, dtype_name(d)) for c, ds in CHIP_DTYPES.items() for d in ds])
def test_matches_pytorch_for_every_reduction_weight_and_layout(chip, dtype):
    rng = np.random.default_rng(zlib.crc32((chip + str(dtype)).encode()))
    failures = []
    with npu(chip) as device:
        for scenario, reduction, with_w, with_p, layout in itertools.product(
                SCENARIOS, (NONE, MEAN, SUM), (True, False), (True, False), (contiguous, column_major_spaced)):
            # sums of 9100 losses of up to ~10 would not fit FLOAT16: smaller logits there
            scale = 1.0 if scenario == "more than one block" and reduction == SUM else 4.0
            values = random_values(rng, SCENARIOS[scenario], scale)
            values["weight"] = values["weight"] if with_w else None
            values["posWeight"] = values["posWeight"] if with_p else None
            dtypes = {"self": dtype}
            ret, out, _ = run_case(device, seen(values, dtypes), dtypes, reduction, layout)
            assert ret == 0, last_error()
            v = seen(values, dtypes)
            try:
                assert_close(out, torch_loss(v["self"], v["target"], v["weight"], v["posWeight"], reduction), dtype)
            except AssertionError as error:
                failures.append("%s %s w=%s p=%s %s: %s" % (scenario, REDUCTION_NAMES[reduction], with_w, with_p,
                                                            layout.__name__, error))
    assert not failures, "\n".join(failures)


EXTREMES = np.array([-np.inf, -1e4, -80.0, -20.0, -1.0, 0.0, 1.0, 20.0, 80.0, 1e4, np.inf, np.nan])


@pytest.mark.parametrize("dtype", (F, H, B), ids=dtype_name)
def test_extreme_logits_match_pytorch(dtype):
    """±80, ±1e4, ±inf and NaN: what PyTorch's formula gives, NaN where it gives NaN (−inf: inf − inf;
    +inf with target 1: 0·inf); finite wherever the logit is finite."""
    t = np.array([0.3, 0.25, 0.5, 0.75, 0.0, 1.0, 0.5, 0.2, 0.4, 0.6, 1.0, 0.5])
    values = {"self": EXTREMES, "target": t, "weight": np.full(t.size, 0.75), "posWeight": np.full(t.size, 2.0)}
    dtypes = {"self": dtype}
    v = seen(values, dtypes)
    with npu() as device:
        ret, out, _ = run_case(device, v, dtypes, NONE)
        assert ret == 0, last_error()
        expected = torch_loss(v["self"], v["target"], v["weight"], v["posWeight"], NONE)
        assert_close(out, expected, dtype)
        assert np.isfinite(out[1:-2]).all() and np.isnan(out[[0, -2, -1]]).all(), out
        for reduction in (MEAN, SUM):
            ret, total, _ = run_case(device, v, dtypes, reduction)
            assert ret == 0 and np.isnan(total).all()  # a NaN loss makes the mean and sum NaN
            finite = {name: value[1:-2] for name, value in v.items()}
            ret, total, _ = run_case(device, finite, dtypes, reduction)
            assert ret == 0
            assert_close(total, torch_loss(*(finite[k] for k in ("self", "target", "weight", "posWeight")), reduction),
                         dtype)


# ------------------------------------------------------------------------------------------------
# Mixed dtypes; weights of any real dtype, cast to the compute dtype first

MIXED = {  # (self, target) dtypes -> compute dtype: promote(self, target); out has target's dtype
    (H, F): F, (F, H): F, (B, H): F, (H, B): F, (B, F): F,
}


@pytest.mark.parametrize("pair", list(MIXED), ids=lambda p: "%s-%s" % (dtype_name(p[0]), dtype_name(p[1])))
def test_self_and_target_of_different_dtypes_compute_in_float32(pair):
    rng = np.random.default_rng(zlib.crc32(str(pair).encode()))
    dtypes = {"self": pair[0], "target": pair[1], "weight": pair[1], "posWeight": pair[0]}
    with npu("Ascend910B") as device:
        for scenario, reduction in itertools.product(("broadcast", "per class", "0-D"), (NONE, MEAN, SUM)):
            v = seen(random_values(rng, SCENARIOS[scenario]), dtypes)
            ret, out, size = run_case(device, v, dtypes, reduction, column_major_spaced)
            assert ret == 0, last_error()
            assert_close(out, torch_loss(v["self"], v["target"], v["weight"], v["posWeight"], reduction), pair[1])


def rounded_through_float32(values: np.ndarray, compute: int) -> np.ndarray:
    """A weight as the cast leaves it: to fp32 (nearest-even), then to the compute dtype."""
    return representable(np.asarray(values).astype(np.float32).astype(np.float64), compute)


WEIGHT_CASTS = [  # (self and target dtype, weight dtype, weight values)
    (H, F, "fine"), (B, F, "fine"), (H, B, "fine"), (B, H, "fine"), (F, D, "fine"), (H, D, "fine"),
    (F, nn.ACL_INT32, "integers"), (H, nn.ACL_INT64, "large integers"), (B, nn.ACL_INT8, "integers"),
    (F, nn.ACL_UINT8, "small integers"), (H, nn.ACL_INT16, "integers"), (F, nn.ACL_BOOL, "bools"),
]


def weight_values(kind: str, rng, shape) -> np.ndarray:
    if kind == "fine":  # fractions FLOAT16 and BFLOAT16 cannot hold
        return rng.uniform(-1, 2, size=shape) + 2.0 ** -14
    if kind == "integers":
        return rng.integers(-3, 4, size=shape)
    if kind == "large integers":  # beyond fp32's 24 bits: the cast rounds
        return rng.integers(-3, 4, size=shape) + (1 << 40) + 1
    if kind == "small integers":
        return rng.integers(0, 4, size=shape)
    return rng.integers(0, 2, size=shape).astype(bool)


@pytest.mark.parametrize("compute,weight_dtype,kind", WEIGHT_CASTS,
                         ids=["%s-%s" % (dtype_name(c), dtype_name(w)) for c, w, _ in WEIGHT_CASTS])
def test_weights_of_any_real_dtype_are_cast_to_the_compute_dtype_first(compute, weight_dtype, kind):
    """The same bits as weights given already rounded to the compute dtype (through fp32), for each
    reduction; the workspace holds the cast copies."""
    rng = np.random.default_rng(zlib.crc32(("%d %d" % (compute, weight_dtype)).encode()))
    x_shape, w_shape, p_shape = SCENARIOS["per class"]
    x, t = rng.normal(size=x_shape) * 3, rng.uniform(0, 1, size=x_shape)
    w, p = weight_values(kind, rng, w_shape), np.abs(weight_values(kind, rng, p_shape))
    with npu("Ascend910B") as device:
        for reduction in (NONE, MEAN, SUM):
            given = {"self": representable(x, compute), "target": representable(t, compute), "weight": w, "posWeight": p}
            ret, out, size = run_case(device, given, {"self": compute, "weight": weight_dtype,
                                                      "posWeight": weight_dtype}, reduction)
            assert ret == 0, last_error()
            assert size > 0
            rounded = dict(given, weight=rounded_through_float32(representable(w, weight_dtype), compute),
                           posWeight=rounded_through_float32(representable(p, weight_dtype), compute))
            ret, expected, plain_size = run_case(device, rounded, {"self": compute}, reduction)
            assert ret == 0
            assert out.tobytes() == expected.tobytes(), (out, expected)
            assert plain_size == (0 if reduction == NONE else 64)


@pytest.mark.parametrize("dtype", [nn.ACL_COMPLEX64, nn.ACL_UINT16, nn.ACL_UINT32, nn.ACL_UINT64, nn.ACL_STRING],
                         ids=dtype_name)
def test_a_weight_no_cast_makes_a_real_number_is_rejected_after_the_empty_return(dtype):
    with npu() as device:
        x = device.tensor(np.zeros((2, 3)), F)
        weight = nn.aclCreateTensor([3], dtype, [1], 0, nn.ACL_FORMAT_ND, [3], device.malloc(64))
        out = device.empty((2, 3), F)
        size, executor, ret = OP[0](x.tensor, x.tensor, weight, None, NONE, out.tensor)
        assert_rejected(ret, 161002, "weightOptional", "the compute dtype FLOAT", dtype_name(dtype))
        empty = device.empty((0, 3), F)
        size, executor, ret = OP[0](empty.tensor, empty.tensor, None, weight, MEAN, device.empty((1,), F).tensor)
        assert (size, ret) == (0, 0), last_error()
        nn.aclDestroyAclOpExecutor(executor)
        nn.aclDestroyTensor(weight)


def test_weight_dtypes_are_not_checked_against_the_chip():
    """BFLOAT16 and DOUBLE weights on Ascend910, whose list for self has neither."""
    rng = np.random.default_rng(11)
    v = seen(random_values(rng, SCENARIOS["per class"]), {"self": H})
    with npu("Ascend910") as device:
        for weight_dtype in (B, D):
            ret, out, _ = run_case(device, v, {"self": H, "weight": weight_dtype, "posWeight": F}, MEAN)
            assert ret == 0, last_error()
            rounded = dict(v, weight=rounded_through_float32(representable(v["weight"], weight_dtype), H),
                           posWeight=rounded_through_float32(v["posWeight"], H))
            assert_close(out, torch_loss(*(rounded[k] for k in ("self", "target", "weight", "posWeight")), MEAN), H)


# ------------------------------------------------------------------------------------------------
# mean and sum: the fixed order, one rounding, any one-element out

def pairwise(values: np.ndarray) -> np.float32:
    """The kernel's order in float32: a[i] += a[i + ceil(n/2)] while more than one is left."""
    a = np.array(values, dtype=np.float32)
    n = a.size
    if n == 0:
        return np.float32(0)
    while n > 1:
        half = (n + 1) // 2
        a[:n // 2] = a[:n // 2] + a[half:half + n // 2]
        n = half
    return a[0]


def test_the_sum_adds_blocks_of_4096_losses_pairwise_then_the_block_sums_pairwise():
    """The float32 losses of reduction none, added in the documented order, give the sum's bits;
    the mean is that sum divided by numel, rounded once."""
    rng = np.random.default_rng(21)
    v = seen(random_values(rng, ((61, 333), (333,), (61, 1))), {"self": F})  # 20313 elements: 5 blocks
    block = bce.SUM_BLOCK
    with npu() as device:
        ret, losses, _ = run_case(device, v, {"self": F}, NONE)
        assert ret == 0
        flat = losses.astype(np.float32).reshape(-1)
        total = pairwise([pairwise(flat[i:i + block]) for i in range(0, flat.size, block)])
        ret, summed, size = run_case(device, v, {"self": F}, SUM)
        assert ret == 0 and size == 64
        assert summed.astype(np.float32).tobytes() == np.float32(total).reshape(1).tobytes()
        ret, mean, _ = run_case(device, v, {"self": F}, MEAN)
        assert mean[0] == np.float32(np.float64(total) / flat.size)


@pytest.mark.parametrize("reduction", (MEAN, SUM), ids=("mean", "sum"))
def test_mean_and_sum_are_bit_identical_across_threads_instruction_sets_and_layouts(reduction):
    rng = np.random.default_rng(5 + reduction)
    values = random_values(rng, ((300, 500), (500,), (300, 1)), scale=1.0)
    dtypes = {"self": B, "target": F, "weight": D, "posWeight": H}  # compute FLOAT; the sum fits out's FLOAT
    v = seen(values, dtypes)
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu() as device:
            for layout in (contiguous, column_major_spaced):
                ret, out, _ = run_case(device, v, dtypes, reduction, layout)
                assert ret == 0, last_error()
                results.append(out.tobytes())
    assert len(set(results)) == 1
    rounded = dict(v, weight=rounded_through_float32(v["weight"], F))
    assert_close(np.frombuffer(results[0], np.float64),
                 torch_loss(*(rounded[k] for k in ("self", "target", "weight", "posWeight")), reduction), F)


@pytest.mark.parametrize("shape", [(), (1,), (1, 1, 1), (1,) * 9], ids=str)
def test_out_of_mean_and_sum_may_have_any_shape_of_one_element(shape):
    rng = np.random.default_rng(2)
    v = seen(random_values(rng, SCENARIOS["broadcast"]), {"self": F})
    with npu() as device:
        for reduction in (MEAN, SUM):
            ret, out, _ = run_case(device, v, {"self": F}, reduction, out=shape)
            assert ret == 0, last_error()
            assert out.shape == shape
            assert_close(out.reshape(1), torch_loss(v["self"], v["target"], v["weight"], v["posWeight"], reduction), F)


@pytest.mark.parametrize("shape", [(2,), (0,), (1, 2)], ids=str)
def test_out_of_mean_and_sum_with_other_than_one_element_is_rejected(shape):
    with npu() as device:
        x = device.tensor(np.zeros((2, 3)), F)
        out = device.empty(shape, F)
        for reduction in (MEAN, SUM):
            size, executor, ret = OP[0](x.tensor, x.tensor, None, None, reduction, out.tensor)
            assert_rejected(ret, 161002, "out: expected exactly one element", REDUCTION_NAMES[reduction], str(list(shape)))


# ------------------------------------------------------------------------------------------------
# An empty self

@pytest.mark.parametrize("reduction,value", [(MEAN, np.nan), (SUM, 0.0)], ids=("mean", "sum"))
@pytest.mark.parametrize("dtype", (F, H, B), ids=dtype_name)
def test_an_empty_self_fills_out_for_mean_and_sum(reduction, value, dtype):
    """Every element of out, whatever its shape and layout: out is allocated and never written before,
    so the sanitizer's initcheck would report reading it back if the fill did not write it all."""
    with npu() as device:
        empty = device.empty((5, 0, 3), dtype)
        weight = device.empty((7,), F)  # the broadcast checks are skipped when target is empty
        for dims, strides in (([1], [1]), ([], []), ([2, 2], [1, 3])):  # the last: column-major, gaps
            storage = 1 + sum((d - 1) * s for d, s in zip(dims, strides))
            address = device.malloc(storage * 4)
            out = nn.aclCreateTensor(dims, dtype, strides, 0, nn.ACL_FORMAT_ND, [storage], address)
            size, executor, ret = OP[0](empty.tensor, empty.tensor, weight.tensor, None, reduction, out)
            assert (size, ret) == (0, 0), last_error()
            assert OP[1](None, 0, executor, device.stream) == 0, last_error()
            assert acl.rt.synchronize_stream(device.stream) == 0
            raw = np.zeros(storage, dtype=np.uint16 if dtype != F else np.float32)
            for i in range(int(np.prod(dims, dtype=np.int64))):
                offset = sum(((i // int(np.prod(dims[k + 1:], dtype=np.int64))) % dims[k]) * strides[k]
                             for k in range(len(dims)))
                item = raw[:1].copy()
                assert acl.rt.memcpy(item.ctypes.data, item.nbytes, address + offset * item.nbytes, item.nbytes, 2) == 0
                if dtype == B:
                    found = (item.astype(np.uint32) << 16).view(np.float32)[0]
                else:
                    found = item.view(np.float16 if dtype == H else np.float32)[0]
                np.testing.assert_array_equal(found, value)
            nn.aclDestroyTensor(out)


def test_an_empty_self_with_reduction_none_runs_nothing_and_skips_the_broadcast_checks():
    with npu() as device:
        empty = device.empty((3, 0), F)
        weight = device.empty((5,), H)
        pos_weight = device.empty((2, 2, 2), nn.ACL_COMPLEX64)  # nor is its dtype checked
        sentinel = device.tensor(np.full((2, 2), 7.0), F)
        size, executor, ret = OP[0](empty.tensor, empty.tensor, weight.tensor, pos_weight.tensor, NONE, sentinel.tensor)
        assert (size, ret) == (0, 0) and executor is not None, last_error()
        assert OP[1](None, 0, executor, device.stream) == 0
        np.testing.assert_array_equal(device.read(sentinel), 7.0)


# ------------------------------------------------------------------------------------------------
# The workspace, in place, null weights

def test_workspace_holds_the_cast_weights_then_a_float_per_block_of_the_sum():
    with npu() as device:
        x = device.tensor(np.zeros((3, 5000)), H)
        same = device.tensor(np.ones((5000,)), H)
        other = device.tensor(np.ones((3, 1)), F)  # FLOAT into a FLOAT16 compute dtype: cast
        one = device.empty((1,), H)
        full = device.empty((3, 5000), H)
        assert -(-15000 // bce.SUM_BLOCK) * 4 <= 64  # four block sums
        cases = [((same, same), NONE, full, 0), ((same, other), NONE, full, 64),
                 ((other, other), NONE, full, 128), ((None, None), SUM, one, 64),
                 ((other, same), MEAN, one, 64 + 64)]  # each part rounded up to 64 bytes
        for (w, p), reduction, out, expected in cases:
            size, executor, ret = OP[0](x.tensor, x.tensor, w and w.tensor, p and p.tensor, reduction, out.tensor)
            assert ret == 0, last_error()
            assert size == expected, (reduction, size)
            assert OP[1](device.malloc(size) if size else None, size, executor, device.stream) == 0
        size, executor, ret = OP[0](x.tensor, x.tensor, None, other.tensor, NONE, full.tensor)
        assert OP[1](device.malloc(size), size - 1, executor, device.stream) == 161002
        assert "workspaceSize: expected at least the 64 bytes" in last_error()
        nn.aclDestroyAclOpExecutor(executor)
        assert acl.rt.synchronize_stream(device.stream) == 0


def test_out_may_be_target_in_place():
    rng = np.random.default_rng(7)
    x, t = rng.normal(size=(40, 30)) * 3, rng.uniform(size=(40, 30))
    with npu() as device:
        xs, ts = device.tensor(x, B), device.tensor(t, B)
        size, executor, ret = OP[0](xs.tensor, ts.tensor, None, None, NONE, ts.tensor)
        assert ret == 0 and size == 0
        assert OP[1](None, 0, executor, device.stream) == 0
        assert_close(device.read(ts), torch_loss(representable(x, B), representable(t, B), None, None, NONE), B)


def test_destroyed_weight_is_rejected():
    with npu() as device:
        x = device.tensor(np.zeros((2, 3)), F)
        weight = nn.aclCreateTensor([3], F, [1], 0, nn.ACL_FORMAT_ND, [3], device.malloc(64))
        nn.aclDestroyTensor(weight)
        size, executor, ret = OP[0](x.tensor, x.tensor, None, weight, NONE, device.empty((2, 3), F).tensor)
        assert (ret, executor) == (161002, None)
        assert "posWeightOptional: expected" in last_error()


# ------------------------------------------------------------------------------------------------
# The forward, then the backward, against PyTorch autograd

@pytest.mark.parametrize("reduction", (NONE, MEAN, SUM), ids=REDUCTION_NAMES)
@pytest.mark.parametrize("with_weights", (True, False), ids=("weights", "no-weights"))
def test_forward_then_backward_match_pytorch_autograd(reduction, with_weights):
    """J = ½·Σ loss², loss from aclnnBinaryCrossEntropyWithLogits: dJ/dloss = loss, so the forward's
    out is the backward's gradOutput as it is, on the device; the backward's out is dJ/dself."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(31 + reduction + 3 * with_weights)
    values = random_values(rng, ((5, 7), (7,), (5, 1)))
    if not with_weights:
        values["weight"] = values["posWeight"] = None
    v = seen(values, {"self": F})
    with npu() as device:
        tensors = {name: None if v[name] is None else device.tensor(v[name], F).tensor for name in v}
        loss = device.empty(out_shape((5, 7), reduction), F)
        grad = device.empty((5, 7), F)
        args = (tensors["self"], tensors["target"], tensors["weight"], tensors["posWeight"], reduction)
        assert device.run(*OP, *args, loss.tensor) == 0, last_error()
        assert device.run(*BACKWARD, loss.tensor, *args, grad.tensor) == 0, last_error()
        forward, backward = device.read(loss), device.read(grad)
    as_tensor = (lambda a: None if a is None else torch.tensor(a))
    x = torch.tensor(v["self"], requires_grad=True)
    torch_loss_value = torch.nn.functional.binary_cross_entropy_with_logits(
        x, as_tensor(v["target"]), weight=as_tensor(v["weight"]), pos_weight=as_tensor(v["posWeight"]),
        reduction=REDUCTION_NAMES[reduction])
    (0.5 * torch_loss_value.pow(2).sum()).backward()
    assert_close(forward, torch_loss_value.detach().numpy().reshape(forward.shape), F)
    assert_close(backward, x.grad.numpy(), F)


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("binary_cross_entropy_with_logits", [
        "result[0] is: 0.329978", "result[1] is: 0.329978", "result[2] is: 0.374116", "result[3] is: 0.374116",
        "result[4] is: 0.369460", "result[5] is: 0.369460", "result[6] is: 0.423682", "result[7] is: 0.423682"])
