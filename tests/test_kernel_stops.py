"""Kernels stop: at the task timeout (TimeoutError naming the operator and the limit) and on Ctrl-C
(KeyboardInterrupt), every one of the ten operators, on 1 and 2 threads, and the pool still works
afterwards: aclnnLogSigmoid, aclnnBinaryCrossEntropyWithLogits, aclnnKlDiv, aclnnCtcLoss,
aclnnScaledMaskedSoftmax and their five backward operators.

The calls are views with zero strides whose element counts (2^54 and more) no buffer holds: they
would run for days over a 64-byte buffer. They call `_kernels` directly, bypassing the first phase,
which would reject them: the kernels must defend themselves. One call is shorter: the summed
aclnnBinaryCrossEntropyWithLogits keeps a partial sum per 4096 losses in its workspace, so it sums
2^38 losses (minutes of work) into a 256 MiB workspace, of which it writes the first pages only.
"""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from aclnn_api import _kernels, ctc_loss, ctc_loss_backward
from emulator.dtypes import ACL_BOOL, ACL_FLOAT, ACL_INT64

HUGE = 1 << 54  # rows of 16 elements: every call below goes over 2^58 elements
SUMMED = 1 << 34  # rows of the summed BCE: 2^38 losses, a partial sum of 4 bytes per 4096 of them


def endless_calls() -> dict:
    """Operator -> a call of its kernel over a huge zero-stride view of small buffers. The rows are
    dense (16 elements) and many, so that 2 threads share them; one strided call of a single row
    covers the element-wise engine's strided path, and one of rows of every other element the
    gathers of KlDiv's sum. Each reduction of a forward operator has its call: none, the sum, and
    the fill that gives an empty input's result."""
    keep = []

    def buffer(dtype=np.float32, fill=0.5, size=16):
        array = np.full(size, fill, dtype=dtype)
        keep.append(array)
        return array.ctypes.data

    def rows(dtype=ACL_FLOAT, fill=0.5, count=HUGE):  # `count` rows of the same 16 elements
        return (buffer(np.bool_ if dtype == ACL_BOOL else np.float32, fill), dtype, (count, 16), (0, 1))

    def strided():  # one row of 2^62 elements, all the same element
        return (buffer(), ACL_FLOAT, (1 << 62,), (0,))

    def gathered():  # HUGE rows of every other element of 32
        return (buffer(size=32), ACL_FLOAT, (HUGE, 16), (0, 2))

    def one():  # the one element of a sum
        return (buffer(), ACL_FLOAT, (), ())

    def softmax_rows(dtype=ACL_FLOAT, fill=0.5):
        view = rows(dtype, fill)
        return (view[0], dtype, (1 << 20, 1 << 20, 1 << 14, 16), (0, 0, 0, 1))

    def bce_summed():  # reduction mean: a partial sum per BCE_WITH_LOGITS_SUM_BLOCK losses in the workspace
        blocks = SUMMED * 16 // _kernels.BCE_WITH_LOGITS_SUM_BLOCK
        partials = np.zeros(blocks, np.float32)  # 256 MiB, whose pages are only taken as the kernel writes them
        keep.append(partials)
        _kernels.binary_cross_entropy_with_logits(one(), rows(count=SUMMED), rows(count=SUMMED), None, None, ACL_FLOAT,
                                                  1, None, None, partials.ctypes.data, blocks)

    batch, classes, labels = 2, 16, 3
    width = 2 * labels + 1
    targets = np.array([1, 2, 3], np.int64)
    keep.append(targets)
    time_steps = 1 << 40

    def ctc_inputs():  # logProbs, targets, lengths, blank, zeroInfinity
        return ((buffer(fill=-2.0), ACL_FLOAT, (time_steps, batch, classes), (0, 0, 1)),
                (targets.ctypes.data, ACL_INT64, (batch, labels), (0, 1)), [time_steps] * batch, [labels] * batch, 0,
                False)

    def ctc_workspace(layout):  # slots and label width, the parts' addresses, their sizes
        sizes = list(layout(batch, width, ACL_FLOAT))
        parts = [np.zeros(size, np.uint8) for size in sizes]
        keep.extend(parts)
        return (batch, width, *(part.ctypes.data for part in parts), sizes)

    def ctc_backward():
        log_probs, targets_view, *settings = ctc_inputs()
        alpha = (buffer(fill=-1.0), ACL_FLOAT, (batch, time_steps, width), (0, 0, 1))
        out = (buffer(), ACL_FLOAT, (time_steps, batch, classes), (0, 0, 1))
        per_item = (buffer(fill=1.0), ACL_FLOAT, (batch,), (0,))
        _kernels.ctc_loss_backward(per_item, log_probs, targets_view, per_item, alpha, out, *settings,
                                   *ctc_workspace(ctc_loss_backward.workspace_layout))

    def ctc_forward():
        log_probs, targets_view, *settings = ctc_inputs()
        nll = (buffer(), ACL_FLOAT, (batch,), (0,))
        alpha = (buffer(), ACL_FLOAT, (batch, time_steps, width + 1), (0, 0, 1))  # one column of padding
        _kernels.ctc_loss(log_probs, targets_view, nll, alpha, *settings, *ctc_workspace(ctc_loss.workspace_layout))

    return {
        "log_sigmoid": lambda: _kernels.log_sigmoid(rows(), rows(), "aclnnLogSigmoid"),
        "log_sigmoid_backward": lambda: _kernels.log_sigmoid_backward(rows(), rows(), rows()),
        "log_sigmoid_backward strided": lambda: _kernels.log_sigmoid_backward(strided(), strided(), strided()),
        "binary_cross_entropy_with_logits": lambda: _kernels.binary_cross_entropy_with_logits(
            rows(), rows(), rows(), None, None, ACL_FLOAT, 0, None, None, None, 0),  # reduction none
        "binary_cross_entropy_with_logits summed": bce_summed,
        "binary_cross_entropy_with_logits filled": lambda: _kernels.binary_cross_entropy_with_logits_fill(
            rows(), float("nan")),
        "binary_cross_entropy_with_logits_backward": lambda: _kernels.binary_cross_entropy_with_logits_backward(
            rows(), rows(), rows(), rows(), rows(), None, 0.5),
        "kl_div": lambda: _kernels.kl_div(rows(), rows(), rows(), False, ACL_FLOAT),
        "kl_div summed": lambda: _kernels.kl_div_reduce(one(), rows(), rows(), True, ACL_FLOAT, 1.0),
        "kl_div summed gathered": lambda: _kernels.kl_div_reduce(one(), gathered(), rows(), False, ACL_FLOAT, 1.0),
        "kl_div filled": lambda: _kernels.kl_div_fill(rows(), float("nan")),
        "kl_div_backward": lambda: _kernels.kl_div_backward(rows(), rows(), rows(), 1.0, True),
        "kl_div_backward summed": lambda: _kernels.kl_div_backward((buffer(), ACL_FLOAT, (16,), (1,)), rows(),
                                                                   rows(), 1.0, False),
        "scaled_masked_softmax": lambda: _kernels.scaled_masked_softmax(
            softmax_rows(), softmax_rows(ACL_BOOL, False), softmax_rows(), 1.0),
        "scaled_masked_softmax_backward": lambda: _kernels.scaled_masked_softmax_backward(
            softmax_rows(), softmax_rows(), softmax_rows(ACL_BOOL, False), softmax_rows(), 1.0),
        "ctc_loss": ctc_forward,
        "ctc_loss_backward": ctc_backward,
        "_buffers": keep,
    }


def operator_of(case: str) -> str:
    """The operator whose kernel a case calls: "kl_div_backward summed" -> "aclnnKlDivBackward"."""
    return "aclnn" + "".join(word.capitalize() for word in case.split()[0].split("_"))


CASES = [name for name in endless_calls() if not name.startswith("_")]


@pytest.fixture
def kernel_settings():
    """Restores the pool size and the task timeout the other tests run with."""
    threads, timeout = _kernels.threads(), _kernels.task_timeout()
    yield
    _kernels.set_threads(threads)
    _kernels.set_task_timeout(timeout)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES)
def test_every_kernel_stops_at_the_task_timeout_with_a_timeout_error(case, threads, kernel_settings):
    calls = endless_calls()
    _kernels.set_threads(threads)
    _kernels.set_task_timeout(0.1)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as stopped:
        calls[case]()
    assert time.monotonic() - start < 2.0
    message = str(stopped.value)
    assert message.startswith(operator_of(case) + ": "), message
    assert "0.1 s" in message and "NPUEMU_TASK_TIMEOUT" in message, message


def compute_a_short_kernel_and_check_it() -> None:
    """A LogSigmoidBackward kernel of 200000 elements: milliseconds of work, in several blocks (each
    but the first a checkpoint), its output checked against float64."""
    rng = np.random.default_rng(3)
    grad, x = rng.normal(size=200_000).astype(np.float32), rng.normal(size=200_000).astype(np.float32)
    out = np.empty_like(x)
    view = lambda a: (a.ctypes.data, ACL_FLOAT, a.shape, (1,))
    _kernels.log_sigmoid_backward(view(grad), view(x), view(out))
    expected = grad.astype(np.float64) / (1.0 + np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)


def test_the_pool_computes_right_after_a_stopped_kernel(kernel_settings):
    _kernels.set_threads(2)
    _kernels.set_task_timeout(0.05)
    with pytest.raises(TimeoutError):
        endless_calls()["log_sigmoid_backward"]()
    _kernels.set_task_timeout(0)
    compute_a_short_kernel_and_check_it()


def hold_the_pool(seconds: float):
    """Starts a host thread whose kernel holds the pool (2 threads or more) for `seconds`: an endless
    kernel stopped by a task timeout of `seconds` set for it alone (a call takes the timeout set when
    it starts), so the limit, not the machine's speed, says how long. Returns once that kernel has
    taken the pool, with a function that joins the thread and returns when its kernel ended
    (time.monotonic())."""
    _kernels.set_task_timeout(seconds)
    endless, ended, started = endless_calls()["log_sigmoid_backward"], [], threading.Event()

    def hold():
        started.set()
        try:
            endless()
        except TimeoutError:
            ended.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    started.wait()
    time.sleep(0.3)  # the thread's call has started (with its timeout) and holds the pool

    def join() -> float:
        holder.join()
        assert ended, "the kernel holding the pool did not end at its task timeout"
        return ended[0]

    return join


def test_the_wait_for_another_threads_kernel_does_not_count_against_the_task_timeout(kernel_settings):
    """On the card both kernels would run: a short kernel queued behind another host thread's long
    one must not time out for the time it waited for the pool."""
    _kernels.set_threads(2)
    join_holder = hold_the_pool(2.0)
    _kernels.set_task_timeout(0.6)  # the short kernel's: it waits about 1.7 s, then computes for ms
    start = time.monotonic()
    compute_a_short_kernel_and_check_it()  # (the holder's thread may note its end after this returns)
    waited = time.monotonic() - start
    join_holder()
    assert waited > 0.6, "the short kernel did not wait for the pool (%.2f s)" % waited


def test_set_task_timeout_rejects_what_is_no_duration():
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="task timeout"):
            _kernels.set_task_timeout(bad)


# ---- in a process of its own: the real NPUEMU_TASK_TIMEOUT, a real SIGINT ----

CHILD = r"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell may start us with SIGINT ignored
sys.path.insert(0, sys.argv[1])
from test_kernel_stops import endless_calls
from aclnn_api import _kernels, operator
operator._apply_kernel_settings()  # NPUEMU_TASK_TIMEOUT and NPUEMU_THREADS from the environment
print("settings", _kernels.task_timeout(), _kernels.threads(), flush=True)
calls = endless_calls()
for phase, names in (("timeout", sys.argv[2].split(",")), ("interrupt", sys.argv[3].split(","))):
    if phase == "interrupt":
        _kernels.set_task_timeout(0)
    for name in names:
        print("running", name, flush=True)
        start = time.monotonic()
        try:
            calls[name]()
            print("finished", name, flush=True)
        except BaseException as error:
            print("stopped", name, type(error).__name__, "%.3f" % (time.monotonic() - start), flush=True)
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_npuemu_task_timeout_and_ctrl_c_stop_kernels_in_a_real_process(threads):
    """The timeout of the environment reaches the kernels; a SIGINT 0.5 s into a call stops every
    kernel of the table, in blocks shared by the threads and in one long part per thread (the summed
    KlDivBackward, the batch items of CtcLoss and CtcLossBackward)."""
    timed, interrupted = ["log_sigmoid_backward"], CASES
    env = dict(os.environ, NPUEMU_TASK_TIMEOUT="0.5", NPUEMU_THREADS=str(threads))
    child = subprocess.Popen([sys.executable, "-c", CHILD, os.path.dirname(__file__), ",".join(timed),
                              ",".join(interrupted)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in child.stdout], daemon=True).start()
    next_line = lambda: lines.get(timeout=10)  # a kernel that does not stop fails the test, not hangs it
    try:
        assert next_line().split() == ["settings", "0.5", str(threads)]
        for phase, names in (("timeout", timed), ("interrupt", interrupted)):
            for name in names:
                assert next_line().strip() == "running " + name
                if phase == "interrupt":
                    time.sleep(0.5)
                    child.send_signal(signal.SIGINT)
                    signalled = time.monotonic()
                words = next_line().split()
                assert words[:-1] == ["stopped", *name.split(), "TimeoutError" if phase == "timeout"
                                      else "KeyboardInterrupt"], words
                if phase == "timeout":
                    assert 0.5 <= float(words[-1]) < 3.0, words
                else:
                    assert time.monotonic() - signalled < 3.0, words
        assert child.wait(timeout=10) == 0, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


CTRL_C_IN_THE_QUEUE = r"""
import signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell may start us with SIGINT ignored
sys.path.insert(0, sys.argv[1])
from test_kernel_stops import compute_a_short_kernel_and_check_it, hold_the_pool
from aclnn_api import _kernels
_kernels.set_threads(2)
join_holder = hold_the_pool(3.0)
_kernels.set_task_timeout(0)
threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
start = time.monotonic()
try:
    compute_a_short_kernel_and_check_it()
    stopped = "finished"
except KeyboardInterrupt:
    stopped = "interrupted"
print(stopped, time.monotonic() - start, join_holder() - start, flush=True)
"""


def test_ctrl_c_stops_a_kernel_of_the_main_thread_waiting_for_another_threads_kernel():
    """The main thread's kernel queued behind another host thread's long one still watches for
    signals: Ctrl-C stops it as it waits, not once the other kernel has ended."""
    done = subprocess.run([sys.executable, "-c", CTRL_C_IN_THE_QUEUE, os.path.dirname(__file__)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    outcome, stopped_after, other_ended_after = done.stdout.split()
    assert outcome == "interrupted", done.stdout
    assert float(stopped_after) < 0.5 * float(other_ended_after), done.stdout


# ---- through the public API: the largest view the first phase accepts, a task timeout ----

LONG_RUN = r"""
import time
import numpy as np
import acl, aclnn_api as nn
acl.init(); acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
buffer, _ = acl.rt.malloc(64, 0)
# 2^37 elements (the first phase's bound) with zero strides over one 64-byte buffer: minutes of work
view = lambda: nn.aclCreateTensor([1 << 21, 1 << 16], nn.ACL_FLOAT, [0, 0], 0, nn.ACL_FORMAT_ND, [16], buffer)
g, s, out = view(), view(), view()
size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(g, s, s, out)
assert ret == 0, acl.get_recent_err_msg()
assert nn.aclnnLogSigmoidBackward(None, size, executor, stream) == 0
start = time.monotonic()
ret = acl.rt.synchronize_stream(stream)
print(ret, round(time.monotonic() - start, 1))
print(acl.get_recent_err_msg())
for t in (g, s, out):
    nn.aclDestroyTensor(t)
acl.rt.free(buffer); acl.rt.destroy_stream(stream); acl.rt.reset_device(0); acl.finalize()
"""


def test_queued_work_past_the_task_timeout_fails_its_synchronisation_with_the_cards_code():
    env = dict(os.environ, NPUEMU_TASK_TIMEOUT="0.5")
    done = subprocess.run([sys.executable, "-c", LONG_RUN], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    status_line, message = done.stdout.splitlines()[:2]
    code, seconds = status_line.split()
    assert int(code) == 107020 and float(seconds) < 5, done.stdout  # ACL_ERROR_RT_TASK_TIMEOUT
    assert "aclnnLogSigmoidBackward" in message and "NPUEMU_TASK_TIMEOUT" in message, message
    assert "leak" not in done.stderr, done.stderr
