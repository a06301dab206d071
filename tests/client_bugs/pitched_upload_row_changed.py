# An image of 1000 rows is uploaded from a pitched host array (rows of 4 floats, 8 apart: 16 bytes
# used of every 32) with aclrtMemcpy2dAsync, and the host marks row 500 before synchronising. The
# copy had not run: the device gets the mark (on the card, either version of the row).
# expect: synccheck host memory in flight
# sites: 30, 33
# output: device row 500 = [42.0, 42.0, 42.0, 42.0]
import sys

import numpy as np

import acl

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
ROWS, WIDTH, PITCH = 1000, 16, 32


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    image = np.ones((ROWS, PITCH // 4), np.float32)
    device, ret = acl.rt.malloc(ROWS * WIDTH, 0)
    check("aclrtMalloc", ret)

    check("aclrtMemcpy2dAsync", acl.rt.memcpy_2d_async(device, WIDTH, acl.util.numpy_to_ptr(image), PITCH, WIDTH,
                                                       ROWS, H2D, stream))
    image[500, :4] = 42.0  # BUG: the copy has not run yet
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    back = np.zeros((ROWS, WIDTH // 4), np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, device, back.nbytes, D2H))
    print("device row 500 = %s" % [float(v) for v in back[500]])

    acl.rt.free(device)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
