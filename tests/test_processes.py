"""Processes: children made by fork() while other threads use the runtime, fault counts in a forked
child, Python signal handlers that raise during a call (docs/runtime.md, "Processes: fork and signals")."""
import os
import subprocess
import sys
import textwrap

import pytest

# A host thread runs a kernel and synchronises in a loop (a training thread), holding the runtime's lock
# and the kernels' pool most of the time; the main thread forks children that each allocate and run a
# kernel big enough for the pool's two threads. A child blocked on a lock of a thread it does not have
# is stopped by its own timer (exit 1, with where it blocked).
FORK_WHILE_SYNCHRONISING = r"""
import faulthandler, os, sys, threading, time
import numpy as np
import acl, aclnn_api as nn
from aclnn_api import _kernels

def tensors(count):
    dev = [acl.rt.malloc(count * 4, 0)[0] for _ in range(3)]
    for d, byte in zip(dev, (0, 0, 0xFF)):  # the output NaN until the kernel writes it: 0 everywhere
        assert acl.rt.memset(d, count * 4, byte, count * 4) == 0
    return dev, [nn.aclCreateTensor([count], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, d) for d in dev]

def log_sigmoid_backward(ts, stream):
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(ts[0], ts[1], ts[1], ts[2])
    assert ret == 0 and nn.aclnnLogSigmoidBackward(None, size, executor, stream) == 0
    return acl.rt.synchronize_stream(stream)

acl.init(); acl.rt.set_device(0)
context, _ = acl.rt.get_context()
stop = False

def train():
    acl.rt.set_context(context)
    stream, _ = acl.rt.create_stream()
    _, ts = tensors(1 << 22)
    while not stop:
        log_sigmoid_backward(ts, stream)

thread = threading.Thread(target=train)
thread.start()
time.sleep(0.3)
finished = 0
for _ in range(3):
    child = os.fork()
    if child == 0:
        faulthandler.dump_traceback_later(15, exit=True)  # blocked: exit 1, with where
        stream, ret = acl.rt.create_stream()
        dev, ts = tensors(1 << 20)
        kernel = log_sigmoid_backward(ts, stream)
        out = np.empty(1 << 20, np.float32)
        acl.rt.memcpy(out.ctypes.data, out.nbytes, dev[2], out.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
        os._exit(0 if (ret, kernel, bool((out == 0).all()), _kernels.threads()) == (0, 0, True, 2) else 2)
    _, status = os.waitpid(child, 0)
    finished += os.waitstatus_to_exitcode(status) == 0
    time.sleep(0.05)
stop = True
thread.join()
print("finished", finished)
os._exit(0)  # the parent's leaks are not what this checks
"""


def test_children_forked_while_another_thread_synchronises_can_use_the_runtime_and_the_kernels():
    """The runtime lock and the kernels' pool were held by the training thread at the fork: each child
    blocked for ever in its first call. Now every child allocates, runs a kernel on the two threads of
    a pool it restarts, and gets the right result."""
    done = subprocess.run([sys.executable, "-c", FORK_WHILE_SYNCHRONISING], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NPUEMU_THREADS": "2"})
    assert done.stdout.split() == ["finished", "3"], (done.stdout, done.stderr)


def test_a_forked_child_counts_its_own_calls_for_the_fault_specs_from_1(tmp_path):
    """docs/faults.md: counts are per process. The parent made two calls, so the child's first aclrtMalloc
    was the 3rd and failed; now it is the child's 1st, and the parent's own 3rd still fails."""
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent("""
        import os
        import acl
        from emulator import inject_faults
        acl.init(); acl.rt.set_device(0)
        with inject_faults("aclrtMalloc#2=207001") as block:
            kept = [acl.rt.malloc(64, 0)[0] for _ in range(1)]
            child = os.fork()
            if child == 0:
                codes = [acl.rt.malloc(64, 0)[1] for _ in range(3)]
                print("child", *codes, block.count("aclrtMalloc"), len(block.injected), flush=True)
                os._exit(0)
            os.waitpid(child, 0)
            print("parent", acl.rt.malloc(64, 0)[1], acl.rt.malloc(64, 0)[1], len(block.injected), flush=True)
    """))
    env = {**os.environ, "NPUEMU_FAULTS": "aclrtMalloc#3=207001", "NPUEMU_LEAK_CHECK": "0"}
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.splitlines() == ["child 0 207001 207001 3 1", "parent 207001 207001 1"], done.stderr


# A Python signal handler raises an ordinary exception (the signal.alarm time-limit idiom) while the
# main thread is in a call that runs a long kernel: the synchronisation (async) or the launch (eager).
HANDLER_RAISES = r"""
import os, signal, sys, threading
import acl, aclnn_api as nn

class TimeLimit(Exception):
    pass

def on_signal(signum, frame):
    raise TimeLimit("time limit reached")

signum = getattr(signal, sys.argv[1])
signal.signal(signum, on_signal)
N = 1 << 25
acl.init(); acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
dev = [acl.rt.malloc(N * 4, 0)[0] for _ in range(3)]
for d in dev:
    acl.rt.memset(d, N * 4, 0, N * 4)
ts = [nn.aclCreateTensor([N], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, d) for d in dev]

def launch():
    size, executor, _ = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(ts[0], ts[1], ts[1], ts[2])
    return nn.aclnnLogSigmoidBackward(None, size, executor, stream)

threading.Timer(0.1, os.kill, (os.getpid(), signum)).start()  # as `kill` or an alarm would, during the calls
try:
    for _ in range(100):
        launch()
    print("returned", acl.rt.synchronize_stream(stream), acl.get_recent_err_msg(), flush=True)
except TimeLimit as error:
    print("raised", error, flush=True)
print("next", acl.rt.synchronize_stream(stream), acl.get_recent_err_msg(), flush=True)
for t in ts:
    nn.aclDestroyTensor(t)
for d in dev:
    acl.rt.free(d)
acl.rt.destroy_stream(stream); acl.rt.reset_device(0); acl.finalize()
"""


@pytest.mark.parametrize("execution", ["async", "eager"])
@pytest.mark.parametrize("signal_name", ["SIGALRM", "SIGTERM"])
def test_an_exception_a_signal_handler_raises_in_a_call_reaches_the_program(signal_name, execution):
    """It was caught as a fault of the kernel: the synchronisation returned 507000 "npuemu internal error"
    and the exception was lost. Now it propagates out of the call, as Ctrl-C's KeyboardInterrupt does, and
    the stream keeps no fault for it: the next synchronisation succeeds."""
    env = {**os.environ, "NPUEMU_EXECUTION": execution, "NPUEMU_LEAK_CHECK": "0"}
    done = subprocess.run([sys.executable, "-c", HANDLER_RAISES, signal_name], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.stdout.splitlines() == ["raised time limit reached", "next 0 None"], (done.stdout, done.stderr)
    assert done.returncode == 0 and "507000" not in done.stderr, done.stderr


HANDLER_CALLS = r"""
import faulthandler, os, signal, sys, threading
import acl, aclnn_api as nn
faulthandler.dump_traceback_later(60, exit=True)  # a hang: exit 1, with where
N = 1 << 25
acl.init(); acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
other, _ = acl.rt.create_stream()
dev = [acl.rt.malloc(N * 4, 0)[0] for _ in range(3)]
for d in dev:
    acl.rt.memset(d, N * 4, 0, N * 4)
ts = [nn.aclCreateTensor([N], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, d) for d in dev]

def launch(s):
    size, executor, _ = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(ts[0], ts[1], ts[1], ts[2])
    return nn.aclnnLogSigmoidBackward(None, size, executor, s)

class Stop(Exception):
    pass

def on_term(signum, frame):
    target = stream if sys.argv[1] == "same" else other
    print("handler", acl.rt.synchronize_stream(target), acl.get_recent_err_msg().split(": ", 2)[2][:60], flush=True)
    raise Stop("stop")

signal.signal(signal.SIGTERM, on_term)
for _ in range(60):
    launch(stream)
launch(other)
threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()  # (the work: 0.3 s or more)
try:
    print("returned", acl.rt.synchronize_stream(stream), flush=True)
except Stop as error:
    print("raised", error, flush=True)
print("next", acl.rt.synchronize_stream(stream), acl.rt.synchronize_stream(other), flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("stream", ["same", "other"])
def test_a_call_from_a_signal_handler_inside_another_call_is_refused_not_a_hang(stream):
    """npuemu runs Python signal handlers at a kernel's checkpoints, inside the call that runs it (the card
    runs them after it). A handler synchronising a stream there hung on the kernels' own pool, or got
    507000 from the runtime halfway through the call. Now such a call returns 500001 saying why, and the
    handler's exception still reaches the program."""
    env = {**os.environ, "NPUEMU_THREADS": "2", "NPUEMU_SANITIZE": "off", "NPUEMU_LEAK_CHECK": "0"}
    done = subprocess.run([sys.executable, "-c", HANDLER_CALLS, stream], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.stdout.splitlines() == [
        "handler 500001 called while aclrtSynchronizeStream is in progress on this t",
        "raised stop", "next 0 0"], (done.stdout, done.stderr)


def test_a_public_call_marks_itself_in_progress_without_an_assignment_to_the_threads_local(monkeypatch):
    """The refusal above rests on the mark of the call in progress on the thread, which every public call
    sets and restores. It was an attribute of a threading.local, whose every read and assignment looks the
    thread's dictionary up (those three were 6 000 of the 147 000 instructions of a whole aclnn call from
    C); it is now the slot of an object of the thread's, fetched once a call. The mark is still set during
    the call and cleared after it."""
    from emulator import errors
    assigned = []

    class Counted(errors._ThreadState):
        def __setattr__(self, name, value):
            assigned.append(name)
            super().__setattr__(name, value)

    monkeypatch.setattr(errors, "_local", Counted())
    seen = []
    call = errors.api("aclrtMarked")(lambda: seen.append(errors._local.in_progress.name))
    assert errors._local.in_progress.name is None  # this thread's state, made at its first use
    assigned.clear()
    assert [call(), call()] == [0, 0]
    assert (seen, errors._local.in_progress.name, assigned) == (["aclrtMarked", "aclrtMarked"], None, [])


CALLBACK_INTERRUPTED = r"""
import os, signal, threading, time
import acl

class TimeLimit(Exception):
    pass

def on_alarm(signum, frame):
    raise TimeLimit("time limit")

signal.signal(signal.SIGALRM, on_alarm)
acl.init(); acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
acl.rt.subscribe_report(threading.get_ident(), stream)

def slow(data):
    start = time.time()
    while time.time() - start < 2:  # the program's callback, busy
        pass

acl.rt.launch_callback(slow, None, 1, stream)
signal.setitimer(signal.ITIMER_REAL, 0.3)
try:
    print("returned", acl.rt.process_report(5000), flush=True)
except TimeLimit as error:
    print("raised", error, flush=True)
os._exit(0)
"""


def test_a_signal_handlers_exception_in_a_callback_on_the_main_thread_reaches_the_program():
    """A callback the main thread runs (aclrtProcessReport) was a program error printed on stderr, and the
    handler's exception was lost; now it propagates out of the call, as in any other call."""
    done = subprocess.run([sys.executable, "-c", CALLBACK_INTERRUPTED], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NPUEMU_LEAK_CHECK": "0"})
    assert (done.stdout, "raised" in done.stderr) == ("raised time limit\n", False), (done.stdout, done.stderr)


DOUBLE_FORK = r"""
import os
import acl, aclnn_api as nn
from aclnn_api import _kernels

def run(stream):
    dev = [acl.rt.malloc(1 << 22, 0)[0] for _ in range(3)]
    for d in dev:
        acl.rt.memset(d, 1 << 22, 0, 1 << 22)
    ts = [nn.aclCreateTensor([1 << 20], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, d) for d in dev]
    size, executor, _ = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(ts[0], ts[1], ts[1], ts[2])
    nn.aclnnLogSigmoidBackward(None, size, executor, stream)
    return acl.rt.synchronize_stream(stream)

acl.init(); acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
print("parent", run(stream), _kernels.threads(), flush=True)
if os.fork() == 0:
    if os.fork() == 0:  # a double-fork daemon: its parent ran no kernel
        print("grandchild", run(stream), _kernels.threads(), flush=True)
        os._exit(0)
    os.wait()
    os._exit(0)
os.wait()
os._exit(0)
"""


def test_a_grandchild_forked_before_its_parent_ran_a_kernel_gets_the_pools_threads_back():
    """The child of a child that had not restarted its pool yet got none to restart: it ran kernels on one
    thread for good."""
    done = subprocess.run([sys.executable, "-c", DOUBLE_FORK], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NPUEMU_THREADS": "2", "NPUEMU_LEAK_CHECK": "0"})
    assert done.stdout.splitlines() == ["parent 0 2", "grandchild 0 2"], (done.stdout, done.stderr)


FINALIZERS_INSIDE_CALLS = r"""
import gc, threading
import acl

acl.init(); acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
codes = []

class Owner:
    # Device memory its finalizer frees: run inside a runtime call, when the runtime drops a callback's
    # userData (its last reference) or the garbage collector collects a cycle during the call.
    def __init__(self):
        self.memory, _ = acl.rt.malloc(64, 0)
        self.cycle = self

    def __del__(self):
        codes.append(acl.rt.free(self.memory))

acl.rt.subscribe_report(threading.get_ident(), stream)
for _ in range(5):
    owner = Owner()
    del owner.cycle
    acl.rt.launch_callback(lambda data: None, owner, 1, stream)
    del owner
    acl.rt.process_report(1000)
acl.rt.launch_callback(lambda data: None, None, 1, stream)  # (the runtime keeps the last callback's userData
acl.rt.process_report(1000)                                 # until another one comes)
gc.set_threshold(50)
for _ in range(500):
    Owner()  # cycles, collected during the calls of the next ones
gc.collect()
acl.rt.unsubscribe_report(threading.get_ident(), stream)
acl.rt.destroy_stream(stream); acl.rt.reset_device(0); acl.finalize()
print(len(codes), sorted(set(codes)))
"""


def test_finalizers_run_inside_a_call_free_what_they_own():
    """A public call inside another is refused only from a signal handler: a __del__ the runtime or the
    garbage collector runs inside a call (a callback's userData released, a cycle collected during
    aclrtMalloc) freed nothing (500001 "from a Python signal handler"), and the memory was reported leaked."""
    done = subprocess.run([sys.executable, "-c", FINALIZERS_INSIDE_CALLS], capture_output=True, text=True,
                          timeout=120)
    assert (done.stdout, done.stderr) == ("505 [0]\n", ""), (done.stdout, done.stderr)
