"""Test support: move NumPy data to and from emulated device tensors of any layout, dtype
conversions (bf16 has no NumPy type), reference tolerances, chips, and running an operator's
declared samples (aclnn_api/declaration.py).

Tolerances against a float64 reference, absolute and relative alike: FLOAT 1e-4, FLOAT16 1e-3,
BFLOAT16 4e-3 (fp16/bf16 inputs are computed in fp32 and rounded to nearest-even once, on output),
DOUBLE 1e-10."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np

import acl
import aclnn_api as nn
import emulator
from aclnn_api.declaration import IntArrayInput, OpDeclaration, SampleInput, TensorInput, call_args, reference_args
from emulator.dtypes import FLOATING

ALL_SOCS = ("Ascend910", "Ascend910B", "Ascend910_93", "Ascend950", "Ascend310P")
FLOAT_DTYPES = (nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16)
TOLERANCE = {nn.ACL_FLOAT: 1e-4, nn.ACL_FLOAT16: 1e-3, nn.ACL_BF16: 4e-3, nn.ACL_DOUBLE: 1e-10}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Whether the package under test is this checkout (the Makefile's editable install) or a copy
# installed elsewhere (`pip install .`, a wheel).
TESTS_THE_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(emulator.__file__))) == REPO


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounded to nearest-even (NaN stays NaN)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    return np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(values: np.ndarray, dtype: int) -> np.ndarray:
    """Host array holding `values` in the device representation of `dtype`."""
    if dtype == nn.ACL_BF16:
        return bf16_bits(values)
    return np.asarray(values).astype(nn.NUMPY_TYPES[dtype])


def decode(raw: np.ndarray, dtype: int) -> np.ndarray:
    """float64 (or the integer/bool) values of a device representation."""
    if dtype == nn.ACL_BF16:
        return bf16_values(raw).astype(np.float64)
    if dtype in (nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_DOUBLE):
        return raw.astype(np.float64)
    return raw


def representable(values: np.ndarray, dtype: int) -> np.ndarray:
    """`values` rounded to what `dtype` can hold, as float64: the inputs a reference should see."""
    return decode(encode(values, dtype), dtype)


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: int, scale: float = 1.0) -> None:
    tol = TOLERANCE[dtype] * scale
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True)


@dataclass
class DeviceTensor:
    tensor: nn.aclTensor
    address: int          # the allocation (storage base)
    storage_elements: int
    dtype: int
    shape: tuple
    strides: tuple
    offset: int


class Npu:
    """One open device and stream; tracks what it allocates and releases it all in close()."""

    def __init__(self, device_id: int = 0):
        assert acl.init() in (0, acl.ACL_ERROR_REPEAT_INITIALIZE)
        assert acl.rt.set_device(device_id) == 0
        self.device_id = device_id
        self.stream, ret = acl.rt.create_stream()
        assert ret == 0
        self.tensors: list[DeviceTensor] = []
        self.buffers: list[int] = []

    def malloc(self, size: int) -> int:
        address, ret = acl.rt.malloc(max(size, 1), 0)
        assert ret == 0, acl.get_recent_err_msg()
        self.buffers.append(address)
        return address

    def tensor(self, values, dtype: int, strides: Optional[Sequence[int]] = None, offset: int = 0,
               fmt: int = nn.ACL_FORMAT_ND, fill: float = np.nan, written: Optional[np.ndarray] = None) -> DeviceTensor:
        """A device tensor whose view reads `values`. With `strides`/`offset`, the view is laid out in
        a larger storage whose other elements hold `fill` (NaN by default: a kernel that reads
        outside its view shows up). `written`, a mask of the view's shape: only those elements are
        uploaded, and nothing else of the storage is ever written (for the sanitizer's initcheck)."""
        values = np.asarray(values)
        shape = values.shape
        strides = tuple(strides) if strides is not None else nn.tensor.contiguous_strides(shape)
        if 0 in shape:
            extent = offset + 1
        else:
            extent = offset + sum((d - 1) * s for d, s in zip(shape, strides)) + 1
        storage = np.full(extent, fill, dtype=np.float64) if values.dtype.kind == "f" else np.zeros(extent, values.dtype)
        if 0 not in shape:
            index = offset + sum(np.indices(shape)[i] * s for i, s in enumerate(strides)) if shape else np.array(offset)
            storage[index] = values
        raw = np.ascontiguousarray(encode(storage, dtype))
        address = self.malloc(raw.nbytes)
        if written is None:
            assert acl.rt.memcpy(address, raw.nbytes, raw.ctypes.data, raw.nbytes, 1) == 0
        elif 0 not in shape:
            _upload_elements(address, raw, np.atleast_1d(index)[np.atleast_1d(written)])
        tensor = nn.aclCreateTensor(list(shape), dtype, list(strides), offset, fmt, [extent], address)
        assert tensor is not None, acl.get_recent_err_msg()
        result = DeviceTensor(tensor, address, extent, dtype, shape, strides, offset)
        self.tensors.append(result)
        return result

    def empty(self, shape, dtype: int, **layout) -> DeviceTensor:
        return self.tensor(np.zeros(shape), dtype, **layout)

    def read(self, t: DeviceTensor) -> np.ndarray:
        """The view's values (float64 for floating dtypes), read after synchronising the stream."""
        assert acl.rt.synchronize_stream(self.stream) == 0, acl.get_recent_err_msg()
        raw = np.zeros(t.storage_elements, dtype=nn.NUMPY_TYPES[t.dtype])
        assert acl.rt.memcpy(raw.ctypes.data, raw.nbytes, t.address, raw.nbytes, 2) == 0
        values = decode(raw, t.dtype)
        if 0 in t.shape:
            return np.zeros(t.shape, dtype=values.dtype)
        index = t.offset + sum(np.indices(t.shape)[i] * s for i, s in enumerate(t.strides)) if t.shape else np.array(t.offset)
        return values[index]

    def run(self, first_phase, second_phase, *args) -> int:
        """Both phases, with a workspace when one is asked for; returns the first non-zero status."""
        size, executor, ret = first_phase(*args)
        if ret != 0:
            return ret
        workspace = self.malloc(size) if size else None
        return second_phase(workspace, size, executor, self.stream)

    def release(self) -> None:
        """Everything this object made, and its reference on the device (not aclFinalize: other
        host threads may still be working)."""
        for t in self.tensors:
            nn.aclDestroyTensor(t.tensor)
        for address in self.buffers:
            acl.rt.free(address)
        acl.rt.destroy_stream(self.stream)
        acl.rt.reset_device(self.device_id)

    def close(self) -> None:
        self.release()
        acl.finalize()


def _upload_elements(address: int, raw: np.ndarray, elements: np.ndarray) -> None:
    """Copy the storage elements `elements` of `raw` to the device storage at `address`, a copy for each
    run of consecutive ones."""
    elements = np.unique(elements)
    breaks = np.flatnonzero(np.diff(elements) != 1) + 1
    for run in np.split(elements, breaks) if elements.size else ():
        first, nbytes = int(run[0]) * raw.itemsize, run.size * raw.itemsize
        assert acl.rt.memcpy(address + first, nbytes, raw.ctypes.data + first, nbytes, 1) == 0


@contextlib.contextmanager
def npu(soc: Optional[str] = None, device_id: int = 0) -> Iterator[Npu]:
    """An open device on `soc` (default: the configured chip), released at the end."""
    if soc is not None:
        emulator.configure(soc=soc)
    device = Npu(device_id)
    try:
        yield device
    finally:
        device.close()


def kernel_variants() -> list[dict]:
    """Settings under which every kernel must give the same bits: 1, 2 and 3 threads with the
    machine's widest vector instructions, then each narrower instruction set it runs."""
    from aclnn_api import _kernels
    isas = ["baseline", "avx2", "avx512", "avx512_bf16"]
    narrower = isas[:isas.index(_kernels.machine_vector_isa())]
    return ([dict(threads=t, vector_isa="auto") for t in (1, 2, 3)]
            + [dict(threads=2, vector_isa=isa) for isa in narrower])


def last_error() -> str:
    return acl.get_recent_err_msg() or ""


def assert_sample_prints(name: str, lines: Sequence[str]) -> None:
    """samples/<name>.py runs cleanly, prints exactly `lines`, and the sanitizer reports nothing."""
    done = run_sample(name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == list(lines)
    assert done.stderr == "", done.stderr


# A correct program reports nothing: run under the whole sanitizer, exiting 86 if it reported anything.
SANITIZED = {"NPUEMU_SANITIZE": "full", "NPUEMU_SANITIZE_EXITCODE": "86"}


def run_sample(name: str, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """Run samples/<name>.py in a fresh interpreter, as a user would, under the whole sanitizer;
    `env` adds to the environment (NPUEMU_SOC, say)."""
    return subprocess.run([sys.executable, os.path.join(REPO, "samples", name + ".py")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **SANITIZED, **(env or {})})


def assert_rejected(ret: int, code: int, *words: str) -> str:
    """`ret` is `code`, and this thread's message says what was expected and found and names each of
    `words` (the parameter, the values...). Returns the message."""
    message = last_error()
    assert ret == code, "expected status %d, got %d (message: %s)" % (code, ret, message)
    for word in ("expected", "found") + words:
        assert word in message, "%r missing from the message %r" % (word, message)
    return message


def run_program(source: str, directory: str, env: Optional[dict] = None) -> tuple[subprocess.CompletedProcess, str]:
    """Run `source` as <directory>/program.py in a fresh interpreter (so that its lines have a file
    name); `env` adds to the environment. Returns the finished process and the program's path."""
    path = os.path.join(str(directory), "program.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source)
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    return done, path


# ------------------------------------------------------------------------------------------------
# Running a declared sample

def dtype_of(arg: TensorInput, dtype: int) -> int:
    """The dtype of a declared tensor when `dtype` is the one under test."""
    return dtype if arg.dtype is None else arg.dtype


def rounded(arg: TensorInput, dtype: int) -> np.ndarray:
    """The values as the tensor's dtype holds them (float64 for floating dtypes)."""
    tensor_dtype = dtype_of(arg, dtype)
    if tensor_dtype in FLOATING:
        return representable(np.asarray(arg.values, dtype=np.float64), tensor_dtype)
    return np.asarray(arg.values)


class Call:
    """A declared sample's tensors and arrays made on `device`, ready for the first phase."""

    def __init__(self, device: Npu, sample: SampleInput, dtype: int):
        self.sample = sample
        self.tensors = {name: device.tensor(rounded(arg, dtype), dtype_of(arg, dtype), strides=arg.strides,
                                            offset=arg.offset, fmt=arg.format)
                        for name, arg in sample.tensors().items()}
        self.arrays = {name: nn.aclCreateIntArray(list(arg.values)) for name, arg in sample.args.items()
                       if isinstance(arg, IntArrayInput)}

    def args(self, replace: Optional[dict] = None) -> list:
        """The first phase's arguments; `replace` gives other values to some parameters by name."""
        made = {name: t.tensor for name, t in self.tensors.items()}
        args = call_args(self.sample, made, self.arrays)
        names = list(self.sample.args)
        for name, value in (replace or {}).items():
            args[names.index(name)] = value
        return args

    def close(self) -> None:
        for array in self.arrays.values():
            nn.aclDestroyIntArray(array)


def run_declared(device: Npu, declaration: OpDeclaration, sample: SampleInput, dtype: int,
                 repeat: int = 1) -> tuple:
    """(status, the output's values, the reference's) of both phases on `device` (run `repeat`
    times); the values are None if a call fails."""
    call = Call(device, sample, dtype)
    try:
        for _ in range(repeat):
            ret = device.run(declaration.first_phase, declaration.second_phase, *call.args())
            if ret != 0:
                return ret, None, None
        actual = device.read(call.tensors[declaration.output])
    finally:
        call.close()
    expected = declaration.reference(reference_args(sample, lambda arg: rounded(arg, dtype)))
    return ret, actual, expected
