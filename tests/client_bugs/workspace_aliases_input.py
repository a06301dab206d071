# A training loop takes its workspaces from a pool of device blocks, and a bookkeeping slip hands
# aclnnBinaryCrossEntropyWithLogits the block that still holds the call's own `target` as its
# workspace. The kernel writes its partial sums there while its cores read `target`: on the card both
# the loss and `target` come out as garbage (here the first target becomes a partial sum).
# expect: memcheck overlapping output
# sites: 44, 49
# output: target[:4] after the call = [4126.8, 1.0, 0.0, 1.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST
N = 4096


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


class Pool:
    """Device blocks of N floats, handed out by index."""

    def __init__(self, count):
        self.blocks = []
        for _ in range(count):
            address, ret = acl.rt.malloc(N * 4, 0)
            check("aclrtMalloc", ret)
            self.blocks.append(address)


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    stream, _ = acl.rt.create_stream()
    pool = Pool(3)
    logits, labels = np.linspace(-3, 3, N).astype(np.float32), (np.arange(N) % 2).astype(np.float32)
    x, target, loss = pool.blocks
    for address, values in ((x, logits), (target, labels)):
        check("aclrtMemcpy", acl.rt.memcpy(address, values.nbytes, acl.util.numpy_to_ptr(values), values.nbytes, H2D))
    tx, tt = (nn.aclCreateTensor([N], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, a) for a in (x, target))
    tl = nn.aclCreateTensor([], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, loss)
    size, executor, ret = nn.aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(tx, tt, None, None, 1, tl)  # mean
    check("aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize", ret)
    workspace = pool.blocks[1]  # BUG: the block of `target`, still in use; a free block was wanted
    check("aclnnBinaryCrossEntropyWithLogits", nn.aclnnBinaryCrossEntropyWithLogits(workspace, size, executor, stream))
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(stream))

    back = np.zeros(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, target, back.nbytes, D2H))
    print("target[:4] after the call = %s" % [round(float(v), 1) for v in back])

    for tensor in (tx, tt, tl):
        nn.aclDestroyTensor(tensor)
    for address in pool.blocks:
        acl.rt.free(address)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
