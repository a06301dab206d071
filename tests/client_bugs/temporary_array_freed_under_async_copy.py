# A helper uploads a batch with aclrtMemcpyAsync from a NumPy array it makes, and returns before the
# stream is synchronised: the array (4 MB, whose pages go back to the system at once) is freed while
# the copy is queued. On the card the copy reads freed memory when it runs; here it faults at the
# synchronisation (507015), and the device keeps the zeros it was set to. (Eagerly the copy ran before
# the array went: only the host memory in flight is reported.)
# expect: synccheck host memory in flight
# expect: memcheck invalid device access
# sites: 28, 40
# output: synchronisation: 507015
# output: batch[:4] on the device = [0.0, 0.0, 0.0, 0.0]
import sys

import numpy as np

import acl

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
N = 1 << 20


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def upload(device, values, stream):
    host = np.asarray(values, dtype=np.float32)  # a new array, alive only in this function
    check("aclrtMemcpyAsync", acl.rt.memcpy_async(device, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                                                  H2D, stream))
    # BUG: returns before the copy ran, and `host` goes with it (keep it until the stream is synchronised)


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    batch, _ = acl.rt.malloc(N * 4, 0)
    check("aclrtMemset", acl.rt.memset(batch, N * 4, 0, N * 4))
    upload(batch, np.arange(N, dtype=np.float64), stream)
    print("synchronisation: %d" % acl.rt.synchronize_stream(stream))

    back = np.zeros(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, batch, back.nbytes, D2H))
    print("batch[:4] on the device = %s" % [float(v) for v in back])

    acl.rt.free(batch)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
