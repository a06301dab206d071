"""aclnnLogSigmoid and aclnnLogSigmoidForward: the cases their declarations do not generate (values
against the NumPy reference across chips, dtypes and layouts, dtypes, determinism, empty inputs and
every check are in test_operators.py): the library's unit tests one by one, values against PyTorch
(float64) across API x chip x dtype x layout, extreme inputs, the Forward's buffer (never checked,
never written), the forward then the existing backward against PyTorch autograd, and the
documentation's samples."""
from __future__ import annotations

import itertools
import math
import zlib

import numpy as np
import pytest

import aclnn_api as nn
from aclnn_api.declaration import LAYOUTS, CHIP_FAMILIES
from aclnn_api.log_sigmoid import DTYPES, reference
from emulator.dtypes import DTYPE_NAMES
from support import TOLERANCE, assert_close, assert_rejected, assert_sample_prints, last_error, npu, representable

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]

F, H, B, D = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE
PLAIN = (nn.aclnnLogSigmoidGetWorkspaceSize, nn.aclnnLogSigmoid)
FORWARD = (nn.aclnnLogSigmoidForwardGetWorkspaceSize, nn.aclnnLogSigmoidForward)
APIS = {"LogSigmoid": PLAIN, "LogSigmoidForward": FORWARD}
DOC_VALUES = ["result[0] is: -0.313262", "result[1] is: -0.126928", "result[2] is: -0.048587",
              "result[3] is: -0.018150", "result[4] is: -0.006715", "result[5] is: -0.002476",
              "result[6] is: -0.000911", "result[7] is: -0.000335"]


def torch_logsigmoid(x: np.ndarray) -> np.ndarray:
    """PyTorch's logsigmoid of `x` in float64."""
    torch = pytest.importorskip("torch")
    return torch.nn.functional.logsigmoid(torch.from_numpy(np.asarray(x, dtype=np.float64))).numpy()


def run(device, api: str, x, out, buffer=None) -> int:
    """Both phases of `api` on device tensors (buffer: the Forward's, None for null)."""
    if api == "LogSigmoid":
        return device.run(*PLAIN, x.tensor, out.tensor)
    return device.run(*FORWARD, x.tensor, out.tensor, None if buffer is None else buffer.tensor)


# ------------------------------------------------------------------------------------------------
# The library's unit tests (test_aclnn_logsigmoid.cpp, harness chip Ascend910B), one by one

FMT = {"ND": nn.ACL_FORMAT_ND, "NCHW": nn.ACL_FORMAT_NCHW, "NHWC": nn.ACL_FORMAT_NHWC,
       "HWCN": nn.ACL_FORMAT_HWCN, "NDHWC": nn.ACL_FORMAT_NDHWC, "NCDHW": nn.ACL_FORMAT_NCDHW,
       "NCL": nn.ACL_FORMAT_NCL}
NONE = None  # a null tensor

# (case, API, self (shape, dtype, format) or NONE, out likewise, expected status)
LIBRARY_CASES = [
    ("case_nullptr_input", "LogSigmoid", NONE, ((1, 1, 1, 3), F, "NCHW"), 161001),
    ("case_nullptr_output", "LogSigmoid", ((2, 3), F, "ND"), NONE, 161001),
    ("case_dtype_notsupport_double", "LogSigmoid", ((2, 3), D, "ND"), ((2, 3), D, "ND"), 161002),
    ("case_dtype_notsupport_complex64", "LogSigmoid", ((2, 3), nn.ACL_COMPLEX64, "ND"),
     ((2, 3), nn.ACL_COMPLEX64, "ND"), 161002),
    ("case_dtype_notsupport_int32", "LogSigmoid", ((2, 3, 4, 5), nn.ACL_INT32, "NHWC"),
     ((2, 3, 4, 5), nn.ACL_INT32, "NHWC"), 161002),
    ("case_dtype_fp32", "LogSigmoid", ((2, 3), F, "ND"), ((2, 3), F, "ND"), 0),
    ("case_forward", "LogSigmoidForward", ((2, 3), F, "ND"), ((2, 3), F, "ND"), 0),
    ("case_dtype_fp16", "LogSigmoid", ((2, 3), H, "ND"), ((2, 3), H, "ND"), 0),
    ("case_format_HWCN", "LogSigmoid", ((1, 2, 3, 4), H, "HWCN"), ((1, 2, 3, 4), H, "HWCN"), 0),
    ("case_format_NDHWC", "LogSigmoid", ((1, 2, 3, 4, 5), H, "NDHWC"), ((1, 2, 3, 4, 5), H, "NDHWC"), 0),
    ("case_format_NCDHW", "LogSigmoid", ((1, 2, 3, 4, 5), H, "NCDHW"), ((1, 2, 3, 4, 5), H, "NCDHW"), 0),
    ("case_shape_1d", "LogSigmoid", ((2,), H, "ND"), ((2,), H, "ND"), 0),
    ("case_shape_3d", "LogSigmoid", ((2, 3, 4), H, "NCL"), ((2, 3, 4), H, "NCL"), 0),
    ("case_shape_4d", "LogSigmoid", ((1, 2, 3, 4), F, "NCHW"), ((1, 2, 3, 4), F, "NCHW"), 0),
    ("case_shape_8d", "LogSigmoid", (tuple(range(1, 9)), F, "ND"), (tuple(range(1, 9)), F, "ND"), 0),
    ("case_shape_9d", "LogSigmoid", (tuple(range(1, 10)), F, "ND"), (tuple(range(1, 10)), F, "ND"), 0),
    ("case_empty_empty", "LogSigmoid", ((2, 0), F, "ND"), ((2, 0), F, "ND"), 0),
    ("case_noempty_empty", "LogSigmoid", ((1, 1), F, "ND"), ((1, 0), F, "ND"), 161002),
    ("case_empty_noempty", "LogSigmoid", ((1, 0), F, "ND"), ((1, 1), F, "ND"), 161002),
    ("case_different_shape", "LogSigmoid", ((1, 2, 3), F, "ND"), ((4, 5, 6), F, "ND"), 161002),
    ("case_different_dtype", "LogSigmoid", ((1, 2, 3), H, "ND"), ((1, 2, 3), F, "ND"), 161002),
    ("case_different_dim", "LogSigmoid", ((1, 2, 3), F, "ND"), ((1, 2), F, "ND"), 161002),
    ("ascend910B2_case_bf16", "LogSigmoid", ((1, 2, 3), B, "ND"), ((1, 2, 3), B, "ND"), 0),
]


def test_the_library_has_23_unit_tests_and_all_are_here():
    assert len(LIBRARY_CASES) == 23 and len({case[0] for case in LIBRARY_CASES}) == 23
    assert [case[1] for case in LIBRARY_CASES].count("LogSigmoidForward") == 1


def made(device, spec, rng):
    """A device tensor of (shape, dtype, format) with values in [-10, 10] (floating dtypes), or None."""
    if spec is NONE:
        return None
    shape, dtype, fmt = spec
    values = rng.uniform(-10, 10, size=shape)
    if dtype in (nn.ACL_INT32, nn.ACL_COMPLEX64):
        values = values.astype(nn.NUMPY_TYPES[dtype])
    return device.tensor(values, dtype, fmt=FMT[fmt])


@pytest.mark.parametrize("case,api,self_spec,out_spec,expected", LIBRARY_CASES, ids=[c[0] for c in LIBRARY_CASES])
def test_library_unit_test(case, api, self_spec, out_spec, expected):
    """The status the library's unit test expects on Ascend910B; where it is 0, the second phase too,
    and the values against PyTorch (the unit tests' precision check)."""
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    with npu("Ascend910B") as device:
        x, out = made(device, self_spec, rng), made(device, out_spec, rng)
        # The unit test's Forward passes a buffer described as out is.
        buffer = made(device, out_spec, rng) if api == "LogSigmoidForward" else None
        args = [None if t is None else t.tensor for t in (x, out)] + ([buffer.tensor] if buffer else [])
        size, executor, ret = APIS[api][0](*args)
        assert ret == expected, "%s: %d (%s)" % (case, ret, last_error())
        if expected:
            assert executor is None and last_error()
            return
        assert APIS[api][1](device.malloc(size) if size else None, size, executor, device.stream) == 0, last_error()
        dtype = self_spec[1]
        assert_close(device.read(out), torch_logsigmoid(device.read(x)), dtype)


# ------------------------------------------------------------------------------------------------
# Values against PyTorch: API x chip x dtype x layout

def pytorch_cases() -> list:
    return [pytest.param(api, chip, dtype, id="%s-%s-%s" % (api, chip, DTYPE_NAMES[dtype]))
            for api in APIS for chip in CHIP_FAMILIES for dtype in DTYPES.on(chip)]


@pytest.mark.parametrize("api,chip,dtype", pytorch_cases())
def test_values_match_pytorch_in_every_layout(api, chip, dtype):
    rng = np.random.default_rng([len(api), CHIP_FAMILIES.index(chip), dtype])
    with npu(chip) as device:
        for layout, shape in itertools.product(LAYOUTS, [(5, 7), (3, 1, 129), (1000,)]):
            x_values = representable(rng.normal(size=shape) * 6, dtype)
            strides, offset = LAYOUTS[layout](shape)
            x = device.tensor(x_values, dtype, strides=strides, offset=offset)
            out = device.tensor(np.full(shape, np.nan), dtype, strides=strides, offset=offset)
            buffer = device.empty(shape, dtype)
            assert run(device, api, x, out, buffer) == 0, last_error()
            actual = device.read(out)
            try:
                assert_close(actual, torch_logsigmoid(x_values), dtype)
            except AssertionError as error:
                raise AssertionError("%s %s: %s" % (layout, shape, error)) from None


def test_the_numpy_reference_is_pytorchs_logsigmoid():
    x = np.concatenate([np.linspace(-120, 120, 4801), [0.0, -0.0, 1e-30, -1e-30, 1e4, -1e4, np.inf, -np.inf]])
    np.testing.assert_allclose(reference({"self": x}), torch_logsigmoid(x), rtol=1e-14, atol=0)


# ------------------------------------------------------------------------------------------------
# Extreme inputs

EXTREMES = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 1.0, -1.0, 5.0, 7.0, 9.0, 15.0, -15.0, 17.0, -17.0, 20.0, -20.0,
                     30.0, 50.0, 80.0, -80.0, 87.0, 88.0, -88.0, 89.0, 100.0, -100.0, 103.0, 104.0, 110.0,
                     1e4, -1e4, 65504.0, -65504.0, 1e30, -1e30, 3e38, -3e38, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dtype", (F, H, B))
def test_extreme_inputs_neither_overflow_nor_lose_the_tiny_result(api, dtype):
    """±80, ±1e4, ±inf, NaN and the ends of each dtype's range: no overflow (e^-|x| never exceeds 1),
    -inf at -inf, 0 at +inf, NaN at NaN; for large positive x the result is -e^-x, which
    log(1 + e^-x) would round to 0 (log1p keeps it)."""
    x_values = representable(EXTREMES, dtype)
    with npu("Ascend910B") as device:
        x = device.tensor(x_values, dtype)
        out = device.tensor(np.full(x_values.shape, 7.0), dtype)
        assert run(device, api, x, out, device.empty(x_values.shape, dtype)) == 0, last_error()
        actual = device.read(out)
    with np.errstate(over="ignore"):
        expected = torch_logsigmoid(x_values)
    assert_close(actual, representable(expected, dtype), dtype)
    assert np.array_equal(np.isnan(actual), np.isnan(x_values))
    assert (actual[np.isneginf(x_values)] == -np.inf).all() and (actual[np.isposinf(x_values)] == 0.0).all()
    # Positive x: -e^-x to within a few ulp wherever it is a normal number of the dtype.
    tiny = {F: np.finfo(np.float32).tiny, H: 2.0 ** -14, B: np.finfo(np.float32).tiny}[dtype]
    ulp = {F: 2.0 ** -23, H: 2.0 ** -10, B: 2.0 ** -7}[dtype]
    small = (x_values > 4) & (np.abs(expected) >= tiny)
    assert small.sum() >= 3
    np.testing.assert_allclose(actual[small], expected[small], rtol=4 * ulp, atol=0)


def test_fp32_is_within_a_few_ulp_of_float64_over_the_whole_range():
    """Every 4099th float32 pattern of [-104, 104] (and the results' normal range), against float64:
    the stable form in fp32 with the kernels' exp and log1p."""
    positive = np.arange(0, 0x42D00000, 4099, dtype=np.uint32).view(np.float32)  # 0 .. 104
    x_values = np.concatenate([positive, -positive]).astype(np.float64)
    with npu("Ascend910B") as device:
        x = device.tensor(x_values, F)
        out = device.empty(x_values.shape, F)
        assert run(device, "LogSigmoid", x, out) == 0, last_error()
        actual = device.read(out)
    expected = torch_logsigmoid(x_values)
    normal = np.abs(expected) >= np.finfo(np.float32).tiny
    ulps = np.abs(actual[normal] - expected[normal]) / np.spacing(np.abs(expected[normal]).astype(np.float32))
    assert ulps.max() <= 4.0, (ulps.max(), x_values[normal][np.argmax(ulps)])


# ------------------------------------------------------------------------------------------------
# The Forward's buffer: never null-checked, never validated, never written

def test_forward_accepts_a_null_buffer():
    x_values = np.linspace(-5, 5, 12).reshape(3, 4)
    with npu() as device:
        x, out = device.tensor(x_values, F), device.empty((3, 4), F)
        assert run(device, "LogSigmoidForward", x, out, None) == 0, last_error()
        assert_close(device.read(out), torch_logsigmoid(x_values), F)


@pytest.mark.parametrize("buffer_dtype,buffer_shape", [(F, (3, 4)), (F, (1,)), (nn.ACL_INT64, (5, 1, 3)),
                                                       (D, ()), (nn.ACL_BOOL, (0, 2)), (B, (2, 1, 2, 1, 2, 1, 2, 1, 3))])
def test_forward_never_validates_nor_writes_the_buffer(buffer_dtype, buffer_shape):
    """Any dtype and shape, on a chip without BFLOAT16 too: the buffer keeps its bytes."""
    x_values = np.linspace(-5, 5, 12).reshape(3, 4)
    with npu("Ascend910") as device:
        x, out = device.tensor(x_values, F), device.empty((3, 4), F)
        values = np.arange(math.prod(buffer_shape)).reshape(buffer_shape) % 2
        buffer = device.tensor(values, buffer_dtype)
        before = device.read(buffer).tobytes()
        assert run(device, "LogSigmoidForward", x, out, buffer) == 0, last_error()
        assert_close(device.read(out), torch_logsigmoid(x_values), F)
        assert device.read(buffer).tobytes() == before


def test_forward_accepts_a_buffer_no_device_could_address_and_a_negative_dim():
    """No shape check either: a buffer of 2^62 elements over 64 bytes, or with a dim of -1."""
    with npu() as device:
        x, out = device.tensor(np.ones((2, 2)), F), device.empty((2, 2), F)
        for dims in ([1 << 31, 1 << 31], [-1, 3]):
            buffer = nn.aclCreateTensor(dims, F, [0, 0], 0, nn.ACL_FORMAT_ND, [1], device.malloc(64))
            assert buffer is not None, last_error()
            assert device.run(*FORWARD, x.tensor, out.tensor, buffer) == 0, last_error()
            assert_close(device.read(out), np.full((2, 2), torch_logsigmoid(np.ones(1))[0]), F)
            nn.aclDestroyTensor(buffer)


def test_forward_buffer_over_memory_never_written_is_not_read():
    """The whole sanitizer is on: a buffer over freshly allocated (never written) memory gives no
    uninitialised-read report, because nothing reads it."""
    with npu() as device:
        x, out = device.tensor(np.ones((4, 2)), F), device.empty((4, 2), F)
        buffer = nn.aclCreateTensor([4, 2], F, [2, 1], 0, nn.ACL_FORMAT_ND, [8], device.malloc(32))
        assert device.run(*FORWARD, x.tensor, out.tensor, buffer) == 0, last_error()
        assert_close(device.read(out), np.full((4, 2), torch_logsigmoid(np.ones(1))[0]), F)
        nn.aclDestroyTensor(buffer)


def test_forward_executor_lists_out_then_buffer_as_its_outputs():
    """The prototype's order: self is the input, out and buffer the outputs. A repeatable executor
    moved to another out by aclSetOutputTensorAddr writes there; the buffer's slot is settable but
    still never written; a null buffer's slot is null."""
    with npu() as device:
        x, out, other = device.tensor(np.full((2, 2), 1.0), F), device.empty((2, 2), F), device.empty((2, 2), F)
        buffer = device.tensor(np.full((2, 2), 5.0), F)
        size, executor, ret = FORWARD[0](x.tensor, out.tensor, buffer.tensor)
        assert ret == 0 and nn.aclSetAclOpExecutorRepeatable(executor) == 0
        assert nn.aclSetOutputTensorAddr(executor, 0, out.tensor, other.address) == 0, last_error()
        assert nn.aclSetOutputTensorAddr(executor, 1, buffer.tensor, buffer.address) == 0, last_error()
        assert_rejected(nn.aclSetOutputTensorAddr(executor, 2, buffer.tensor, buffer.address), 161002,
                        "out, buffer")
        assert FORWARD[1](None, size, executor, device.stream) == 0, last_error()
        assert_close(device.read(other), np.full((2, 2), math.log(1 / (1 + math.exp(-1)))), F)
        assert device.read(buffer).tolist() == [[5.0, 5.0], [5.0, 5.0]]
        assert nn.aclDestroyAclOpExecutor(executor) == 0
        size, executor, ret = FORWARD[0](x.tensor, out.tensor, None)
        assert ret == 0
        assert_rejected(nn.aclSetOutputTensorAddr(executor, 1, buffer.tensor, buffer.address), 161002,
                        "buffer, which is null")
        assert nn.aclDestroyAclOpExecutor(executor) == 0


# ------------------------------------------------------------------------------------------------
# Forward, then the existing backward, against PyTorch autograd

def forward_backward_cases() -> list:
    return [pytest.param(chip, dtype, layout, id="%s-%s-%s" % (chip, DTYPE_NAMES[dtype], layout))
            for chip in ("Ascend910B", "Ascend910", "Ascend310P") for dtype in DTYPES.on(chip)
            for layout in LAYOUTS]


@pytest.mark.parametrize("chip,dtype,layout", forward_backward_cases())
def test_forward_then_backward_matches_pytorch_autograd(chip, dtype, layout):
    """loss = sum(w · logsigmoid(x)): aclnnLogSigmoidForward gives logsigmoid(x) (and its buffer,
    which it never fills), aclnnLogSigmoidBackward with gradOutput = w and the forward's buffer
    (which it requires non-null and never reads) gives dloss/dx; both against torch autograd in
    float64, and the loss from our forward's output against torch's loss."""
    torch = pytest.importorskip("torch")
    shape = (6, 33)
    rng = np.random.default_rng([CHIP_FAMILIES.index(chip), dtype, list(LAYOUTS).index(layout)])
    x_values = representable(np.concatenate([rng.normal(size=shape[0] * shape[1] - 6) * 5,
                                             [-80.0, 80.0, -1e4, 1e4, 0.0, -0.0]]).reshape(shape), dtype)
    w_values = representable(rng.normal(size=shape), dtype)
    strides, offset = LAYOUTS[layout](shape)
    with npu(chip) as device:
        x = device.tensor(x_values, dtype, strides=strides, offset=offset)
        out = device.tensor(np.full(shape, np.nan), dtype, strides=strides, offset=offset)
        buffer = device.empty(shape, dtype)
        assert device.run(*FORWARD, x.tensor, out.tensor, buffer.tensor) == 0, last_error()
        w = device.tensor(w_values, dtype, strides=strides, offset=offset)
        grad = device.tensor(np.full(shape, np.nan), dtype, strides=strides, offset=offset)
        assert device.run(nn.aclnnLogSigmoidBackwardGetWorkspaceSize, nn.aclnnLogSigmoidBackward,
                          w.tensor, x.tensor, buffer.tensor, grad.tensor) == 0, last_error()
        y_ours, grad_ours = device.read(out), device.read(grad)
        assert not device.read(buffer).any()  # still the zeros it was made with
    xt = torch.tensor(x_values, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.logsigmoid(xt)
    loss = (torch.from_numpy(w_values) * y).sum()
    loss.backward()
    assert_close(y_ours, y.detach().numpy(), dtype)
    assert_close(grad_ours, xt.grad.numpy(), dtype)
    # The loss from our forward: each term within the tolerance, so the sum within |w|·|y| of it.
    bound = TOLERANCE[dtype] * (np.abs(w_values) * (1 + np.abs(y.detach().numpy()))).sum()
    assert abs((w_values * y_ours).sum() - loss.item()) <= bound


def test_backward_needs_a_buffer_the_forward_never_fills():
    """The pair's one trap: the Forward accepts a null buffer, the backward refuses one."""
    with npu() as device:
        x, out, grad = (device.tensor(np.ones((2, 2)), F) for _ in range(3))
        assert device.run(*FORWARD, x.tensor, out.tensor, None) == 0
        size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(out.tensor, x.tensor, None, grad.tensor)
        assert_rejected(ret, 161001, "buffer")
        assert_close(device.read(out), np.full((2, 2), torch_logsigmoid(np.ones(1))[0]), F)


# ------------------------------------------------------------------------------------------------
# Chips: no gate on 310P (the aclnnLogSigmoid documentation calls it unsupported; the code accepts it)

@pytest.mark.parametrize("api", APIS)
def test_ascend310p_runs_float16_and_float32_and_refuses_bfloat16(api):
    with npu("Ascend310P") as device:
        for dtype in (F, H):
            x, out = device.tensor(np.array([-2.0, 0.5, 3.0]), dtype), device.empty((3,), dtype)
            assert run(device, api, x, out, device.empty((3,), dtype)) == 0, last_error()
            assert_close(device.read(out), torch_logsigmoid(device.read(x)), dtype)
        x, out = device.tensor(np.ones(3), B), device.empty((3,), B)
        assert_rejected(run(device, api, x, out, None), 161002, "self", "Ascend310P", "[FLOAT16, FLOAT]")


# ------------------------------------------------------------------------------------------------
# The documentation's samples

def test_reference_gives_the_documented_values():
    assert ["result[%d] is: %f" % (i, v) for i, v in enumerate(reference({"self": np.arange(1.0, 9.0)}))] == DOC_VALUES


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("log_sigmoid", DOC_VALUES)


def test_forward_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("log_sigmoid_forward", DOC_VALUES)
