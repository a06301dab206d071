# A helper uploads a temporary input, launches the kernel and frees the temporary at once, as if the
# launch had consumed it: the kernel is still queued and, when it runs, its input is freed memory.
# The synchronisation fails with the AI-core exception code and the output keeps its zeros.
# expect: synccheck memory freed while in use
# expect: memcheck invalid device access
# sites: 32, 37, 40
# output: aclrtSynchronizeStream returned 507015
# output: grad_input = [0.0, 0.0, 0.0, 0.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def to_device(host):
    address, ret = acl.rt.malloc(host.nbytes, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D))
    return address


def log_sigmoid_backward(grad_dev, x_host, out_dev, stream):
    x_dev = to_device(x_host)   # a temporary copy of the input
    tensors = [nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
               for a in (grad_dev, x_dev, x_dev, out_dev)]
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
    check("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
    check("aclnnLogSigmoidBackward", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
    for tensor in tensors:
        nn.aclDestroyTensor(tensor)
    acl.rt.free(x_dev)   # BUG: the kernel queued above has not run yet


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    grad = np.ones(4, np.float32)
    x = np.array([1, 2, 3, 4], np.float32)
    out = np.zeros(4, np.float32)
    grad_dev, out_dev = to_device(grad), to_device(out)

    log_sigmoid_backward(grad_dev, x, out_dev, stream)
    ret = acl.rt.synchronize_stream(stream)
    print("aclrtSynchronizeStream returned %d" % ret)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), 16, out_dev, 16, D2H))
    print("grad_input = %s" % [float(v) for v in out])

    acl.rt.free(grad_dev)
    acl.rt.free(out_dev)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
