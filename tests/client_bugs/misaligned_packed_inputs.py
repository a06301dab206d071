# To save allocations, the program packs its three inputs of 3 floats back to back in one buffer:
# the second and third start 12 and 24 bytes in, which is not the 32-byte alignment aclCreateTensor
# requires of tensor data. The emulator computes the right numbers; the card may not.
# expect: memcheck misaligned tensor
# sites: 33, 39
# output: out = [-1.0, -2.0, -3.0]
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
    packed = np.array([1, 1, 1, 4, 4, 4, 1, 2, 3], np.float32)   # gradOutput | self | target
    inputs, ret = acl.rt.malloc(packed.nbytes, 0)
    check("aclrtMalloc", ret)
    out_dev, ret = acl.rt.malloc(12, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(inputs, packed.nbytes, acl.util.numpy_to_ptr(packed), packed.nbytes, H2D))
    # BUG: each part starts 3 floats (12 bytes) after the previous one
    grad, x, target = (nn.aclCreateTensor([3], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, inputs + 12 * i)
                       for i in range(3))
    out = nn.aclCreateTensor([3], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, out_dev)

    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad, x, target, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    result = np.empty(3, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), 12, out_dev, 12, D2H))
    print("out = %s" % [float(v) for v in result])

    for tensor in (grad, x, target, out):
        nn.aclDestroyTensor(tensor)
    acl.rt.free(inputs)
    acl.rt.free(out_dev)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
