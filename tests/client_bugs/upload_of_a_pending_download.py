# A result is downloaded with aclrtMemcpyAsync into pinned memory, and the program passes it on to
# another device buffer with aclrtMemcpy before synchronising the stream: aclrtMemcpy does not wait
# for queued work, so it copies what the pinned buffer held before the download (its -1 fill).
# expect: synccheck missing synchronisation
# sites: 39, 40
# output: passed on = [-1.0, -1.0, -1.0, -1.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
NBYTES = 16


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    x_host = np.array([1, 2, 3, 4], np.float32)
    x, y, kept = (acl.rt.malloc(NBYTES, 0)[0] for _ in range(3))
    check("aclrtMemcpy", acl.rt.memcpy(x, NBYTES, acl.util.numpy_to_ptr(x_host), NBYTES, H2D))
    pinned, ret = acl.rt.malloc_host(NBYTES)
    check("aclrtMallocHost", ret)
    acl.util.ptr_to_numpy(pinned, (4,), np.dtype(np.float32).num)[:] = -1
    tx, ty = (nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a) for a in (x, y))
    size, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(tx, ty)
    check("aclnnLogSigmoidGetWorkspaceSize", ret)
    check("aclnnLogSigmoid", nn.aclnnLogSigmoid(None, 0, executor, stream))

    # BUG: aclrtMemcpy reads `pinned` before the download into it was synchronised
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(pinned, NBYTES, y, NBYTES, D2H, stream))
    check("aclrtMemcpy", acl.rt.memcpy(kept, NBYTES, pinned, NBYTES, H2D))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    result = np.zeros(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), NBYTES, kept, NBYTES, D2H))
    print("passed on = %s" % [float(v) for v in result])

    nn.aclDestroyTensor(tx)
    nn.aclDestroyTensor(ty)
    acl.rt.free_host(pinned)
    for address in (x, y, kept):
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
