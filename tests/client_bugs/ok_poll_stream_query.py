# Control: instead of blocking in aclrtSynchronizeStream, the host polls the stream with
# aclrtStreamQuery and does other work until it answers complete; a query that answers complete
# orders the work before the host's later calls, so the copy back is safe. Nothing to report.
# expect: none
# output: result = [0.268941, 0.119203, 0.047426, 0.017986]
# output: polled until complete
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
COMPLETE = 0   # ACL_STREAM_STATUS_COMPLETE


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    hosts = [np.ones(4, np.float32), np.array([1, 2, 3, 4], np.float32)]
    addresses = [acl.rt.malloc(16, 0)[0] for _ in range(3)]
    for address, host in zip(addresses, hosts):
        check("aclrtMemcpy", acl.rt.memcpy(address, 16, acl.util.numpy_to_ptr(host), 16, H2D))
    g, x, out = (nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a) for a in addresses)
    _, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(g, x, x, out)
    check("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
    check("aclnnLogSigmoidBackward", nn.aclnnLogSigmoidBackward(None, 0, executor, stream))

    polls = 0
    while True:
        status, ret = acl.rt.stream_query(stream)
        check("aclrtStreamQuery", ret)
        if status == COMPLETE:
            break
        polls += 1   # ... the host does something useful meanwhile
        if polls > 1000:
            sys.exit("the stream never completed")
    print("polled until complete")
    result = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), 16, addresses[2], 16, D2H))
    print("result = [%s]" % ", ".join("%.6f" % v for v in result))

    for tensor in (g, x, out):
        nn.aclDestroyTensor(tensor)
    for address in addresses:
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
