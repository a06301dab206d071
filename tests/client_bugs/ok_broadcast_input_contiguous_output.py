# output_strides_of_a_broadcast_input.py fixed: the target stays a stride-0 view along the batch (an
# input may repeat its elements), and the output is made contiguous, one element for each loss.
# expect: none
# output: row 0: [-0.19459, 0.32958, 0.32958, 0.32958]
# output: row 2: [0.00000, 0.32958, 0.12164, -0.20794]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
ROWS, COLS = 3, 4


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def upload(values):
    address, ret = acl.rt.malloc(values.nbytes, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemcpy", acl.rt.memcpy(address, values.nbytes, acl.util.numpy_to_ptr(values), values.nbytes, H2D))
    return address


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    log_probs = np.log(np.array([[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25], [0.1, 0.1, 0.2, 0.6]], np.float32))
    target = np.array([0.1, 0.3, 0.3, 0.3], np.float32)  # one row, for every row of the batch
    self_dev, target_dev = upload(log_probs), upload(target)
    out_dev, ret = acl.rt.malloc(log_probs.nbytes, 0)
    check("aclrtMalloc", ret)
    check("aclrtMemset", acl.rt.memset(out_dev, log_probs.nbytes, 0, log_probs.nbytes))
    expanded = [0, 1]  # the target's strides: stride 0 along the batch
    self_tensor = nn.aclCreateTensor([ROWS, COLS], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, self_dev)
    target_tensor = nn.aclCreateTensor([ROWS, COLS], nn.ACL_FLOAT, expanded, 0, nn.ACL_FORMAT_ND, [COLS], target_dev)
    out = nn.aclCreateTensor([ROWS, COLS], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, out_dev)

    _, executor, ret = nn.aclnnKlDivGetWorkspaceSize(self_tensor, target_tensor, 0, False, out)
    check("aclnnKlDivGetWorkspaceSize", ret)
    check("aclnnKlDiv", nn.aclnnKlDiv(None, 0, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    result = np.empty((ROWS, COLS), np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), result.nbytes, out_dev, result.nbytes, D2H))
    for row in (0, 2):
        print("row %d: [%s]" % (row, ", ".join("%.5f" % v for v in result[row])))

    for tensor in (self_tensor, target_tensor, out):
        nn.aclDestroyTensor(tensor)
    for address in (self_dev, target_dev, out_dev):
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
