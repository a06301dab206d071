# At the end of a run the program queues a memset that clears its pinned result buffer for the next
# run, on the default stream, and tears the device down without synchronising: aclrtResetDevice
# destroys work the program never waited for (here the reset runs it; on the card it may be dropped).
# expect: synccheck pending work destroyed
# sites: 45, 46
# output: result = [-2.0, -3.0, -5.0, -8.0]
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
    values = np.array([1, 1, 1, 1, 2, 3, 5, 8], np.float32)
    pinned, ret = acl.rt.malloc_host(64)
    check("aclrtMallocHost", ret)
    device, ret = acl.rt.malloc(64, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(device, 32, acl.util.numpy_to_ptr(values), 32, H2D))
    grad, x, out = (nn.aclCreateTensor([4], nn.ACL_FLOAT, None, offset, nn.ACL_FORMAT_ND, None, device)
                    for offset in (0, 4, 8))
    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad, x, x, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, None))
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(pinned, 16, device + 32, 16, D2H, None))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(None))
    result = acl.util.ptr_to_numpy(pinned, (4,), 11).copy()   # 11: NPY_FLOAT
    print("result = %s" % [float(v) for v in result])

    for tensor in (grad, x, out):
        nn.aclDestroyTensor(tensor)
    acl.rt.free(device)
    # BUG: queued, never synchronised: the reset below destroys it
    check("aclrtMemsetAsync", acl.rt.memset_async(pinned, 64, 0, 64, None))
    acl.rt.reset_device(0)
    acl.rt.free_host(pinned)
    acl.finalize()


if __name__ == "__main__":
    main()
