"""Peak memory of one large case, in a fresh process: `python bench/memory.py OP SIZE_INDEX DTYPE`.

The child imports only npuemu and NumPy (no PyTorch), streams the inputs to the device in pieces of
data.CHUNK_BYTES (no full host copy), runs the two-phase call once and prints one JSON line with
its RSS high-water mark (VmHWM) next to what the case needs: inputs + output + the declared workspace.
Device memory is host memory here, so a peak close to that sum plus a fixed allowance for the
interpreter means the emulator adds no hidden copies of the data.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

ALLOWANCE = 64 << 20          # interpreter, NumPy, the extension, staging pieces
THREADS = 2


def rss_peak() -> int:
    """The resident-set high-water mark of this process's address space, in bytes: VmHWM, not
    getrusage's ru_maxrss, which survives exec and so would count the parent's pages at fork."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def measure(op_name: str, size_index: int, dtype: int) -> dict:
    import emulator
    from cases import BY_NAME
    from data import BenchDevice

    op = BY_NAME[op_name]
    size = op.sizes[size_index]
    emulator.configure(threads=THREADS)
    device = BenchDevice()
    try:
        baseline = rss_peak()
        case = op.build(size, dtype)
        tensors = {name: device.upload(source.shape, source.dtype, source.chunks()).tensor
                   for name, source in case.inputs.items()}
        name, shape = case.output
        tensors[name] = device.output(shape, dtype).tensor
        attrs = {k: device.int_array(v) if isinstance(v, list) else v for k, v in case.attrs.items()}
        workspace_size, executor, ret = op.first_phase()(*op.npuemu_args(tensors, attrs))
        if ret != 0:
            import acl
            return {"error": "first phase returned %d: %s" % (ret, acl.get_recent_err_msg())}
        workspace = device.malloc(workspace_size) if workspace_size else None
        ret = op.second_phase()(workspace, workspace_size, executor, device.stream)
        if ret == 0:
            import acl
            ret = acl.rt.synchronize_stream(device.stream)
        if ret != 0:
            return {"error": "second phase returned %d" % ret}
        return {"peak": rss_peak(), "baseline": baseline, "inputs": case.input_bytes, "output": case.output_bytes,
                "workspace": workspace_size, "allowance": ALLOWANCE}
    finally:
        device.close()


def run_child(op_name: str, size_index: int, dtype: int, timeout: float = 600) -> dict:
    """measure() in a fresh interpreter; its JSON result (or {'error': ...})."""
    command = [sys.executable, os.path.abspath(__file__), op_name, str(size_index), str(dtype)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % timeout}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": "exit %d: %s" % (done.returncode, (done.stderr or done.stdout).strip()[-300:])}
    return json.loads(lines[-1])


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
