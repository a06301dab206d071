"""The Python contract's parameter names work as keywords (docs/runtime.md, "Calls"): every call the
contract writes with named parameters is made here by keyword, with valid values, and must be accepted.

The table is the contract's own text: its signatures are parsed, so a name it gives that a call does
not take fails here. Calls whose own parameters carry the C names (`deviceId`, `destMax`, `workspace`)
take the contract's names too; their positional form is unchanged."""
import re

import numpy as np
import pytest

import acl
import aclnn_api as nn
from aclnn_api.declaration import all_declarations
from support import Call, last_error, npu
from test_operators import first_sample

# The Python contract's signatures, as it writes them.
CONTRACT = """
    acl.init(config_path=None) -> ret            acl.finalize() -> ret
    acl.get_recent_err_msg() -> str | None       (thread-local, cleared by reading)
    acl.rt.set_device(id) -> ret                 acl.rt.reset_device(id) -> ret
    acl.rt.get_device() -> (id, ret)             acl.rt.get_device_count() -> (n, ret)
    acl.rt.get_soc_name() -> str                 acl.rt.get_run_mode() -> (mode, ret)
    acl.rt.create_context(id) -> (ctx, ret)      acl.rt.destroy_context(ctx) -> ret
    acl.rt.set_context(ctx) -> ret               acl.rt.get_context() -> (ctx, ret)
    acl.rt.create_stream() -> (stream, ret)      acl.rt.destroy_stream(stream) -> ret
    acl.rt.synchronize_stream(stream) -> ret     acl.rt.synchronize_device() -> ret
    acl.rt.create_event() -> (event, ret)        acl.rt.destroy_event(event) -> ret
    acl.rt.record_event(event, stream) -> ret    acl.rt.stream_wait_event(stream, event) -> ret
    acl.rt.synchronize_event(event) -> ret       acl.rt.query_event_status(event) -> (status, ret)
    acl.rt.event_elapsed_time(start, end) -> (ms, ret)
    acl.rt.malloc(size, policy) -> (dev_ptr, ret)        acl.rt.free(dev_ptr) -> ret
    acl.rt.malloc_host(size) -> (host_ptr, ret)          acl.rt.free_host(host_ptr) -> ret
    acl.rt.memcpy(dst, dest_max, src, count, kind) -> ret
    acl.rt.memcpy_async(dst, dest_max, src, count, kind, stream) -> ret
    acl.rt.memset(dev_ptr, max_count, value, count) -> ret
    acl.rt.memset_async(dev_ptr, max_count, value, count, stream) -> ret
    acl.rt.get_mem_info(attr) -> (free, total, ret)
    acl.util.bytes_to_ptr(b) -> int      acl.util.ptr_to_bytes(ptr, size) -> bytes
    acl.util.numpy_to_ptr(arr) -> int    acl.util.ptr_to_numpy(ptr, shape, np_type_code) -> ndarray

    aclCreateTensor(view_dims, data_type, strides, offset, format, storage_dims, tensor_data) -> aclTensor | None
    aclDestroyTensor(tensor) -> ret
    aclCreateIntArray(values) -> aclIntArray | None            aclDestroyIntArray(array) -> ret
    aclSetAclOpExecutorRepeatable(executor) -> ret             aclDestroyAclOpExecutor(executor) -> ret

    workspace_size, executor, ret = aclnnXxxGetWorkspaceSize(<tensor and attribute args in C order>, out)
    ret = aclnnXxx(workspace_ptr, workspace_size, executor, stream)

    ws, ex, ret = aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, buffer, gradInput)
    ws, ex, ret = aclnnCtcLossBackwardGetWorkspaceSize(gradOut, logProbs, targets, inputLengths,
                      targetLengths, negLogLikelihood, logAlpha, blank, zeroInfinity, out)
"""
# The operators its `aclnnXxx(workspace_ptr, ...)` stands for.
CONTRACT_OPERATORS = ("BinaryCrossEntropyWithLogitsBackward", "CtcLossBackward", "KlDivBackward",
                      "LogSigmoidBackward", "ScaledMaskedSoftmaxBackward")


def contract_calls() -> list:
    """(call name, its parameter names) of every signature of the contract that names parameters."""
    text = re.sub(r",\s*\n\s*", ", ", CONTRACT)  # a signature continued on the next line
    calls = []
    for name, parameters in re.findall(r"([\w.]+)\(([^()<]*)\)", text):
        names = tuple(part.split("=")[0].strip() for part in parameters.split(",") if part.strip())
        if not names:
            continue
        if name == "aclnnXxx":
            calls.extend(("aclnn" + op, names) for op in CONTRACT_OPERATORS)
        else:
            calls.append((name, names))
    return calls


CALLS = contract_calls()


def test_the_table_holds_every_named_signature_of_the_contract():
    names = [name for name, _ in CALLS]
    assert len(names) == len(set(names)) == 40, names
    assert ("acl.rt.memcpy", ("dst", "dest_max", "src", "count", "kind")) in CALLS
    assert ("aclnnKlDivBackward", ("workspace_ptr", "workspace_size", "executor", "stream")) in CALLS


def function(name: str):
    """The public callable a contract name names (acl.rt.memcpy, aclCreateTensor)."""
    if not name.startswith("acl."):
        return getattr(nn, name)
    target = acl
    for part in name.split(".")[1:]:
        target = getattr(target, part)
    return target


def declaration_of(op: str):
    return next(d for d in all_declarations() if d.name == "aclnn" + op)


# Each operator's first sample, made before any device is open (making one sets the chip).
SAMPLES = {op: first_sample(declaration_of(op)) for op in CONTRACT_OPERATORS}


class World:
    """A device and one of everything the contract's calls take, made fresh where a call uses it up;
    what the calls make is released at the end."""

    def __init__(self, device):
        self.device = device
        self.cleanups = []
        self.host = np.zeros(64, np.uint8)
        self.dev = device.malloc(64)
        self.context, ret = acl.rt.get_context()
        assert ret == 0
        self.event, self.later = self.recorded_event(), self.recorded_event()

    def recorded_event(self) -> int:
        event, ret = acl.rt.create_event()
        assert ret == 0 and acl.rt.record_event(event, self.device.stream) == 0
        assert acl.rt.synchronize_event(event) == 0
        self.cleanups.append(lambda: acl.rt.destroy_event(event))
        return event

    def tensor(self):
        return self.device.empty([4], nn.ACL_FLOAT).tensor

    def executor(self, op: str = "LogSigmoidBackward") -> tuple:
        """(workspace, size, executor) planned by the operator's first phase on its first sample."""
        call = Call(self.device, SAMPLES[op], nn.ACL_FLOAT)
        self.cleanups.append(call.close)
        size, executor, ret = declaration_of(op).first_phase(*call.args())
        assert ret == 0, last_error()
        return (self.device.malloc(size) if size else None), size, executor

    def first_phase_arguments(self, op: str) -> dict:
        sample = SAMPLES[op]
        call = Call(self.device, sample, nn.ACL_FLOAT)
        self.cleanups.append(call.close)
        return dict(zip(sample.args, call.args()))

    def arguments(self, name: str, names: tuple) -> dict:
        """Valid keyword arguments of the call `name`."""
        if name.endswith("GetWorkspaceSize"):
            return self.first_phase_arguments(name[len("aclnn"):-len("GetWorkspaceSize")])
        if name.startswith("aclnn"):
            workspace, size, executor = self.executor(name[len("aclnn"):])
            return dict(workspace_ptr=workspace, workspace_size=size, executor=executor, stream=self.device.stream)
        fresh = {  # parameters a call uses up or holds on to
            "acl.rt.destroy_context": {"ctx": lambda: acl.rt.create_context(0)[0]},
            "acl.rt.destroy_stream": {"stream": lambda: acl.rt.create_stream()[0]},
            "acl.rt.destroy_event": {"event": lambda: acl.rt.create_event()[0]},
            "acl.rt.free": {"dev_ptr": lambda: acl.rt.malloc(64, 0)[0]},
            "acl.rt.free_host": {"host_ptr": lambda: acl.rt.malloc_host(64)[0]},
            "acl.rt.reset_device": {"id": lambda: acl.rt.set_device(0) or 0},  # the reference it drops
            "aclDestroyTensor": {"tensor": lambda: nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, 2, None, self.dev)},
            "aclDestroyIntArray": {"array": lambda: nn.aclCreateIntArray([1])},
            "aclDestroyAclOpExecutor": {"executor": lambda: self.executor()[2]},
            "aclSetAclOpExecutorRepeatable": {"executor": lambda: self.repeatable()},
        }.get(name, {})
        valid = {
            "config_path": None, "id": 0, "ctx": self.context, "stream": self.device.stream, "event": self.event,
            "start": self.event, "end": self.later, "size": 64, "policy": 0, "dst": self.dev, "dest_max": 64,
            "src": self.host.ctypes.data, "count": 64, "kind": acl.ACL_MEMCPY_HOST_TO_DEVICE, "dev_ptr": self.dev,
            "max_count": 64, "value": 0, "attr": acl.ACL_HBM_MEM, "b": bytes(8), "ptr": self.host.ctypes.data,
            "arr": self.host, "shape": (64,), "np_type_code": 2, "view_dims": [4], "data_type": nn.ACL_FLOAT,
            "strides": None, "offset": 0, "format": nn.ACL_FORMAT_ND, "storage_dims": None, "tensor_data": self.dev,
            "values": [1, 2],
        }
        return {parameter: fresh[parameter]() if parameter in fresh else valid[parameter] for parameter in names}

    def repeatable(self):
        executor = self.executor()[2]
        self.cleanups.append(lambda: nn.aclDestroyAclOpExecutor(executor))
        return executor

    def release(self, name: str, result) -> None:
        """Undo what a call made: a context made current, a tensor, an array, a first phase's executor (a
        repeated acl.init only counts: the device's aclFinalize ends it)."""
        if name == "acl.rt.create_context":
            acl.rt.destroy_context(result[0])
        elif isinstance(result, (nn.aclTensor, nn.aclIntArray)):
            (nn.aclDestroyTensor if isinstance(result, nn.aclTensor) else nn.aclDestroyIntArray)(result)
        elif name.endswith("GetWorkspaceSize"):
            nn.aclDestroyAclOpExecutor(result[1])
        acl.rt.set_context(self.context)

    def close(self) -> None:
        assert acl.rt.synchronize_device() == 0, last_error()
        for cleanup in self.cleanups:
            cleanup()


def accepted(name: str, result) -> bool:
    """A status of 0 (a repeated acl.init: its harmless 100002), or a result that is not null."""
    if isinstance(result, tuple):
        result = result[-1]
    if name == "acl.init":
        return result in (0, acl.ACL_ERROR_REPEAT_INITIALIZE)
    if isinstance(result, bool) or not isinstance(result, (int, np.integer)):
        return result is not None
    return result == 0 if name.startswith(("acl.rt.", "acl.init", "aclDestroy", "aclSet", "aclnn")) else result != 0


@pytest.mark.parametrize("name,parameters", CALLS, ids=[name for name, _ in CALLS])
def test_each_call_takes_the_contract_parameter_names_as_keywords(name, parameters):
    with npu() as device:
        world = World(device)
        try:
            arguments = world.arguments(name, parameters)
            result = function(name)(**arguments)
            message = last_error()
            assert accepted(name, result), "%s(%s) -> %r: %s" % (
                name, ", ".join("%s=%r" % item for item in arguments.items()), result, message)
            world.release(name, result)
        finally:
            world.close()


def test_a_parameter_given_by_both_its_names_is_refused_with_a_message():
    assert acl.rt.set_device(0, id=0) == acl.ACL_ERROR_INVALID_PARAM
    assert "multiple values for argument 'deviceId'" in last_error()
    assert acl.rt.set_device(id=0, deviceId=0) == acl.ACL_ERROR_INVALID_PARAM
    message = last_error()  # said "unexpected keyword argument 'id'", though id is one of its names
    assert "expected (deviceId (or id))" in message and "deviceId and id given, two names of the same parameter" \
        in message, message
    assert acl.init(config_path=None, configPath=None) == acl.ACL_ERROR_INVALID_PARAM
    assert "configPath and config_path given, two names of the same parameter" in last_error()
