# Control: a three-stream pipeline done right. The upload stream copies the inputs in and records an
# event; stage 1 (stream s1) waits for it, computes `mid` and records another; stage 2 (stream s2)
# waits for that one and reads `mid`. The host synchronises an event recorded after stage 2 before
# reading the result, and the upload stream before its host arrays change. Nothing to report.
# expect: none
# output: final = [2.0, 3.0, 5.0, 8.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def kl_div_backward(grad, x, target, out, stream):
    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad, x, target, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, stream))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    upload, s1, s2 = (acl.rt.create_stream()[0] for _ in range(3))
    uploaded, stage1_done, stage2_done = (acl.rt.create_event()[0] for _ in range(3))
    hosts = [np.ones(4, np.float32), np.array([2, 3, 5, 8], np.float32), np.array([2, 3, 5, 8], np.float32)]
    addresses = [acl.rt.malloc(16, 0)[0] for _ in range(5)]
    for address, host in zip(addresses, hosts):
        check("aclrtMemcpyAsync", acl.rt.memcpy_async(address, 16, acl.util.numpy_to_ptr(host), 16, H2D, upload))
    check("aclrtRecordEvent", acl.rt.record_event(uploaded, upload))
    g, x, t, mid, final = (nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a)
                           for a in addresses)

    check("aclrtStreamWaitEvent", acl.rt.stream_wait_event(s1, uploaded))
    kl_div_backward(g, x, t, mid, s1)                 # mid = -t
    check("aclrtRecordEvent", acl.rt.record_event(stage1_done, s1))
    check("aclrtStreamWaitEvent", acl.rt.stream_wait_event(s2, stage1_done))
    kl_div_backward(g, x, mid, final, s2)             # final = -mid = t
    check("aclrtRecordEvent", acl.rt.record_event(stage2_done, s2))

    check("aclrtSynchronizeEvent", acl.rt.synchronize_event(stage2_done))
    result = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), 16, addresses[4], 16, D2H))
    print("final = %s" % [float(v) for v in result])

    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(upload))
    for tensor in (g, x, t, mid, final):
        nn.aclDestroyTensor(tensor)
    for address in addresses:
        acl.rt.free(address)
    for event in (uploaded, stage1_done, stage2_done):
        acl.rt.destroy_event(event)
    for stream in (upload, s1, s2):
        acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
