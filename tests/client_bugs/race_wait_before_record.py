# A two-stage pipeline: stage 1 (stream s1) computes `mid`, stage 2 (stream s2) reads it. The
# program makes s2 wait for the event before s1 records it: a wait for an event that was never
# recorded does not wait, so stage 2 is not ordered after stage 1 (a read/write race). Stage 2 ran
# first here and read the zeros `mid` was initialised with.
# expect: racecheck race
# sites: 53, 56
# output: final = [-0.0, -0.0, -0.0, -0.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def device_tensor(values, keep):
    host = np.array(values, np.float32)
    keep.append(host)
    address, ret = acl.rt.malloc(host.nbytes, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D))
    return address, nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, address)


def kl_div_backward(grad, x, target, out, stream):
    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad, x, target, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    return nn.aclnnKlDivBackward(None, 0, executor, stream)


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    stage1_done, _ = acl.rt.create_event()
    keep = []
    g_addr, g = device_tensor([1, 1, 1, 1], keep)
    x_addr, x = device_tensor([2, 3, 5, 8], keep)
    t_addr, t = device_tensor([2, 3, 5, 8], keep)
    mid_addr, mid = device_tensor([0, 0, 0, 0], keep)
    final_addr, final = device_tensor([0, 0, 0, 0], keep)

    # BUG: the wait is queued before the record it should wait for
    check("aclrtStreamWaitEvent", acl.rt.stream_wait_event(s2, stage1_done))
    check("stage 1", kl_div_backward(g, x, t, mid, s1))               # mid = -t
    check("aclrtRecordEvent", acl.rt.record_event(stage1_done, s1))

    check("stage 2", kl_div_backward(g, x, mid, final, s2))           # final = -mid
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s2))
    result = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), result.nbytes, final_addr, result.nbytes, D2H))
    print("final = %s" % [float(v) for v in result])
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(s1))

    for tensor in (g, x, t, mid, final):
        nn.aclDestroyTensor(tensor)
    for address in (g_addr, x_addr, t_addr, mid_addr, final_addr):
        acl.rt.free(address)
    acl.rt.destroy_event(stage1_done)
    acl.rt.destroy_stream(s1)
    acl.rt.destroy_stream(s2)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
