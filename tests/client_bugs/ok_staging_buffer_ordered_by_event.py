# Control: race_staging_buffer_two_streams.py fixed: an event recorded on stream 1 after the download
# into the staging buffer, and waited for by stream 2 before its upload, orders the two copies, so the
# next step gets the LogSigmoid result whatever stream is synchronised first. Nothing to report.
# expect: none
# output: next input = [-0.313262, -0.126928, -0.048587, -0.018150]
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

    downloaded, ret = acl.rt.create_event()
    check("aclrtCreateEvent", ret)
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(staging, NBYTES, y, NBYTES, D2H, s1))
    check("aclrtRecordEvent", acl.rt.record_event(downloaded, s1))
    check("aclrtStreamWaitEvent", acl.rt.stream_wait_event(s2, downloaded))
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(next_input, NBYTES, staging, NBYTES, H2D, s2))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s2))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s1))

    result = np.zeros(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), NBYTES, next_input, NBYTES, D2H))
    print("next input = [%s]" % ", ".join("%.6f" % v for v in result))

    acl.rt.destroy_event(downloaded)
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
