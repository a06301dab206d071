"""Short rows: calls whose weight or target of shape [C] is broadcast to (N, C), as PyTorch users pass
a per-class weight, with N·C = 1e5 FLOAT elements on one thread, against PyTorch's same call with the
same broadcast, in interleaved bursts of the same run. The element-wise engine computes rows shorter
than 256 elements in flat blocks of whole rows (docs/performance.md, "Short rows"); this shows
where that stands against PyTorch for a few C. Not part of `make bench` (its sizes are square).

    .venv/bin/python bench/short_rows.py      # prints the table (a few seconds; needs PyTorch)
"""
from __future__ import annotations

import statistics
import time
import warnings
from typing import Callable

import numpy as np

import acl
import aclnn_api as nn
import emulator

ELEMENTS = 100_000
ROUNDS, BURST = 15, 20
CASES = (  # label, operator, reduction, C
    ("BCE-with-logits, none", "bce", 0, 5), ("BCE-with-logits, mean", "bce", 1, 5),
    ("BCE-with-logits, none", "bce", 0, 64), ("BCE-with-logits, none", "bce", 0, 316),
    ("KlDiv, none", "kl", 0, 5), ("KlDiv, mean", "kl", 1, 5),
)


class Device:
    """Device tensors of one stream, released at the end."""

    def __init__(self):
        acl.rt.set_device(0)
        self.stream, _ = acl.rt.create_stream()
        self.addresses, self.tensors = [], []

    def tensor(self, values: np.ndarray):
        values = np.ascontiguousarray(values, dtype=np.float32)
        size = max(values.nbytes, 4)
        address, _ = acl.rt.malloc(size, 0)
        acl.rt.memcpy(address, size, acl.util.numpy_to_ptr(values), values.nbytes, 1)
        tensor = nn.aclCreateTensor(list(values.shape), nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND,
                                    list(values.shape), address)
        self.addresses.append(address)
        self.tensors.append(tensor)
        return tensor

    def close(self):
        for tensor in self.tensors:
            nn.aclDestroyTensor(tensor)
        for address in self.addresses:
            acl.rt.free(address)
        acl.rt.destroy_stream(self.stream)
        acl.rt.reset_device(0)


def npuemu_call(device: Device, op: str, reduction: int, x, t, w) -> Callable:
    out = device.tensor(np.zeros(() if reduction else x.shape))
    if op == "bce":
        args = (device.tensor(x), device.tensor(t), device.tensor(w), None, reduction, out)
        first, second = nn.aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize, nn.aclnnBinaryCrossEntropyWithLogits
    else:
        args = (device.tensor(x), device.tensor(w), reduction, False, out)
        first, second = nn.aclnnKlDivGetWorkspaceSize, nn.aclnnKlDiv
    size, executor, ret = first(*args)
    assert ret == 0, acl.get_recent_err_msg()
    nn.aclDestroyAclOpExecutor(executor)  # this one only sized the workspace
    workspace = acl.rt.malloc(size, 0)[0] if size else None
    if workspace is not None:
        device.addresses.append(workspace)

    def call():
        size, executor, ret = first(*args)
        assert ret == 0 and second(workspace, size, executor, device.stream) == 0, acl.get_recent_err_msg()
        acl.rt.synchronize_stream(device.stream)
    return call


def torch_call(op: str, reduction: int, x, t, w) -> Callable:
    import torch
    x, t, w = (torch.from_numpy(np.asarray(a, np.float32)) for a in (x, t, w))
    name = ("none", "mean")[reduction]
    if op == "bce":
        return lambda: torch.nn.functional.binary_cross_entropy_with_logits(x, t, w, reduction=name)
    return lambda: torch.nn.functional.kl_div(x, w, reduction=name)


def burst_us(call: Callable) -> float:
    start = time.perf_counter()
    for _ in range(BURST):
        call()
    return (time.perf_counter() - start) / BURST * 1e6


def main() -> None:
    import torch
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "reduction: 'mean' divides")  # kl_div's notice of a future change
    emulator.configure(threads=1)
    acl.init()
    device = Device()
    rng = np.random.default_rng(0)
    print("| call | C | npuemu µs | PyTorch µs | speedup |\n|---|---:|---:|---:|---:|")
    for label, op, reduction, classes in CASES:
        shape = (ELEMENTS // classes, classes)
        x = rng.normal(size=shape) if op == "bce" else -rng.uniform(0.5, 3, size=shape)
        t, w = rng.uniform(0, 1, size=shape), rng.uniform(0.1, 1, size=classes)
        ours, theirs = npuemu_call(device, op, reduction, x, t, w), torch_call(op, reduction, x, t, w)
        ours(), theirs()
        times = {"npuemu": [], "torch": []}
        for _ in range(ROUNDS):  # interleaved: a spell of load from other users hits both alike
            times["npuemu"].append(burst_us(ours))
            times["torch"].append(burst_us(theirs))
        a, b = statistics.median(times["npuemu"]), statistics.median(times["torch"])
        print("| %s | %d | %.0f | %.0f | %.2f× |" % (label, classes, a, b, b / a))
    device.close()
    acl.finalize()


if __name__ == "__main__":
    main()
