"""Benchmark data: tensors generated block by block, and an emulated device to hold them.

A `Source` describes one tensor (shape, aclDataType) and makes its values one block of rows at a
time from a per-block seed (rows = the shape flattened to (-1, last dim)). Any block can be made
alone, so the same values can be materialised whole (the timing run, which hands them to PyTorch
too) or streamed to the device in small chunks (the peak-memory run, whose host side must stay
small). Values are encoded in the device representation with the test suite's codecs.
"""
from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

import acl
import aclnn_api as nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from support import TOLERANCE, DeviceTensor, Npu, decode, encode, representable  # noqa: E402,F401

SEED = 20260822
BLOCK_ELEMENTS = 1 << 16      # automatic block size: about this many elements share one seed
CHUNK_BYTES = 256 << 10       # encoded bytes per piece streamed to the device (keeps host staging small)
MATERIALIZE_BYTES = 4 << 20   # the same when a whole host copy is made anyway (fewer, larger pieces)
FLOAT_DTYPES = (nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16)
DTYPE_LABEL = {nn.ACL_FLOAT: "float32", nn.ACL_FLOAT16: "float16", nn.ACL_BF16: "bfloat16"}

# make_block(block index, first row, row count) -> values of those rows, shape (row count, row length)
BlockMaker = Callable[[int, int, int], np.ndarray]


@dataclass
class Source:
    shape: tuple
    dtype: int
    make_block: BlockMaker
    block_rows: int = 0          # rows per block (0: about BLOCK_ELEMENTS elements)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def row_length(self) -> int:
        return self.shape[-1] if self.shape else 1

    @property
    def rows(self) -> int:
        return self.numel // self.row_length if self.row_length else 0

    @property
    def itemsize(self) -> int:
        return nn.aclDataTypeSize(self.dtype)

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    def rows_per_block(self) -> int:
        return self.block_rows or max(1, BLOCK_ELEMENTS // max(self.row_length, 1))

    def blocks(self, first: int = 0, stop: Optional[int] = None) -> Iterator[np.ndarray]:
        """Values (not yet encoded) of blocks first..stop-1, one block at a time."""
        step = self.rows_per_block()
        stop = -(-self.rows // step) if stop is None else stop
        for block in range(first, stop):
            start = block * step
            count = min(step, self.rows - start)
            values = np.asarray(self.make_block(block, start, count))
            if values.shape != (count, self.row_length):
                raise ValueError("block %d: expected %s values, made %s" % (block, (count, self.row_length), values.shape))
            yield values

    def chunks(self, max_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, np.ndarray]]:
        """(byte offset, encoded bytes) pieces of whole blocks, each about max_bytes or less."""
        step = self.rows_per_block()
        block_bytes = step * self.row_length * self.itemsize
        per_chunk = max(1, max_bytes // max(block_bytes, 1))
        total = -(-self.rows // step)
        for first in range(0, total, per_chunk):
            values = np.concatenate(list(self.blocks(first, min(first + per_chunk, total))))
            yield first * block_bytes, np.ascontiguousarray(encode(values.reshape(-1), self.dtype))

    def materialize(self) -> np.ndarray:
        """The whole tensor in its device representation (bf16 as uint16 bit patterns)."""
        raw = np.empty(self.numel, dtype=nn.NUMPY_TYPES[self.dtype])
        for offset, piece in self.chunks(MATERIALIZE_BYTES):
            start = offset // self.itemsize
            raw[start:start + piece.size] = piece
        return raw.reshape(self.shape)


def rng(tag: str, block: int) -> np.random.Generator:
    """The generator of one block of one tensor: the same values whichever way they are made."""
    return np.random.default_rng([SEED, zlib.crc32(tag.encode()), block])


def random_source(tag: str, shape: Sequence[int], dtype: int,
                  draw: Callable[[np.random.Generator, tuple], np.ndarray], block_rows: int = 0) -> Source:
    """A tensor of values draw(generator, (rows, row length)), seeded per block by `tag`."""
    shape = tuple(shape)
    row_length = shape[-1] if shape else 1
    return Source(shape, dtype, lambda block, start, count: draw(rng(tag, block), (count, row_length)), block_rows)


def normal(scale: float = 1.0) -> Callable:
    return lambda g, shape: g.standard_normal(shape) * scale


def uniform(low: float, high: float) -> Callable:
    return lambda g, shape: g.uniform(low, high, shape)


def bernoulli(p: float) -> Callable:
    return lambda g, shape: g.random(shape) < p


def softmax_rows(g: np.random.Generator, shape: tuple) -> np.ndarray:
    logits = g.standard_normal(shape)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class BenchDevice(Npu):
    """The test suite's device (one device, one stream, released in close()) plus contiguous
    uploads in chunks, uninitialised outputs, whole-tensor reads and host int arrays."""

    def __init__(self, device_id: int = 0):
        super().__init__(device_id)
        self.arrays: list = []

    def _tensor(self, shape: tuple, dtype: int, address: int) -> DeviceTensor:
        strides = nn.tensor.contiguous_strides(shape)
        tensor = nn.aclCreateTensor(list(shape), dtype, list(strides), 0, nn.ACL_FORMAT_ND, list(shape), address)
        assert tensor is not None, acl.get_recent_err_msg()
        numel = int(np.prod(shape, dtype=np.int64))
        result = DeviceTensor(tensor, address, numel, dtype, tuple(shape), strides, 0)
        self.tensors.append(result)
        return result

    def upload(self, shape: tuple, dtype: int, pieces: Iterator[tuple[int, np.ndarray]]) -> DeviceTensor:
        """A contiguous device tensor filled from (byte offset, encoded bytes) pieces."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * nn.aclDataTypeSize(dtype)
        address = self.malloc(nbytes)
        for offset, piece in pieces:
            piece = np.ascontiguousarray(piece)
            ret = acl.rt.memcpy(address + offset, nbytes - offset, piece.ctypes.data, piece.nbytes,
                                acl.ACL_MEMCPY_HOST_TO_DEVICE)
            assert ret == 0, acl.get_recent_err_msg()
        return self._tensor(tuple(shape), dtype, address)

    def output(self, shape: tuple, dtype: int) -> DeviceTensor:
        """A device tensor for the operator to write (its pages stay uncommitted until then)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * nn.aclDataTypeSize(dtype)
        return self._tensor(tuple(shape), dtype, self.malloc(nbytes))

    def read_raw(self, t: DeviceTensor) -> np.ndarray:
        """The tensor's device representation, after synchronising the stream."""
        assert acl.rt.synchronize_stream(self.stream) == 0, acl.get_recent_err_msg()
        raw = np.empty(t.shape, dtype=nn.NUMPY_TYPES[t.dtype])
        if raw.nbytes:
            ret = acl.rt.memcpy(raw.ctypes.data, raw.nbytes, t.address, raw.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
            assert ret == 0, acl.get_recent_err_msg()
        return raw

    def int_array(self, values: Sequence[int]):
        array = nn.aclCreateIntArray([int(v) for v in values])
        assert array is not None, acl.get_recent_err_msg()
        self.arrays.append(array)
        return array

    def close(self) -> None:
        for array in self.arrays:
            nn.aclDestroyIntArray(array)
        super().close()
