"""A training step for each of the five forward/backward pairs: the forward (the loss or the
activation), then its backward, on one stream, with an event before, between and after them.

Each gradient is checked against a finite-difference estimate made with the forward itself: for a
random direction v, the derivative of the loss along v, (L(x + h·v) - L(x - h·v)) / 2h, must equal
<gradient, v>. A loss that is not a scalar (LogSigmoid, ScaledMaskedSoftmax) is weighted by a
random upstream gradient g, L = sum(g · f(x)), which is what the backward receives. CtcLoss is
differentiated through log_softmax, as a network computes its log-probabilities: its backward (as
PyTorch's) gives the gradient with respect to the logits z of logProbs = log_softmax(z).

Runs on every chip npuemu emulates (NPUEMU_SOC): CtcLoss's logAlpha width is the chip's
(aclrtGetSocName), and a pair whose forward or backward has no kernel on the chip (its first phase
returns 561003, as aclnnScaledMaskedSoftmax does on Ascend910 and Ascend310P) is skipped, with that
status and message, after releasing what it made.

Prints one line per pair: the events' elapsed times and the two derivatives, or why it was skipped;
exits 1 if any pair that ran disagrees by more than 1% (everything is computed in float32 on the
device).
"""
import sys
from typing import Optional

import numpy as np

import acl
import aclnn_api as nn

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACLNN_ERR_INNER_FIND_KERNEL_ERROR = 561003  # a first phase's "no kernel for this chip"
STEP = 1e-2       # h of the central difference, in float32 on inputs of order 1
TOLERANCE = 1e-2  # relative agreement of the two derivatives


def check_ret(what, ret):
    if ret != acl.ACL_SUCCESS:
        print("%s failed. ERROR: %d\n%s" % (what, ret, acl.get_recent_err_msg()))
        sys.exit(1)


class NoKernel(Exception):
    """A first phase that found no kernel for the chip: the pair cannot run here."""

    def __init__(self, what, status, message):
        super().__init__("%s returned %d: %s" % (what, status, " ".join(message.split())))


class Device:
    """One stream, and what is made on it until release(): tensors and their device memory, int
    arrays, workspaces, and executors planned but not launched."""

    def __init__(self, device_id=0):
        self.device_id = device_id
        check_ret("aclInit", acl.init())
        check_ret("aclrtSetDevice", acl.rt.set_device(device_id))
        self.stream, ret = acl.rt.create_stream()
        check_ret("aclrtCreateStream", ret)
        self.tensors = []  # (tensor, device address, shape, host dtype)
        self.arrays = []
        self.workspaces = []
        self.planned = []  # executors whose second phase has not run yet

    def tensor(self, values, data_type=nn.ACL_FLOAT, host_type=np.float32):
        """A contiguous device tensor holding `values`."""
        host = np.ascontiguousarray(values, dtype=host_type)
        shape = list(host.shape)
        address, ret = acl.rt.malloc(max(host.nbytes, 1), ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("aclrtMalloc", ret)
        if host.nbytes:
            check_ret("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                                                   ACL_MEMCPY_HOST_TO_DEVICE))
        strides = [int(s // host.itemsize) for s in host.strides]
        tensor = nn.aclCreateTensor(shape, data_type, strides, 0, nn.ACL_FORMAT_ND, shape, address)
        self.tensors.append((tensor, address, host.shape, host_type))
        return tensor

    def int_array(self, values):
        array = nn.aclCreateIntArray(values)
        self.arrays.append(array)
        return array

    def read(self, tensor):
        """A tensor's values, copied back to the host (after the stream is synchronised)."""
        for made, address, shape, host_type in self.tensors:
            if made is tensor:
                result = np.zeros(shape, dtype=host_type)
                if result.nbytes:
                    check_ret("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), result.nbytes, address,
                                                           result.nbytes, ACL_MEMCPY_DEVICE_TO_HOST))
                return result
        raise KeyError("not a tensor of this device")

    def plan(self, op, *args):
        """The first phase of aclnn<op>, with its workspace (freed by synchronize()); returns launch(),
        which queues the second phase on the stream. Raises NoKernel if the chip has no kernel."""
        first_phase = "aclnn%sGetWorkspaceSize" % op
        workspace_size, executor, ret = getattr(nn, first_phase)(*args)
        if ret == ACLNN_ERR_INNER_FIND_KERNEL_ERROR:
            raise NoKernel(first_phase, ret, acl.get_recent_err_msg())
        check_ret(first_phase, ret)
        self.planned.append(executor)
        workspace = None
        if workspace_size > 0:
            workspace, ret = acl.rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("allocate workspace", ret)
            self.workspaces.append(workspace)

        def launch():
            check_ret("aclnn" + op, getattr(nn, "aclnn" + op)(workspace, workspace_size, executor, self.stream))
            self.planned.remove(executor)  # its second phase released it
        return launch

    def run(self, op, *args):
        """Both phases of aclnn<op> on the stream."""
        self.plan(op, *args)()

    def synchronize(self):
        """Waits for the stream, then frees the workspaces its work used."""
        check_ret("aclrtSynchronizeStream", acl.rt.synchronize_stream(self.stream))
        self.free_workspaces()

    def free_workspaces(self):
        for workspace in self.workspaces:
            check_ret("aclrtFree", acl.rt.free(workspace))
        self.workspaces = []

    def release(self):
        """Everything made since the last release(), the plans a refusal left unlaunched included."""
        for executor in self.planned:
            check_ret("aclDestroyAclOpExecutor", nn.aclDestroyAclOpExecutor(executor))
        self.planned = []
        self.free_workspaces()
        for array in self.arrays:
            nn.aclDestroyIntArray(array)
        self.arrays = []
        for tensor, address, _, _ in self.tensors:
            nn.aclDestroyTensor(tensor)
            check_ret("aclrtFree", acl.rt.free(address))
        self.tensors = []

    def close(self):
        self.release()
        check_ret("aclrtDestroyStream", acl.rt.destroy_stream(self.stream))
        check_ret("aclrtResetDevice", acl.rt.reset_device(self.device_id))
        check_ret("aclFinalize", acl.finalize())


# ------------------------------------------------------------------------------------------------
# The five pairs. Each has `loss(device, x)` (the forward, reduced to a scalar on the host) and
# `step(device, x)` -> (forward's outputs, gradient), which runs forward then backward with events.

def step_with_events(device, forward, backward, result):
    """The planned forward and backward (Device.plan's launchers) queued on the stream between three
    events, so that the events time the device's work alone; returns (the backward's `result`
    tensor read back, forward ms, backward ms)."""
    events = []
    for _ in range(3):
        event, ret = acl.rt.create_event()
        check_ret("aclrtCreateEvent", ret)
        events.append(event)
    check_ret("aclrtRecordEvent", acl.rt.record_event(events[0], device.stream))
    forward()
    check_ret("aclrtRecordEvent", acl.rt.record_event(events[1], device.stream))
    backward()
    check_ret("aclrtRecordEvent", acl.rt.record_event(events[2], device.stream))
    check_ret("aclrtSynchronizeEvent", acl.rt.synchronize_event(events[2]))
    device.synchronize()
    times = []
    for begin, end in zip(events, events[1:]):
        ms, ret = acl.rt.event_elapsed_time(begin, end)
        check_ret("aclrtEventElapsedTime", ret)
        times.append(ms)
    for event in events:
        check_ret("aclrtDestroyEvent", acl.rt.destroy_event(event))
    return (device.read(result), *times)


class LogSigmoid:
    name = "LogSigmoid"

    def __init__(self, rng):
        self.x = rng.normal(size=(4, 8)) * 3
        self.g = rng.normal(size=(4, 8))  # the upstream gradient

    def loss(self, device, x):
        x_t, out = device.tensor(x), device.tensor(np.zeros_like(x))
        device.run("LogSigmoid", x_t, out)
        device.synchronize()
        return float(np.sum(self.g * device.read(out)))

    def step(self, device, x):
        x_t, out, buffer = device.tensor(x), device.tensor(np.zeros_like(x)), device.tensor(np.zeros_like(x))
        g, grad = device.tensor(self.g), device.tensor(np.zeros_like(x))
        return step_with_events(device, device.plan("LogSigmoidForward", x_t, out, buffer),
                                device.plan("LogSigmoidBackward", g, x_t, buffer, grad), grad)


class BinaryCrossEntropyWithLogits:
    name = "BinaryCrossEntropyWithLogits"
    MEAN = 1

    def __init__(self, rng):
        self.x = rng.normal(size=(4, 8)) * 2
        self.target = rng.uniform(size=(4, 8))
        self.weight = rng.uniform(0.5, 1.5, size=(8,))
        self.pos_weight = rng.uniform(0.5, 2.0, size=(8,))

    def inputs(self, device, x):
        return (device.tensor(x), device.tensor(self.target), device.tensor(self.weight),
                device.tensor(self.pos_weight))

    def loss(self, device, x):
        out = device.tensor(np.zeros(1))
        device.run("BinaryCrossEntropyWithLogits", *self.inputs(device, x), self.MEAN, out)
        device.synchronize()
        return float(device.read(out)[0])

    def step(self, device, x):
        x_t, target, weight, pos_weight = self.inputs(device, x)
        out, g, grad = device.tensor(np.zeros(1)), device.tensor(np.ones(1)), device.tensor(np.zeros_like(x))
        return step_with_events(
            device, device.plan("BinaryCrossEntropyWithLogits", x_t, target, weight, pos_weight, self.MEAN, out),
            device.plan("BinaryCrossEntropyWithLogitsBackward", g, x_t, target, weight, pos_weight, self.MEAN, grad),
            grad)


class KlDiv:
    name = "KlDiv"
    BATCHMEAN = 3

    def __init__(self, rng):
        logits = rng.normal(size=(4, 8))
        self.x = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))  # log-probabilities
        self.target = rng.dirichlet(np.ones(8), size=4)                        # probabilities

    def loss(self, device, x):
        out = device.tensor(np.zeros(1))
        device.run("KlDiv", device.tensor(x), device.tensor(self.target), self.BATCHMEAN, False, out)
        device.synchronize()
        return float(device.read(out)[0])

    def step(self, device, x):
        x_t, target = device.tensor(x), device.tensor(self.target)
        out, g, grad = device.tensor(np.zeros(1)), device.tensor(np.ones(1)), device.tensor(np.zeros_like(x))
        return step_with_events(device, device.plan("KlDiv", x_t, target, self.BATCHMEAN, False, out),
                                device.plan("KlDivBackward", g, x_t, target, self.BATCHMEAN, False, grad), grad)


def alpha_width(max_target_length):
    """CtcLoss's logAlpha width on this chip: the Ascend950 family (also named Ascend910_95) keeps
    2·max(targetLengths) + 1, the other chips round it up to a multiple of 8 (docs/ops/ctc_loss.md)."""
    exact = 2 * max_target_length + 1
    if acl.rt.get_soc_name().startswith(("Ascend950", "Ascend910_95")):
        return exact
    return (exact + 7) // 8 * 8


def log_softmax(z, axis=-1):
    shifted = z - np.max(z, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


class CtcLoss:
    """x is the logits z (T, N, C); the loss is sum(g · negLogLikelihood(log_softmax(z)))."""
    name = "CtcLoss"
    BLANK = 0

    def __init__(self, rng):
        self.x = rng.normal(size=(10, 2, 5))
        self.targets = np.array([[1, 3, 3], [2, 4, 0]])
        self.input_lengths, self.target_lengths = [10, 8], [3, 2]
        self.g = rng.uniform(0.5, 1.5, size=(2,))
        self.width = alpha_width(max(self.target_lengths))

    def operands(self, device):
        """targets, (inputLengths, targetLengths), and the forward's outputs nll and logAlpha."""
        nll, log_alpha = device.tensor(np.zeros(2)), device.tensor(np.zeros((2, 10, self.width)))
        arrays = (device.int_array(self.input_lengths), device.int_array(self.target_lengths))
        targets = device.tensor(self.targets, nn.ACL_INT64, np.int64)
        return targets, arrays, nll, log_alpha

    def loss(self, device, x):
        log_probs = device.tensor(log_softmax(x))
        targets, arrays, nll, log_alpha = self.operands(device)
        device.run("CtcLoss", log_probs, targets, *arrays, self.BLANK, False, nll, log_alpha)
        device.synchronize()
        return float(np.sum(self.g * device.read(nll)))

    def step(self, device, x):
        log_probs = device.tensor(log_softmax(x))
        targets, arrays, nll, log_alpha = self.operands(device)
        g, grad = device.tensor(self.g), device.tensor(np.zeros_like(x))
        return step_with_events(
            device, device.plan("CtcLoss", log_probs, targets, *arrays, self.BLANK, False, nll, log_alpha),
            device.plan("CtcLossBackward", g, log_probs, targets, *arrays, nll, log_alpha, self.BLANK, False, grad),
            grad)


class ScaledMaskedSoftmax:
    name = "ScaledMaskedSoftmax"
    SCALE = 0.5

    def __init__(self, rng):
        self.x = rng.normal(size=(2, 2, 4, 8)) * 2
        self.mask = rng.uniform(size=(1, 2, 4, 8)) < 0.25  # true: masked out
        self.g = rng.normal(size=(2, 2, 4, 8))

    def mask_tensor(self, device):
        return device.tensor(self.mask, nn.ACL_BOOL, np.bool_)

    def loss(self, device, x):
        y = device.tensor(np.zeros_like(x))
        device.run("ScaledMaskedSoftmax", device.tensor(x), self.mask_tensor(device), self.SCALE, False, y)
        device.synchronize()
        return float(np.sum(self.g * device.read(y)))

    def step(self, device, x):
        x_t, mask, y = device.tensor(x), self.mask_tensor(device), device.tensor(np.zeros_like(x))
        g, grad = device.tensor(self.g), device.tensor(np.zeros_like(x))
        return step_with_events(device, device.plan("ScaledMaskedSoftmax", x_t, mask, self.SCALE, False, y),
                                device.plan("ScaledMaskedSoftmaxBackward", g, y, mask, self.SCALE, False, grad), grad)


PAIRS = (LogSigmoid, BinaryCrossEntropyWithLogits, KlDiv, CtcLoss, ScaledMaskedSoftmax)


def check(pair, device, rng) -> Optional[bool]:
    """One training step of `pair`, and its gradient against the central difference of its loss:
    True if they agree, False if not, None if the chip has no kernel for the pair (skipped)."""
    try:
        gradient, forward_ms, backward_ms = pair.step(device, pair.x)
    except NoKernel as refusal:
        device.release()
        print("%-29s skipped: %s" % (pair.name, refusal))
        return None
    device.release()
    direction = rng.normal(size=pair.x.shape)
    along = float(np.sum(gradient.astype(np.float64) * direction))
    estimate = (pair.loss(device, pair.x + STEP * direction) - pair.loss(device, pair.x - STEP * direction)) / (2 * STEP)
    device.release()
    agrees = abs(along - estimate) <= TOLERANCE * max(abs(along), abs(estimate), 1e-3)
    print("%-29s forward %.3f ms, backward %.3f ms; <gradient, v> = %.5f, finite difference %.5f: %s"
          % (pair.name, forward_ms, backward_ms, along, estimate, "ok" if agrees else "DIFFERENT"))
    return agrees


def main():
    device = Device()
    rng = np.random.default_rng(2026)
    results = [check(pair_class(rng), device, rng) for pair_class in PAIRS]
    device.close()
    return 1 if False in results else 0


if __name__ == "__main__":
    sys.exit(main())
