"""aclnnScaledMaskedSoftmaxBackward: the cases its declaration does not generate (values across
chips, dtypes, mask forms and layouts, dtypes, determinism, empty inputs and every check are in
test_operators.py): row lengths up to the chip's limit, the fixed summation order bit for bit,
PyTorch, masked rows that are not finite, out aliasing or overlapping an input, streamed outputs,
no workspace, empty inputs on every chip (before the kernel lookup), accepted formats and shapes,
the sample."""
import dataclasses
import itertools
import zlib

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import _kernels
from aclnn_api import scaled_masked_softmax_backward as sms
from support import ALL_SOCS, assert_close, assert_sample_prints, kernel_variants, last_error, npu, representable

OP = (nn.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize, nn.aclnnScaledMaskedSoftmaxBackward)
F, H, B, D, BOOL = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE, nn.ACL_BOOL
NZ = nn.ACL_FORMAT_FRACTAL_NZ
KERNEL_DTYPES = {"Ascend910B": (F, H, B), "Ascend910_93": (F, H, B), "Ascend950": (F, H, B), "Ascend310P": (F, H)}
KERNEL_SOCS = tuple(KERNEL_DTYPES)
LIMIT = {"Ascend950": 8192}  # S2 limit; 4096 elsewhere
SCALES = (1.0, 0.125, -2.5, 0.1)
ITEMSIZE = {F: 4, H: 2, B: 2}  # 0.1 is not an fp32 value: the kernel holds it as fp32


def reference(grad, y, mask, scale):
    """The declaration's float64 reference: (p - sum(p) * y) * fp32(scale), p = grad * y; 0 where
    the (broadcast) mask is set."""
    return sms.reference({"gradOutput": grad, "y": y, "mask": mask, "scale": scale})


def layout(kind, shape):
    """(strides, offset) of a 4-D view of `shape` laid out as `kind` in a larger storage."""
    b, n, s1, s2 = shape
    if kind == "contiguous":
        return None, 0
    if kind == "offset":
        return None, 11
    if kind == "transposed":  # stored as [B, N, S2, S1]: the reduced axis is not unit-stride
        return (n * s2 * s1, s2 * s1, 1, s1), 0
    if kind == "strided":  # every other element, padded rows, then an offset
        row = 2 * s2 + 3
        return (n * s1 * row, s1 * row, row, 2), 5
    raise ValueError(kind)


def mask_shape(form, shape):
    b, n, s1, s2 = shape
    return {"BN": (b, n, s1, s2), "B1": (b, 1, s1, s2), "1N": (1, n, s1, s2), "11": (1, 1, s1, s2)}[form]


def inputs(rng, shape, mshape, dtype):
    """gradOutput ~ N(0, 1), y ~ U(0, 1) (both representable in dtype) and a mask with ~30% set."""
    grad = representable(rng.normal(size=shape), dtype)
    y = representable(rng.uniform(0.0, 1.0, size=shape), dtype)
    return grad, y, rng.random(mshape) < 0.3


def run_case(device, dtype, grad, y, mask, scale, kind="contiguous", mask_kind="contiguous", out_kind=None):
    """Both phases on device tensors in the given layouts; returns the output values."""
    strides, offset = layout(kind, grad.shape)
    go = device.tensor(grad, dtype, strides=strides, offset=offset)
    ys = device.tensor(y, dtype, strides=strides, offset=offset)
    mstrides, moffset = layout(mask_kind, mask.shape)
    ms = device.tensor(mask, BOOL, strides=mstrides, offset=moffset)
    ostrides, ooffset = layout(out_kind or kind, grad.shape)
    out = device.empty(grad.shape, dtype, strides=ostrides, offset=ooffset)
    assert device.run(*OP, go.tensor, ys.tensor, ms.tensor, scale, False, out.tensor) == 0, last_error()
    return device.read(out)


def check_values(actual, grad, y, mask, scale, dtype):
    expected = reference(grad, y, mask, scale)
    masked = np.broadcast_to(mask, expected.shape)
    assert np.all(actual[masked] == 0) and not np.any(np.signbit(actual[masked])), "masked positions must be +0"
    assert_close(actual, expected, dtype)




@pytest.mark.parametrize("soc", KERNEL_SOCS)
@pytest.mark.parametrize("s2", ("1", "odd", "pow2", "limit"))
def test_row_lengths_up_to_the_chip_limit(soc, s2):
    cols = {"1": 1, "odd": 1001, "pow2": 512, "limit": LIMIT.get(soc, 4096)}[s2]
    rng = np.random.default_rng(zlib.crc32((soc + s2).encode()))
    shape = (1, 2, 2, cols)
    with npu(soc) as device:
        for dtype, scale in zip(KERNEL_DTYPES[soc], SCALES):
            grad, y, mask = inputs(rng, shape, mask_shape("B1", shape), dtype)
            check_values(run_case(device, dtype, grad, y, mask, scale), grad, y, mask, scale, dtype)


def tree_sum_fp32(p):
    """The documented order, in float32: fold the upper half (from ceil(n/2)) onto the lower half."""
    p = p.astype(np.float32)
    while p.shape[-1] > 1:
        half = (p.shape[-1] + 1) // 2
        upper = p[..., half:]
        p = p[..., :half].copy()
        p[..., :upper.shape[-1]] += upper
    return p


@pytest.mark.parametrize("kind", ("transposed", "contiguous"))
@pytest.mark.parametrize("cols", (1, 2, 3, 5, 32, 64, 512, 1001, 1024, 4096))
def test_float32_results_follow_the_documented_order_bit_for_bit(cols, kind):
    """Every length's fold, on the strided rows' path and the dense rows' vector path, where
    AVX-512 finishes a fold in registers from a level of a power of two of whole vectors (at most
    16) on: the power-of-two lengths from 32 columns."""
    rng = np.random.default_rng(cols)
    grad, y, mask = inputs(rng, (1, 2, 3, cols), (1, 1, 3, cols), F)
    with npu() as device:
        actual = run_case(device, F, grad, y, mask, 0.3, kind)
    g32, y32, scale = grad.astype(np.float32), y.astype(np.float32), np.float32(0.3)
    p = g32 * y32
    expected = np.where(mask, np.float32(0), (p - tree_sum_fp32(p) * y32) * scale)
    np.testing.assert_array_equal(actual.astype(np.float32), expected)


def test_softmax_outputs_as_in_training():
    """y a real softmax (rows summing to 1), a causal mask, scale 1/sqrt(d): the intended use."""
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(2, 4, 16, 16)) * 3
    y = np.exp(logits - logits.max(-1, keepdims=True))
    y = representable(y / y.sum(-1, keepdims=True), F)
    grad = representable(rng.normal(size=y.shape), F)
    mask = np.triu(np.ones((16, 16), dtype=bool), k=1)[None, None]
    with npu() as device:
        actual = run_case(device, F, grad, y, mask, 0.125)
    check_values(actual, grad, y, mask, 0.125, F)


def test_matches_pytorch_softmax_backward():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    shape = (2, 3, 5, 37)
    for dtype, scale in ((F, 1.0), (H, 0.5), (B, -3.0)):
        grad, y, mask = inputs(rng, shape, (2, 1, 5, 37), dtype)
        with npu("Ascend910B") as device:
            actual = run_case(device, dtype, grad, y, mask, scale, "strided")
        grad64, y64 = torch.from_numpy(grad), torch.from_numpy(y)
        expected = torch._softmax_backward_data(grad64, y64, -1, torch.float64) * float(np.float32(scale))
        expected = expected.masked_fill(torch.from_numpy(mask), 0.0).numpy()
        assert_close(actual, expected, dtype)


def test_masked_positions_are_zero_even_when_the_row_is_not_finite():
    grad = np.array([[[[1.0, np.nan, 2.0, 3.0], [np.inf, 1.0, 1.0, 1.0]]]])
    y = np.full(grad.shape, 0.5)
    mask = np.array([[[[True, False, False, True], [False, False, True, False]]]])
    with npu() as device:
        for dtype in (F, H, B):
            actual = run_case(device, dtype, grad, y, mask, 2.0)
            assert np.all(actual[mask] == 0) and not np.any(np.signbit(actual[mask]))
            with np.errstate(invalid="ignore"):  # row sums NaN and inf: unmasked values are NaN or -inf
                np.testing.assert_array_equal(actual, reference(grad, y, mask, 2.0))


@pytest.mark.parametrize("kind", ("contiguous", "strided"))
@pytest.mark.parametrize("aliased", ("gradOutput", "y"))
@pytest.mark.parametrize("dtype", (F, H, B))
def test_out_may_be_an_input_itself(kind, aliased, dtype):
    rng = np.random.default_rng(3)
    grad, y, mask = inputs(rng, (2, 2, 3, 50), (1, 2, 3, 50), dtype)
    strides, offset = layout(kind, grad.shape)
    with npu() as device:
        go = device.tensor(grad, dtype, strides=strides, offset=offset)
        ys = device.tensor(y, dtype, strides=strides, offset=offset)
        ms = device.tensor(mask, BOOL)
        out = go if aliased == "gradOutput" else ys
        assert device.run(*OP, go.tensor, ys.tensor, ms.tensor, 0.5, False, out.tensor) == 0, last_error()
        check_values(device.read(out), grad, y, mask, 0.5, dtype)


@pytest.mark.parametrize("shift", (-3, 1, 3))
def test_out_may_overlap_an_input_within_its_rows(shift):
    """out and gradOutput are views of one storage, out shifted by a few elements (rows padded so
    that a row overlaps only its own shifted copy): each row is read whole before it is written."""
    rng = np.random.default_rng(4)
    shape, pad = (1, 2, 3, 37), 5
    grad, y, mask = inputs(rng, shape, (1, 1, 3, 37), F)
    row = shape[3] + pad
    strides = (shape[1] * shape[2] * row, shape[2] * row, row, 1)
    storage = np.zeros(shape[1] * shape[2] * row + 2 * pad)
    index = pad + sum(np.indices(shape)[i] * s for i, s in enumerate(strides))
    storage[index] = grad
    with npu() as device:
        flat = device.tensor(storage, F)
        views = [nn.aclCreateTensor(list(shape), F, list(strides), pad + delta, nn.ACL_FORMAT_ND, [storage.size],
                                    flat.address) for delta in (0, shift)]
        ys, ms = device.tensor(y, F), device.tensor(mask, BOOL)
        try:
            assert device.run(*OP, views[0], ys.tensor, ms.tensor, 0.5, False, views[1]) == 0, last_error()
        finally:
            for view in views:
                nn.aclDestroyTensor(view)
        out = dataclasses.replace(flat, shape=shape, strides=strides, offset=pad + shift)
        check_values(device.read(out), grad, y, mask, 0.5, F)


@pytest.fixture
def streaming_everything():
    """Every output streamed (the plan's threshold at 0), as only outputs above 8 MiB are otherwise."""
    saved = _kernels.memory_plan()["threshold"]
    _kernels.set_memory_plan(threshold=0)
    yield
    _kernels.set_memory_plan(threshold=saved)


@pytest.mark.parametrize("cols", (5, 67, 1024))
@pytest.mark.parametrize("dtype", (F, H, B))
def test_special_values_give_the_same_bits_across_threads_and_instruction_sets(dtype, cols, streaming_everything):
    """Dense rows on every instruction set (vectors, then single lanes; streamed stores from the
    first aligned address of each row) and the strided rows (through fp32 buffers): NaN, ±inf and
    1e4 in the inputs, masked rows, odd row lengths, scale 1 (no multiply) and not, the same bits."""
    rng = np.random.default_rng(cols)
    shape = (3, 4, 9, cols)
    grad, y, mask = inputs(rng, shape, (3, 1, 9, cols), dtype)
    for row, value in zip(range(0, 3 * 4 * 9, 5), itertools.cycle((np.nan, np.inf, -np.inf, 1e4))):
        grad.reshape(-1, cols)[row, row % cols] = value
        y.reshape(-1, cols)[row + 2, (row + 1) % cols] = value
    mask[1, 0, 3, :] = True
    results = {}
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu() as device:
            for kind, scale in itertools.product(("contiguous", "offset", "strided"), (1.0, 0.3)):
                results.setdefault((kind, scale), []).append(run_case(device, dtype, grad, y, mask, scale, kind))
    for (kind, scale), outputs in results.items():
        assert all(o.tobytes() == outputs[0].tobytes() for o in outputs[1:]), (kind, scale, kernel_variants())
        assert outputs[0].tobytes() == results[("strided", scale)][0].tobytes(), (kind, scale)


@pytest.mark.parametrize("dtype", (F, H, B))
def test_large_outputs_are_streamed_with_the_same_bits(dtype):
    """Outputs above the streaming threshold (8 MiB) are written with non-temporal stores from
    the first aligned address of each row (here rows start unaligned and have odd lengths): the
    same bits as the strided path, which gathers each row first."""
    rng = np.random.default_rng(dtype)
    cols = 2049
    rows = 8 * 2**20 // (cols * ITEMSIZE[dtype]) + 7
    shape = (1, 1, rows, cols)
    grad, y, mask = inputs(rng, shape, shape, dtype)
    with npu() as device:
        streamed = run_case(device, dtype, grad, y, mask, 0.125, "offset")
        gathered = run_case(device, dtype, grad[..., :8, :], y[..., :8, :], mask[..., :8, :], 0.125, "transposed")
    np.testing.assert_array_equal(streamed[..., :8, :], gathered)
    check_values(streamed, grad, y, mask, 0.125, dtype)


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
def test_no_workspace_is_needed():
    with npu() as device:
        t = device.empty((1, 1, 2, 8), F).tensor
        m = device.empty((1, 1, 2, 8), BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(t, t, m, 1.0, False, t)
        assert (size, ret) == (0, 0), last_error()
        assert nn.aclnnScaledMaskedSoftmaxBackward(None, 0, executor, device.stream) == 0


@pytest.mark.parametrize("soc", ALL_SOCS)
@pytest.mark.parametrize("empty_dim", range(4))
def test_empty_tensors_succeed_with_workspace_zero(soc, empty_dim):
    shape = [2, 3, 4, 5]
    shape[empty_dim] = 0
    with npu(soc) as device:
        t = device.empty(shape, F).tensor
        m = device.empty(shape, BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(t, t, m, 1.0, False, t)
        assert (size, ret) == (0, 0), last_error()
        assert executor is not None
        assert nn.aclnnScaledMaskedSoftmaxBackward(None, 0, executor, device.stream) == 0


def test_training_series_has_no_kernel():
    """Ascend910: every parameter check passes (the op_api does not gate chips), then no kernel."""
    with npu("Ascend910") as device:
        t = device.empty((1, 1, 2, 8), F).tensor
        m = device.empty((1, 1, 2, 8), BOOL).tensor
        size, executor, ret = nn.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(t, t, m, 1.0, False, t)
        message = last_error()
        assert (ret, executor) == (561003, None)
        assert "Ascend910" in message and "expected" in message and "found FLOAT" in message
        # a parameter error still wins over the missing kernel
        _, _, ret = nn.aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(t, t, m, 1.0, True, t)
        assert ret == 161002 and "fixTriuMask" in last_error()


SHAPE = (2, 3, 4, 8)
GOOD = {"gradOutput": (F, SHAPE, nn.ACL_FORMAT_ND), "y": (F, SHAPE, nn.ACL_FORMAT_ND),
        "mask": (BOOL, SHAPE, nn.ACL_FORMAT_ND), "out": (F, SHAPE, nn.ACL_FORMAT_ND)}
NAMES = ("gradOutput", "y", "mask", "out")


def _with(**changes):
    """The good arguments with some (dtype, shape, format) fields replaced: name=(dtype|None, shape|None, fmt|None)."""
    spec = dict(GOOD)
    for name, (dtype, shape, fmt) in changes.items():
        old = spec[name]
        spec[name] = tuple(old[i] if new is None else new for i, new in enumerate((dtype, shape, fmt)))
    return spec


ACCEPTED = [  # (id, soc, tensors): cases the checks must let through (they run and give the reference)
    ("S2 4097 on 950", "Ascend950", _with(**{n: (None, (1, 1, 2, 4097), None) for n in NAMES})),
    ("FRACTAL_NZ on 950", "Ascend950", _with(gradOutput=(None, None, NZ), y=(None, None, NZ), out=(None, None, NZ))),
    ("NCHW and NHWC formats", "Ascend910B", _with(gradOutput=(None, None, nn.ACL_FORMAT_NCHW),
                                                  mask=(None, None, nn.ACL_FORMAT_NHWC))),
    ("FRACTAL_NZ_C0_16 is not FRACTAL_NZ", "Ascend910B", _with(y=(None, None, nn.ACL_FORMAT_FRACTAL_NZ_C0_16))),
    ("mask [1, 1]", "Ascend310P", _with(mask=(None, (1, 1, 4, 8), None))),
]


@pytest.mark.parametrize("soc,tensors", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_inputs_run(soc, tensors):
    rng = np.random.default_rng(zlib.crc32(soc.encode()))
    with npu(soc) as device:
        shape = tensors["gradOutput"][1]
        grad, y, mask = inputs(rng, shape, tensors["mask"][1], F)
        go, ys = device.tensor(grad, F, fmt=tensors["gradOutput"][2]), device.tensor(y, F, fmt=tensors["y"][2])
        ms = device.tensor(mask, BOOL, fmt=tensors["mask"][2])
        out = device.empty(shape, F, fmt=tensors["out"][2])
        assert device.run(*OP, go.tensor, ys.tensor, ms.tensor, 1.0, False, out.tensor) == 0, last_error()
        check_values(device.read(out), grad, y, mask, 1.0, F)


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("scaled_masked_softmax_backward", ["result[%d] is: %f" % (i, v) for i, v in enumerate(
        [0, 0, -66, -84, 0, 0, -742, -840, 0, 0, -2794, -3036, 0, 0, -6990, -7440])])
