"""Host threads: NPUEMU_THREADS, concurrent launches of every declared operator from several host
threads, the run-time choice of vector instructions."""
import os
import resource
import subprocess
import sys
import threading

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import _kernels
from aclnn_api.declaration import all_declarations
from support import Npu, assert_close, run_declared


def test_threads_setting_comes_from_the_environment(tmp_path):
    code = "import emulator; print(emulator.settings().threads)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NPUEMU_THREADS": "3"}, timeout=60)
    assert done.stdout.strip() == "3", done.stderr


def test_default_threads_are_the_cores_the_process_may_run_on(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "NPUEMU_THREADS"}
    code = "import emulator; print(emulator.settings().threads)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=60)
    assert done.stdout.strip() == str(len(os.sched_getaffinity(0))), done.stderr
    one_core = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " + code
    done = subprocess.run([sys.executable, "-c", one_core], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=60)
    assert done.stdout.strip() == "1", done.stderr


def test_launches_from_several_host_threads_at_once_are_all_correct_and_share_one_pool():
    """Each host thread runs its own stream and a declared operator (every one, each on its largest
    sample, again and again); kernels run one at a time on the pool of NPUEMU_THREADS workers, so
    concurrent launches neither oversubscribe nor interfere."""
    emulator.configure(threads=2)
    declarations = all_declarations()
    samples = [max(d.sample_inputs(np.random.default_rng(7)), key=lambda s: np.size(s.args[d.output].values))
               for d in declarations]
    results, errors = [None] * len(declarations), []

    def worker(index):
        try:
            device = Npu()  # its own reference on device 0 and its own stream, on this host thread
            results[index] = run_declared(device, declarations[index], samples[index], nn.ACL_FLOAT, repeat=10)
            device.release()
        except Exception as error:  # surfaced below, with the thread's failure
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(declarations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for declaration, (ret, actual, expected) in zip(declarations, results):
        assert ret == 0, declaration.name
        assert_close(actual, expected, nn.ACL_FLOAT)
    assert _kernels.threads() == 2


def test_the_vector_instruction_set_is_chosen_at_run_time_from_the_cpu():
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        flags = set(next(line for line in handle if line.startswith("flags")).split())
    avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
    expected = ("avx512_bf16" if avx512 and "avx512_bf16" in flags else "avx512" if avx512
                else "avx2" if {"avx2", "f16c", "fma"} <= flags else "baseline")
    assert _kernels.build_info().endswith("vector ISA " + expected)


SMALL_STACK = """
import sys
import threading
sys.path.insert(0, {tests!r})
import numpy as np
import aclnn_api as nn
import emulator
from aclnn_api.declaration import all_declarations
from support import Npu, assert_close, run_declared

def run_all(results):
    device = Npu()
    for declaration in all_declarations():
        for dtype in (nn.ACL_FLOAT, nn.ACL_DOUBLE):
            if not declaration.runs(emulator.settings().profile.family, dtype):
                continue
            for sample in declaration.sample_inputs(np.random.default_rng(7)):
                ret, actual, expected = run_declared(device, declaration, sample, dtype)
                assert ret == 0, (declaration.name, ret)
                assert_close(actual, expected, dtype)
                results.append(actual)
    device.release()

in_main, in_thread = [], []
run_all(in_main)
threading.stack_size({stack})
thread = threading.Thread(target=run_all, args=(in_thread,))
thread.start()
thread.join()
assert len(in_thread) == len(in_main) > 100, (len(in_thread), len(in_main))
for a, b in zip(in_main, in_thread):
    assert a.tobytes() == b.tobytes()
print("bit-identical", len(in_thread))
"""


def test_kernels_run_on_a_host_thread_with_a_small_stack(tmp_path):
    """A kernel runs on the host thread that synchronises, whose stack may be small (threading.stack_size,
    ulimit -s, a C++ program's threads). BCE-with-logits' block sums put 80 KiB in one frame, KlDiv's
    48 KiB, CtcLossBackward's DOUBLE rows 16 KiB: a 64 KiB thread died of SIGSEGV. Their buffers are
    now each thread's scratch: every declared operator, on every sample, in FLOAT and DOUBLE, gives
    on that thread the bits it gives on the main thread."""
    tests = os.path.dirname(os.path.abspath(__file__))
    program = SMALL_STACK.format(tests=tests, stack=64 << 10)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "NPUEMU_THREADS": "2"}, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("bit-identical "), done.stdout


THREAD_LIMIT = """
import hashlib
import os
import resource
import sys
sys.path.insert(0, {tests!r})
import numpy as np
import aclnn_api as nn
from support import Npu

device = Npu()
x = device.tensor(np.linspace(-30.0, 30.0, 1 << 20), nn.ACL_FLOAT)
out = device.empty(x.shape, nn.ACL_FLOAT)
if {limit}:
    # thread stacks are RLIMIT_STACK's 256 MiB (set before the start): none fits in 128 MiB more
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + (128 << 20), resource.RLIM_INFINITY))
for _ in range(3):
    ret = device.run(nn.aclnnLogSigmoidGetWorkspaceSize, nn.aclnnLogSigmoid, x.tensor, out.tensor)
    assert ret == 0, ret
    values = device.read(out)
device.close()
print(hashlib.sha256(values.tobytes()).hexdigest())
"""


def _run_thread_limit(tmp_path, threads: int, limit: bool) -> subprocess.CompletedProcess:
    tests = os.path.dirname(os.path.abspath(__file__))
    big_stacks = lambda: resource.setrlimit(resource.RLIMIT_STACK, (256 << 20, resource.RLIM_INFINITY))
    return subprocess.run([sys.executable, "-c", THREAD_LIMIT.format(tests=tests, limit=limit)],
                          capture_output=True, text=True, cwd=tmp_path, preexec_fn=big_stacks, timeout=120,
                          env={**os.environ, "NPUEMU_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1"})


@pytest.mark.parametrize("threads", [1, 64])
def test_kernels_run_on_the_threads_the_system_lets_the_pool_start(tmp_path, threads):
    """A pool that could not start its workers (RLIMIT_NPROC, or here no address space left for their
    stacks) made every kernel fail with 507000, and NPUEMU_THREADS=1 first started a worker per core.
    Now the pool starts only the workers asked for, as many as the system lets it: the kernels give
    the same bits on the caller alone, and a note on stderr, once, says so and names the limit."""
    reference = _run_thread_limit(tmp_path, 1, limit=False)
    assert reference.returncode == 0, reference.stderr
    done = _run_thread_limit(tmp_path, threads, limit=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == reference.stdout
    if threads == 1:
        assert done.stderr == ""
    else:
        assert done.stderr.count("npuemu: note:") == 1, done.stderr
        assert done.stderr.startswith(
            "npuemu: note: NPUEMU_THREADS=64: the system would not start more than 1 kernel thread(s) ("), done.stderr
        assert "ulimit -v " in done.stderr and "kernels run on 1, with the same results" in done.stderr, done.stderr
