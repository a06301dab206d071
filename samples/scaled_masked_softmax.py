"""aclnnScaledMaskedSoftmax: the documentation's C++ calling example, ported step by step to Python.

Prints result[i] for y = softmax(x * scale, -10000 where the mask is true) over the last axis of a
2x2x2x2 tensor; x = 1..16, mask = 1,1,0,0 per row pair (the first row of each pair fully masked:
uniform 0.5, 0.5), scale 1, fixTriuMask false.
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


def create_acl_tensor(host_data, shape, data_type, host_type):
    # the C++ template CreateAclTensor<T>: host_type plays the part of T (float, or char for the bool mask)
    host = np.ascontiguousarray(host_data, dtype=host_type)
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
    x_shape = [2, 2, 2, 2]
    mask_shape = [2, 2, 2, 2]
    y_shape = [2, 2, 2, 2]
    x_host = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    mask_host = [1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0]
    y_host = [0] * 16
    scale = 1.0
    fix_triu_mask = False
    x_addr, x = create_acl_tensor(x_host, x_shape, nn.ACL_FLOAT, np.float32)
    mask_addr, mask = create_acl_tensor(mask_host, mask_shape, nn.ACL_BOOL, np.bool_)
    y_addr, y = create_acl_tensor(y_host, y_shape, nn.ACL_FLOAT, np.float32)

    # 3. first phase: workspace size and executor
    workspace_size, executor, ret = nn.aclnnScaledMaskedSoftmaxGetWorkspaceSize(x, mask, scale, fix_triu_mask, y)
    check_ret("aclnnScaledMaskedSoftmaxGetWorkspaceSize", ret)
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("allocate workspace", ret)
    # second phase, on the stream
    check_ret("aclnnScaledMaskedSoftmax", nn.aclnnScaledMaskedSoftmax(workspace_addr, workspace_size, executor, stream))

    # 4. (fixed) wait for the stream
    check_ret("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    # 5. copy the result back to the host
    size = get_shape_size(y_shape)
    result = np.zeros(size, dtype=np.float32)
    check_ret("copy result from device to host", acl.rt.memcpy(
        acl.util.numpy_to_ptr(result), result.nbytes, y_addr, size * result.itemsize, ACL_MEMCPY_DEVICE_TO_HOST))
    for i in range(size):
        print("result[%d] is: %f" % (i, result[i]))

    # 6. release the aclTensors
    nn.aclDestroyTensor(x)
    nn.aclDestroyTensor(mask)
    nn.aclDestroyTensor(y)
    # 7. release device resources
    acl.rt.free(x_addr)
    acl.rt.free(mask_addr)
    acl.rt.free(y_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
