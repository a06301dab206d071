"""aclnnLogSigmoidForward: the documentation's C++ calling example, ported step by step to Python.

Prints result[i] for out = log(sigmoid(self)) with self = 1..8 (shape [4, 2], FLOAT); the buffer,
a [4, 2] FLOAT tensor of zeros, is passed as the example does and is never written.
"""
import sys

import numpy as np

import acl
import aclnn_api as nn

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2


def check_ret(what, ret):
    if ret != acl.ACL_SUCCESS:
        print("%s failed. ERROR: %d\n%s" % (what, ret, acl.get_recent_err_msg()))
        sys.exit(1)


def get_shape_size(shape):
    size = 1
    for dim in shape:
        size *= dim
    return size


def init(device_id):
    # (fixed) AscendCL initialisation
    check_ret("aclInit", acl.init())
    check_ret("aclrtSetDevice", acl.rt.set_device(device_id))
    stream, ret = acl.rt.create_stream()
    check_ret("aclrtCreateStream", ret)
    return stream


def create_acl_tensor(host_data, shape, data_type):
    host = np.ascontiguousarray(host_data, dtype=np.float32)
    size = get_shape_size(shape) * host.itemsize
    # aclrtMalloc: device memory; aclrtMemcpy: host data to the device
    device_addr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("aclrtMalloc", ret)
    check_ret("aclrtMemcpy", acl.rt.memcpy(device_addr, size, acl.util.numpy_to_ptr(host), size,
                                           ACL_MEMCPY_HOST_TO_DEVICE))
    # strides of a contiguous tensor
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    tensor = nn.aclCreateTensor(shape, data_type, strides, 0, nn.ACL_FORMAT_ND, shape, device_addr)
    return device_addr, tensor


def main():
    # 1. (fixed) device/stream initialisation
    device_id = 0
    stream = init(device_id)

    # 2. inputs and outputs
    self_shape = [4, 2]
    out_shape = [4, 2]
    buffer_shape = [4, 2]
    self_host = [1, 2, 3, 4, 5, 6, 7, 8]
    out_host = [0] * 8
    buffer_host = [0] * 8  # the example's buffer: zeros, which the operator leaves as they are
    self_addr, self_tensor = create_acl_tensor(self_host, self_shape, nn.ACL_FLOAT)
    out_addr, out = create_acl_tensor(out_host, out_shape, nn.ACL_FLOAT)
    buffer_addr, buffer = create_acl_tensor(buffer_host, buffer_shape, nn.ACL_FLOAT)

    # 3. first phase: workspace size and executor
    workspace_size, executor, ret = nn.aclnnLogSigmoidForwardGetWorkspaceSize(self_tensor, out, buffer)
    check_ret("aclnnLogSigmoidForwardGetWorkspaceSize", ret)
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("allocate workspace", ret)
    # second phase, on the stream
    check_ret("aclnnLogSigmoidForward", nn.aclnnLogSigmoidForward(workspace_addr, workspace_size, executor, stream))

    # 4. (fixed) wait for the stream
    check_ret("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    # 5. copy the result back to the host
    size = get_shape_size(out_shape)
    result = np.zeros(size, dtype=np.float32)
    check_ret("copy result from device to host", acl.rt.memcpy(
        acl.util.numpy_to_ptr(result), result.nbytes, out_addr, size * result.itemsize, ACL_MEMCPY_DEVICE_TO_HOST))
    for i in range(size):
        print("result[%d] is: %f" % (i, result[i]))

    # 6. release the aclTensors
    nn.aclDestroyTensor(self_tensor)
    nn.aclDestroyTensor(out)
    nn.aclDestroyTensor(buffer)
    # 7. release device resources
    acl.rt.free(self_addr)
    acl.rt.free(out_addr)
    acl.rt.free(buffer_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
