"""aclnnLogSigmoidBackward (spec/OPS.md §4): values against a float64 NumPy reference across
chips, dtypes, shapes and layouts; every check with its code, in the library's order."""
import itertools
import zlib

import numpy as np
import pytest

import aclnn_api as nn
from support import ALL_SOCS, assert_close, assert_sample_prints, kernel_variants, last_error, npu, representable

OP = (nn.aclnnLogSigmoidBackwardGetWorkspaceSize, nn.aclnnLogSigmoidBackward)
BF16_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")


def reference(grad, x):
    with np.errstate(over="ignore"):
        return grad / (1.0 + np.exp(x))


def dtypes_of(soc):
    return (nn.ACL_FLOAT, nn.ACL_FLOAT16) + ((nn.ACL_BF16,) if soc in BF16_SOCS else ())


LAYOUTS = {  # name: (shape, strides or None, offset)
    "contiguous": ((3, 5), None, 0),
    "transposed": ((4, 3), (1, 4), 0),
    "offset": ((2, 3, 4), None, 7),
    "sliced": ((3, 4), (10, 2), 3),
    "0-D": ((), (), 0),
    "9-D": ((1, 2, 1, 2, 1, 2, 1, 2, 3), None, 0),
    "large": ((257, 129), None, 0),
}


@pytest.mark.parametrize("soc,layout", list(itertools.product(ALL_SOCS, LAYOUTS)))
def test_values_match_float64_reference(soc, layout):
    shape, strides, offset = LAYOUTS[layout]
    rng = np.random.default_rng(zlib.crc32((soc + layout).encode()))
    with npu(soc) as device:
        for dtype in dtypes_of(soc):
            grad = representable(rng.normal(size=shape) * 3, dtype)
            x = representable(rng.normal(size=shape) * 8, dtype)
            go = device.tensor(grad, dtype, strides=strides, offset=offset)
            xs = device.tensor(x, dtype, strides=strides, offset=offset)
            buffer = device.tensor(np.zeros(1), dtype)
            gi = device.empty(shape, dtype, strides=strides, offset=offset)
            assert device.run(*OP, go.tensor, xs.tensor, buffer.tensor, gi.tensor) == 0, last_error()
            assert_close(device.read(gi), reference(grad, x), dtype)


def test_extreme_inputs_do_not_overflow():
    x = np.array([-1e30, -100.0, -20.0, 0.0, 20.0, 100.0, 1e30, np.inf, -np.inf], dtype=np.float32)
    with npu() as device:
        go, xs = device.tensor(np.ones_like(x), nn.ACL_FLOAT), device.tensor(x, nn.ACL_FLOAT)
        gi = device.empty(x.shape, nn.ACL_FLOAT)
        assert device.run(*OP, go.tensor, xs.tensor, go.tensor, gi.tensor) == 0
        np.testing.assert_allclose(device.read(gi), reference(1.0, x.astype(np.float64)), rtol=1e-6, atol=1e-30)


def test_results_are_bit_identical_across_thread_counts_and_vector_isas():
    import emulator
    rng = np.random.default_rng(1)
    grad, x = rng.normal(size=(300, 500)), rng.normal(size=(300, 500))
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu() as device:
            go, xs = device.tensor(grad, nn.ACL_BF16), device.tensor(x, nn.ACL_BF16)
            gi = device.empty(grad.shape, nn.ACL_BF16)
            assert device.run(*OP, go.tensor, xs.tensor, go.tensor, gi.tensor) == 0
            results.append(device.read(gi))
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_empty_tensors_succeed_with_workspace_zero():
    with npu() as device:
        empty = device.empty((3, 0), nn.ACL_FLOAT)
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(empty.tensor, empty.tensor, empty.tensor, empty.tensor)
        assert (size, ret) == (0, 0) and executor is not None
        assert nn.aclnnLogSigmoidBackward(None, 0, executor, device.stream) == 0


def _tensors(device, dtypes=(nn.ACL_FLOAT,) * 4, shapes=((2, 2),) * 4):
    return [device.empty(s, d).tensor for d, s in zip(dtypes, shapes)]


F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
CHECKS = [  # (soc, dtypes of gradOutput/self/buffer/gradInput, shapes, nulls, code, words in the message)
    ("Ascend910B", (F, F, F, F), None, ("gradOutput",), 161001, "gradOutput"),
    ("Ascend910B", (F, F, F, F), None, ("buffer",), 161001, "buffer"),
    ("Ascend910B", (F, F, F, F), None, ("gradInput",), 161001, "gradInput"),
    ("Ascend910B", (D, F, F, F), None, (), 161002, "gradOutput"),
    ("Ascend910B", (F, D, F, F), None, (), 161002, "self"),
    ("Ascend910", (B, B, B, B), None, (), 161002, "gradOutput"),
    ("Ascend310P", (F, B, F, B), None, (), 161002, "self"),
    ("Ascend910B", (F, H, F, F), None, (), 161002, "gradInput"),
    ("Ascend910B", (H, H, F, F), None, (), 161002, "gradInput"),
    ("Ascend910B", (F, F, D, F), ((2, 2), (2, 2), (7,), (2, 3)), (), 161002, "gradOutput"),
    ("Ascend910B", (F, F, F, F), ((2, 2), (2, 1), (2, 2), (2, 2)), (), 161002, "self"),
    ("Ascend910B", (D, F, F, F), None, ("self",), 161001, "self"),  # null before dtype
]


@pytest.mark.parametrize("soc,dtypes,shapes,nulls,code,word", CHECKS)
def test_each_check_returns_its_code_and_names_the_parameter(soc, dtypes, shapes, nulls, code, word):
    names = ("gradOutput", "self", "buffer", "gradInput")
    with npu(soc) as device:
        args = _tensors(device, dtypes, shapes or ((2, 2),) * 4)
        args = [None if n in nulls else a for n, a in zip(names, args)]
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*args)
        message = last_error()
        assert (ret, executor) == (code, None)
        assert word in message and "expected" in message and "found" in message


def test_buffer_is_never_validated_beyond_null():
    with npu() as device:
        go, x, gi = _tensors(device, shapes=((2, 2),) * 3)
        buffer = device.empty((5, 1, 3), nn.ACL_INT64).tensor
        assert device.run(*OP, go, x, buffer, gi) == 0


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("log_sigmoid_backward", ["result[0] is: 0.268941", "result[1] is: 0.119203",
                                                 "result[2] is: 0.047426", "result[3] is: 0.017986"])
