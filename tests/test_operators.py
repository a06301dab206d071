"""Tests generated from the operators' declarations (aclnn_api/declaration.py): for every declared
operator, values against its float64 reference across dtype x chip x layout, declared dtypes equal
to accepted dtypes on every chip, bit-identical results across thread counts and vector
instruction sets, empty inputs, every error input's code and message in the library's order,
negative dims and unaddressable views rejected at the shape step, attribute values, and the
README's operator table. Tolerances are those of tests/support.py (TOLERANCE)."""
from __future__ import annotations

import inspect
import itertools
import re
import zlib

import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from aclnn_api import operator
from aclnn_api.declaration import (CHIP_FAMILIES, ErrorInput, OpDeclaration, SampleInput, TensorInput,
                                   all_declarations, readme_table)
from emulator.dtypes import DTYPE_NAMES
from support import REPO, Call, assert_close, dtype_of, kernel_variants, last_error, npu, run_declared

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]

DECLARATIONS = all_declarations()
DEFAULT_CHIP = "Ascend910B"
HALF_AND_SINGLE = (nn.ACL_FLOAT, nn.ACL_FLOAT16, nn.ACL_BF16)


def ids(declarations) -> list:
    return [d.name[len("aclnn"):] for d in declarations]


def rng_for(*words) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(" ".join(map(str, words)).encode()))


def samples_on(chip: str, declaration: OpDeclaration, rng: np.random.Generator) -> list:
    """The declaration's samples as made with `chip` in force: an operator's valid shapes may depend on
    the chip (aclnnCtcLoss's logAlphaOut width). The chip stays in force, as the tests use it next."""
    emulator.configure(soc=chip)
    return declaration.sample_inputs(rng)


def first_sample(declaration: OpDeclaration, chip: str = None) -> SampleInput:
    return samples_on(chip or DEFAULT_CHIP, declaration, rng_for(declaration.name, "first"))[0]


def value_cases() -> list:
    """Every dtype of every chip (all samples on the default chip, a quarter on the others)."""
    cases = []
    for declaration in DECLARATIONS:
        for chip in CHIP_FAMILIES:
            for dtype in declaration.dtypes.on(chip):
                if declaration.runs(chip, dtype):
                    cases.append(pytest.param(declaration, chip, dtype, id="%s-%s-%s" % (
                        declaration.name[len("aclnn"):], chip, DTYPE_NAMES[dtype])))
    return cases


@pytest.mark.parametrize("declaration,chip,dtype", value_cases())
def test_values_match_the_reference_in_every_layout(declaration, chip, dtype):
    samples = samples_on(chip, declaration, rng_for(declaration.name, chip, dtype))
    if chip != DEFAULT_CHIP:  # every 4th sample, from a different one on each chip: all layouts somewhere
        samples = samples[CHIP_FAMILIES.index(chip) % 4::4]
    with npu(chip) as device:
        for sample in samples:
            ret, actual, expected = run_declared(device, declaration, sample, dtype)
            assert ret == 0, "%s: %s" % (sample.label, last_error())
            assert actual.shape == expected.shape, sample.label
            try:
                assert_close(actual, expected, dtype)
            except AssertionError as error:
                raise AssertionError("sample %s: %s" % (sample.label, error)) from None


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_every_declaration_has_empty_and_strided_samples(declaration):
    samples = declaration.sample_inputs(rng_for(declaration.name))
    labels = [s.label for s in samples]
    assert any(label.startswith("empty") for label in labels), labels
    assert any(any(arg.strides is not None or arg.offset for arg in s.tensors().values()) for s in samples), labels


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_empty_inputs_need_no_workspace_and_write_nothing(declaration):
    samples = [s for s in samples_on(DEFAULT_CHIP, declaration, rng_for(declaration.name))
               if s.label.startswith("empty")]
    dtype = declaration.dtypes.on(DEFAULT_CHIP)[0]
    with npu(DEFAULT_CHIP) as device:
        for sample in samples:
            call = Call(device, sample, dtype)
            output = call.tensors[declaration.output]
            before = device.read(output).tobytes()
            size, executor, ret = declaration.first_phase(*call.args())
            assert (size, ret) == (0, 0) and executor is not None, (sample.label, last_error())
            assert declaration.second_phase(None, 0, executor, device.stream) == 0, last_error()
            assert device.read(output).tobytes() == before, sample.label
            call.close()


def far_unit_strides(sample: SampleInput) -> SampleInput:
    """The sample with every dim of one of every tensor given the stride 2^62: a dim of one moves no
    address, so any stride is a valid view of the same elements."""
    args = dict(sample.args)
    for name, arg in sample.tensors().items():
        base = arg.strides or nn.tensor.contiguous_strides(arg.shape)
        strides = tuple(1 << 62 if dim == 1 else stride for dim, stride in zip(arg.shape, base))
        args[name] = TensorInput(arg.values, arg.dtype, strides, arg.offset, arg.format)
    return SampleInput(sample.label + "/far unit strides", args)


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_a_dim_of_one_may_have_any_stride(declaration):
    """The kernels scaled such a stride by the item size, a signed overflow (undefined behaviour, seen
    by UBSan in the softmax rows, CtcLoss's class dim, KlDivBackward's axes): they now take the stride
    a dense layout gives the dim."""
    dtype = declaration.dtypes.on(DEFAULT_CHIP)[0]
    samples = [far_unit_strides(s) for s in samples_on(DEFAULT_CHIP, declaration, rng_for(declaration.name, "unit"))
               if any(1 in arg.shape and arg.values.size for arg in s.tensors().values())]
    if not samples:
        pytest.skip("no declared sample of %s has a dim of one" % declaration.name)
    with npu(DEFAULT_CHIP) as device:
        for sample in samples:
            ret, actual, expected = run_declared(device, declaration, sample, dtype)
            assert ret == 0, "%s: %s" % (sample.label, last_error())
            assert_close(actual, expected, dtype)


# ------------------------------------------------------------------------------------------------
# Views of more dims than the kernels take (aclnn_api.operator.fit_kernel_dims)

# The operators that take a tensor of any rank (no rank check on it): the LogSigmoid family, and the
# one-element out of KlDiv's and BCE-with-logits' reductions.
ANY_RANK = {"aclnnLogSigmoid", "aclnnLogSigmoidForward", "aclnnLogSigmoidBackward", "aclnnKlDiv",
            "aclnnBinaryCrossEntropyWithLogits"}
MANY_DIMS = 20  # more than the kernels take (operator.MAX_KERNEL_DIMS)


def with_leading_ones(arg: TensorInput, rank: int) -> TensorInput:
    """The same values with dims of size 1 in front up to `rank` dims, their strides odd (a dim of
    size 1 is never stepped over, so any stride is valid)."""
    extra = rank - len(arg.shape)
    strides = None if arg.strides is None else (7,) * extra + tuple(arg.strides)
    return TensorInput(np.reshape(arg.values, (1,) * extra + arg.shape), arg.dtype, strides, arg.offset, arg.format)


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_views_of_more_dims_than_the_kernels_take_give_the_values_of_their_elements(declaration):
    """Every sample with every tensor, then only the output, given MANY_DIMS dims: the first phase
    rejects it (161002, a rank or shape check) or the elements get the sample's values."""
    assert MANY_DIMS > operator.MAX_KERNEL_DIMS
    dtype = declaration.dtypes.on(DEFAULT_CHIP)[0]
    ran, samples = [], samples_on(DEFAULT_CHIP, declaration, rng_for(declaration.name, "dims"))
    with npu(DEFAULT_CHIP) as device:
        for sample in samples:
            for names in (sample.tensors(), [declaration.output]):
                args = dict(sample.args)
                args.update({name: with_leading_ones(sample.args[name], MANY_DIMS) for name in names})
                ret, actual, expected = run_declared(device, declaration, SampleInput(sample.label, args), dtype)
                if ret == nn.ACLNN_ERR_PARAM_INVALID:
                    continue
                assert ret == 0, "%s: %s" % (sample.label, last_error())
                assert_close(actual, np.reshape(expected, actual.shape), dtype)
                ran.append(sample.label)
    assert bool(ran) == (declaration.name in ANY_RANK), ran


def dims_stepped_in_reverse(count: int) -> tuple:
    """Element strides of `count` dims of 2 laid out last dim first: no two neighbours merge."""
    return tuple(1 << d for d in range(count))


def test_views_that_no_merging_brings_within_the_kernels_dims_run_over_their_leading_dims():
    views = [operator.TensorView(name, None, nn.ACL_FLOAT, (2,) * 18, strides, 0, 4 << 18, 0)
             for name, strides in (("self", dims_stepped_in_reverse(18)),
                                   ("out", nn.tensor.contiguous_strides((2,) * 18)))]
    kernel, args = operator.fit_kernel_dims(print, tuple(views) + ("op",))
    assert isinstance(kernel, operator.OuterLoop) and kernel.leading == 18 - operator.MAX_KERNEL_DIMS
    assert [arg.shape for arg in args[:2]] == [(2,) * 18] * 2 and args[2] == "op"


@pytest.mark.parametrize("declaration", [d for d in DECLARATIONS if d.name.startswith("aclnnLogSigmoid")],
                         ids=ids([d for d in DECLARATIONS if d.name.startswith("aclnnLogSigmoid")]))
@pytest.mark.parametrize("dtype", HALF_AND_SINGLE, ids=["float32", "float16", "bfloat16"])
def test_element_wise_views_that_no_merging_fits_give_the_reference_values(declaration, dtype):
    """17 dims of 2: the inputs laid out last dim first, the output contiguous (the kernel runs once
    for each index of the first dim)."""
    rng, sample = rng_for(declaration.name, "unmergeable", dtype), first_sample(declaration)
    args = dict(sample.args)
    for name, arg in sample.tensors().items():
        strides = None if name == declaration.output else dims_stepped_in_reverse(17)
        args[name] = TensorInput(rng.normal(0, 4, (2,) * 17), arg.dtype, strides)
    with npu(DEFAULT_CHIP) as device:
        ret, actual, expected = run_declared(device, declaration, SampleInput("17 dims of 2", args), dtype)
    assert ret == 0, last_error()
    assert_close(actual, expected, dtype)


# ------------------------------------------------------------------------------------------------
# Declared dtypes are the accepted dtypes, on every chip

def tensor_of_dtype(device, arg: TensorInput, dtype: int, address: int):
    """A descriptor of `arg`'s shape and layout with any dtype: the first phase never reads data."""
    shape = arg.shape
    strides = list(arg.strides) if arg.strides is not None else None
    extent = arg.offset + sum((d - 1) * s for d, s in zip(shape, arg.strides or nn.tensor.contiguous_strides(shape))) + 1
    tensor = nn.aclCreateTensor(list(shape), dtype, strides, arg.offset, arg.format, [max(extent, 1)], address)
    assert tensor is not None, last_error()
    return tensor


@pytest.mark.parametrize("chip", CHIP_FAMILIES)
@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_declared_dtypes_are_exactly_the_accepted_ones(declaration, chip):
    sample = first_sample(declaration, chip)
    declared = declaration.dtypes.on(chip)
    with npu(chip) as device:
        address = device.malloc(64)
        call = Call(device, sample, nn.ACL_FLOAT)
        accepted = []
        for dtype in DTYPE_NAMES:
            if dtype == nn.ACL_DT_UNDEFINED:
                continue
            made = {name: tensor_of_dtype(device, arg, dtype, address) for name, arg in sample.tensors().items()
                    if arg.dtype is None}
            size, executor, ret = declaration.first_phase(*call.args(made))
            message = last_error()
            for tensor in made.values():
                nn.aclDestroyTensor(tensor)
            if executor is not None:
                nn.aclDestroyAclOpExecutor(executor)
            if ret == 0 or ret == nn.ACLNN_ERR_INNER_FIND_KERNEL_ERROR:
                assert (ret == 0) == declaration.runs(chip, dtype), (DTYPE_NAMES[dtype], message)
                accepted.append(dtype)
            else:
                assert ret == nn.ACLNN_ERR_PARAM_INVALID and "expected a dtype in" in message, (DTYPE_NAMES[dtype], ret, message)
        call.close()
    assert sorted(accepted) == sorted(declared)


# ------------------------------------------------------------------------------------------------
# Bit-identical across thread counts and vector instruction sets

def largest_sample(declaration: OpDeclaration, rng) -> SampleInput:
    samples = samples_on(DEFAULT_CHIP, declaration, rng)
    return max(samples, key=lambda s: np.size(s.args[declaration.output].values))


def identity_cases() -> list:
    return [pytest.param(d, dtype, id="%s-%s" % (d.name[len("aclnn"):], DTYPE_NAMES[dtype]))
            for d in DECLARATIONS for dtype in d.dtypes.on(DEFAULT_CHIP)
            if dtype in HALF_AND_SINGLE and d.runs(DEFAULT_CHIP, dtype)]


@pytest.mark.parametrize("declaration,dtype", identity_cases())
def test_results_are_bit_identical_across_threads_and_instruction_sets(declaration, dtype):
    sample = largest_sample(declaration, rng_for(declaration.name, "identity"))
    results = []
    for settings in kernel_variants():
        emulator.configure(**settings)
        with npu(DEFAULT_CHIP) as device:
            ret, actual, _ = run_declared(device, declaration, sample, dtype)
            assert ret == 0, last_error()
            results.append(actual.tobytes())
    assert all(r == results[0] for r in results[1:]), [s for s, r in zip(kernel_variants(), results) if r != results[0]]


# ------------------------------------------------------------------------------------------------
# Error inputs: codes, messages, order

def apply_changes(sample: SampleInput, changes: dict) -> tuple:
    """(the sample with the changes, the names to pass as null)."""
    args, nulls = dict(sample.args), []
    for name, change in changes.items():
        if change is None:
            nulls.append(name)
        elif isinstance(change, dict):
            arg = args[name]
            shape = change.get("shape", arg.shape)
            values = np.zeros(shape) if "shape" in change else arg.values
            strides = None if "shape" in change else arg.strides
            args[name] = TensorInput(values, change.get("dtype", arg.dtype), strides, arg.offset,
                                     change.get("format", arg.format))
        else:
            args[name] = change
    return SampleInput(sample.label, args), nulls


def first_phase_of(declaration: OpDeclaration, changes: dict, chip: str = None) -> tuple:
    """(status, executor, message) of the first phase on the first sample with `changes`."""
    sample, nulls = apply_changes(first_sample(declaration, chip), changes)
    with npu(chip or DEFAULT_CHIP) as device:
        call = Call(device, sample, nn.ACL_FLOAT)
        size, executor, ret = declaration.first_phase(*call.args({name: None for name in nulls}))
        message = last_error()
        if executor is not None:
            nn.aclDestroyAclOpExecutor(executor)
        call.close()
    return ret, executor, message


def error_cases() -> list:
    return [pytest.param(d, e, id="%s-%s" % (d.name[len("aclnn"):], e.label)) for d in DECLARATIONS
            for e in d.error_inputs]


@pytest.mark.parametrize("declaration,error", error_cases())
def test_each_error_input_gives_its_code_and_message(declaration, error: ErrorInput):
    ret, executor, message = first_phase_of(declaration, error.changes, error.chip)
    assert (ret, executor) == (error.code, None), message
    assert error.fragment in message and "expected" in message and "found" in message, message


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_checks_run_in_the_declared_order(declaration):
    """For every pair of error inputs on one chip that change different parameters, the earlier
    one is reported."""
    failures = []
    for earlier, later in itertools.combinations(declaration.error_inputs, 2):
        if earlier.chip == later.chip and not set(earlier.changes) & set(later.changes):
            ret, _, message = first_phase_of(declaration, {**earlier.changes, **later.changes}, earlier.chip)
            if ret != earlier.code or earlier.fragment not in message:
                failures.append("%s before %s: %s" % (earlier.label, later.label, message))
    assert not failures, "\n".join(failures)


def shape_cases() -> list:
    return [pytest.param(d, name, id="%s-%s" % (d.name[len("aclnn"):], name)) for d in DECLARATIONS
            for name in d.shape_checked]


def replaced_by(declaration: OpDeclaration, name: str, make) -> tuple:
    """(status, message) of the first sample with tensor `name` replaced by make(device, arg, dtype)."""
    sample = first_sample(declaration)
    arg = sample.args[name]
    with npu(DEFAULT_CHIP) as device:
        call = Call(device, sample, nn.ACL_FLOAT)
        tensor = make(device, arg, dtype_of(arg, nn.ACL_FLOAT))
        size, executor, ret = declaration.first_phase(*call.args({name: tensor}))
        message = last_error()
        nn.aclDestroyTensor(tensor)
        if executor is not None:
            nn.aclDestroyAclOpExecutor(executor)
        call.close()
    return ret, message


def with_negative_dim(device, arg: TensorInput, dtype: int):
    """The tensor with its first dim -1: as aclCreateTensor makes it where it accepts negative dims
    (the real one does), else a valid tensor whose view dims are then set so."""
    dims = [-1] + list(arg.shape[1:])
    tensor = nn.aclCreateTensor(dims, dtype, [1] * len(dims), 0, arg.format, [1], device.malloc(64))
    if tensor is None:
        acl.get_recent_err_msg()
        tensor = nn.aclCreateTensor([1] + dims[1:], dtype, [1] * len(dims), 0, arg.format, [1], device.malloc(64))
        tensor.view_dims = tuple(dims)
    return tensor


@pytest.mark.parametrize("declaration,name", shape_cases())
def test_a_negative_dim_is_rejected_at_the_shape_step(declaration, name):
    ret, message = replaced_by(declaration, name, with_negative_dim)
    assert ret == nn.ACLNN_ERR_PARAM_INVALID, message
    assert "%s: expected dims >= 0, found shape [-1" % name in message, message


def unaddressable(device, arg: TensorInput, dtype: int):
    """2^62 elements (2^31 x 2^31, all strides 0) over a 64-byte buffer, of the tensor's rank."""
    rank = max(len(arg.shape), 1)
    dims = [1 << 31, 1 << 31] + [1] * (rank - 2) if rank >= 2 else [1 << 62]
    return nn.aclCreateTensor(dims, dtype, [0] * rank, 0, arg.format, [1], device.malloc(64))


@pytest.mark.parametrize("declaration,name", shape_cases())
def test_a_view_no_device_could_address_is_rejected_at_the_shape_step(declaration, name):
    ret, message = replaced_by(declaration, name, unaddressable)
    assert ret == nn.ACLNN_ERR_PARAM_INVALID, message
    assert "%s: expected at most 2^37 elements" % name in message, message


def attribute_cases() -> list:
    return [pytest.param(d, name, valid, id="%s-%s" % (d.name[len("aclnn"):], name)) for d in DECLARATIONS
            for name, valid in d.attributes.items()]


@pytest.mark.parametrize("declaration,name,valid", attribute_cases())
def test_only_the_declared_attribute_values_are_accepted(declaration, name, valid):
    for value in valid:
        ret, _, message = first_phase_of(declaration, {name: value})
        assert ret == 0, message
    for value in (min(valid) - 1, max(valid) + 1, -(1 << 63), np.int64(-1)):
        ret, _, message = first_phase_of(declaration, {name: value})
        assert ret == nn.ACLNN_ERR_PARAM_INVALID and "%s: expected" % name in message, (value, message)
    ret, _, message = first_phase_of(declaration, {name: 1 << 64})
    assert ret == nn.ACLNN_ERR_PARAM_INVALID and "expected an int64" in message, message


# A first phase's int64_t, bool and double parameters (by their annotations): what C passes by value.
C_SCALAR_WORDS = {"int": "int64", "bool": "bool", "float": "double"}
# Python values that no C argument of the type holds, and the NumPy scalar type that does hold one.
NOT_HELD = {"int": [True, 1.0, 1 << 64, -(1 << 63) - 1, np.float64(1.0)],
            "bool": [2, -1, 0.5, np.int8(2)],
            "float": [True, np.True_, 10 ** 400, -(10 ** 400), 1j]}
NOT_SCALARS = [np.array([1, 2]), np.array([1]), np.array(1), "1", b"1", [1], object()]
NUMPY_SCALAR = {"int": np.int32, "bool": np.bool_, "float": np.float32}


def scalar_parameter_cases() -> list:
    cases = []
    for d in DECLARATIONS:
        for parameter in inspect.signature(d.first_phase).parameters.values():
            if parameter.annotation in C_SCALAR_WORDS:
                cases.append(pytest.param(d, parameter.name, parameter.annotation,
                                          id="%s-%s" % (d.name[len("aclnn"):], parameter.name)))
    return cases


@pytest.mark.parametrize("declaration,name,kind", scalar_parameter_cases())
def test_scalar_parameters_take_what_their_c_type_holds_and_name_anything_else(declaration, name, kind):
    """Arrays, strings, out-of-range integers and the like get 161002 naming the parameter and its C
    type (never the internal-error code); the NumPy scalar of the sample's value is taken as it."""
    for value in NOT_HELD[kind] + NOT_SCALARS:
        ret, executor, message = first_phase_of(declaration, {name: value})
        assert (ret, executor) == (nn.ACLNN_ERR_PARAM_INVALID, None), (value, message)
        assert "%s: expected a%s %s, found" % (name, "n" if kind == "int" else "", C_SCALAR_WORDS[kind]) in message, \
            (value, message)
        assert len(message) < 400, message  # 10**400 is not printed in full
    sample_value = first_sample(declaration).args[name]
    ret, _, message = first_phase_of(declaration, {name: NUMPY_SCALAR[kind](sample_value)})
    assert ret == 0, message


def scalar_rule() -> str:
    """docs/ops/README.md's section "Scalar parameters from Python"."""
    with open(REPO + "/docs/ops/README.md", encoding="utf-8") as handle:
        text = handle.read()
    return text.split("## Scalar parameters from Python", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("declaration,name,kind", scalar_parameter_cases())
def test_a_scalar_of_the_wrong_type_is_rejected_before_the_tensor_checks_unless_the_rule_names_the_exception(
        declaration, name, kind):
    """docs/ops/README.md: a Python value no C argument of the type holds is reported before any check of
    a tensor (each declared tensor error given with it), except for the operators the rule names."""
    tensor_errors = [error for error in declaration.error_inputs if error.chip is None and error.code == 161002
                     and all(isinstance(change, dict) for change in error.changes.values())]
    assert tensor_errors
    after = [error.label for error in tensor_errors
             if "%s: expected" % name not in first_phase_of(declaration, {**error.changes, name: "1"})[2]]
    named = re.search(r"\b%s\b" % declaration.name, scalar_rule()) is not None
    assert bool(after) == named, "%s is checked after %s; the rule names it: %s" % (name, after, named)


# ------------------------------------------------------------------------------------------------
# The declarations themselves

def test_the_readme_table_is_rendered_from_the_declarations():
    with open(REPO + "/README.md", encoding="utf-8") as handle:
        readme = handle.read()
    assert readme_table() in readme, "README.md's operator table differs from:\n" + readme_table()


def module_of(declaration: OpDeclaration) -> str:
    """The aclnn_api module that declares `declaration` (where its first phase is written)."""
    return declaration.first_phase.__module__.rsplit(".", 1)[-1]


@pytest.mark.parametrize("declaration", DECLARATIONS, ids=ids(DECLARATIONS))
def test_each_declaration_names_files_that_exist_and_its_functions_are_exported(declaration):
    import os
    for path in (declaration.sample, declaration.doc, "kernels_cpp/ops/%s.cpp" % module_of(declaration)):
        assert os.path.exists(os.path.join(REPO, path)), path
    for name, function in declaration.functions().items():
        assert getattr(nn, name) is function


def test_every_operator_module_is_declared():
    """Each kernel file kernels_cpp/ops/<module>.cpp has its module aclnn_api/<module>.py, which
    declares its operators; nothing else declares one."""
    import os
    import pkgutil
    kernels = {name[:-len(".cpp")] for name in os.listdir(os.path.join(REPO, "kernels_cpp", "ops"))
               if name.endswith(".cpp")}
    assert kernels <= {m.name for m in pkgutil.iter_modules(nn.__path__)}
    assert {module_of(d) for d in DECLARATIONS} == kernels

