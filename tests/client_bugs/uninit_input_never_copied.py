# The program allocates the `target` input but forgets to copy its host values in: the kernel reads
# device bytes nothing wrote. On the card they are garbage; here they read as the poison pattern,
# a NaN, which the kernel propagates to every output.
# expect: initcheck uninitialised read
# sites: 42, 50
# output: out[0] = nan
# output: out[3] = nan
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def alloc(nbytes):
    address, ret = acl.rt.malloc(nbytes, 0)
    check("aclrtMalloc", ret)
    return address


def tensor(address):
    return nn.aclCreateTensor([2, 2], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, address)


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    grad = np.ones(4, np.float32)
    x = np.array([2, 3, 5, 8], np.float32)
    target = np.array([1, 2, 3, 4], np.float32)

    grad_dev, x_dev, out_dev = alloc(16), alloc(16), alloc(16)
    target_dev = alloc(16)
    check("aclrtMemcpy", acl.rt.memcpy(grad_dev, 16, acl.util.numpy_to_ptr(grad), 16, H2D))
    check("aclrtMemcpy", acl.rt.memcpy(x_dev, 16, acl.util.numpy_to_ptr(x), 16, H2D))
    # BUG: `target` is never copied to target_dev
    tensors = [tensor(a) for a in (grad_dev, x_dev, target_dev, out_dev)]

    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(*tensors[:3], 0, False, tensors[3])
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("aclnnKlDivBackward", nn.aclnnKlDivBackward(None, 0, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    out = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), 16, out_dev, 16, D2H))
    for i, value in enumerate(out):
        print("out[%d] = %s" % (i, value))

    for t in tensors:
        nn.aclDestroyTensor(t)
    for address in (grad_dev, x_dev, target_dev, out_dev):
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
