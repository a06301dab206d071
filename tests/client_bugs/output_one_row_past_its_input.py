# To keep a copy of its first row, the program writes the log-sigmoid of a [3, 8] tensor into the
# same buffer one row further on, as a view over rows 1 to 3, instead of in place or into a buffer of
# its own. Each row the output writes is the input of the next row: on a card the cores read and
# write them in no fixed order, so the output's rows 1 and 2 hold the log-sigmoid of the input or of
# the log-sigmoid, as it happens. Only its row 0 comes from an input that nothing overwrites (rows
# of 8 floats keep every view 32-byte aligned): ln(sigmoid(0)) = -0.69315, ln(sigmoid(1)) =
# -0.31326, ln(sigmoid(-1)) = -1.31326, ln(sigmoid(2)) = -0.12693.
# expect: memcheck overlapping output
# sites: 38, 40, 43
# output: out row 0 begins: [-0.69315, -0.31326, -1.31326, -0.12693]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
ROWS, COLS = 3, 8


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    rows = np.zeros((ROWS + 1, COLS), np.float32)  # and a spare row
    rows[:ROWS] = np.array([0, 1, -1, 2, -2, 3, -3, 0.5]) + np.arange(ROWS)[:, None]
    buffer, ret = acl.rt.malloc(rows.nbytes, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(buffer, rows.nbytes, acl.util.numpy_to_ptr(rows), rows.nbytes, H2D))
    row_bytes = COLS * 4

    x = nn.aclCreateTensor([ROWS, COLS], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, buffer)
    # BUG: the output is the same memory one row on, so each row it writes is the next row's input
    out = nn.aclCreateTensor([ROWS, COLS], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, buffer + row_bytes)
    _, executor, ret = nn.aclnnLogSigmoidGetWorkspaceSize(x, out)
    check("aclnnLogSigmoidGetWorkspaceSize", ret)
    check("aclnnLogSigmoid", nn.aclnnLogSigmoid(None, 0, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    result = np.empty_like(rows)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), result.nbytes, buffer, result.nbytes, D2H))
    print("out row 0 begins: [%s]" % ", ".join("%.5f" % v for v in result[1, :4]))

    nn.aclDestroyTensor(x)
    nn.aclDestroyTensor(out)
    acl.rt.free(buffer)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
