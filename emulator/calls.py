"""The public calls by their C names, for the tools that name them (fault injection, logs).

A public call is a function wrapped by `emulator.errors.api`: it carries its C name as `c_name`. The
runtime's are in `emulator.runtime`; those of the layers built on it (aclnn: the framework and the
operators' two phases) in the modules that the entry point group `npuemu.layers` names, loaded only
when a name is not the runtime's (the runtime does not depend on the layers above it). The tasks a stream runs are named by the call that queued them: an operator's
second phase (aclnnKlDivBackward), aclrtMemcpyAsync, aclrtMemcpy2dAsync, aclrtMemsetAsync,
aclrtLaunchCallback.
"""
from __future__ import annotations

import inspect
import sys
from .entry_points import entry_points
from typing import Callable, Optional

from . import status

# What a stream task is named after, besides the operators (emulator.stream.Task.name up to its "(").
RUNTIME_TASKS = ("aclrtMemcpyAsync", "aclrtMemcpy2dAsync", "aclrtMemsetAsync", "aclrtLaunchCallback")

_runtime_calls: Optional[dict] = None
_aclnn_calls: Optional[dict] = None


def _wrapped_in(module) -> dict:
    return {fn.c_name: fn for fn in vars(module).values() if callable(fn) and isinstance(getattr(fn, "c_name", None), str)}


def runtime_calls() -> dict:
    """{C name: public function} of the runtime (aclInit, aclrtMalloc, ...)."""
    global _runtime_calls
    if _runtime_calls is None:
        from . import runtime
        _runtime_calls = _wrapped_in(runtime)
    return _runtime_calls


def _layer(load: bool):
    """The aclnn layer's module (entry point `npuemu.layers` `aclnn`), or None: not installed, not built,
    or (with `load` False) not imported yet."""
    for entry in entry_points("npuemu.layers", "aclnn"):
        module = sys.modules.get(entry.value)
        if module is None and load:
            try:
                module = entry.load()
            except ImportError:  # the kernels are not built: only the runtime can be called
                module = None
        return module
    return None


def aclnn_calls(load: bool = True) -> dict:
    """{C name: public function} of aclnn (aclCreateTensor, aclnnKlDivBackwardGetWorkspaceSize, ...);
    with `load` False, empty unless aclnn_api is imported already. Empty if it cannot be imported."""
    global _aclnn_calls
    if _aclnn_calls is None:
        module = _layer(load)
        if module is None:
            return {}
        found = _wrapped_in(module)
        if getattr(getattr(module, "__spec__", None), "_initializing", False):
            return found  # still being imported: its operators are not all there yet, keep nothing
        _aclnn_calls = found
    return _aclnn_calls


def find(name: str, load: bool = True) -> Optional[Callable]:
    """The public function called `name`, or None."""
    fn = runtime_calls().get(name)
    return fn if fn is not None else aclnn_calls(load).get(name)


_parameters: dict = {}  # call name -> its parameter names

# The parameters of the public calls whose C type is a pointer or a handle (void *, aclrtStream,
# aclTensor *, ...), by their names in the calls' declarations, where no name is an integer in one call
# and a pointer in another: the logs and the trace show their values in hex, the other integers as
# given. tests/test_trace.py checks them against the C declarations of the toolkit.
POINTER_PARAMETERS = frozenset((
    "dst", "src", "devPtr", "hostPtr", "addr", "data", "dataBuffer", "tensor_data", "workspace", "userData", "fn",
    "stream", "event", "startEvent", "endEvent", "context", "executor", "tensor", "tensors", "array", "scalar"))


def parameter_names(name: str) -> tuple:
    """The parameter names of the public call `name`, in order (empty for a call not found: a C
    toolkit function with no Python twin, or aclnn's before aclnn_api is imported)."""
    names = _parameters.get(name)
    if names is None:
        fn = find(name, load=False)
        try:
            names = tuple(inspect.signature(fn).parameters) if fn is not None else ()
        except (TypeError, ValueError):
            names = ()
        if fn is not None:  # a name not found yet may be found once its layer is imported
            _parameters[name] = names
    return names


def is_aclnn(name: str) -> bool:
    """Whether `name` is a call of the aclnn layer (the framework's or an operator's), not the runtime's."""
    return name not in runtime_calls() and (name.startswith("aclnn") or name in aclnn_calls(load=False)
                                           or name.startswith(("aclCreate", "aclDestroy", "aclGet", "aclSet",
                                                               "aclInitTensor")))


def all_names() -> list:
    """Every public call's C name, sorted."""
    return sorted(set(runtime_calls()) | set(aclnn_calls()))


def operator_names() -> list:
    """The operators' second phases (the names their stream tasks carry), sorted."""
    return sorted(name for name in aclnn_calls() if name.startswith("aclnn") and name + "GetWorkspaceSize"
                  in aclnn_calls())


def task_names() -> list:
    """What a stream task can be named: the operators, then the runtime's queued calls."""
    return operator_names() + list(RUNTIME_TASKS)


def task_kind(task_name: str) -> str:
    """The call a task is named after: `aclrtMemcpyAsync(16 bytes)` -> `aclrtMemcpyAsync`."""
    return task_name.split("(", 1)[0]


def code_name(code: int) -> str:
    """The symbolic name of an aclError or aclnnStatus value ("aclError" if it has none)."""
    name = status.CODE_NAMES.get(code)
    if name is None:
        names = _aclnn_code_names()
        name = names.get(code, "aclnnStatus" if code // 1000 in (161, 361, 561) else "aclError")
    return name


def _aclnn_status():
    """The aclnn layer's status module (ACLNN_* codes), or None."""
    layer = _layer(load=True)
    return getattr(layer, "status", None)


def _aclnn_code_names() -> dict:
    module = _aclnn_status()
    if module is None:
        return {}
    names: dict = {}
    for key, value in vars(module).items():
        if key.startswith("ACLNN_") and isinstance(value, int):
            names.setdefault(value, key)  # the first name of a value: not the library's misspelt alias
    return names


def code_values() -> dict:
    """{name: value} of every named failure code (ACL_ERROR_*, ACLNN_ERR_*), for specs that name codes."""
    values = {k: v for k, v in vars(status).items() if k.startswith("ACL_ERROR_") and isinstance(v, int) and v}
    aclnn_status = _aclnn_status()
    if aclnn_status is None:
        return values
    values.update({k: v for k, v in vars(aclnn_status).items() if k.startswith("ACLNN_ERR") and isinstance(v, int)})
    return values
