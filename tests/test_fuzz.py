"""A seeded fuzzer of the public API: every public function of acl.rt, acl.util and aclnn_api called
with odd values (null, negatives, huge integers, floats, strings, NumPy scalars and arrays, objects,
live handles of the wrong kind); every operator's first phase called with random tensor descriptors
(dtypes, formats, shapes with zero, negative and huge dims, strides, offsets); and every operator's
declared valid calls with one or two things changed (a dim, the rank, extreme values, zero or
overlapping strides, a dtype, a format, a length, an attribute, two arguments made one tensor).
What is accepted is launched and synchronised. Nothing may raise, and no call may answer with an
internal-error code: whatever a user can pass gets its layer's code and a message."""
import contextlib
import inspect
import random

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api.declaration import CHIP_FAMILIES, IntArrayInput, SampleInput, TensorInput, all_declarations
from emulator import dtypes, leaks
from support import Call, npu

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
    return [None, 0, -1, 1, 2 ** 64, 2 ** 63 - 1, 10 ** 400, 1.5, float("nan"), "x", b"x", np.array([1]), np.array(1),
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


def every_public_function() -> list:
    """The calls of acl (init, finalize, ...), acl.rt, acl.util and aclnn_api, the ones the fuzzer
    leaves out included: the runtime's and aclnn's calls (errors.api and value_call wrap them) and the
    modules' own helpers (not what a module imports)."""
    found = []
    for module in (acl, acl.rt, acl.util, nn):
        for name in sorted(dir(module)):
            function = getattr(module, name)
            if not name.startswith("_") and callable(function) and not isinstance(function, type) and (
                    hasattr(function, "__wrapped__") or getattr(function, "__module__", None) == module.__name__):
                found.append(("%s.%s" % (module.__name__, name), function))
    return found


def test_public_calls_given_a_wrong_number_of_arguments_answer_with_a_message_never_an_exception():
    """One argument too many and one too few: the C prototype would not compile, so the call does
    nothing and leaves a message naming its parameters (a status of its layer where it returns one)."""
    checked = 0
    for name, function in every_public_function():
        parameters = inspect.signature(function).parameters.values()
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            continue
        for count in {len(parameters) + 1, arity(function) - 1} - {-1}:
            function(*[0] * count)  # an exception fails the test, naming the call
            message = acl.get_recent_err_msg() or ""
            assert "arguments: expected (" in message, "%s with %d arguments: %r" % (name, count, message)
            checked += 1
    assert checked > 150, checked


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


# ------------------------------------------------------------------------------------------------
# Mutations of the declared valid calls: deeper than random descriptors, which seldom get past the
# shape checks of CtcLoss or ScaledMaskedSoftmax.

EXTREME_FLOATS = [0.0, -0.0, np.nan, np.inf, -np.inf, 80.0, -80.0, 1e4, -1e4, 1e-40, 65504.0, 3e38]
EXTREME_INTS = [-1, 0, 255, 1 << 20, -(1 << 31)]
FLOATING = {nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16, nn.ACL_DOUBLE}
HOST_DTYPES = sorted(nn.NUMPY_TYPES)  # dtypes a test can fill from the host; the others are fuzzed above
FORMATS = [f for f in ALL_FORMATS if f != nn.ACL_FORMAT_UNDEFINED]  # aclCreateTensor's own check is fuzzed above


def resized(values: np.ndarray, shape: list) -> np.ndarray:
    return np.resize(values, shape) if values.size else np.zeros(shape, values.dtype)


def in_layout(values: np.ndarray, arg: TensorInput, strides: list, offset: int) -> TensorInput:
    """The tensor viewed with `strides` (zero and overlapping ones too) over storage holding its
    values: elements that share storage share a value, as they would on the device."""
    if not values.size:
        return TensorInput(values, arg.dtype, strides, offset, arg.format)
    index = offset + sum(np.indices(values.shape)[i] * stride for i, stride in enumerate(strides))
    storage = resized(values.reshape(-1), [int(index.max()) + 1])
    return TensorInput(storage[index], arg.dtype, strides, offset, arg.format)


def mutated_tensor(rng: random.Random, arg: TensorInput) -> TensorInput:
    values, shape = np.asarray(arg.values), list(np.shape(arg.values))
    change = rng.choice(["dim", "rank", "values", "layout", "dtype", "format"])
    if change == "dim" and shape:
        i = rng.randrange(len(shape))
        shape[i] = rng.choice([0, 1, shape[i] + 1, 2 * shape[i] + 3])
        return TensorInput(resized(values, shape), arg.dtype, format=arg.format)
    if change == "rank":
        roll = rng.random()
        if roll < 0.1:  # past the kernels' 16 dims (operators with no rank limit take it)
            shape = [1] * max(0, rng.randint(17, 20) - len(shape)) + shape
        else:
            shape = shape[1:] if shape and roll < 0.55 else shape + [rng.choice([1, 2])]
        return TensorInput(resized(values, shape), arg.dtype, format=arg.format)
    if change == "values" and values.size:
        flat = values.copy().reshape(-1)
        for _ in range(rng.randint(1, 3)):
            flat[rng.randrange(flat.size)] = rng.choice(EXTREME_FLOATS if flat.dtype.kind == "f" else EXTREME_INTS)
        return TensorInput(flat.reshape(values.shape), arg.dtype, arg.strides, arg.offset, arg.format)
    if change == "layout" and shape:
        strides = [rng.choice([0, 1, 2, stride]) for stride in nn.tensor.contiguous_strides(shape)]
        return in_layout(values, arg, strides, rng.choice([0, 1, 7]))
    if change == "dtype":
        dtype = rng.choice(HOST_DTYPES)
        if dtype not in FLOATING and values.dtype.kind == "f":
            values = np.clip(np.nan_to_num(np.round(values)), 0, 1 if dtype == nn.ACL_BOOL else 100)
        return TensorInput(values, dtype, None, 0, arg.format)
    return TensorInput(values, arg.dtype, arg.strides, arg.offset, rng.choice(FORMATS))


def mutated_array(rng: random.Random, arg: IntArrayInput) -> IntArrayInput:
    values = list(arg.values)
    change = rng.choice(["element", "longer", "shorter", "random"])
    if change == "element" and values:
        values[rng.randrange(len(values))] = rng.choice([-1, 0, 1 << 40, 10 ** 6, values[0] + 1])
    elif change == "longer":
        values.append(rng.randint(0, 5))
    elif change == "shorter":
        values = values[1:]
    else:
        values = [rng.choice([0, 1, 3, -5]) for _ in values]
    return IntArrayInput(tuple(values))


def mutated_attribute(rng: random.Random, value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([value - 1, value + 1, -1, 0, 2, 1 << 31])
    if isinstance(value, float):
        return rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30, 1e-30])
    return value


def mutated(rng: random.Random, sample: SampleInput) -> SampleInput:
    """The sample with one or two of its arguments changed."""
    args, changes = dict(sample.args), []
    for _ in range(rng.randint(1, 2)):
        name = rng.choice(list(args))
        if isinstance(args[name], TensorInput):
            args[name] = mutated_tensor(rng, args[name])
            arg = args[name]
            changes.append("%s %s %s strides %s offset %d format %d" % (
                name, list(arg.shape), "default" if arg.dtype is None else arg.dtype, arg.strides, arg.offset, arg.format))
        else:
            args[name] = (mutated_array if isinstance(args[name], IntArrayInput) else mutated_attribute)(rng, args[name])
            changes.append("%s %r" % (name, args[name]))
    return SampleInput("%s with %s" % (sample.label, ", ".join(changes)), args)


def one_tensor_twice(rng: random.Random, args: list) -> list:
    """Now and then two tensor arguments made the same tensor (an output aliasing an input, say)."""
    tensors = [i for i, value in enumerate(args) if isinstance(value, nn.aclTensor)]
    if len(tensors) >= 2 and rng.random() < 0.15:
        into, source = rng.sample(tensors, 2)
        args = list(args)
        args[into] = args[source]
    return args


def assert_explained(ret: int, where: str) -> None:
    message = acl.get_recent_err_msg()
    assert ret not in INTERNAL, "%s: %s" % (where, message)
    if ret != 0:
        assert message and "expected" in message and "found" in message, "%s: %d with %r" % (where, ret, message)


def mutation_cases() -> list:
    return [pytest.param(declaration, chip, id="%s-%s" % (declaration.name[len("aclnn"):], chip))
            for declaration in all_declarations() for chip in CHIP_FAMILIES]


@pytest.mark.sanitizer_reports("overlapping output")  # zero or overlapping strides given to an output
@pytest.mark.filterwarnings("ignore:overflow encountered in cast", "ignore:invalid value encountered in cast")
@pytest.mark.parametrize("declaration,chip", mutation_cases())
def test_mutated_valid_calls_answer_with_an_explained_code_and_run_what_they_accept(declaration, chip):
    rng = random.Random("%s %s" % (declaration.name, chip))
    emulator.configure(soc=chip)
    samples = declaration.sample_inputs(np.random.default_rng(len(chip)))
    dtypes_here = list(declaration.dtypes.on(chip)) or [nn.ACL_FLOAT]
    with npu(chip) as device:
        for _ in range(25):
            sample = mutated(rng, rng.choice(samples))
            call = Call(device, sample, rng.choice(dtypes_here))
            where = "%s on %s, sample %s" % (declaration.name, chip, sample.label)
            size, executor, ret = declaration.first_phase(*one_tensor_twice(rng, call.args()))
            assert_explained(ret, where)
            if ret == 0:
                workspace = device.malloc(size) if size else None
                assert_explained(declaration.second_phase(workspace, size, executor, device.stream), where)
                assert_explained(acl.rt.synchronize_stream(device.stream), where)
            call.close()
