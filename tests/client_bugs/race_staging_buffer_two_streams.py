# A two-stream pipeline hands each step's result to the next step through one pinned staging buffer:
# stream 1 computes LogSigmoid and downloads it into the buffer, stream 2 uploads the buffer as the
# next step's input. No event orders the upload after the download, so on the card the two DMA
# engines go through the buffer in either order. Here stream 2 is synchronised first: its upload
# reads the buffer before the download filled it, and the next step gets the zeros it held.
# expect: racecheck race
# sites: 50, 51
# output: next input = [0.0, 0.0, 0.0, 0.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
NBYTES = 16


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def device_buffer(values=None):
    address, ret = acl.rt.malloc(NBYTES, 0)
    check("aclrtMalloc", ret)
    if values is not None:
        check("aclrtMemcpy", acl.rt.memcpy(address, NBYTES, acl.util.numpy_to_ptr(values), NBYTES, H2D))
    return address


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    x_host = np.array([1, 2, 3, 4], np.float32)
    x, y, next_input = device_buffer(x_host), device_buffer(), device_buffer()
    staging, ret = acl.rt.malloc_host(NBYTES)
    check("aclrtMallocHost", ret)
    check("aclrtMemset", acl.rt.memset(staging, NBYTES, 0, NBYTES))
    tx, ty = (nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a) for a in (x, y))
    size, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(tx, ty)
    check("aclnnLogSigmoidGetWorkspaceSize", ret)
    check("aclnnLogSigmoid", nn.aclnnLogSigmoid(None, 0, executor, s1))

    # BUG: the upload on s2 is not ordered after the download on s1 (record an event after the
    # download on s1 and make s2 wait for it)
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(staging, NBYTES, y, NBYTES, D2H, s1))
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(next_input, NBYTES, staging, NBYTES, H2D, s2))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s2))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s1))

    result = np.zeros(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), NBYTES, next_input, NBYTES, D2H))
    print("next input = %s" % [float(v) for v in result])

    nn.aclDestroyTensor(tx)
    nn.aclDestroyTensor(ty)
    acl.rt.free_host(staging)
    for address in (x, y, next_input):
        acl.rt.free(address)
    acl.rt.destroy_stream(s1)
    acl.rt.destroy_stream(s2)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
