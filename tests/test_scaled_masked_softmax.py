"""aclnnScaledMaskedSoftmax: the library's unit tests, and the cases its declaration does not generate
(values across chips, dtypes, mask forms and layouts at power-of-two scales, dtypes, determinism,
empty inputs and every check are in test_operators.py): values against PyTorch in float64 across
dtypes x chips x layouts x mask forms x scales (the fp16 product rounded as the kernel rounds it),
extreme and non-finite inputs, fully masked rows, row lengths up to the chip's limit, bit-identity
of special values across threads and instruction sets, y aliasing x, streamed outputs, null tensors
(561103), chips without a kernel, empty inputs on every chip, the forward fed to
aclnnScaledMaskedSoftmaxBackward against PyTorch autograd, the sample."""
import itertools
import zlib

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import scaled_masked_softmax as sms
from test_scaled_masked_softmax_backward import layout, mask_shape  # the backward's views and mask forms
from support import (ALL_SOCS, assert_close, assert_rejected, assert_sample_prints, kernel_variants, last_error, npu,
                     representable)

torch = pytest.importorskip("torch")

OP = (nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize, nn.aclnnScaledMaskedSoftmax)
BACKWARD = (nn.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize, nn.aclnnScaledMaskedSoftmaxBackward)
F, H, B, D, BOOL = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE, nn.ACL_BOOL
KERNEL_SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")
NO_KERNEL_SOCS = ("Ascend910", "Ascend310P")
DTYPES = (F, H, B)
LIMIT = {"Ascend950": 8192}  # S2 limit; 4096 elsewhere
ITEMSIZE = {F: 4, H: 2, B: 2}


# ---------------------------------------------------------------- the float64 reference

def scores(x, scale, dtype):
    """z = x * scale as the kernel forms it, in float64: fp32(scale) for FLOAT and BFLOAT16; for
    FLOAT16, scale rounded to fp32 then fp16 and the product rounded to fp16 (exact in float64
    before that rounding)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == H:
            return (x * float(np.float16(np.float32(scale)))).astype(np.float16).astype(np.float64)
        return x * float(np.float32(scale))


def reference(x, mask, scale, dtype):
    """PyTorch in float64: softmax(z.masked_fill(mask, -10000), -1)."""
    z = torch.from_numpy(scores(x, scale, dtype))
    masked = torch.from_numpy(np.broadcast_to(mask, x.shape).copy())
    return torch.softmax(z.masked_fill(masked, -10000.0), dim=-1).numpy()


# ---------------------------------------------------------------- running it


def run_case(device, dtype, x, mask, scale, kind="contiguous", mask_kind="contiguous", y_kind=None):
    """Both phases on device tensors in the given layouts; returns y's values."""
    strides, offset = layout(kind, x.shape)
    xs = device.tensor(x, dtype, strides=strides, offset=offset)
    mstrides, moffset = layout(mask_kind, mask.shape)
    ms = device.tensor(mask, BOOL, strides=mstrides, offset=moffset)
    ystrides, yoffset = layout(y_kind or kind, x.shape)
    y = device.empty(x.shape, dtype, strides=ystrides, offset=yoffset)
    assert device.run(*OP, xs.tensor, ms.tensor, scale, False, y.tensor) == 0, last_error()
    return device.read(y)


def inputs(rng, shape, mshape, dtype, spread=3.0, masked=0.3):
    """x ~ N(0, spread^2) (representable in dtype) and a mask with a share `masked` set."""
    return representable(rng.normal(scale=spread, size=shape), dtype), rng.random(mshape) < masked


def rng_for(*words):
    return np.random.default_rng(zlib.crc32(" ".join(map(str, words)).encode()))


# ---------------------------------------------------------------- the library's unit tests (SoC 910B)

LIBRARY_CASES = [  # id: x shape, mask shape, y shape (BFLOAT16 x and y, scale 0.8, fixTriuMask false)
    ("dimNum_not_4", (1, 2, 2, 128, 128), (1, 2, 2, 128, 128), (1, 2, 2, 128, 128), "x: expected 4 dims"),
    ("dim4_out_of_range", (2, 2, 128, 5000), (1, 2, 128, 5000), (2, 2, 128, 5000),
     "x: expected a last dim (S2) in (0, 4096]"),
    ("broadcast_failed", (2, 4, 128, 128), (1, 2, 128, 128), (2, 2, 128, 128), "mask: expected dim 1 to be x's 4 or 1"),
]


@pytest.mark.parametrize("x_shape,m_shape,y_shape,fragment", [c[1:] for c in LIBRARY_CASES],
                         ids=[c[0] for c in LIBRARY_CASES])
def test_library_unit_tests(x_shape, m_shape, y_shape, fragment):
    with npu("Ascend910B") as device:
        x, y = device.empty(x_shape, B).tensor, device.empty(y_shape, B).tensor
        mask = device.empty(m_shape, BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(x, mask, 0.8, False, y)
        assert executor is None
        assert fragment in assert_rejected(ret, 161002)


# ---------------------------------------------------------------- values against PyTorch

SCALES = (1.0, 0.125, 0.3, -1.7)  # 0.3 and -1.7 are not fp16 values: the fp16 rounding shows
LAYOUTS = ("contiguous", "transposed", "strided", "offset")
MASK_FORMS = ("BN", "B1", "1N", "11")


def value_cases():
    """Each dtype on each chip with a kernel, every layout of x (y in the same or the contiguous
    layout), every mask form (contiguous or strided), each scale: a deterministic quarter of the
    product, every value of every factor present."""
    cases = []
    for k, (soc, dtype, kind, form, scale) in enumerate(itertools.product(KERNEL_SOCS, DTYPES, LAYOUTS, MASK_FORMS,
                                                                         SCALES)):
        if k % 4 == 0:
            cases.append((soc, dtype, kind, form, scale, ("contiguous", "strided")[k // 4 % 2],
                          (kind, "contiguous")[k // 8 % 2]))
    return cases


@pytest.mark.parametrize("soc,dtype,kind,form,scale,mask_kind,y_kind", value_cases())
def test_values_match_pytorch(soc, dtype, kind, form, scale, mask_kind, y_kind):
    rng = rng_for(soc, dtype, kind, form, scale)
    shape = (2, 3, 5, 37)
    x, mask = inputs(rng, shape, mask_shape(form, shape), dtype)
    with npu(soc) as device:
        actual = run_case(device, dtype, x, mask, scale, kind, mask_kind, y_kind)
    assert_close(actual, reference(x, mask, scale, dtype), dtype)
    assert np.allclose(actual.sum(-1), 1.0, atol=0.02)


def test_fp16_rounds_the_product_as_an_fp16_multiply():
    """x near 5000 times 0.1 (0.0999755859375 in fp16): scores near 500, where fp16 values are
    0.25 apart. The fp16-rounded scores give the result within the FLOAT16 tolerance, an fp32
    multiply would not."""
    rng = np.random.default_rng(5)
    shape = (1, 2, 4, 16)
    x = representable(rng.uniform(4950, 5050, size=shape), H)
    mask = np.zeros((1, 1, 4, 16), dtype=bool)
    with npu() as device:
        actual = run_case(device, H, x, mask, 0.1)
    assert_close(actual, reference(x, mask, 0.1, H), H)
    unrounded = reference(x, mask, 0.1, F)  # fp32 scale and product
    assert np.max(np.abs(actual - unrounded)) > 10 * 1e-3


def test_bf16_multiplies_in_fp32():
    """BFLOAT16 inputs are widened first: scores x * fp32(0.3), no bf16 rounding of the product
    (near 500, bf16 values are 2 apart)."""
    rng = np.random.default_rng(6)
    shape = (1, 2, 4, 16)
    x = representable(rng.uniform(1600, 1700, size=shape), B)
    mask = np.zeros((1, 1, 4, 16), dtype=bool)
    with npu() as device:
        actual = run_case(device, B, x, mask, 0.3)
    assert_close(actual, reference(x, mask, 0.3, B), B)
    z = torch.from_numpy(representable(x * float(np.float32(0.3)), B))  # the product rounded to bf16
    assert np.max(np.abs(actual - torch.softmax(z, -1).numpy())) > 10 * 4e-3


@pytest.mark.parametrize("dtype", DTYPES)
def test_extreme_and_non_finite_inputs(dtype):
    """±80, ±1e4, ±inf and NaN, masked and not: unmasked NaN or +inf makes the row NaN, -inf gives
    0 (NaN when the whole row is -inf), masked positions are -10000 whatever x holds."""
    inf, nan = np.inf, np.nan
    rows = [
        [80.0, -80.0, 0.0, 1.0, 2.0, 3.0],
        [1e4, -1e4, 0.0, 1.0, 5.0, -3.0],
        [-1e4, -1e4 + 8, -9990.0, 1.0, 0.5, 0.25],
        [inf, 1.0, 2.0, 3.0, 4.0, 5.0],
        [-inf, 1.0, 2.0, 3.0, 4.0, 5.0],
        [-inf, -inf, -inf, -inf, -inf, -inf],
        [nan, 1.0, 2.0, 3.0, 4.0, 5.0],
        [nan, inf, -inf, 1.0, 80.0, -80.0],
        [-1e4, -1e4, -1e4, -1e4, -1e4, -1e4],
        [0.0, -90.0, -100.0, -110.0, -1e4, 2.0],
    ]
    x = representable(np.array(rows)[None, None], dtype)
    mask = np.zeros((1, 1) + x.shape[2:], dtype=bool)
    mask[0, 0, 7, :3] = True   # NaN, +inf and -inf masked: a finite row
    mask[0, 0, 8, 2:] = True   # -10000 masked and unmasked alike: uniform
    with npu() as device:
        for scale in (1.0, 0.125):
            actual = run_case(device, dtype, x, mask, scale)
            expected = reference(x, mask, scale, dtype)
            assert_close(actual, expected, dtype)
            assert np.array_equal(np.isnan(actual), np.isnan(expected))
            assert np.all(np.isnan(actual[0, 0, [3, 5, 6]])) and not np.any(np.isnan(actual[0, 0, 7]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_rows_are_exactly_uniform(dtype):
    rng = np.random.default_rng(8)
    with npu() as device:
        for cols in (1, 3, 7, 100, 1000):
            x, _ = inputs(rng, (2, 2, 3, cols), (1, 1, 3, cols), dtype)
            x[0, 0, 0, 0] = np.nan  # ignored where masked
            mask = np.zeros((1, 1, 3, cols), dtype=bool)
            mask[..., 1, :] = True
            actual = run_case(device, dtype, x, mask, 0.7)
            assert np.all(actual[:, :, 1, :] == representable(np.float32(1) / np.float32(cols), dtype))
            assert_close(actual, reference(x, mask, 0.7, dtype), dtype)


def test_masked_positions_can_dominate():
    """-10000, not -inf: where every unmasked score is below -10000, the masked positions win."""
    x = np.array([[[[-30000.0, -20000.0, 5.0, 7.0]]]])
    mask = np.array([[[[False, False, True, True]]]])
    with npu() as device:
        actual = run_case(device, F, x, mask, 1.0)
    np.testing.assert_array_equal(actual, [[[[0.0, 0.0, 0.5, 0.5]]]])


@pytest.mark.parametrize("soc", KERNEL_SOCS)
@pytest.mark.parametrize("s2", ("1", "odd", "pow2", "limit"))
def test_row_lengths_up_to_the_chip_limit(soc, s2):
    cols = {"1": 1, "odd": 1001, "pow2": 512, "limit": LIMIT.get(soc, 4096)}[s2]
    rng = rng_for(soc, s2)
    shape = (1, 2, 2, cols)
    with npu(soc) as device:
        for dtype, scale in zip(DTYPES, SCALES):
            x, mask = inputs(rng, shape, mask_shape("B1", shape), dtype)
            assert_close(run_case(device, dtype, x, mask, scale), reference(x, mask, scale, dtype), dtype)


@pytest.mark.parametrize("cols", (67, 1024))
@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_give_the_same_bits_across_threads_and_instruction_sets(dtype, cols):
    """NaN (payloads included), ±inf, scores that underflow, masked rows, odd row lengths, and rows
    whose folds end in registers on AVX-512 (1024: from a level of 16 whole vectors on): the same
    bits for every thread count and instruction set."""
    rng = np.random.default_rng(dtype)
    shape = (3, 4, 9, cols)
    x, mask = inputs(rng, shape, (3, 1, 9, cols), dtype, spread=40.0)
    flat = x.reshape(-1, cols)
    for row, value in zip(range(0, flat.shape[0], 7), itertools.cycle((np.nan, np.inf, -np.inf, 1e4, -1e4))):
        flat[row, row % cols] = value
    mask[1, 0, 3, :] = True
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu() as device:
            results.append(run_case(device, dtype, x, mask, 0.3, "offset").tobytes())
    assert all(r == results[0] for r in results[1:]), kernel_variants()


@pytest.mark.parametrize("kind", ("contiguous", "strided"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_y_may_be_x_itself(kind, dtype):
    rng = np.random.default_rng(3)
    x, mask = inputs(rng, (2, 2, 3, 50), (1, 2, 3, 50), dtype)
    strides, offset = layout(kind, x.shape)
    with npu() as device:
        xs = device.tensor(x, dtype, strides=strides, offset=offset)
        ms = device.tensor(mask, BOOL)
        assert device.run(*OP, xs.tensor, ms.tensor, 0.5, False, xs.tensor) == 0, last_error()
        assert_close(device.read(xs), reference(x, mask, 0.5, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_outputs_are_streamed_with_the_same_bits(dtype):
    """Outputs above the streaming threshold (8 MiB) are written with non-temporal stores from
    the first aligned address of each row (here rows start unaligned and have odd lengths): the
    same bits as the strided path, which scatters each row."""
    rng = np.random.default_rng(dtype)
    cols = 2049
    rows = 8 * 2**20 // (cols * ITEMSIZE[dtype]) + 7
    shape = (1, 1, rows, cols)
    x, mask = inputs(rng, shape, shape, dtype)
    with npu() as device:
        streamed = run_case(device, dtype, x, mask, 0.125, "offset")
        scattered = run_case(device, dtype, x[..., :8, :], mask[..., :8, :], 0.125, "transposed")
    np.testing.assert_array_equal(streamed[..., :8, :], scattered)
    assert_close(streamed, reference(x, mask, 0.125, dtype), dtype)


# ---------------------------------------------------------------- checks

@pytest.mark.parametrize("null", ("x", "mask", "y"))
def test_a_null_tensor_is_561103_as_in_the_library_code(null):
    with npu() as device:
        tensors = {"x": device.empty((1, 1, 2, 8), F).tensor, "mask": device.empty((1, 1, 2, 8), BOOL).tensor,
                   "y": device.empty((1, 1, 2, 8), F).tensor}
        tensors[null] = None
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(tensors["x"], tensors["mask"], 1.0, False,
                                                                          tensors["y"])
        assert (size, executor) == (0, None)
        assert "%s: expected an aclTensor, found null" % null in assert_rejected(ret, nn.ACLNN_ERR_INNER_NULLPTR)


def test_a_destroyed_tensor_is_161002():
    with npu() as device:
        x, y = device.empty((1, 1, 2, 8), F).tensor, device.empty((1, 1, 2, 8), F).tensor
        mask = nn.aclCreateTensor([1, 1, 2, 8], BOOL, None, 0, nn.ACL_FORMAT_ND, [16], device.malloc(16))
        nn.aclDestroyTensor(mask)
        _, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(x, mask, 1.0, False, y)
        assert executor is None
        assert "mask: expected a live aclTensor" in assert_rejected(ret, 161002)


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
def test_no_workspace_is_needed():
    with npu() as device:
        t = device.empty((1, 1, 2, 8), F).tensor
        m = device.empty((1, 1, 2, 8), BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(t, m, 1.0, False, t)
        assert (size, ret) == (0, 0), last_error()
        assert nn.aclnnScaledMaskedSoftmax(None, 0, executor, device.stream) == 0


@pytest.mark.parametrize("soc", ALL_SOCS)
@pytest.mark.parametrize("empty_dim", range(3))
def test_empty_tensors_succeed_with_workspace_zero_on_every_chip(soc, empty_dim):
    shape = [2, 3, 4, 5]
    shape[empty_dim] = 0
    with npu(soc) as device:
        t = device.empty(shape, F).tensor
        m = device.empty([1, 1, 4, 5] if empty_dim < 2 else shape, BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(t, m, 1.0, False, t)
        assert (size, ret) == (0, 0), last_error()
        assert executor is not None
        assert nn.aclnnScaledMaskedSoftmax(None, 0, executor, device.stream) == 0


def test_an_empty_last_axis_is_rejected_even_on_chips_without_a_kernel():
    for soc in ALL_SOCS:
        with npu(soc) as device:
            t = device.empty((1, 2, 3, 0), F).tensor
            m = device.empty((1, 1, 3, 0), BOOL).tensor
            _, _, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(t, m, 1.0, False, t)
            assert "x: expected a last dim (S2) in (0, " in assert_rejected(ret, 161002)


@pytest.mark.parametrize("soc", NO_KERNEL_SOCS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_chips_without_a_kernel_accept_the_parameters_then_fail_with_561003(soc, dtype):
    with npu(soc) as device:
        t = device.empty((1, 1, 2, 8), dtype).tensor
        m = device.empty((1, 1, 2, 8), BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(t, m, 1.0, False, t)
        message = assert_rejected(ret, nn.ACLNN_ERR_INNER_FIND_KERNEL_ERROR, soc)
        assert executor is None and "ScaledMaskedSoftmaxV2 kernel" in message
        # a parameter error still wins over the missing kernel
        _, _, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(t, m, 1.0, True, t)
        assert "fixTriuMask" in assert_rejected(ret, 161002)


ACCEPTED = [  # (id, soc, x shape, mask shape): corner shapes the checks must let through
    ("S2 4096", "Ascend910_93", (1, 1, 2, 4096), (1, 1, 2, 4096)),
    ("S2 8192 on 950", "Ascend950", (1, 1, 2, 8192), (1, 1, 2, 8192)),
    ("S2 1", "Ascend910B", (2, 3, 4, 1), (1, 3, 4, 1)),
    ("mask 1 1", "Ascend910B", (3, 5, 2, 6), (1, 1, 2, 6)),
    ("B and N of 1", "Ascend910B", (1, 1, 7, 6), (1, 1, 7, 6)),
]


@pytest.mark.parametrize("soc,x_shape,m_shape", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_shapes_run(soc, x_shape, m_shape):
    rng = rng_for(soc, x_shape)
    x, mask = inputs(rng, x_shape, m_shape, F)
    with npu(soc) as device:
        assert_close(run_case(device, F, x, mask, 0.5), reference(x, mask, 0.5, F), F)


def test_formats_are_not_checked():
    rng = np.random.default_rng(9)
    x, mask = inputs(rng, (1, 2, 3, 8), (1, 1, 3, 8), F)
    with npu() as device:
        xs = device.tensor(x, F, fmt=nn.ACL_FORMAT_FRACTAL_NZ)
        ms = device.tensor(mask, BOOL, fmt=nn.ACL_FORMAT_NCHW)
        y = device.empty(x.shape, F, fmt=nn.ACL_FORMAT_NHWC)
        assert device.run(*OP, xs.tensor, ms.tensor, 1.0, False, y.tensor) == 0, last_error()
        assert_close(device.read(y), reference(x, mask, 1.0, F), F)


# ---------------------------------------------------------------- forward, then the backward

@pytest.mark.parametrize("dtype,scale,form", [(F, 0.125, "B1"), (F, -2.0, "BN"), (H, 0.5, "11"), (B, 0.25, "1N")])
def test_forward_then_backward_matches_pytorch_autograd(dtype, scale, form):
    """y from aclnnScaledMaskedSoftmax fed to aclnnScaledMaskedSoftmaxBackward with a gradient of y:
    the gradient of x against autograd through (x * scale).masked_fill(mask, -10000).softmax(-1)."""
    rng = rng_for(dtype, scale, form)
    shape = (2, 3, 6, 40)
    x, mask = inputs(rng, shape, mask_shape(form, shape), dtype)
    grad = representable(rng.normal(size=shape), dtype)
    with npu() as device:
        xs, gs = device.tensor(x, dtype), device.tensor(grad, dtype)
        ms = device.tensor(mask, BOOL)
        y, out = device.empty(shape, dtype), device.empty(shape, dtype)
        assert device.run(*OP, xs.tensor, ms.tensor, scale, False, y.tensor) == 0, last_error()
        assert device.run(*BACKWARD, gs.tensor, y.tensor, ms.tensor, scale, False, out.tensor) == 0, last_error()
        y_values, gradient = device.read(y), device.read(out)
    x64 = torch.from_numpy(x).requires_grad_()
    masked = torch.from_numpy(np.broadcast_to(mask, shape).copy())
    y64 = torch.softmax((x64 * scale).masked_fill(masked, -10000.0), dim=-1)
    y64.backward(torch.from_numpy(grad))
    assert_close(y_values, y64.detach().numpy(), dtype)
    # the backward's inputs are the rounded y: its error adds to the forward's, scaled by |grad|·|scale|
    assert_close(gradient, x64.grad.numpy(), dtype, scale=4 * abs(scale) * max(1.0, np.abs(grad).max()))
    assert np.all(gradient[np.broadcast_to(mask, shape)] == 0)


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("scaled_masked_softmax", ["result[%d] is: %f" % (i, v) for i, v in enumerate(
        [0.5, 0.5, 0.268941, 0.731059] * 4)])
