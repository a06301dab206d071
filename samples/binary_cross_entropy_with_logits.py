"""aclnnBinaryCrossEntropyWithLogits: the documentation's C++ calling example, ported step by step
to Python.

Prints result[i] for the loss of BCE-with-logits (reduction none) over [4, 2] FLOAT tensors:
self = 0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4; target = 0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1;
weight = posWeight = 0.5 everywhere.
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
    target_shape = [4, 2]
    weight_shape = [4, 2]
    pos_weight_shape = [4, 2]
    out_shape = [4, 2]
    self_host = [0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.4, 0.4]
    target_host = [0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1]
    weight_host = [0.5] * 8
    pos_weight_host = [0.5] * 8
    out_host = [0] * 8
    reduction = 0
    self_addr, self_tensor = create_acl_tensor(self_host, self_shape, nn.ACL_FLOAT)
    target_addr, target = create_acl_tensor(target_host, target_shape, nn.ACL_FLOAT)
    weight_addr, weight = create_acl_tensor(weight_host, weight_shape, nn.ACL_FLOAT)
    pos_weight_addr, pos_weight = create_acl_tensor(pos_weight_host, pos_weight_shape, nn.ACL_FLOAT)
    out_addr, out = create_acl_tensor(out_host, out_shape, nn.ACL_FLOAT)

    # 3. first phase: workspace size and executor
    workspace_size, executor, ret = nn.aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(
        self_tensor, target, weight, pos_weight, reduction, out)
    check_ret("aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize", ret)
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("allocate workspace", ret)
    # second phase, on the stream
    check_ret("aclnnBinaryCrossEntropyWithLogits",
              nn.aclnnBinaryCrossEntropyWithLogits(workspace_addr, workspace_size, executor, stream))

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
    nn.aclDestroyTensor(target)
    nn.aclDestroyTensor(weight)
    nn.aclDestroyTensor(pos_weight)
    nn.aclDestroyTensor(out)
    # 7. release device resources
    acl.rt.free(self_addr)
    acl.rt.free(target_addr)
    acl.rt.free(weight_addr)
    acl.rt.free(pos_weight_addr)
    acl.rt.free(out_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
