"""Error reporting shared by the runtime and the aclnn framework.

Every rejected call raises `AclError` internally; the public entry point (`api`) turns it into
the real status code and leaves a message for `aclGetRecentErrMsg`, which, as in the real
runtime, is thread-local, newest first and cleared by reading.
"""
from __future__ import annotations

import errno
import functools
import inspect
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, Callable, Optional

from . import hooks, status
from .config import ConfigError


class AclError(Exception):
    """A call is rejected with `code`; `message` names the parameter, what was expected and what was found."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _CallInProgress:
    """The name of the public call in progress on a thread (None: none): a call made inside it from a
    Python signal handler is refused (_refuse_nested)."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name: Optional[str] = None


class _ThreadState(threading.local):
    """What npuemu keeps per thread: its messages, its last error, and its call in progress. The call in
    progress is an object of the thread's, made once: each public call reads and sets its slot, where an
    attribute of a threading.local costs a look-up of the thread's dictionary at every read and every
    assignment (those three were 6 000 of the 147 000 instructions of a whole aclnn call from C)."""

    def __init__(self) -> None:
        self.in_progress = _CallInProgress()


_local = _ThreadState()


def _timestamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(now)) + ".%03d" % int(now % 1 * 1000)


def _is_aclnn_status(code: int) -> bool:
    return code // 1000 in (161, 361, 561)


def _title(code: int) -> str:
    """The error-manager title the real stack prints for a code: the aclnn layer's EZ codes, else the
    code's name and number."""
    if 161000 <= code < 162000:
        return "AclNN_Parameter_Error(EZ1001)"
    if 361000 <= code < 362000:
        return "AclNN_Runtime_Error(EZ9903)"
    if 561000 <= code < 562000:
        return "AclNN_Inner_Error(EZ9999)"
    return "%s(%d)" % (status.code_name(code), code)


def record(code: int, api_name: str, message: str) -> None:
    """Leave a message for this thread's next `get_recent_err_msg()`; the code becomes the thread's
    last error (`aclrtGetLastError`) unless it is an aclnn status (the aclnn layer reports through its
    return values only)."""
    if not _is_aclnn_status(code):
        _local.last_error = code
    line = "[PID:%d] %s %s: %s: %s" % (os.getpid(), _timestamp(), _title(code), api_name, message)
    messages = getattr(_local, "messages", None)
    if messages is None:
        messages = _local.messages = []
    messages.append(line)
    del messages[:-32]  # keep the newest few, as the real error manager does
    for observer in hooks.MESSAGES:
        observer.recorded(code, api_name, message)


def last_error(clear: bool) -> int:
    """The code of this thread's latest failed call (0 if none); `clear` resets it (aclrtGetLastError
    clears, aclrtPeekAtLastError does not)."""
    code = getattr(_local, "last_error", status.ACL_SUCCESS)
    if clear:
        _local.last_error = status.ACL_SUCCESS
    return code


def get_recent_err_msg() -> Optional[str]:
    """This thread's messages, newest first, or None; reading clears them."""
    messages = getattr(_local, "messages", None)
    if not messages:
        return None
    _local.messages = []
    return "\n".join(reversed(messages))


def _out_of_descriptors(error: Exception, internal_code: int) -> Optional[tuple]:
    """(code, message) for a call that failed because the process had no file descriptor left (EMFILE,
    ENFILE: a module or file the call opens): the host's resources, not a bug of ours. The runtime's
    calls return ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, aclnn's (whose `internal_code` is 561xxx)
    ACLNN_ERR_RUNTIME_ERROR; None for any other error."""
    if not isinstance(error, OSError) or error.errno not in (errno.EMFILE, errno.ENFILE):
        return None
    aclnn_runtime_error = 361001  # ACLNN_ERR_RUNTIME_ERROR (aclnn_api.status depends on this module)
    code = aclnn_runtime_error if _is_aclnn_status(internal_code) else status.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL
    opened = " opening %s" % error.filename if error.filename else ""
    message = ("the host refused a file descriptor%s (%s): every descriptor the process may have is in use; close "
               "the files it no longer needs, or raise the limit (`ulimit -n`), and call again"
               % (opened, error.strerror))
    return code, message


def raised_by_signal_handler(error: BaseException) -> bool:
    """Whether a Python signal handler of the program raised `error` (the `signal.alarm` time-limit idiom,
    a SIGTERM handler that raises): then it is no error of the call it interrupted, but the program's
    own way to stop, and it propagates as Ctrl-C's KeyboardInterrupt does. Handlers run in the main
    thread only, between two instructions of whatever Python code runs there (the runtime's too) or at
    a kernel's checkpoint: one of the frames the exception went through is then a handler's."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handlers = _signal_handler_codes()
    traceback_entry = error.__traceback__
    while traceback_entry is not None:
        if traceback_entry.tb_frame.f_code in handlers:
            return True
        traceback_entry = traceback_entry.tb_next
    return False


def _signal_handler_codes() -> set:
    """The code objects of the Python signal handlers installed now (read when an error is being
    handled only: never on the success path)."""
    codes = set()
    for signal_number in signal.valid_signals():
        try:
            handler = signal.getsignal(signal_number)
        except (ValueError, OSError):
            continue
        code = _code_of(handler)
        if code is not None:
            codes.add(code)
    return codes


def _code_of(handler: Any) -> Any:
    """The code object a handler runs: a function's, a method's, a partial's function's, or a callable
    object's __call__ (None: SIG_DFL, SIG_IGN, a handler of C code)."""
    while isinstance(handler, functools.partial):
        handler = handler.func
    function = getattr(handler, "__func__", handler)  # a bound method
    code = getattr(function, "__code__", None)
    if code is None and callable(handler) and not isinstance(handler, type):
        code = getattr(getattr(type(handler).__call__, "__func__", type(handler).__call__), "__code__", None)
    return code


def _refuse_nested(name: str, outer: str, internal_code: int) -> None:
    """A public call made while another one (`outer`) is in progress on this thread, other than from a
    callback, may come from a Python signal handler, which CPython runs between any two steps of the
    runtime's Python code and npuemu at a kernel's checkpoints, inside `outer` (the card runs it once the
    C call has returned). The runtime is half-way through `outer` there, and a kernel of it may hold its
    threads: such a call is refused (the call did not run), never a hang or an internal error. A
    finalizer (`__del__`, weakref.finalize) that the garbage collector, or the runtime dropping the last
    reference to a callback's userData, runs there is the program's tidying, as on the card: it runs."""
    if not _inside_a_signal_handler():
        return
    code = 361001 if _is_aclnn_status(internal_code) else status.ACL_ERROR_FAILURE
    raise AclError(code, "called while %s is in progress on this thread, from a Python signal handler: npuemu runs "
                         "handlers inside the call they interrupt, where the card runs them once that call returns; "
                         "set a flag (or raise) in the handler, and make the call after" % outer)


def _inside_a_signal_handler() -> bool:
    """Whether an installed Python signal handler's frame lies between this call and the public call in
    progress below it (looked at only for a call made inside another: rare)."""
    handlers = _signal_handler_codes()
    frame = sys._getframe(3)  # the caller of the public call (this <- _refuse_nested <- the wrapper)
    while frame is not None and frame.f_code is not _WRAPPER_CODE:
        if frame.f_code in handlers:
            return True
        frame = frame.f_back
    return False


def calls_in_progress_set_aside() -> Optional[str]:
    """For a callback the runtime runs inside a call (aclrtProcessReport): the program's own code, whose
    calls are no signal handler's. Returns what to give back to `calls_in_progress_restored`."""
    in_progress = _local.in_progress
    outer, in_progress.name = in_progress.name, None
    return outer


def calls_in_progress_restored(outer: Optional[str]) -> None:
    _local.in_progress.name = outer


def _bad_call_code(internal_code: int) -> int:
    """A call the C prototype would not even compile: the invalid-parameter code of its layer."""
    aclnn_param_invalid = 161002  # ACLNN_ERR_PARAM_INVALID (aclnn_api.status depends on this module)
    return aclnn_param_invalid if 561000 <= internal_code < 562000 else status.ACL_ERROR_INVALID_PARAM


def _arguments_error(fn: Callable, name: str, args: tuple, kwargs: dict, code: int,
                     keywords: Optional[dict] = None) -> Optional[AclError]:
    """An AclError if (args, kwargs) do not fit fn's parameters (wrong count, unknown keyword, a parameter
    given by both its names); the contract's names (`keywords`) are shown beside the C ones."""
    signature = inspect.signature(fn)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        other_name = {own: contract for contract, own in (keywords or {}).items()}
        shown = ", ".join("%s (or %s)" % (parameter, other_name[parameter]) if parameter in other_name else parameter
                          for parameter in signature.parameters)
        both = ["%s and %s" % (own, contract) for contract, own in (keywords or {}).items()
                if contract in kwargs and own in kwargs]  # what _by_own_names leaves of a parameter named twice
        reason = "%s given, two names of the same parameter" % ", ".join(both) if both else error
        return AclError(code, "arguments: expected (%s), found %d positional and %d keyword argument(s) (%s)"
                        % (shown, len(args), len(kwargs), reason))
    return None


def _by_own_names(kwargs: dict, keywords: dict) -> dict:
    """kwargs with the Python contract's keyword names (`keywords`: {contract name: the function's own,
    C, name}) given as the function's own; a parameter named both ways keeps the contract's name, which
    the call then refuses as any unexpected keyword."""
    return {(keywords[key] if key in keywords and keywords[key] not in kwargs else key): value
            for key, value in kwargs.items()}


def _taking_keywords(call: Callable, keywords: Optional[dict]) -> None:
    """Say in help() which keyword names of the Python contract the call takes besides its C names."""
    if keywords:
        names = ", ".join("%s (for %s)" % item for item in keywords.items())
        call.__doc__ = ("%s\n\nAlso takes the Python contract's keyword names: %s." % ((call.__doc__ or "").rstrip(),
                                                                                      names)).lstrip()


_WRAPPER_CODE = None  # the code of a public call's wrapper (`call` below), where a walk up the stack ends


def api(name: str, failure: tuple = (), internal_code: int = status.ACL_ERROR_RT_INTERNAL_ERROR,
        returns_status: bool = True, keywords: Optional[dict] = None) -> Callable:
    """Wrap a public call: its outputs come first, the status last, as in pyACL.

    The wrapped function returns its outputs (a tuple, a single value, or None when it has
    none); `failure` gives the outputs returned with a non-zero status. Calls whose C form returns
    a pointer (aclCreateTensor, ...) have `returns_status=False`: the output alone, null on failure,
    with the message left as usual. An AclError becomes its code; a call with the wrong number of
    arguments, or one that needs settings whose NPUEMU_* value is unusable, becomes the layer's
    invalid-parameter code (100000 or 161002); any other exception is a bug of ours and becomes
    `internal_code` with its traceback. `keywords` ({name: parameter}) are the keyword names the Python
    contract gives parameters whose own names are the C ones (`acl.rt.set_device(id=0)` for `deviceId`):
    the call takes both, and everything behind it (the logs, the trace) sees the C names.
    """
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any):
            if keywords and kwargs:
                kwargs = _by_own_names(kwargs, keywords)
            afters = [] if hooks.CALLS else None
            in_progress = _local.in_progress
            outer = in_progress.name
            try:
                if outer is not None:
                    _refuse_nested(name, outer, internal_code)
                in_progress.name = name
                if afters is not None:
                    _observe(name, args, kwargs, afters)
                outputs = fn(*args, **kwargs)
                code = 0  # ACL_SUCCESS
            except AclError as error:
                record(error.code, name, error.message)
                code = error.code
            except ConfigError as error:  # an NPUEMU_* setting the emulator cannot use, read on first need
                code = _bad_call_code(internal_code)
                record(code, name, str(error))
            except Exception as error:  # never let a bug escape a public call
                if raised_by_signal_handler(error):
                    raise  # the program stops itself, as with Ctrl-C: no error of the call
                code = _unexpected(error, fn, name, args, kwargs, keywords, _bad_call_code(internal_code), internal_code)
            finally:
                in_progress.name = outer
            if afters:
                for after in afters:
                    after(code)
            if not failure:
                return code
            if code:
                outputs = failure[0] if len(failure) == 1 else failure
            if not returns_status:
                return outputs
            return (outputs, code) if len(failure) == 1 else (*outputs, code)
        global _WRAPPER_CODE
        _WRAPPER_CODE = call.__code__
        call.c_name = name
        call.__signature__ = _pyacl_signature(fn, failure, returns_status)
        _taking_keywords(call, keywords)
        return call
    return wrap


def _unexpected(error: Exception, fn: Callable, name: str, args: tuple, kwargs: dict, keywords: Optional[dict],
                invalid_code: int, internal_code: int) -> int:
    """A public call raised something other than its refusal: the wrong arguments (`invalid_code`), no
    file descriptor left (the host's resources), else a bug of ours (`internal_code`). Its message is
    left; returns its code."""
    bad_call = isinstance(error, TypeError) and _arguments_error(fn, name, args, kwargs, invalid_code, keywords)
    if bad_call:
        record(bad_call.code, name, bad_call.message)
        return bad_call.code
    refused = _out_of_descriptors(error, internal_code)
    if refused:
        record(refused[0], name, refused[1])
        return refused[0]
    _record_internal(internal_code, name, error)
    return internal_code


def _record_internal(code: int, name: str, error: Exception) -> None:
    detail = "".join(traceback.format_exception_only(type(error), error)).strip()
    record(code, name, "internal error of the emulator (please report): " + detail)


def value_call(name: str, failure: Any, keywords: Optional[dict] = None) -> Callable:
    """Wrap a public call whose C form returns a value, not a status (aclGetRecentErrMsg,
    aclrtGetSocName, aclFloat16ToFloat, aclDataTypeSize, the acl.util helpers): a wrong number of
    arguments, or settings whose NPUEMU_* value is unusable, give `failure` (what C gets on failure:
    null, 0) and a message with 100000, never an exception; a bug of ours gives `failure` and a
    507000 message. The call itself checks its values. `keywords` as for `api`."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any):
            if keywords and kwargs:
                kwargs = _by_own_names(kwargs, keywords)
            try:
                return fn(*args, **kwargs)
            except ConfigError as error:
                record(status.ACL_ERROR_INVALID_PARAM, name, str(error))
            except Exception as error:  # never let a bug escape a public call
                if raised_by_signal_handler(error):
                    raise  # the program stops itself, as with Ctrl-C: no error of the call
                _unexpected(error, fn, name, args, kwargs, keywords, status.ACL_ERROR_INVALID_PARAM,
                            status.ACL_ERROR_RT_INTERNAL_ERROR)
            return failure
        _taking_keywords(call, keywords)
        return call  # no c_name: fault injection (emulator.calls) takes the calls that return a status
    return wrap


def c_rejected(code: int, name: str, message: str, arguments: dict) -> int:
    """A call the C toolkit rejected before the Python call ran (a null or unwritable out-parameter, an
    array it cannot read): the call observers see it as they see a call rejected in Python (fault
    injection counts it, and an entry for it fails it first; the trace and the logs show it, with its
    C `arguments` by name: numbers, and pointers as addresses or None), and its message is left. Returns
    the status the C caller gets."""
    afters: list = []
    try:
        _observe(name, (), arguments, afters)
    except AclError as error:  # an injected fault: the call fails with it, as in Python
        code, message = error.code, error.message
    record(code, name, message)
    for after in afters:
        after(code)
    return code


def _observe(name: str, args: tuple, kwargs: dict, afters: list) -> None:
    """Tell the call observers (emulator.hooks) that `name` starts; what each wants to hear at the end
    goes into `afters`, also when a later one makes the call fail (an AclError, raised on)."""
    for observer in hooks.CALLS:
        after = observer.before(name, args, kwargs)
        if after is not None:
            afters.append(after)


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Signature.empty:
        return "Any"
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _pyacl_signature(fn: Callable, failure: tuple, returns_status: bool) -> inspect.Signature:
    """fn's signature with the return of the public call, so that help() shows what it returns: the
    status (`int`) alone for a call without outputs, `tuple[<outputs>, int]` with outputs, the output
    alone for a call whose C form returns a pointer."""
    signature = inspect.signature(fn)
    outputs = _annotation_text(signature.return_annotation)
    if not failure:
        returned = "int"
    elif not returns_status:
        returned = outputs
    elif len(failure) > 1 and outputs.startswith("tuple[") and outputs.endswith("]"):
        returned = "tuple[%s, int]" % outputs[len("tuple["):-1]
    else:
        returned = "tuple[%s, int]" % outputs
    return signature.replace(return_annotation=returned)
