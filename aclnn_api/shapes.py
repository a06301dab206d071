"""The one broadcasting routine of the framework: right-aligned NumPy rules, where a pair of dims is
compatible only if equal or one of them is 1 (so 0 with 1 gives 0, 0 with 3 is an error)."""
from __future__ import annotations

from typing import Optional, Sequence


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> Optional[tuple]:
    """The broadcast shape of a and b, or None if they do not broadcast."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    result = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            result.append(x)
        elif x == 1:
            result.append(y)
        else:
            return None
    return tuple(result)


def broadcast_strides(shape: Sequence[int], strides: Sequence[int], target: Sequence[int]) -> tuple:
    """Strides that read a tensor of `shape`/`strides` as if it had the (broadcast) `target` shape:
    0 along new leading dims and along dims of size 1 that the target widens."""
    lead = len(target) - len(shape)
    result = [0] * lead
    for dim, stride, wanted in zip(shape, strides, target[lead:]):
        result.append(0 if dim == 1 and wanted != 1 else stride)
    return tuple(result)


def numel(shape: Sequence[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
