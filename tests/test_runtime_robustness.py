"""Bad input never crashes (docs/runtime.md, "Calling conventions"): every public function of acl, acl.rt, acl.util and
aclnn_api, called with values of the wrong Python type in each parameter in turn (the others valid),
and (for the C-named calls) with too few or too many arguments, returns a status (or null for
creators) and leaves a message saying what was expected and found; it never raises, and never
reports an internal error of the emulator. The list of functions is read from the modules, so new
public functions (operators included) are covered as they appear."""
import errno
import inspect
import os
import re
import subprocess
import sys
import threading
import traceback
from types import SimpleNamespace

import numpy as np
import pytest

import acl
import aclnn_api as nn
from emulator import leaks
from support import REPO

BAD_VALUES = {"str": "text", "float": 1.5, "None": None, "negative": -1, "huge": 1 << 70, "list": [1]}
INTERNAL = (acl.ACL_ERROR_RT_INTERNAL_ERROR, nn.ACLNN_ERR_INNER)


def public_functions():
    found = {"acl.init": acl.init}
    for prefix, module in (("acl.rt.", acl.rt), ("acl.util.", acl.util), ("aclnn_api.", nn)):
        for name, fn in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(fn):
                continue
            if module is acl.util and fn.__module__ != "acl.util":
                continue                                   # imported helpers, not acl.util's own API
            if module is nn and not name.startswith("acl"):
                continue                                   # aclnn_api's public calls carry their C names
            found[prefix + name] = fn
    return found


FUNCTIONS = public_functions()


@pytest.fixture
def world():
    """An open device with one of everything a call may need, each parameter name mapped to a valid value."""
    assert acl.init() in (0, acl.ACL_ERROR_REPEAT_INITIALIZE)
    assert acl.rt.set_device(0) == 0
    w = SimpleNamespace()
    w.context, _ = acl.rt.create_context(0)
    w.stream, _ = acl.rt.create_stream()
    w.event, _ = acl.rt.create_event()
    w.dev, _ = acl.rt.malloc(4096, 0)
    w.host, _ = acl.rt.malloc_host(4096)

    def tensor():
        return nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, w.dev)

    def executor():
        t = tensor()
        return nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, t)[1]

    w.valid = {
        "deviceId": lambda: 0, "context": lambda: w.context, "stream": lambda: w.stream, "event": lambda: w.event,
        "startEvent": lambda: w.event, "endEvent": lambda: w.event, "flag": lambda: 0, "size": lambda: 64,
        "policy": lambda: 0, "devPtr": lambda: w.dev, "hostPtr": lambda: w.host, "dst": lambda: w.dev,
        "src": lambda: w.host, "destMax": lambda: 64, "count": lambda: 64, "kind": lambda: acl.ACL_MEMCPY_DEFAULT,
        "maxCount": lambda: 64, "value": lambda: 1, "attr": lambda: acl.ACL_HBM_MEM, "config_path": lambda: None,
        "data": lambda: bytes(8), "ptr": lambda: w.host, "array": lambda: np.zeros(4), "shape": lambda: (4,),
        "np_type": lambda: 11, "view_dims": lambda: [4], "data_type": lambda: nn.ACL_FLOAT, "strides": lambda: None,
        "offset": lambda: 0, "format": lambda: nn.ACL_FORMAT_ND, "storage_dims": lambda: None,
        "tensor_data": lambda: w.dev, "addr": lambda: w.dev, "values": lambda: [1], "workspace": lambda: None,
        "workspaceSize": lambda: 0, "executor": executor, "scalar": lambda: nn.aclCreateScalar(1.0, nn.ACL_FLOAT),
        "timeout": lambda: 10, "fn": lambda: (lambda data: None), "userData": lambda: None, "blockType": lambda: 0,
        "threadId": threading.get_ident, "priority": lambda: 0, "dpitch": lambda: 64, "spitch": lambda: 64,
        "width": lambda: 64, "height": lambda: 1, "level": lambda: 0, "args": lambda: [],
    }
    w.tensor = tensor
    yield w
    acl.rt.synchronize_device()
    acl.rt.reset_device(0)
    acl.get_recent_err_msg()
    # Calls that legitimately accept an odd value (a negative malloc policy falls back to the default,
    # an unknown flag is a flag...) made resources this test does not track: forget them.
    leaks.forget()


def valid_argument(w, name):
    return w.valid.get(name, w.tensor)()                   # operators' tensor parameters, by default a tensor


def status_of(result):
    """The status of a pyACL-style result; None for a call whose C form returns a pointer or a value."""
    if isinstance(result, bool):
        return None
    if isinstance(result, int):
        return result
    if isinstance(result, tuple) and result and isinstance(result[-1], int) and not isinstance(result[-1], bool):
        return result[-1]
    return None


def refused(result) -> bool:
    """A null-like result of a creator or helper: None, 0, or (0, None)."""
    if result is None or (isinstance(result, int) and result == 0):
        return True
    return isinstance(result, tuple) and len(result) == 2 and result[0] == 0 and result[1] is None


# Values of BAD_VALUES that are legal for a function (ACL_DT_UNDEFINED is -1, and its size is 0).
LEGAL = {"aclnn_api.aclDataTypeSize": {"negative"}}


def call_and_check(fn, args, what, legal=False):
    """Call; nothing may escape, a non-zero status or a null result must come with an expected/found
    message, and no message may be an internal error. Returns (result, message)."""
    acl.get_recent_err_msg()
    try:
        result = fn(*args)
    except BaseException:  # noqa: B902  anything at all escaping a public call is the failure
        pytest.fail("%s raised:\n%s" % (what, traceback.format_exc()))
    message = acl.get_recent_err_msg() or ""
    assert "internal error" not in message, "%s: %s" % (what, message)
    status = status_of(result) if hasattr(fn, "c_name") else None
    if status is not None:
        assert status not in INTERNAL, "%s: %s" % (what, message)
        rejected = status != 0
    else:
        rejected = refused(result) and not legal
    if rejected:
        assert "expected" in message and "found" in message, "%s returned %r with message %r" % (what, result, message)
    return result, message


def parameters(fn):
    return [p for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def each_parameter_replaced(world, fn, values):
    """(parameter, label, arguments): valid arguments with one parameter replaced by each of `values`."""
    params = parameters(fn)
    for position, param in enumerate(params):
        for label, value in values.items():
            args = [valid_argument(world, p.name) for p in params]
            args[position] = value
            yield param, label, args


@pytest.mark.sanitizer_reports("race", "uninitialised read")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_wrong_python_types_in_each_parameter_give_a_status_and_a_message(world, name):
    fn = FUNCTIONS[name]
    for param, label, args in each_parameter_replaced(world, fn, BAD_VALUES):
        call_and_check(fn, args, "%s(%s=%s)" % (name, param.name, label), label in LEGAL.get(name, ()))


C_NAMED = sorted(name for name, fn in FUNCTIONS.items() if hasattr(fn, "c_name"))


@pytest.mark.parametrize("name", C_NAMED)
def test_wrong_argument_counts_give_a_status_and_a_message(world, name):
    fn = FUNCTIONS[name]
    params = parameters(fn)
    valid = [valid_argument(world, p.name) for p in params]
    required = [p for p in params if p.default is p.empty]
    calls = [(valid + [0], "an extra argument")]
    if required:
        calls.append((valid[:len(required) - 1], "%d argument(s)" % (len(required) - 1)))
    for args, how in calls:
        result, message = call_and_check(fn, args, "%s with %s" % (name, how))
        assert status_of(result) or refused(result), "%s with %s succeeded: %r" % (name, how, result)
        assert "arguments" in message, message


def test_the_generated_tests_cover_the_whole_api():
    """The discovery above finds the documented pyACL and aclnn surface: a renamed or missing function shows up here."""
    expected = ["acl.rt." + n for n in (
        "set_device", "reset_device", "get_device", "get_device_count", "get_run_mode", "create_context",
        "destroy_context", "set_context", "get_context", "create_stream", "destroy_stream", "synchronize_stream",
        "synchronize_device", "create_event", "destroy_event", "record_event", "stream_wait_event",
        "synchronize_event", "query_event_status", "event_elapsed_time", "malloc", "free", "malloc_host",
        "free_host", "memcpy", "memcpy_async", "memset", "memset_async", "get_mem_info")]
    expected += ["acl.util." + n for n in ("bytes_to_ptr", "ptr_to_bytes", "numpy_to_ptr", "ptr_to_numpy",
                                           "start_thread")]
    expected += ["aclnn_api." + n for n in (
        "aclCreateTensor", "aclDestroyTensor", "aclCreateIntArray", "aclDestroyIntArray", "aclCreateFloatArray",
        "aclCreateBoolArray", "aclCreateScalar", "aclSetAclOpExecutorRepeatable", "aclDestroyAclOpExecutor",
        "aclnnLogSigmoidBackwardGetWorkspaceSize", "aclnnLogSigmoidBackward")]
    assert not [name for name in expected if name not in FUNCTIONS]


# -- fuzzing acl.rt ----------------------------------------------------------------------------------

ODD_VALUES = {"None": None, "-1": -1, "2**64": 1 << 64, "1.5": 1.5, "np.int64(3)": np.int64(3),
              "np.array([1])": np.array([1]), "'x'": "x", "object()": object()}
NO_INTEGER = ("np.array([1])", "object()", "'x'", "1.5")
# Every status an acl.rt call may answer an odd argument with; docs/runtime.md names each of them.
DOCUMENTED = {0, 100000, 100033, 100034, 100035, 100036, 107000, 107001, 107002, 107003, 107017, 507007, 207001}
RT_FUNCTIONS = sorted(name for name in FUNCTIONS if name.startswith("acl.rt."))
DOUBLED_WORD = re.compile(r"\b([A-Za-z]{2,}) \1\b")


@pytest.mark.sanitizer_reports("race")
@pytest.mark.parametrize("name", RT_FUNCTIONS)
def test_every_runtime_call_answers_odd_values_with_a_documented_code_and_a_message(world, name):
    fn = FUNCTIONS[name]
    for param, label, args in each_parameter_replaced(world, fn, ODD_VALUES):
        what = "%s(%s=%s)" % (name, param.name, label)
        result, message = call_and_check(fn, args, what, legal=label == "np.int64(3)")
        status = status_of(result) if hasattr(fn, "c_name") else None
        assert status is None or status in DOCUMENTED, "%s: %s %s" % (what, status, message)
        assert not DOUBLED_WORD.search(message), "%s: a doubled word in %r" % (what, message)
        if label in NO_INTEGER and status is not None and param.name != "userData":   # userData is any object
            assert status != 0, "%s was accepted" % what


def test_the_documented_codes_are_in_the_runtime_docs():
    with open(os.path.join(REPO, "docs", "runtime.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert not [code for code in DOCUMENTED - {0} if str(code) not in text]


def test_numpy_integers_are_accepted_as_handles_ids_and_enums(world):
    assert acl.rt.set_device(np.int16(0)) == 0
    assert acl.rt.set_context(np.uint64(world.context)) == 0
    assert acl.rt.synchronize_stream(np.uint64(world.stream)) == 0
    assert acl.rt.record_event(np.int64(world.event), np.uint64(world.stream)) == 0
    assert acl.rt.synchronize_event(np.int64(world.event)) == 0
    assert acl.rt.get_mem_info(np.int32(acl.ACL_HBM_MEM))[-1] == 0
    assert acl.rt.reset_device(np.int8(0)) == 0


def test_help_of_every_runtime_call_says_what_it_returns():
    """help(acl.rt.malloc) showed `-> int` although it returns (ptr, ret)."""
    assert str(inspect.signature(acl.rt.malloc).return_annotation) == "tuple[int, int]"
    assert str(inspect.signature(acl.rt.get_mem_info).return_annotation) == "tuple[int, int, int]"
    assert str(inspect.signature(acl.rt.free).return_annotation) == "int"
    for name in RT_FUNCTIONS + ["acl.init", "acl.finalize"]:
        fn = FUNCTIONS.get(name) or getattr(acl, name.split(".")[-1])
        returned = inspect.signature(fn).return_annotation
        assert returned is not inspect.Signature.empty, name
        doc = inspect.getdoc(fn) or ""
        assert doc.startswith("->"), "%s: the docstring should start with what it returns: %r" % (name, doc[:60])
        if hasattr(fn, "c_name"):
            outputs = doc[2:].split(".")[0]
            assert ("ret" in outputs) == (str(returned) != "int" or "ret" in outputs), name
            assert (str(returned) == "int") == (outputs.strip().startswith("ret")), "%s: %s vs %r" % (name, returned, doc)


def _unresolved(annotation: str, fn, module) -> bool:
    """Whether a shown annotation names something a reader of the package cannot resolve (a placeholder
    such as `cls`): it is evaluated among typing's names, the public module's and the function's own."""
    import typing
    names = {**vars(typing), **vars(module), **getattr(inspect.unwrap(fn), "__globals__", {})}
    try:
        eval(annotation, names)
    except NameError:
        return True
    return False


def test_help_of_every_public_call_shows_resolvable_annotations():
    """help(aclCreateIntArray) showed `-> 'Optional[cls]'`, help(aclGetIntArraySize) `-> 'tuple[tuple,
    int]'` and help(aclnnXxxGetWorkspaceSize) `-> 'tuple[Any, int]'`: the annotations of every public call
    name real types, each size getter's is (size, ret), each first phase's (size, executor, ret)."""
    unresolved = []
    top_level = {"acl." + name: fn for name, fn in vars(acl).items() if not name.startswith("_") and inspect.isfunction(fn)}
    for name, fn in {**top_level, **FUNCTIONS}.items():
        module = nn if name.startswith("aclnn_api.") else acl
        signature = inspect.signature(fn)
        shown = [p.annotation for p in signature.parameters.values()] + [signature.return_annotation]
        unresolved += ["%s%s" % (name, signature) for annotation in shown
                       if isinstance(annotation, str) and _unresolved(annotation, fn, module)]
    assert unresolved == []
    for name in FUNCTIONS:
        if re.fullmatch(r"aclnn_api\.aclGet\w+(Array|List)Size", name):
            assert str(inspect.signature(FUNCTIONS[name]).return_annotation) == "tuple[int, int]", name
        if re.fullmatch(r"aclnn_api\.aclnn\w+GetWorkspaceSize", name):  # it showed tuple[Any, int]
            assert str(inspect.signature(FUNCTIONS[name]).return_annotation) == \
                "tuple[int, Optional[aclOpExecutor], int]", name
        if re.fullmatch(r"aclnn_api\.aclCreate\w+(Array|List)", name):
            kind = name[len("aclnn_api.aclCreate"):]
            assert str(inspect.signature(FUNCTIONS[name]).return_annotation) == "Optional[acl%s]" % kind, name


def test_the_repository_stands_alone():
    """The code, docs and tests cited the design notes and specifications the project was built
    from: files outside the repository. What npuemu relies on is written in its own docs/."""
    outside = re.compile(r"spec/\w+\.md|spec[ ]§|DESIGN\.md|API\.md|\.\./shared")
    citing = []
    for name in _project_files():
        if name == os.path.join("tests", os.path.basename(__file__)):
            continue  # this test names the patterns it looks for
        try:
            with open(os.path.join(REPO, name), encoding="utf-8") as handle:
                citing += ["%s: %s" % (name, line.strip()) for line in handle if outside.search(line)]
        except UnicodeDecodeError:
            continue  # binary
    assert not citing, "\n".join(citing)


def _project_files() -> list:
    """The repository's own files: not the virtual environment, the build or caches."""
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "__pycache__")]
        found += [os.path.relpath(os.path.join(root, f), REPO) for f in files if not f.endswith((".so", ".pyc"))]
    return found


NO_FREE_DESCRIPTOR = """import os, acl
def take_every_descriptor():
    held = []
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            return held
print("init", acl.init())
held = take_every_descriptor()
code = acl.rt.set_device(0)
message = acl.get_recent_err_msg() if code else ""
for fd in held:
    os.close(fd)
print("set_device", code, message)
print("malloc", acl.rt.malloc(64, 0)[1])
"""


def test_set_device_with_every_file_descriptor_in_use_succeeds(tmp_path):
    """The first aclrtSetDevice applies the settings; it imported emulator.tools then, which needs a file
    descriptor: with none free, 507000 "internal error of the emulator". Now that module is imported
    with acl, and the call needs no descriptor."""
    script = tmp_path / "program.py"
    script.write_text(NO_FREE_DESCRIPTOR)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NPUEMU_")}
    done = subprocess.run(["prlimit", "--nofile=256", sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=environment)
    assert done.stdout.splitlines() == ["init 0", "set_device 0 ", "malloc 0"], done.stdout + done.stderr


INIT_WITH_NO_FREE_DESCRIPTOR = """import os, sys, acl
held = []
while True:
    try:
        held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
code = acl.init(sys.argv[1])
message = acl.get_recent_err_msg()
for fd in held:
    os.close(fd)
print("init", code, message.split(": ", 2)[-1])
print("again", acl.init(sys.argv[1]))
"""


def test_init_with_a_config_file_and_no_free_descriptor_names_the_descriptors_not_the_file(tmp_path):
    """aclInit(configPath) with every descriptor in use said 100003 "expected a readable JSON file" of a
    readable file (review F). Now it is the host's resources, as for any call: 207005, naming the limit."""
    script, config = tmp_path / "program.py", tmp_path / "acl.json"
    script.write_text(INIT_WITH_NO_FREE_DESCRIPTOR)
    config.write_text("{}")
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NPUEMU_")}
    done = subprocess.run(["prlimit", "--nofile=256", sys.executable, str(script), str(config)], capture_output=True,
                          text=True, timeout=120, env=environment)
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("init 207005 the host refused a file descriptor opening %s" % config), \
        done.stdout + done.stderr
    assert "ulimit -n" in lines[0] and lines[1] == "again 0", done.stdout


def test_a_call_that_finds_no_file_descriptor_returns_a_resource_code_naming_the_cause():
    """A call that must open a file while every descriptor is in use (EMFILE) is refused by the host, not
    broken: 207005 (aclnn: 361001) and a message that names the file and the limit, never 507000."""
    from emulator import errors, status

    def opening(*_):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), "/some/module.py")

    runtime_call = errors.api("aclrtOpening")(opening)
    aclnn_call = errors.api("aclnnOpening", internal_code=nn.ACLNN_ERR_INNER)(opening)
    assert runtime_call() == status.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL
    message = acl.get_recent_err_msg()
    assert "aclrtOpening: the host refused a file descriptor opening /some/module.py (Too many open files)" in message
    assert "ulimit -n" in message and "internal error" not in message, message
    assert aclnn_call() == nn.ACLNN_ERR_RUNTIME_ERROR
    assert "aclnnOpening: the host refused a file descriptor" in acl.get_recent_err_msg()
