"""NPUEMU_VECTOR_ISA, and the element-wise engine's paths under each instruction set: aligned and
unaligned starts, vector tails, streamed outputs, broadcast and strided operands, special values.
Every instruction set the machine runs must give the same bits, and the reference's values. The
operators, their inputs and references come from their declarations (aclnn_api/declaration.py):
every operator that declares element-wise inputs is covered."""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import _kernels
from aclnn_api.declaration import SampleInput, TensorInput, all_declarations
from support import FLOAT_DTYPES, assert_close, kernel_variants, last_error, npu, run_declared

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast"),  # 1e30 as FLOAT16: inf
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]  # NumPy on NaN payloads

F, H, B = nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16
# NaNs with payloads too (a signalling one among them): every path must convert them alike.
NANS = np.array([0x7FF0000000000001, 0xFFF8DEAD00000000, 0x7FF4000100000000], dtype=np.uint64).view(np.float64)
SPECIAL = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.0, -88.0, 104.0, -110.0, 1e30, -1e30],
                          NANS])


LARGEST = {F: float(np.finfo(np.float32).max), H: 65504.0, B: float(np.finfo(np.float32).max)}


def assert_matches_reference(actual, expected, dtype):
    """Where the exact result fits the dtype: within tolerance; NaN exactly where it is NaN."""
    fits = np.abs(expected) < LARGEST[dtype] * 0.999
    assert_close(actual[fits], expected[fits], dtype)
    assert np.array_equal(np.isnan(actual), np.isnan(expected))


def isa_variants():
    return [v for v in kernel_variants() if v["vector_isa"] != "auto"] + [dict(threads=2, vector_isa="auto")]


# The operators on the element-wise engine: those whose declaration gives full-shape inputs.
ENGINE_OPS = {d.name[len("aclnn"):]: d for d in all_declarations() if d.engine_inputs is not None}


def engine_call(device, declaration, shape, dtype, placement, rng):
    """(output, reference) of the declaration's element-wise inputs of `shape`: its special inputs
    start with SPECIAL, and every full-shape tensor is laid out by `placement` (strides, offset)."""
    sample = declaration.engine_inputs(shape, rng)
    args = dict(sample.args)
    for name, arg in sample.tensors().items():
        values = np.array(arg.values, dtype=np.float64)
        if name in declaration.special_inputs and values.size >= SPECIAL.size:
            values.reshape(-1)[:SPECIAL.size] = SPECIAL
        full = arg.shape == tuple(shape)
        args[name] = TensorInput(values, arg.dtype, placement.get("strides") if full else None,
                                 placement.get("offset", 0) if full else 0, arg.format)
    with np.errstate(over="ignore", invalid="ignore"):
        ret, actual, expected = run_declared(device, declaration, SampleInput(sample.label, args), dtype)
    assert ret == 0, last_error()
    return actual, expected


LAYOUTS = {  # name: (shape, layout): starts off a vector boundary, tails, rows, strides
    "aligned-with-tail": ((1000 * 16 + 7,), {}),
    "offset-3": ((37, 129), dict(offset=3)),
    "offset-13": ((5, 1031), dict(offset=13)),
    "transposed": ((67, 45), dict(strides=(1, 67))),
    "sliced-rows": ((30, 70), dict(strides=(100, 1), offset=5)),
    # rows shorter than kShortRow, computed in flat blocks of whole rows: BCE's posWeight [5]
    # repeated row by row (a tile), the others in place; then every operand gathered, in two ways
    "short-rows": ((4000, 5), {}),
    "short-rows-transposed": ((4000, 5), dict(strides=(1, 4000))),
    "short-rows-sliced": ((3000, 6), dict(strides=(8, 1), offset=3)),
}


@pytest.mark.parametrize("op,dtype,layout", list(itertools.product(ENGINE_OPS, FLOAT_DTYPES, LAYOUTS)))
def test_every_instruction_set_gives_the_same_bits_and_the_reference(op, dtype, layout):
    shape, placement = LAYOUTS[layout]
    results = []
    for settings in isa_variants():
        emulator.configure(**settings)
        with npu("Ascend910B") as device:
            actual, expected = engine_call(device, ENGINE_OPS[op], shape, dtype, placement, np.random.default_rng(5))
            results.append(actual)
    for settings, result in zip(isa_variants(), results):
        assert result.tobytes() == results[0].tobytes(), settings
    assert_matches_reference(results[0], expected, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_streamed_outputs_from_an_unaligned_start_give_the_same_bits(dtype):
    """Outputs above 8 MiB are written with streaming stores from the first aligned address."""
    elements = (9 << 20) // np.dtype(nn.NUMPY_TYPES.get(dtype, np.uint16)).itemsize + 21
    results = []
    for settings in isa_variants():
        emulator.configure(**settings)
        with npu("Ascend910B") as device:
            actual, expected = engine_call(device, ENGINE_OPS["LogSigmoidBackward"], (elements,), dtype, dict(offset=5),
                                           np.random.default_rng(9))
            results.append(actual)
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])
    assert_matches_reference(results[0], expected, dtype)


def test_the_setting_limits_the_kernels_to_a_narrower_instruction_set():
    machine = _kernels.machine_vector_isa()
    order = ["baseline", "avx2", "avx512", "avx512_bf16"]
    for requested in order + ["auto"]:
        expected = machine if requested == "auto" else order[min(order.index(requested), order.index(machine))]
        emulator.configure(vector_isa=requested)
        with npu() as device:
            engine_call(device, ENGINE_OPS["LogSigmoidBackward"], (4, 4), F, {}, np.random.default_rng(1))
        assert _kernels.vector_isa() == expected, requested


def test_the_setting_comes_from_the_environment_and_bad_values_are_refused(tmp_path):
    code = "import emulator; print(emulator.settings().vector_isa)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NPUEMU_VECTOR_ISA": "AVX2"}, timeout=60)
    assert done.stdout.strip() == "avx2", done.stderr
    with pytest.raises(emulator.ConfigError, match="NPUEMU_VECTOR_ISA: expected one of auto, avx512_bf16, avx512, avx2, baseline, found 'sse9'"):
        emulator.configure(vector_isa="sse9")
