"""Host threads: NPUEMU_THREADS, concurrent launches of every declared operator from several host
threads, the run-time choice of vector instructions, and the calls of one thread while another's kernels
run (the runtime lock released while a kernel computes)."""
import os
import resource
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api import _kernels
from emulator import leaks
from aclnn_api.declaration import all_declarations
from support import Npu, assert_close, last_error, run_declared


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


# -- one thread's kernels and another thread's calls -------------------------------------------------------


class QueuedKernels:
    """`count` LogSigmoid kernels over `n` floats queued on a new stream of device 0 (set by the caller), and
    what they run on: `x`, `y` (device addresses), `target` (the runtime's stream)."""

    def __init__(self, count: int, n: int = 1 << 22):
        from emulator.runtime import stream_of
        self.stream, ret = acl.rt.create_stream()
        assert ret == 0
        self.target = stream_of(self.stream)
        self.x, self.y = acl.rt.malloc(n * 4, 0)[0], acl.rt.malloc(n * 4, 0)[0]
        assert acl.rt.memset(self.x, n * 4, 0, n * 4) == 0
        self.tensors = [nn.aclCreateTensor([n], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, address)
                        for address in (self.x, self.y)]
        for _ in range(count):
            size, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(*self.tensors)
            assert ret == 0 and nn.aclnnLogSigmoid(None, size, executor, self.stream) == 0
        self.count, self.results = count, []

    def synchronise_in_a_thread(self) -> threading.Thread:
        """A host thread that synchronises the stream (results: its status and seconds), returned once it is
        inside a kernel (whose computation runs with the runtime lock released)."""
        context, _ = acl.rt.get_context()

        def synchronise():
            acl.rt.set_context(context)
            start = time.perf_counter()
            self.results.append((acl.rt.synchronize_stream(self.stream), time.perf_counter() - start))
        thread = threading.Thread(target=synchronise)
        thread.start()
        inside = time.perf_counter() + 30
        while self.target.busy is None and thread.is_alive() and time.perf_counter() < inside:
            time.sleep(0.0005)
        return thread

    def release(self) -> None:
        for tensor in self.tensors:
            nn.aclDestroyTensor(tensor)
        for address in (self.x, self.y):
            acl.rt.free(address)
        acl.rt.destroy_stream(self.stream)


def test_a_long_synchronisation_in_one_thread_holds_up_no_call_of_another():
    """Thread A synchronises a stream of 300 queued kernels; meanwhile this thread's calls return at once,
    with their codes: on its own idle stream a timed synchronisation, queries, an event's; of the device,
    whose other stream is busy, 507046 on time; an allocation. Each waited for A's whole synchronisation,
    the kernels having run with the runtime lock held (aclrtSynchronizeDeviceWithTimeout(10) then
    returned 0 after 0.8 s)."""
    emulator.configure(threads=1)
    assert acl.rt.set_device(0) == 0
    idle, _ = acl.rt.create_stream()
    event, _ = acl.rt.create_event()
    assert acl.rt.record_event(event, idle) == 0 and acl.rt.synchronize_stream(idle) == 0
    work = QueuedKernels(300)
    calls = {"aclrtSynchronizeStreamWithTimeout(idle, 10)": (lambda: acl.rt.synchronize_stream_with_timeout(idle, 10),
                                                            0),
             "aclrtStreamQuery(idle)": (lambda: acl.rt.stream_query(idle), (acl.ACL_STREAM_STATUS_COMPLETE, 0)),
             "aclrtSynchronizeEventWithTimeout(event, 10)": (lambda: acl.rt.synchronize_event_with_timeout(event, 10),
                                                             0),
             "aclrtQueryEventStatus(event)": (lambda: acl.rt.query_event_status(event),
                                              (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)),
             "aclrtSynchronizeDeviceWithTimeout(10)": (lambda: acl.rt.synchronize_device_with_timeout(10),
                                                       acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT),
             "aclrtStreamQuery(busy)": (lambda: acl.rt.stream_query(work.stream), (acl.ACL_STREAM_STATUS_NOT_READY, 0))}
    thread = work.synchronise_in_a_thread()
    took = {}
    for name, (call, expected) in calls.items():
        start = time.perf_counter()
        assert call() == expected, (name, last_error())
        took[name] = time.perf_counter() - start
    start = time.perf_counter()
    address, ret = acl.rt.malloc(64, 0)
    took["aclrtMalloc(64)"] = time.perf_counter() - start
    still_synchronising = thread.is_alive()
    thread.join()
    assert ret == 0 and acl.rt.free(address) == 0
    [(code, synchronisation)] = work.results
    assert code == 0, last_error()
    assert still_synchronising, "the calls waited for the other thread's synchronisation (%.3f s): %s" \
        % (synchronisation, took)
    slow = {name: seconds for name, seconds in took.items() if seconds > synchronisation / 10}
    assert not slow, "calls took over a tenth of the other thread's synchronisation (%.3f s): %s" % (synchronisation,
                                                                                                   slow)
    work.release()
    acl.rt.destroy_event(event)
    acl.rt.destroy_stream(idle)
    assert acl.rt.reset_device(0) == 0


class HeldUp:
    """Called on `work`: that work, run only once the test sets `go_on` (or after 30 s); `running` is set as
    it starts, and `locked` gets whether the runtime lock was held then."""

    def __init__(self):
        self.running, self.go_on, self.locked = threading.Event(), threading.Event(), []

    def __call__(self, work):
        from emulator.state import PROCESS

        def run(*args):
            self.locked.append(PROCESS.lock._is_owned())
            self.running.set()
            self.go_on.wait(30)
            work(*args)
        return run


def synchronising_thread(stream) -> tuple[threading.Thread, list]:
    """A started host thread that synchronises `stream` in this thread's context, and the list that gets
    its status."""
    context, _ = acl.rt.get_context()
    results: list = []

    def synchronise():
        acl.rt.set_context(context)
        results.append(acl.rt.synchronize_stream(stream))
    thread = threading.Thread(target=synchronise)
    thread.start()
    return thread, results


@pytest.mark.parametrize("queued", ["aclrtMemcpyAsync", "aclrtMemsetAsync", "aclnnLogSigmoid"])
def test_the_last_queued_task_runs_with_the_runtime_lock_released_and_its_stream_not_ready(queued, monkeypatch):
    """A stream's last queued task, a copy's or memset's bytes as a kernel's computation, runs with the
    runtime lock released: while thread A's synchronisation runs it, this thread's calls return with their
    codes (a query of A's stream NOT_READY, the device's timed synchronisation 507046, an allocation), and
    the bytes arrive. A copy of a GB used to hold up every other thread's call for its whole duration, and
    a query of a stream whose last kernel was computing answered COMPLETE (the task had left the queue)."""
    from aclnn_api import operator
    from emulator import memory
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    n = 1 << 20
    (target, _), (source, _) = acl.rt.malloc(n, 0), acl.rt.malloc(n, 0)
    assert acl.rt.memset(source, n, 0, n) == 0
    x = nn.aclCreateTensor([n // 4], nn.ACL_FLOAT, [1], 0, nn.ACL_FORMAT_ND, [n // 4], source)
    out = nn.aclCreateTensor([n // 4], nn.ACL_FLOAT, [1], 0, nn.ACL_FORMAT_ND, [n // 4], target)
    held_up = HeldUp()  # the task runs once this thread's calls are done
    if queued == "aclnnLogSigmoid":
        compute = operator.interface.compute
        monkeypatch.setattr(operator.interface, "compute",
                            lambda kernel, args, touched: compute(held_up(kernel), args, touched))
        size, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(x, out)
        assert ret == 0 and nn.aclnnLogSigmoid(None, size, executor, stream) == 0
    else:
        monkeypatch.setattr(memory.Copy, "move", held_up(memory.Copy.move))
        monkeypatch.setattr(memory.Fill, "set_at", held_up(memory.Fill.set_at))
        if queued == "aclrtMemcpyAsync":
            assert acl.rt.memcpy_async(target, n, source, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream) == 0
        else:
            assert acl.rt.memset_async(target, n, 0, n, stream) == 0
    thread, results = synchronising_thread(stream)
    try:
        assert held_up.running.wait(30), "the queued work never ran"
        assert acl.rt.stream_query(stream) == (acl.ACL_STREAM_STATUS_NOT_READY, 0), last_error()
        assert acl.rt.synchronize_device_with_timeout(10) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, last_error()
        address, ret = acl.rt.malloc(64, 0)
        assert ret == 0 and acl.rt.free(address) == 0
        still_running = not held_up.go_on.is_set()
    finally:
        held_up.go_on.set()
        thread.join()
    assert still_running and held_up.locked == [False], "the task ran holding the runtime lock"
    assert results == [0], last_error()
    assert acl.rt.stream_query(stream) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
    host = np.ones(n // 4, np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), n, target, n, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    expected = np.float32(-np.log(2.0)) if queued == "aclnnLogSigmoid" else 0  # log sigmoid(0) = -log 2
    assert (host == expected).all()
    for tensor in (x, out):
        nn.aclDestroyTensor(tensor)
    assert acl.rt.free(target) == 0 and acl.rt.free(source) == 0
    assert acl.rt.destroy_stream(stream) == 0 and acl.rt.reset_device(0) == 0


@pytest.mark.sanitizer_reports("host memory in flight")
def test_pinned_memory_freed_while_a_queued_copy_moves_into_it_stays_mapped_until_the_copy_ends(monkeypatch):
    """Thread A's synchronisation moves a queued download into aclrtMallocHost memory, the runtime lock
    released; this thread frees that memory meanwhile (the program's error, reported): no crash, the
    copy's writes land in memory still mapped, which is unmapped once the copy ends."""
    from emulator import memory
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    n = 1 << 20
    device, _ = acl.rt.malloc(n, 0)
    assert acl.rt.memset(device, n, 5, n) == 0
    pinned, ret = acl.rt.malloc_host(n)
    assert ret == 0
    held_up = HeldUp()
    monkeypatch.setattr(memory.Copy, "move", held_up(memory.Copy.move))
    assert acl.rt.memcpy_async(pinned, n, device, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream) == 0
    thread, results = synchronising_thread(stream)
    try:
        assert held_up.running.wait(30), "the copy never ran"
        assert acl.rt.free_host(pinned) == 0
        mapped_while_moving = memory.host_range_readable(pinned, n)
    finally:
        held_up.go_on.set()
        thread.join()
    assert results == [0], last_error()
    assert mapped_while_moving, "unmapped while the copy moves into it"
    assert not memory.host_range_readable(pinned, n), "still mapped after the copy"
    assert acl.rt.free(device) == 0
    assert acl.rt.destroy_stream(stream) == 0 and acl.rt.reset_device(0) == 0


def test_kernels_of_two_threads_at_once_give_the_bits_of_one_thread():
    """Two host threads synchronise their own streams of kernels at once, their computations overlapping
    (the runtime lock released): each output is what the kernel gives alone."""
    emulator.configure(threads=2)
    device = Npu()
    x = device.tensor(np.linspace(-30.0, 30.0, 1 << 20), nn.ACL_FLOAT)
    alone = device.empty(x.shape, nn.ACL_FLOAT)
    assert device.run(nn.aclnnLogSigmoidGetWorkspaceSize, nn.aclnnLogSigmoid, x.tensor, alone.tensor) == 0
    expected = device.read(alone).tobytes()
    context, _ = acl.rt.get_context()
    outputs, codes = [device.empty(x.shape, nn.ACL_FLOAT) for _ in range(2)], []

    def run(out):
        acl.rt.set_context(context)
        stream, _ = acl.rt.create_stream()
        for _ in range(20):
            size, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(x.tensor, out.tensor)
            assert ret == 0 and nn.aclnnLogSigmoid(None, size, executor, stream) == 0
        codes.append(acl.rt.synchronize_stream(stream))
        acl.rt.destroy_stream(stream)
    threads = [threading.Thread(target=run, args=(out,)) for out in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [0, 0]
    assert [device.read(out).tobytes() for out in outputs] == [expected, expected]
    device.close()


def test_memory_freed_while_a_kernel_uses_it_stays_mapped_until_the_kernel_ends():
    """emulator.memory: a backing freed while a kernel's computation touches it is unmapped when the
    computation ends, not at once (the kernel, running without the runtime lock, would write to memory
    no longer mapped: a crash)."""
    from emulator import memory
    from emulator.state import PROCESS
    assert acl.rt.set_device(0) == 0
    address, _ = acl.rt.malloc(1 << 16, 0)
    backing = PROCESS.space.heaps[0].live[address].backing
    with PROCESS.lock:
        held = [(backing + 4096, 64)]
        memory.in_use(held)
        assert acl.rt.free(address) == 0
        assert memory.host_range_readable(backing, 1 << 16), "unmapped while the kernel touches it"
        memory.no_longer_in_use(held)
        assert not memory.host_range_readable(backing, 1 << 16), "still mapped after the kernel"
    assert acl.rt.reset_device(0) == 0


def test_a_kernel_computes_with_the_runtime_lock_released_and_gives_its_memory_up_after():
    """emulator.stream.compute_unlocked: the kernel's native compute runs with the runtime lock released
    (other threads' calls go on meanwhile), the lock is held again afterwards, and the memory it touched
    is no longer held in use."""
    from emulator import memory, stream as stream_module
    from emulator.state import PROCESS
    assert acl.rt.set_device(0) == 0
    work = QueuedKernels(2, n=16)
    kernels = []

    def profile(frame, event, arg):  # the native calls compute_unlocked makes: the kernel is one of them
        if event == "c_call" and frame.f_code is stream_module.compute_unlocked.__code__ and \
                arg.__name__ == "log_sigmoid":
            kernels.append(PROCESS.lock._is_owned())

    sys.setprofile(profile)
    try:
        ret = acl.rt.synchronize_stream(work.stream)
    finally:
        sys.setprofile(None)
        work.release()
    assert ret == 0 and acl.rt.reset_device(0) == 0
    assert kernels == [False, False], "a kernel computed holding the runtime lock"
    assert memory._in_use == []


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
@pytest.mark.parametrize("release", ["aclrtFree", "aclrtResetDeviceForce", "aclrtDestroyStreamForce"])
def test_releasing_what_another_threads_kernel_uses_while_it_runs_is_no_crash(release):
    """Thread A synchronises a stream of kernels; this thread frees their memory, resets the device or
    destroys the stream while one of them computes, round after round: no crash, and each call and the
    synchronisation return a status (a freed tensor's later kernels fault, as on the card)."""
    emulator.configure(threads=1)
    for _ in range(4):
        assert acl.rt.set_device(0) == 0
        work = QueuedKernels(20)
        thread = work.synchronise_in_a_thread()
        if release == "aclrtFree":
            assert acl.rt.free(work.x) == 0 and acl.rt.free(work.y) == 0
            work.x = work.y = None
        elif release == "aclrtResetDeviceForce":
            assert acl.rt.reset_device_force(0) == 0
        else:
            assert acl.rt.destroy_stream_force(work.stream) == 0
        thread.join()
        [(code, _)] = work.results
        assert code in (0, acl.ACL_ERROR_RT_AICORE_EXCEPTION), last_error()
        if release != "aclrtResetDeviceForce":
            for tensor in work.tensors:
                nn.aclDestroyTensor(tensor)
            for address in (work.x, work.y):
                if address is not None:
                    acl.rt.free(address)
            if release != "aclrtDestroyStreamForce":
                acl.rt.destroy_stream(work.stream)
            assert acl.rt.reset_device(0) == 0
        else:
            for tensor in work.tensors:
                nn.aclDestroyTensor(tensor)
            leaks.forget()  # the stream and memory the forced reset released: released on purpose


CTRL_C_WHILE_TAKING_THE_LOCK_BACK = """
import os, signal, threading, time
import acl, aclnn_api as nn
from aclnn_api import operator
from emulator import memory
from emulator.state import PROCESS
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell may start us with SIGINT ignored
assert acl.init() == 0 and acl.rt.set_device(0) == 0
stream, _ = acl.rt.create_stream()
N = 1024
def tensor():
    address, ret = acl.rt.malloc(N * 4, 0)
    assert ret == 0 and acl.rt.memset(address, N * 4, 0, N * 4) == 0
    return address, nn.aclCreateTensor([N], nn.ACL_FLOAT, [1], 0, nn.ACL_FORMAT_ND, [N], address)
x_address, x = tensor()
_, out = tensor()
_, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(x, out)
assert ret == 0

computing, lock_taken = threading.Event(), threading.Event()
real_compute = operator.interface.compute
def compute(kernel, args, touched):  # the kernel computes only once the other thread holds the lock
    def held_up_kernel(*args):
        computing.set()
        lock_taken.wait(30)
        kernel(*args)
    real_compute(held_up_kernel, args, touched)
operator.interface.compute = compute

def another_threads_call():  # holds the runtime lock while the kernel ends, then Ctrl-C comes
    computing.wait(30)
    with PROCESS.lock:
        lock_taken.set()
        time.sleep(0.5)  # the kernel ends meanwhile, and its thread waits to take the lock back
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)

threading.Thread(target=another_threads_call, daemon=True).start()
assert nn.aclnnLogSigmoid(None, 0, executor, stream) == 0
try:
    acl.rt.synchronize_stream(stream)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
print("in use", len(memory._in_use))
assert acl.rt.free(x_address) == 0
print("waiting to be unmapped", len(memory._unmap_after))
"""


def test_ctrl_c_as_a_kernel_takes_the_runtime_lock_back_leaves_no_memory_held(tmp_path):
    """The kernel had ended and its thread waited for the runtime lock another thread held; the Ctrl-C
    that came meanwhile was raised as the lock came back, before the kernel's ranges were given up: they
    stayed in use for good, and every later free of that memory (32 MB here) was never unmapped."""
    done = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_TAKING_THE_LOCK_BACK], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "NPUEMU_LEAK_CHECK": "0"}, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:3] == ["interrupted", "in use 0", "waiting to be unmapped 0"], done.stdout
