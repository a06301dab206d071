"""aclnnCtcLoss: the documentation's C++ calling example (the Atlas A2 / A3 one), ported step by step
to Python.

T=12, N=4, C=5 (logProbs as given, not normalised: the formula is applied as is); padded int64
targets (4, 7); inputLengths 10 each, targetLengths {2, 3, 1, 5}; blank 0, zeroInfinity false.
negLogLikelihoodOut (4) and logAlphaOut (4, 12, 16): A = round_up(2 * 5 + 1, 8) = 16 on
A2 / A3 (the Ascend950 example is the same with logAlphaOut (4, 12, 11)). Prints both outputs;
every logAlpha position the recursion does not reach (s > 2S, rows t = 10 and 11) is -inf.
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


def copy_to_host(device_addr, shape):
    size = get_shape_size(shape)
    result = np.zeros(size, dtype=np.float32)
    check_ret("copy result from device to host", acl.rt.memcpy(
        acl.util.numpy_to_ptr(result), result.nbytes, device_addr, size * result.itemsize, ACL_MEMCPY_DEVICE_TO_HOST))
    return result


def main():
    # 1. (fixed) device/stream initialisation
    device_id = 0
    stream = init(device_id)

    # 2. inputs and outputs
    log_probs_shape = [12, 4, 5]
    targets_shape = [4, 7]
    neg_log_likelihood_shape = [4]
    log_alpha_shape = [4, 12, 16]  # Ascend950: [4, 12, 11]
    log_probs_host = [
        -1.0894, -2.7162, -0.9764, -1.9126, -2.6162, -2.0684, -2.4871, -2.0866, -1.7205, -0.7187,
        -2.4423, -1.2017, -1.4653, -1.1821, -2.5942, -2.467, -2.7257, -1.4135, -2.1042, -0.7248,
        -3.7759, -1.3742, -1.2549, -1.5807, -1.4562, -1.3826, -1.8995, -1.8527, -0.9493, -2.8895,
        -1.6316, -2.6603, -2.5014, -0.6992, -1.8609, -1.9269, -2.235, -0.8073, -1.8906, -1.8947,
        -0.3468, -2.5855, -2.0723, -2.7147, -3.6668, -0.9541, -1.7258, -2.0693, -1.6378, -2.1531,
        -3.5386, -3.483, -0.2532, -2.0557, -3.3261, -1.148, -1.808, -0.8244, -3.2414, -3.1909,
        -0.8866, -0.754, -4.4312, -3.4634, -2.6, -1.2785, -1.8347, -3.3122, -0.762, -2.8349,
        -1.4975, -1.3865, -0.9645, -3.8171, -2.0939, -2.3536, -2.0773, -1.4981, -0.8372, -2.0938,
        -1.2186, -0.8285, -2.9399, -2.1159, -2.362, -2.3139, -0.6503, -2.7249, -1.234, -3.7927,
        -0.7143, -2.5084, -3.2826, -2.6651, -1.1334, -1.6965, -1.9728, -2.3849, -1.6052, -0.9554,
        -1.6384, -1.2596, -2.168, -1.8476, -1.3866, -3.0455, -0.5737, -2.5339, -2.1118, -1.6681,
        -2.4675, -2.8842, -0.4329, -3.6266, -1.6925, -3.1023, -2.7696, -1.2755, -0.647, -2.4143,
        -2.0107, -2.0912, -1.3053, -0.8557, -3.0683, -1.2872, -3.6523, -1.6703, -2.7596, -0.8063,
        -2.4633, -1.2959, -1.6153, -2.3072, -1.0705, -3.0543, -0.6473, -1.165, -2.9025, -2.771,
        -3.5519, -2.04, -1.8667, -1.4289, -0.805, -1.4602, -0.7452, -1.5754, -3.1624, -3.1247,
        -1.4677, -1.2725, -2.9575, -1.8883, -1.2513, -1.2164, -1.5894, -2.2217, -2.3714, -1.211,
        -2.0843, -0.6515, -1.4252, -2.9402, -2.7964, -1.5261, -2.5471, -1.7167, -1.9846, -0.9488,
        -1.4847, -1.7093, -1.4095, -1.7293, -1.7675, -0.9203, -4.2299, -1.874, -1.4076, -1.6671,
        -1.9052, -0.833, -2.1839, -2.2459, -1.6193, -2.9108, -1.2114, -1.4616, -1.7297, -1.433,
        -2.2656, -0.7878, -1.8533, -1.8711, -2.0349, -2.2457, -2.1395, -1.4509, -0.7538, -2.6381,
        -0.8078, -2.1054, -2.6703, -1.1108, -3.3867, -1.7774, -1.8426, -1.9473, -1.3293, -1.3273,
        -1.349, -1.9842, -2.5357, -2.2161, -0.88, -1.5412, -1.8003, -2.7603, -0.8606, -2.0066,
        -1.8342, -2.2741, -1.8348, -1.5833, -0.9877, -3.5196, -2.3361, -0.9124, -0.9307, -2.5531,
        -1.4862, -1.2153, -1.4453, -3.4462, -1.5625, -2.6455, -1.4153, -1.3079, -1.1568, -2.2897,
    ]
    targets_host = [
        1, 2, 1, 1, 2, 4, 1,
        2, 2, 2, 2, 2, 2, 3,
        4, 2, 1, 4, 3, 1, 4,
        4, 1, 4, 2, 2, 2, 3,
    ]
    neg_log_likelihood_host = [0] * 4
    log_alpha_host = [0] * get_shape_size(log_alpha_shape)
    input_lengths_host = [10, 10, 10, 10]
    target_lengths_host = [2, 3, 1, 5]
    blank = 0
    zero_infinity = False
    log_probs_addr, log_probs = create_acl_tensor(log_probs_host, log_probs_shape, nn.ACL_FLOAT, np.float32)
    targets_addr, targets = create_acl_tensor(targets_host, targets_shape, nn.ACL_INT64, np.int64)
    neg_log_likelihood_addr, neg_log_likelihood = create_acl_tensor(
        neg_log_likelihood_host, neg_log_likelihood_shape, nn.ACL_FLOAT, np.float32)
    log_alpha_addr, log_alpha = create_acl_tensor(log_alpha_host, log_alpha_shape, nn.ACL_FLOAT, np.float32)
    input_lengths = nn.aclCreateIntArray(input_lengths_host)
    target_lengths = nn.aclCreateIntArray(target_lengths_host)

    # 3. first phase: workspace size and executor
    workspace_size, executor, ret = nn.aclnnCtcLossGetWorkspaceSize(
        log_probs, targets, input_lengths, target_lengths, blank, zero_infinity, neg_log_likelihood, log_alpha)
    check_ret("aclnnCtcLossGetWorkspaceSize", ret)
    workspace_addr = None
    if workspace_size > 0:
        workspace_addr, ret = acl.rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("allocate workspace", ret)
    # second phase, on the stream
    check_ret("aclnnCtcLoss", nn.aclnnCtcLoss(workspace_addr, workspace_size, executor, stream))

    # 4. (fixed) wait for the stream
    check_ret("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    # 5. copy the results back to the host
    result = copy_to_host(neg_log_likelihood_addr, neg_log_likelihood_shape)
    for i in range(result.size):
        print("negLoglikelihoodOut result[%d] is: %f" % (i, result[i]))
    result = copy_to_host(log_alpha_addr, log_alpha_shape)
    for i in range(result.size):
        print("logAlphaOut result[%d] is: %f" % (i, result[i]))

    # 6. release the aclTensors and aclIntArrays
    nn.aclDestroyTensor(log_probs)
    nn.aclDestroyTensor(targets)
    nn.aclDestroyIntArray(input_lengths)
    nn.aclDestroyIntArray(target_lengths)
    nn.aclDestroyTensor(neg_log_likelihood)
    nn.aclDestroyTensor(log_alpha)
    # 7. release device resources
    acl.rt.free(log_probs_addr)
    acl.rt.free(targets_addr)
    acl.rt.free(neg_log_likelihood_addr)
    acl.rt.free(log_alpha_addr)
    if workspace_size > 0:
        acl.rt.free(workspace_addr)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(device_id)
    acl.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
