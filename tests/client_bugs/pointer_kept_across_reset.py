# A model object uploads its weights once and keeps the device pointer. Between two runs the program
# "cleans up" with aclrtResetDevice and sets the device again: the reset released the weights (a leak:
# the program never freed them), and the next kernel reads the stale pointer, which faults.
# expect: memcheck invalid device access
# expect: leakcheck leak
# sites: 27, 49
# output: aclrtSynchronizeStream returned 507015
# output: aclrtFree(weights) returned 107000
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


class Model:
    def __init__(self, weights):
        self.host = np.array(weights, np.float32)
        self.weights, ret = acl.rt.malloc(self.host.nbytes, 0)
        check("aclrtMalloc", ret)
        check("aclrtMemcpy", acl.rt.memcpy(self.weights, 16, acl.util.numpy_to_ptr(self.host), 16, H2D))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    model = Model([1, 2, 3, 4])
    # BUG: the reset releases everything the device holds, the model's weights included
    check("aclrtResetDevice", acl.rt.reset_device(0))
    check("aclrtSetDevice", acl.rt.set_device(0))

    stream, _ = acl.rt.create_stream()
    grad = np.ones(4, np.float32)
    grad_dev, _ = acl.rt.malloc(16, 0)
    out_dev, _ = acl.rt.malloc(16, 0)
    check("aclrtMemcpy", acl.rt.memcpy(grad_dev, 16, acl.util.numpy_to_ptr(grad), 16, H2D))
    tensors = [nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
               for a in (grad_dev, model.weights, model.weights, out_dev)]
    _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(*tensors)
    check("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
    check("aclnnLogSigmoidBackward", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))
    print("aclrtSynchronizeStream returned %d" % acl.rt.synchronize_stream(stream))

    for tensor in tensors:
        nn.aclDestroyTensor(tensor)
    print("aclrtFree(weights) returned %d" % acl.rt.free(model.weights))
    acl.rt.free(grad_dev)
    acl.rt.free(out_dev)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
