"""A seeded fuzzer of the public API: every public function of acl.rt, acl.util and aclnn_api called
with odd values (null, negatives, huge integers, floats, strings, NumPy scalars and arrays, objects,
live handles of the wrong kind), and every operator's first phase called with random tensor
descriptors (dtypes, formats, shapes with zero, negative and huge dims, strides, offsets) and, when
accepted, launched and synchronised. Nothing may raise, and no call may answer with an internal-error
code: whatever a user can pass gets its layer's code and a message."""
import contextlib
import inspect
import random

import numpy as np
import pytest

import acl
import aclnn_api as nn
from aclnn_api.declaration import all_declarations
from emulator import dtypes, leaks
from support import npu

INTERNAL = {500000, 507000, 561000}
SKIPPED = {"process_report", "launch_callback", "subscribe_report", "unsubscribe_report",  # need a thread
           "finalize", "finalize_reference", "reset_device", "reset_device_force", "aclnnFinalize"}


def public_functions() -> list:
    found = []
    for module in (acl.rt, acl.util, nn):
        for name in sorted(dir(module)):
            function = getattr(module, name)
            if name.startswith("_") or name in SKIPPED or isinstance(function, type) or not callable(function):
                continue
            if getattr(function, "__module__", "").split(".")[0] not in ("acl", "aclnn_api", "emulator"):
                continue  # typing.Optional and the like, imported by a module
            found.append(("%s.%s" % (module.__name__, name), function))
    return found


@contextlib.contextmanager
def forgetting_what_the_calls_made():
    """Odd values sometimes make resources (a malloc of 1 byte, an empty array): not leaks of this test."""
    try:
        yield
    finally:
        leaks.forget()


def odd_values(device) -> list:
    tensor = device.tensor(np.ones(4), nn.ACL_FLOAT).tensor
    return [None, 0, -1, 1, 2 ** 64, 2 ** 63 - 1, 1.5, float("nan"), "x", b"x", np.array([1]), np.array(1),
            np.int64(3), np.float32(1.0), object(), True, [1, 2], (), tensor, tensor.handle, device.stream]


def arity(function) -> int:
    try:
        return len([p for p in inspect.signature(function).parameters.values() if p.default is inspect.Parameter.empty])
    except (TypeError, ValueError):
        return 2


@pytest.mark.parametrize("seed", range(3))
def test_public_calls_answer_odd_values_with_a_code_never_an_exception(seed):
    rng = random.Random(seed)
    with npu() as device, forgetting_what_the_calls_made():
        values = odd_values(device)
        for name, function in public_functions():
            for _ in range(12):
                args = [rng.choice(values) for _ in range(arity(function))]
                result = function(*args)  # an exception fails the test, naming the call
                codes = [v for v in (result if isinstance(result, tuple) else (result,))
                         if type(v) is int and v in INTERNAL]
                assert not codes, "%s%r -> %r: %s" % (name, tuple(args), result, acl.get_recent_err_msg())
        acl.rt.synchronize_stream(device.stream)


ALL_DTYPES = sorted({v for k, v in vars(dtypes).items() if k.startswith("ACL_") and not k.startswith("ACL_FORMAT")
                     and type(v) is int})
ALL_FORMATS = sorted({v for k, v in vars(dtypes).items() if k.startswith("ACL_FORMAT_") and type(v) is int})


def random_arguments(rng: random.Random, declaration, buffer: int) -> list:
    """Mostly coherent tensors (one shape and dtype), now and then one that is not."""
    dims = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(0, 4))]
    dtype = rng.choice([nn.ACL_FLOAT, nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE, nn.ACL_INT64])

    def tensor():
        if rng.random() < 0.85:
            return nn.aclCreateTensor(dims, dtype, None, 0, nn.ACL_FORMAT_ND, None, buffer)
        shape = [rng.choice([0, 1, 3, -1, 1 << 20]) for _ in range(rng.randint(0, 5))]
        strides = None if rng.random() < 0.5 else [rng.choice([0, 1, 2, -1]) for _ in shape]
        return nn.aclCreateTensor(shape, rng.choice(ALL_DTYPES), strides, rng.choice([0, 1]),
                                  rng.choice(ALL_FORMATS), None, buffer)

    args = []
    for parameter in inspect.signature(declaration.first_phase).parameters.values():
        annotation = str(parameter.annotation)
        if "aclTensor" in annotation:
            args.append(tensor() if rng.random() > 0.03 else None)
        elif "aclIntArray" in annotation:
            args.append(nn.aclCreateIntArray([rng.randint(-2, 6) for _ in range(rng.randint(0, 4))]))
        elif "float" in annotation:
            args.append(rng.choice([1.0, -1.0, 0.0, float("nan"), 1e30]))
        elif "bool" in annotation:
            args.append(rng.choice([True, False]))
        else:
            args.append(rng.choice([0, 1, 2, 3, -1, 2 ** 40]))
    return args


@pytest.mark.sanitizer_reports("uninitialised read")
@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend910", "Ascend310P"])
def test_operators_answer_random_descriptors_with_a_code_and_run_what_they_accept(soc):
    rng = random.Random(soc)
    declarations = list(all_declarations())
    with npu(soc) as device:
        buffer = device.malloc(1 << 16)
        for _ in range(150):
            declaration = rng.choice(declarations)
            args = random_arguments(rng, declaration, buffer)
            size, executor, ret = declaration.first_phase(*args)
            assert ret not in INTERNAL, "%s: %s" % (declaration.name, acl.get_recent_err_msg())
            if ret == 0:
                workspace = device.malloc(size) if size else None
                ret = declaration.second_phase(workspace, size, executor, device.stream)
                assert ret not in INTERNAL, "%s: %s" % (declaration.name, acl.get_recent_err_msg())
                ret = acl.rt.synchronize_stream(device.stream)
                assert ret not in INTERNAL, "%s: %s" % (declaration.name, acl.get_recent_err_msg())
            for value in args:
                if isinstance(value, nn.aclTensor):
                    nn.aclDestroyTensor(value)
                elif isinstance(value, nn.aclIntArray):
                    nn.aclDestroyIntArray(value)
