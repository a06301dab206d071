# An evaluation loop builds its tensors for every batch and never destroys them: each iteration leaks
# four aclTensors (the executor itself is consumed by its launch). The numbers are right; the handles pile up.
# expect: leakcheck leak
# sites: 37
# output: batch 0: [0.268941, 0.119203, 0.047426, 0.017986]
# output: batch 2: [0.268941, 0.119203, 0.047426, 0.017986]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    grad = np.ones(4, np.float32)
    x = np.array([1, 2, 3, 4], np.float32)
    buffers = []
    for host in (grad, x, np.zeros(4, np.float32)):
        address, ret = acl.rt.malloc(16, 0)
        check("aclrtMalloc", ret)
        check("aclrtMemcpy", acl.rt.memcpy(address, 16, acl.util.numpy_to_ptr(host), 16, H2D))
        buffers.append(address)
    grad_dev, x_dev, out_dev = buffers

    for batch in range(3):
        tensors = [nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
                   for a in (grad_dev, x_dev, x_dev, out_dev)]
        _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
        check("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
        check("aclnnLogSigmoidBackward", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
        check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
        result = np.empty(4, np.float32)
        check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), 16, out_dev, 16, D2H))
        print("batch %d: [%s]" % (batch, ", ".join("%.6f" % v for v in result)))
        # BUG: the tensors are never destroyed

    for address in buffers:
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
