# The input is uploaded with aclrtMemcpyAsync, and the host then scales the same NumPy array in place
# for its own reference computation, before synchronising: the copy had not run, so the device got
# the scaled values (on the card, either version, or a mix).
# expect: synccheck host memory in flight
# sites: 37, 42
# output: device x = [4.0, 6.0, 10.0, 16.0]
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
    x = np.array([2, 3, 5, 8], np.float32)
    ones = np.ones(4, np.float32)
    x_dev, _ = acl.rt.malloc(16, 0)
    g_dev, _ = acl.rt.malloc(16, 0)
    out_dev, _ = acl.rt.malloc(16, 0)
    check("aclrtMemcpy", acl.rt.memcpy(g_dev, 16, acl.util.numpy_to_ptr(ones), 16, H2D))
    grad, self_, target, out = (nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
                                for a in (g_dev, x_dev, x_dev, out_dev))

    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad, self_, target, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(x_dev, 16, acl.util.numpy_to_ptr(x), 16, H2D, stream))
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, stream))
    # BUG: x is still being copied by the stream; the host changes it before synchronising
    x *= 2
    expected = -x  # the host's reference, computed from the doubled values
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    check_x = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(check_x), 16, x_dev, 16, D2H))
    print("device x = %s" % [float(v) for v in check_x])
    print("expected %s" % [float(v) for v in expected])

    for t in (grad, self_, target, out):
        nn.aclDestroyTensor(t)
    for address in (x_dev, g_dev, out_dev):
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
