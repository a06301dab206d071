# A wrapper builds the tensors, runs the first phase, and destroys its input tensors "since the
# executor has them now", before the second phase: on the card the launch reads freed descriptors.
# expect: memcheck destroyed tensor
# sites: 31, 36, 48
# output: grad_input = [0.268941, 0.119203, 0.047426, 0.017986]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def upload(values):
    host = np.array(values, np.float32)
    address, ret = acl.rt.malloc(host.nbytes, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D))
    return address


def prepare(grad_dev, x_dev, out_dev):
    """First phase of LogSigmoidBackward; returns the executor and the output tensor."""
    grad = nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, grad_dev)
    x = nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, x_dev)
    out = nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, out_dev)
    _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(grad, x, x, out)
    check("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
    nn.aclDestroyTensor(grad)   # BUG: the executor still needs them until the second phase
    nn.aclDestroyTensor(x)
    return executor, out


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    grad_dev, x_dev, out_dev = upload([1, 1, 1, 1]), upload([1, 2, 3, 4]), upload([0, 0, 0, 0])

    executor, out = prepare(grad_dev, x_dev, out_dev)
    check("aclnnLogSigmoidBackward", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    result = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), 16, out_dev, 16, D2H))
    print("grad_input = [%s]" % ", ".join("%.6f" % v for v in result))

    nn.aclDestroyTensor(out)
    for address in (grad_dev, x_dev, out_dev):
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
