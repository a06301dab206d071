# The output buffer is sized with the element size of float16 while the tensor is float32: the
# kernel writes, and the copy back reads, 16 bytes past the 16 requested. They land in the padding
# aclrtMalloc adds (so the card does not fault, and the numbers even look right) but were never the
# program's.
# expect: memcheck padding overrun
# sites: 33, 42, 45
# output: grad_input = [0.26894, 0.11920, 0.04743, 0.01799, 0.00669, 0.00247, 0.00091, 0.00034]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
N = 8


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    grad = np.ones(N, np.float32)
    x = np.arange(1, N + 1, dtype=np.float32)
    grad_dev, _ = acl.rt.malloc(grad.nbytes, 0)
    x_dev, _ = acl.rt.malloc(x.nbytes, 0)
    # BUG: 2 bytes per element (float16), the tensor below is float32
    out_dev, ret = acl.rt.malloc(N * 2, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(grad_dev, grad.nbytes, acl.util.numpy_to_ptr(grad), grad.nbytes, H2D))
    check("aclrtMemcpy", acl.rt.memcpy(x_dev, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, H2D))
    tensors = [nn.aclCreateTensor([N], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
               for a in (grad_dev, x_dev, x_dev, out_dev)]

    _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
    check("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
    check("aclnnLogSigmoidBackward", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    out = np.empty(N, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, out_dev, out.nbytes, D2H))
    print("grad_input = [%s]" % ", ".join("%.5f" % v for v in out))

    for tensor in tensors:
        nn.aclDestroyTensor(tensor)
    for address in (grad_dev, x_dev, out_dev):
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
