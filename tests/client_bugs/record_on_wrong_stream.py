# Producer/consumer on two streams ordered by an event, but the event is recorded on the consumer's
# stream instead of the producer's: the wait orders nothing, the consumer reads the producer's
# output unordered (a read/write race) and, having run first, sees the output's initial zeros.
# expect: racecheck race
# sites: 41, 47
# output: loss grad = [-0.0, -0.0, -0.0, -0.0]
import sys

import numpy as np

import acl
import aclnn_api as nn

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


def check(what, ret):
    if ret != 0:
        sys.exit("%s failed: %d %s" % (what, ret, acl.get_recent_err_msg()))


def main():
    check("aclInit", acl.init())
    check("aclrtSetDevice", acl.rt.set_device(0))
    producer, _ = acl.rt.create_stream()
    consumer, _ = acl.rt.create_stream()
    ready, _ = acl.rt.create_event()

    hosts = {"g": [1, 1, 1, 1], "x": [2, 3, 5, 8], "t": [2, 3, 5, 8], "mid": [0] * 4, "out": [0] * 4}
    arrays, addresses, tensors = {}, {}, {}
    for name, values in hosts.items():
        arrays[name] = np.array(values, np.float32)
        addresses[name], ret = acl.rt.malloc(16, 0)
        check("aclrtMalloc", ret)
        check("aclrtMemcpy", acl.rt.memcpy(addresses[name], 16, acl.util.numpy_to_ptr(arrays[name]), 16, H2D))
        tensors[name] = nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, addresses[name])
    g, x, t, mid, out = (tensors[name] for name in ("g", "x", "t", "mid", "out"))

    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(g, x, t, 0, False, mid)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("producer", nn.aclnnKlDivBackward(None, 0, executor, producer))
    # BUG: recorded on the consumer's stream, so waiting for it orders nothing
    check("aclrtRecordEvent", acl.rt.record_event(ready, consumer))
    check("aclrtStreamWaitEvent", acl.rt.stream_wait_event(consumer, ready))
    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(g, x, mid, 0, False, out)
    check("aclnnKlDivBackwardGetWorkspaceSize", ret)
    check("consumer", nn.aclnnKlDivBackward(None, 0, executor, consumer))

    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(consumer))
    result = np.empty(4, np.float32)
    check("aclrtMemcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), 16, addresses["out"], 16, D2H))
    print("loss grad = %s" % [float(v) for v in result])
    check("aclrtSynchronizeStream", acl.rt.synchronize_stream(producer))

    for name in hosts:
        nn.aclDestroyTensor(tensors[name])
        acl.rt.free(addresses[name])
    acl.rt.destroy_event(ready)
    acl.rt.destroy_stream(producer)
    acl.rt.destroy_stream(consumer)
    acl.rt.reset_device(0)
    acl.finalize()


if __name__ == "__main__":
    main()
