"""aclnnCtcLoss feeding aclnnCtcLossBackward, as one training step does: the forward's real
negLogLikelihoodOut and logAlphaOut (width A = round_up(2 * 5 + 1, 8) = 16 on Atlas A2 / A3, 11 on
Ascend950: the backward reads A from the tensor) go straight into the backward.

The sizes and data are those of the documentation's examples (T=12, N=4, C=5, padded int64
targets, inputLengths 10 each, targetLengths {2, 3, 1, 5}, blank 0), the example's 240 values taken
as a model's scores: logProbs = log_softmax(scores) over the C classes, as a model hands them over.
No reduction in either direction: the loss here is sum_b weight_b * nll_b, so the backward's gradOut
is the weights (a 'mean' reduction would pass 1 / (N * max(targetLength_b, 1)) instead).

The backward (as PyTorch's _ctc_loss_backward) returns exp(logProbs) - posteriors: for normalised
log-probabilities, the gradient with respect to the scores through the log_softmax. It is checked
against PyTorch autograd of F.ctc_loss(reduction='none') when PyTorch is installed, else against
central finite differences, over the scores, of the same loss computed with aclnnCtcLoss itself in
DOUBLE (--finite-differences forces that check). Prints the losses, the gradient and the check;
exits 1 if the check fails.
"""
import sys

import numpy as np

import acl
import aclnn_api as nn

ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
TOLERANCE = 1e-4  # FLOAT results against a float64 reference

T, N, C = 12, 4, 5
SCORES = np.array([
    -1.0894, -2.7162, -0.9764, -1.9126, -2.6162, -2.0684, -2.4871, -2.0866, -1.7205, -0.7187,
    -2.4423, -1.2017, -1.4653, -1.1821, -2.5942, -2.467, -2.7257, -1.4135, -2.1042, -0.7248,
    -3.7759, -1.3742, -1.2549, -1.5807, -1.4562, -1.3826, -1.8995, -1.8527, -0.9493, -2.8895,
    -1.6316, -2.6603, -2.5014, -0.6992, -1.8609, -1.9269, -2.235, -0.8073, -1.8906, -1.8947,
    -0.3468, -2.5855, -2.0723, -2.7147, -3.6668, -0.9541, -1.7258, -2.0693, -1.6378, -2.1531,
    -3.5386, -3.483, -0.2532, -2.0557, -3.3261, -1.148, -1.808, -0.8244, -3.2414, -3.1909,
    -0.8866, -0.754, -4.4312, -3.4634, -2.6, -1.2785, -1.8347, -3.3122, -0.762, -2.8349,
    -1.4975, -1.3865, -0.9645, -3.8171, -2.0939, -2.3536, -2.0773, -1.4981, -0.8372, -2.0938,
    -1.2186, -0.8285, -2.9399, -2.1159, -2.362, -2.3139, -0.6503, -2.7249, -1.234, -3.7927,
    -0.7143, -2.5084, -3.2826, -2.6651, -1.1334, -1.6965, -1.9728, -2.3849, -1.6052, -0.9554,
    -1.6384, -1.2596, -2.168, -1.8476, -1.3866, -3.0455, -0.5737, -2.5339, -2.1118, -1.6681,
    -2.4675, -2.8842, -0.4329, -3.6266, -1.6925, -3.1023, -2.7696, -1.2755, -0.647, -2.4143,
    -2.0107, -2.0912, -1.3053, -0.8557, -3.0683, -1.2872, -3.6523, -1.6703, -2.7596, -0.8063,
    -2.4633, -1.2959, -1.6153, -2.3072, -1.0705, -3.0543, -0.6473, -1.165, -2.9025, -2.771,
    -3.5519, -2.04, -1.8667, -1.4289, -0.805, -1.4602, -0.7452, -1.5754, -3.1624, -3.1247,
    -1.4677, -1.2725, -2.9575, -1.8883, -1.2513, -1.2164, -1.5894, -2.2217, -2.3714, -1.211,
    -2.0843, -0.6515, -1.4252, -2.9402, -2.7964, -1.5261, -2.5471, -1.7167, -1.9846, -0.9488,
    -1.4847, -1.7093, -1.4095, -1.7293, -1.7675, -0.9203, -4.2299, -1.874, -1.4076, -1.6671,
    -1.9052, -0.833, -2.1839, -2.2459, -1.6193, -2.9108, -1.2114, -1.4616, -1.7297, -1.433,
    -2.2656, -0.7878, -1.8533, -1.8711, -2.0349, -2.2457, -2.1395, -1.4509, -0.7538, -2.6381,
    -0.8078, -2.1054, -2.6703, -1.1108, -3.3867, -1.7774, -1.8426, -1.9473, -1.3293, -1.3273,
    -1.349, -1.9842, -2.5357, -2.2161, -0.88, -1.5412, -1.8003, -2.7603, -0.8606, -2.0066,
    -1.8342, -2.2741, -1.8348, -1.5833, -0.9877, -3.5196, -2.3361, -0.9124, -0.9307, -2.5531,
    -1.4862, -1.2153, -1.4453, -3.4462, -1.5625, -2.6455, -1.4153, -1.3079, -1.1568, -2.2897,
]).reshape(T, N, C)
TARGETS = np.array([[1, 2, 1, 1, 2, 4, 1], [2, 2, 2, 2, 2, 2, 3], [4, 2, 1, 4, 3, 1, 4], [4, 1, 4, 2, 2, 2, 3]])
INPUT_LENGTHS = [10, 10, 10, 10]
TARGET_LENGTHS = [2, 3, 1, 5]
BLANK = 0
ZERO_INFINITY = False
WEIGHTS = np.array([1.0, 0.5, 2.0, 0.25])  # d loss / d nll_b: the backward's gradOut


def log_softmax(scores):
    """Over the classes (the last dim), in float64."""
    shifted = scores - scores.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


LOG_PROBS = log_softmax(SCORES).astype(np.float32)  # what the model hands over, in FLOAT


def check_ret(what, ret):
    if ret != acl.ACL_SUCCESS:
        print("%s failed. ERROR: %d\n%s" % (what, ret, acl.get_recent_err_msg()))
        sys.exit(1)


class Device:
    """One device and stream, and everything made on them (released by close())."""

    def __init__(self, device_id=0):
        self.device_id = device_id
        check_ret("aclInit", acl.init())
        check_ret("aclrtSetDevice", acl.rt.set_device(device_id))
        self.stream, ret = acl.rt.create_stream()
        check_ret("aclrtCreateStream", ret)
        self.buffers, self.tensors = [], []

    def tensor(self, host, data_type):
        """A contiguous device tensor holding `host` (a NumPy array of the device dtype)."""
        host = np.ascontiguousarray(host)
        address, ret = acl.rt.malloc(max(host.nbytes, 1), 0)
        check_ret("aclrtMalloc", ret)
        self.buffers.append(address)
        self.upload(address, host)
        strides = [int(s // host.itemsize) for s in host.strides]
        tensor = nn.aclCreateTensor(list(host.shape), data_type, strides, 0, nn.ACL_FORMAT_ND, list(host.shape), address)
        self.tensors.append(tensor)
        return address, tensor

    def upload(self, address, host):
        check_ret("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                                               ACL_MEMCPY_HOST_TO_DEVICE))

    def download(self, address, like):
        result = np.zeros_like(like)
        check_ret("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), result.nbytes, address, result.nbytes,
                                               ACL_MEMCPY_DEVICE_TO_HOST))
        return result

    def run(self, name, first_phase, second_phase, *args):
        """Both phases of an operator, with the workspace the first asks for, then a synchronisation."""
        workspace_size, executor, ret = first_phase(*args)
        check_ret(name + "GetWorkspaceSize", ret)
        workspace = None
        if workspace_size > 0:
            workspace, ret = acl.rt.malloc(workspace_size, 0)
            check_ret("allocate workspace", ret)
        check_ret(name, second_phase(workspace, workspace_size, executor, self.stream))
        check_ret("aclrtSynchronizeStream", acl.rt.synchronize_stream(self.stream))
        if workspace is not None:
            acl.rt.free(workspace)

    def close(self):
        for tensor in self.tensors:
            nn.aclDestroyTensor(tensor)
        for address in self.buffers:
            acl.rt.free(address)
        acl.rt.destroy_stream(self.stream)
        acl.rt.reset_device(self.device_id)
        acl.finalize()


def alpha_width(max_target_length):
    """logAlphaOut's width on this chip: the Ascend950 family (also named Ascend910_95) keeps 2 * max + 1,
    the others round it up to 8."""
    exact = 2 * max_target_length + 1
    return exact if acl.get_soc_name().startswith(("Ascend950", "Ascend910_95")) else (exact + 7) // 8 * 8


class Forward:
    """aclnnCtcLoss's tensors on a device, for log-probabilities of one dtype (FLOAT or DOUBLE)."""

    def __init__(self, device, host_type, data_type):
        self.device, self.host_type, self.data_type = device, host_type, data_type
        self.log_probs_addr, self.log_probs = device.tensor(LOG_PROBS.astype(host_type), data_type)
        _, self.targets = device.tensor(TARGETS.astype(np.int64), nn.ACL_INT64)
        self.nll_host = np.zeros(N, host_type)
        self.alpha_host = np.zeros((N, T, alpha_width(max(TARGET_LENGTHS))), host_type)
        self.nll_addr, self.nll = device.tensor(self.nll_host, data_type)
        self.alpha_addr, self.alpha = device.tensor(self.alpha_host, data_type)
        self.input_lengths = nn.aclCreateIntArray(INPUT_LENGTHS)
        self.target_lengths = nn.aclCreateIntArray(TARGET_LENGTHS)

    def run(self, log_probs=None):
        """The losses (N) of LOG_PROBS, or of `log_probs` uploaded first."""
        if log_probs is not None:
            self.device.upload(self.log_probs_addr, np.ascontiguousarray(log_probs, dtype=self.host_type))
        self.device.run("aclnnCtcLoss", nn.aclnnCtcLossGetWorkspaceSize, nn.aclnnCtcLoss, self.log_probs,
                        self.targets, self.input_lengths, self.target_lengths, BLANK, ZERO_INFINITY, self.nll,
                        self.alpha)
        return self.device.download(self.nll_addr, self.nll_host)

    def close(self):
        nn.aclDestroyIntArray(self.input_lengths)
        nn.aclDestroyIntArray(self.target_lengths)


def gradient(device, forward):
    """aclnnCtcLossBackward on the forward's own outputs; the gradient (T, N, C)."""
    _, grad_out = device.tensor(WEIGHTS.astype(np.float32), nn.ACL_FLOAT)
    out_host = np.zeros((T, N, C), np.float32)
    out_addr, out = device.tensor(out_host, nn.ACL_FLOAT)
    device.run("aclnnCtcLossBackward", nn.aclnnCtcLossBackwardGetWorkspaceSize, nn.aclnnCtcLossBackward, grad_out,
               forward.log_probs, forward.targets, forward.input_lengths, forward.target_lengths, forward.nll,
               forward.alpha, BLANK, ZERO_INFINITY, out)
    return device.download(out_addr, out_host)


def torch_gradient(torch):
    """PyTorch autograd of sum_b weight_b * F.ctc_loss(reduction='none')_b, in float64, with
    respect to the (FLOAT) log-probabilities."""
    log_probs = torch.tensor(LOG_PROBS.astype(np.float64), requires_grad=True)
    losses = torch.nn.functional.ctc_loss(log_probs, torch.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS, BLANK,
                                          reduction="none", zero_infinity=ZERO_INFINITY)
    (losses * torch.tensor(WEIGHTS)).sum().backward()
    return log_probs.grad.numpy()


def finite_difference_gradient(device, step=1e-5):
    """Central differences over the scores of sum_b weight_b * nll_b(log_softmax(scores)), with
    aclnnCtcLoss in DOUBLE."""
    forward = Forward(device, np.float64, nn.ACL_DOUBLE)
    estimate = np.zeros_like(SCORES)
    for index in np.ndindex(SCORES.shape):
        shifted = SCORES.copy()
        shifted[index] += step
        up = WEIGHTS @ forward.run(log_softmax(shifted))
        shifted[index] -= 2 * step
        down = WEIGHTS @ forward.run(log_softmax(shifted))
        estimate[index] = (up - down) / (2 * step)
    forward.close()
    return estimate


def main(argv):
    device = Device()
    forward = Forward(device, np.float32, nn.ACL_FLOAT)
    losses = forward.run()
    for b in range(N):
        print("negLogLikelihood[%d] is: %f" % (b, losses[b]))
    grad = gradient(device, forward)
    for i, value in enumerate(grad.reshape(-1)):
        print("gradient result[%d] is: %f" % (i, value))

    torch = None
    if "--finite-differences" not in argv:
        try:
            import torch
        except ImportError:
            pass
    if torch is not None:
        reference, against = torch_gradient(torch), "PyTorch autograd of F.ctc_loss(reduction='none')"
    else:
        reference, against = finite_difference_gradient(device), "central finite differences of aclnnCtcLoss"
    error = float(np.max(np.abs(grad - reference) / (TOLERANCE + TOLERANCE * np.abs(reference))))
    verdict = "ok" if error <= 1.0 else "FAILED"
    print("gradient vs %s: largest error %.2g of the tolerance (%g absolute + relative): %s"
          % (against, error, TOLERANCE, verdict))

    forward.close()
    device.close()
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
