# Two CTC-loss backward passes (two utterances) run on two streams to overlap; to save memory the
# program allocates one workspace and gives it to both launches. Both kernels write their scratch
# data there unordered: a write/write race (on the card, wrong gradients; here the kernels happen to
# run one after the other, so the numbers are right).
# expect: racecheck race
# sites: 68, 94, 95
# output: utterance 0: out[0] = [-0.045018, -0.434791, 0.479808]
# output: utterance 1: out[0] = [-0.098383, 0.494951, -0.396568]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
T, C = 4, 3


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def forward(log_probs, labels):
    """The CTC forward pass on the host: log alpha (T, 2S+1) and the negative log likelihood."""
    ext = [0]
    for label in labels:
        ext += [label, 0]
    alpha = np.full((T, len(ext)), -np.inf)
    alpha[0, :2] = log_probs[0, ext[:2]]
    for t in range(1, T):
        for s in range(len(ext)):
            terms = [alpha[t - 1, s]] + ([alpha[t - 1, s - 1]] if s >= 1 else [])
            if s >= 2 and ext[s] != 0 and ext[s] != ext[s - 2]:
                terms.append(alpha[t - 1, s - 2])
            alpha[t, s] = np.logaddexp.reduce(terms) + log_probs[t, ext[s]]
    return alpha, -np.logaddexp(alpha[-1, -1], alpha[-1, -2])


class Utterance:
    """One batch item (N = 1) on the device, with the tensors of CtcLossBackward."""

    def __init__(self, seed, labels):
        logits = np.sin(np.arange(T * C, dtype=np.float64) * seed).reshape(T, C)
        log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        alpha, nll = forward(log_probs, labels)
        alpha = np.where(np.isinf(alpha), -99999.0, alpha)
        self.hosts = [np.ones(1, np.float32), log_probs.astype(np.float32), np.array([labels], np.int64),
                      np.array([nll], np.float32), alpha.astype(np.float32)[None], np.zeros((T, 1, C), np.float32)]
        shapes = [[1], [T, 1, C], [1, len(labels)], [1], [1, T, 2 * len(labels) + 1], [T, 1, C]]
        self.addresses, self.tensors = [], []
        for host, shape in zip(self.hosts, shapes):
            address, ret = acl.rt.malloc(host.nbytes, 0)
            check("aclrtMalloc", ret)
            check("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D))
            dtype = nn.ACL_INT64 if host.dtype == np.int64 else nn.ACL_FLOAT
            self.addresses.append(address)
            self.tensors.append(nn.aclCreateTensor(shape, dtype, None, 0, nn.ACL_FORMAT_ND, None, address))
        self.input_lengths = nn.aclCreateIntArray([T])
        self.target_lengths = nn.aclCreateIntArray([len(labels)])

    def backward(self, workspace, workspace_size, stream):
        g, lp, tg, nll, alpha, out = self.tensors
        size, executor, ret = nn.aclnnCtcLossBackwardGetWorkspaceSize(
            g, lp, tg, self.input_lengths, self.target_lengths, nll, alpha, 0, False, out)
        check("aclnnCtcLossBackwardGetWorkspaceSize", ret)
        check("aclnnCtcLossBackward", nn.aclnnCtcLossBackward(workspace, workspace_size, executor, stream))

    def result(self):
        out = self.hosts[5]
        check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, self.addresses[5], out.nbytes, D2H))
        return out

    def release(self):
        for tensor in self.tensors:
            nn.aclDestroyTensor(tensor)
        nn.aclDestroyIntArray(self.input_lengths)
        nn.aclDestroyIntArray(self.target_lengths)
        for address in self.addresses:
            acl.rt.free(address)


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    streams = [acl.rt.create_stream()[0] for _ in range(2)]
    utterances = [Utterance(0.7, [1, 2]), Utterance(1.3, [2, 2])]
    workspace_size = 4096   # enough for either (the first phase asks for less)
    workspace, ret = acl.rt.malloc(workspace_size, 0)
    check("aclrtMalloc", ret)

    # BUG: one workspace for two launches on two streams that nothing orders
    utterances[0].backward(workspace, workspace_size, streams[0])
    utterances[1].backward(workspace, workspace_size, streams[1])
    for stream in streams:
        check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    for i, utterance in enumerate(utterances):
        print("utterance %d: out[0] = [%s]" % (i, ", ".join("%.6f" % v for v in utterance.result()[0, 0])))

    for utterance in utterances:
        utterance.release()
    acl.rt.free(workspace)
    for stream in streams:
        acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
