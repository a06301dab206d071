# Control: the documented LogSigmoidBackward flow run with NPUEMU_EXECUTION=eager (each piece of work
# runs as it is queued), with its synchronisation in place. Nothing to report, same numbers.
# env: NPUEMU_EXECUTION=eager
# expect: none
# output: result[0] is: 0.268941
# output: result[3] is: 0.017986
import sys

import numpy as np

import acl
import aclnn_api as nn

HUGE_FIRST = 0
H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check_ret(what, ret):
    if ret != acl.ACL_SUCCESS:
        print("%s failed. ERROR: %d\n%s" % (what, ret, acl.get_recent_err_msg()))
        sys.exit(1)


def to_device(values):
    host = np.ascontiguousarray(values, dtype=np.float32)
    address, ret = acl.rt.malloc(host.nbytes, HUGE_FIRST)
    check_ret("aclrtMalloc", ret)
    check_ret("aclrtMemcpy", acl.rt.memcpy(address, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes, H2D))
    tensor = nn.aclCreateTensor([2, 2], nn.ACL_FLOAT, [2, 1], 0, nn.ACL_FORMAT_ND, [2, 2], address)
    return address, tensor


def main():
    check_ret("aclInit", acl.init())
    check_ret("aclrtSetDevice", acl.rt.set_device(0))
    stream, ret = acl.rt.create_stream()
    check_ret("aclrtCreateStream", ret)

    grad_output_addr, grad_output = to_device([1, 1, 1, 1])
    self_addr, self_tensor = to_device([1, 2, 3, 4])
    buffer_addr, buffer = to_device([1, 2, 3, 4])
    grad_input_addr, grad_input = to_device([0, 0, 0, 0])

    workspace_size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(
        grad_output, self_tensor, buffer, grad_input)
    check_ret("aclnnLogSigmoidBackwardGetWorkspaceSize", ret)
    workspace = None
    if workspace_size > 0:
        workspace, ret = acl.rt.malloc(workspace_size, HUGE_FIRST)
        check_ret("allocate workspace", ret)
    check_ret("aclnnLogSigmoidBackward",
              nn.aclnnLogSigmoidBackward(workspace, workspace_size, executor, stream))

    check_ret("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))
    result = np.zeros(4, dtype=np.float32)
    check_ret("copy result from device to host", acl.rt.memcpy(
        acl.util.numpy_to_ptr(result), result.nbytes, grad_input_addr, result.nbytes, D2H))
    for i in range(4):
        print("result[%d] is: %f" % (i, result[i]))

    for tensor in (grad_output, self_tensor, buffer, grad_input):
        nn.aclDestroyTensor(tensor)
    for address in (grad_output_addr, self_addr, buffer_addr, grad_input_addr):
        acl.rt.free(address)
    if workspace is not None:
        acl.rt.free(workspace)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
