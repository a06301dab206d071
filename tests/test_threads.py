"""Host threads: NPUEMU_THREADS, concurrent launches of every declared operator from several host
threads, the run-time choice of vector instructions."""
import os
import subprocess
import sys
import threading

import numpy as np

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
