# The program uploads on one stream and computes on another; before reading the result it
# synchronises the upload stream, not the compute stream, so the copy reads the output before the
# kernel wrote it (the zeros it was initialised with, instead of -target * gradOutput).
# expect: synccheck missing synchronisation
# sites: 45, 50
# output: out[0] = 0.0
# output: out[3] = 0.0
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
    upload, ret = acl.rt.create_stream()
    compute, ret = acl.rt.create_stream()

    hosts = [np.array([2, 3, 5, 8], np.float32) for _ in range(3)] + [np.zeros(4, np.float32)]
    addresses, tensors = [], []
    for host in hosts:
        address, ret = acl.rt.malloc(host.nbytes, 0)
        check("aclrtMalloc", ret)
        check("aclrtMemcpyAsync", acl.rt.memcpy_async(address, host.nbytes, acl.util.numpy_to_ptr(host),
                                                      host.nbytes, H2D, upload))
        addresses.append(address)
        tensors.append(nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, address))
    event, ret = acl.rt.create_event()
    check("aclrtRecordEvent", acl.rt.record_event(event, upload))
    check("aclrtStreamWaitEvent", acl.rt.stream_wait_event(compute, event))

    grad_output, self_, target, out = tensors
    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(grad_output, self_, target, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, compute))

    # BUG: the kernel is on `compute`; this waits for `upload` only
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(upload))
    result = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), result.nbytes, addresses[3], result.nbytes, D2H))
    for i, value in enumerate(result):
        print("out[%d] = %.1f" % (i, value))

    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(compute))
    for tensor in tensors:
        nn.aclDestroyTensor(tensor)
    for address in addresses:
        acl.rt.free(address)
    acl.rt.destroy_event(event)
    acl.rt.destroy_stream(upload)
    acl.rt.destroy_stream(compute)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
