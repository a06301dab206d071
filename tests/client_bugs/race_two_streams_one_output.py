# Two loss gradients are computed concurrently on two streams, but a copy-paste gives both kernels
# the same output tensor: they race on it (write/write). Here the second stream's kernel runs last,
# so out_a holds out_b's values and out_b keeps its zeros.
# expect: racecheck race
# sites: 58, 59
# output: out_a = [-4.0, -6.0, -10.0, -16.0]
# output: out_b = [0.0, 0.0, 0.0, 0.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


class Buffer:
    def __init__(self, values):
        self.host = np.array(values, np.float32)
        self.address, ret = acl.rt.malloc(self.host.nbytes, 0)
        check("aclrtMalloc", ret)
        check("aclrtMemcpy", acl.rt.memcpy(self.address, self.host.nbytes, acl.util.numpy_to_ptr(self.host),
                                           self.host.nbytes, H2D))
        self.tensor = nn.aclCreateTensor([2, 2], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, self.address)

    def read(self):
        check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(self.host), self.host.nbytes, self.address,
                                           self.host.nbytes, D2H))
        return [float(v) for v in self.host]

    def release(self):
        nn.aclDestroyTensor(self.tensor)
        acl.rt.free(self.address)


def kl_div_backward(grad, x, target, out, stream):
    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad.tensor, x.tensor, target.tensor, 0, False,
                                                                 out.tensor)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, stream))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    ones, twos = Buffer([1, 1, 1, 1]), Buffer([2, 2, 2, 2])
    x, target = Buffer([2, 3, 5, 8]), Buffer([2, 3, 5, 8])
    out_a, out_b = Buffer([0, 0, 0, 0]), Buffer([0, 0, 0, 0])

    kl_div_backward(ones, x, target, out_a, s1)
    kl_div_backward(twos, x, target, out_a, s2)  # BUG: should write out_b

    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s1))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s2))
    print("out_a = %s" % out_a.read())
    print("out_b = %s" % out_b.read())

    for buffer in (ones, twos, x, target, out_a, out_b):
        buffer.release()
    acl.rt.destroy_stream(s1)
    acl.rt.destroy_stream(s2)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
