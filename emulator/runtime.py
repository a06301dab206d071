"""The ACL runtime calls by their C names (aclInit, aclrtMalloc, ...), in the chapters of the ACL
documentation: initialisation, devices, contexts, streams, events, memory, callbacks, errors and
data types. pyACL conventions: outputs first, the aclError status last (see emulator.errors.api).

Each entry point converts its C arguments (emulator.cargs; handles with emulator.resource.live), in
the order the real runtime checks them, then calls the object the behaviour belongs to: `Device`,
`Context`, `Stream`, `Event` (emulator.device, .context, .stream, .event), the callbacks of
emulator.callback, and the copies and memsets of emulator.memory. What the emulator does where the
real runtime is silent is in docs/runtime.md.
"""
from __future__ import annotations

import atexit
import json
import struct
import threading
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import callback, cargs, config_file, errors, faults, leaks, status
from . import context as context_module
from .cargs import INT32, UINT32, UINT64
from .config import ConfigError
from .context import Context
from .data_buffer import (aclCreateDataBuffer, aclDestroyDataBuffer, aclGetDataBufferAddr,  # noqa: F401
                          aclGetDataBufferSize, aclGetDataBufferSizeV2)  # C names, as every runtime call
from .device import Device
from .errors import AclError, api, value_call
from .event import Event
from .memory import MEMCPY_KINDS, Copy, Fill
from .resource import HANDLES, live, optional
from .sites import user_site
from .state import PROCESS
from .sanitizer import TRACKER
from .stream import Stream, Task, compute_unlocked

_P = PROCESS
_HBM_ATTRS = {1, 4, 5, 8, 9, 10, 11}
_DDR_ATTRS = {0, 2, 3, 6, 7}
_MEM_ATTR_LAST = status.ACL_MEM_P2P_HUGE1G  # aclrtMemAttr runs 0..17
_STREAM_FLAGS = 0x3F      # ACL_STREAM_FAST_LAUNCH | FAST_SYNC | PERSISTENT | HUGE | CPU_SCHEDULE | DEVICE_USE_ONLY
_STREAM_PRIORITIES = (0, 7)
_CALLBACK_BLOCK_TYPES = {status.ACL_CALLBACK_NO_BLOCK: "ACL_CALLBACK_NO_BLOCK", status.ACL_CALLBACK_BLOCK: "ACL_CALLBACK_BLOCK"}
_LAST_ERROR_LEVELS = {status.ACL_RT_THREAD_LEVEL: "ACL_RT_THREAD_LEVEL"}


# ---------------------------------------------------------------------------------------------
# arguments the runtime resolves: device ids, the current context, streams, timeouts


def _device_id(value: Any) -> int:
    device_id = cargs.integer("deviceId", value, INT32)
    count = _P.config.device_count
    if not 0 <= device_id < count:
        raise AclError(status.ACL_ERROR_RT_INVALID_DEVICEID,
                       "deviceId: expected a device id in [0, %d), found %d" % (count, device_id))
    return device_id


def current_context() -> Context:
    """The calling thread's context, or 107002 (an aclInit `defaultDevice` sets one implicitly)."""
    context = context_module.current()
    if context is None and _P.default_device is not None:
        _set_device(_default_device_id(_P.default_device))  # checked again: configure() may have cut the count
        context = context_module.current()
    if context is None:
        raise AclError(status.ACL_ERROR_RT_CONTEXT_NULL,
                       "context: expected a current context on this thread (call aclrtSetDevice or "
                       "aclrtSetCurrentContext first), found %s" % _no_context())
    return context


def _no_context() -> str:
    """What the thread has instead of a current context: none, or one released since it was made current
    (by a reset, or by another thread's aclrtDestroyContext), named with the call that released it."""
    released = context_module.released_current()
    if released is None:
        return "none"
    return ("none: its current context %s was released by %s" % (released.describe(), released.released_by()))


def stream_of(value: Any, name: str = "stream", for_work: bool = False) -> Stream:
    """A stream argument: null means the default stream of the current context. A stream of another
    device than the current one gives 107003; so does, for calls that put work on the stream
    (`for_work`: launches, async copies and memsets, event records and waits), a stream of another
    context of the same device, as the runtime checks "stream is not in current ctx"."""
    stream = HANDLES.get(value) if type(value) is int else None  # the common case: a live stream's handle
    if type(stream) is not Stream or not stream.alive:
        stream = optional(Stream, name, value)
    context = context_module.current() or current_context()
    if stream is None:
        return context.default_stream
    if stream.device_id != context.device.id:
        raise AclError(status.ACL_ERROR_RT_STREAM_CONTEXT,
                       "%s: expected a stream of the current device %d, found stream %s"
                       % (name, context.device.id, stream.describe()))
    if for_work and stream.context is not context:
        raise AclError(status.ACL_ERROR_RT_STREAM_CONTEXT,
                       "%s: expected a stream of the current context 0x%x, found stream %s, which belongs to context 0x%x"
                       % (name, context.handle, stream.describe(), stream.context.handle))
    return stream


def _settled(check: Callable[[], Any], streams_of: Callable[[Any], Sequence[Stream]]) -> Any:
    """What `check()` returns (the call's checks: it raises when the call is refused) once the queued work
    of `streams_of(that)`, the streams the call releases, has run. A release runs that work before it
    changes anything, so that a call refused there (107020: this thread holds one of the streams, in a
    blocking callback) leaves everything as it was and reports nothing. A drain that waited for another
    host thread let it call the runtime meanwhile, so the checks run again, until they pass with nothing
    queued: from then on the caller holds the lock and the release cannot fail."""
    while True:
        checked = check()
        streams = streams_of(checked)
        if not any(stream.queue or stream.busy is not None for stream in streams):
            return checked
        for stream in streams:
            stream.drain()


def _deadline(value: Any) -> Optional[float]:
    """A synchronisation timeout in milliseconds: -1 waits forever (None); 0 and values below -1 are
    107000, as the runtime rejects them."""
    timeout = cargs.integer("timeout", value, INT32)
    if timeout == -1:
        return None
    if timeout <= 0:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "timeout: expected milliseconds > 0, or -1 to wait forever, found %d" % timeout)
    return time.perf_counter() + timeout / 1000.0


def eager() -> bool:
    """Whether queued work runs at once (NPUEMU_EXECUTION=eager)."""
    return (_P._config or _P.config).execution == "eager"  # on every enqueue: the property only once


def enqueue(stream: Stream, task: Task) -> None:
    """Queue work on a stream; in eager mode it runs at once (faults surface at the next sync)."""
    stream.enqueue(task, eager())


# The keyword names the Python contract (pyACL's, docs/runtime.md) gives parameters that carry their C
# names here: a call takes both (emulator.errors.api).
_DEVICE_ID = {"id": "deviceId"}
_DEV_PTR = {"dev_ptr": "devPtr"}
_DEST_MAX = {"dest_max": "destMax"}
_MEMSET = {"dev_ptr": "devPtr", "max_count": "maxCount"}


# ---------------------------------------------------------------------------------------------
# initialisation: aclInit / aclFinalize


@api("aclInit", keywords={"config_path": "configPath"})
def aclInit(configPath: Optional[str] = None) -> None:
    """-> ret. Reference-counted: a repeated call is 100002 (harmless), one with another config 100000."""
    text, settings = _read_init_config(configPath)  # outside the lock: a slow disk holds up no other call
    with _P.lock:
        if _P.init_count > 0:
            if text != _P.init_config:
                raise AclError(status.ACL_ERROR_INVALID_PARAM,
                               "configPath: expected the same configuration as the first aclInit, found a different one")
            _P.init_count += 1
            raise AclError(status.ACL_ERROR_REPEAT_INITIALIZE,
                           "call: expected a single initialisation, found a repeated call (harmless; "
                           "reference count is now %d)" % _P.init_count)
        default_device = _default_device_of(settings)  # may reject the file: nothing is committed before
        _P.init_count, _P.finalized, _P.init_config, _P.default_device = 1, False, text, default_device
    _log_ignored_sections(settings)


def _log_ignored_sections(settings: dict) -> None:
    """One INFO line naming the sections of the configuration that the emulator does not read (dump,
    profiler...): they are accepted, but nothing is dumped or profiled."""
    ignored = [json.dumps(key)[:40] for key in settings if key != "defaultDevice"]
    from . import log  # not at import: the package imports the log after the runtime (emulator/__init__.py)
    logger = log.current() if ignored else None
    if logger is not None:
        shown = ", ".join(ignored[:log.LIST_SHOWN]) + (" and %d more" % (len(ignored) - log.LIST_SHOWN)
                                                       if len(ignored) > log.LIST_SHOWN else "")
        logger.info("aclInit", "configPath: sections not emulated, accepted and ignored: %s" % shown, "runtime.py:1")


# The status of each way a configuration file can be unusable (emulator.config_file).
_CONFIG_FILE_CODES = {config_file.BAD_PATH: status.ACL_ERROR_INVALID_PARAM,
                      config_file.UNREADABLE: status.ACL_ERROR_INVALID_FILE,
                      config_file.TOO_LARGE: status.ACL_ERROR_INVALID_FILE_SIZE,
                      config_file.BAD_CONTENT: status.ACL_ERROR_PARSE_FILE}


def _read_init_config(config_path: Any) -> tuple[str, dict]:
    """The configuration's text (what a second aclInit is compared with) and its settings; no file: none."""
    config_path = cargs.optional_string("configPath", config_path)
    if not config_path:
        return "", {}
    try:
        return config_file.read_json_object(config_path)
    except config_file.ConfigFileError as error:
        raise AclError(_CONFIG_FILE_CODES[error.kind], "configPath: " + error.message) from None


def _default_device_of(settings: dict) -> Optional[int]:
    """The device of {"defaultDevice": {"default_device": "<id>"}}, or None when there is no such
    section or the section names no device; a section that is not an object, or a null id, → 100000."""
    if "defaultDevice" not in settings:
        return None
    section = settings["defaultDevice"]
    if not isinstance(section, dict):
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "defaultDevice: expected a JSON object, found %s"
                       % _json_shown(section))
    if "default_device" not in section:
        return None
    return _default_device_id(section["default_device"])


def _default_device_id(value: Any) -> int:
    """`default_device` as a device id of the device count in force: a JSON integer, or a string of
    ASCII decimal digits (a choice, docs/runtime.md: what a C parser checking for digits takes; not
    true, 1.7, "+3", "1_0" or other scripts' digits, which Python's int() takes); else 100000. Any
    such id outside [0, count), however long, is 107001."""
    digits = type(value) is str and value.isascii() and value.isdigit()
    if type(value) is not int and not digits:
        raise AclError(status.ACL_ERROR_INVALID_PARAM,
                       "defaultDevice.default_device: expected a device id (a JSON integer or a string of decimal "
                       "digits), found %s" % _json_shown(value))
    count = _P.config.device_count
    too_long = digits and len(value.lstrip("0")) > 9  # beyond any device count (and beyond what int() converts)
    if too_long or not 0 <= int(value) < count:
        raise AclError(status.ACL_ERROR_RT_INVALID_DEVICEID, "defaultDevice.default_device: expected a device "
                       "id in [0, %d), found %s" % (count, _json_shown(value if too_long else int(value))))
    return int(value)


def _json_shown(value: Any) -> str:
    """A JSON value as a message shows it: a container by its kind (it may be huge or deep)."""
    if isinstance(value, (dict, list)):
        return "a JSON object" if isinstance(value, dict) else "a JSON array"
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


@api("aclFinalize")
def aclFinalize() -> None:
    """-> ret. Tears down at once; a repeated call is 100037."""
    with _P.lock:
        _settled(_expect_not_finalized, lambda _: _open_streams())
        _teardown("aclFinalize")


def _expect_not_finalized() -> None:
    if _P.finalized:
        raise AclError(status.ACL_ERROR_REPEAT_FINALIZE, "call: expected one call per aclInit, found a repeated call")


def _open_streams() -> list:
    """Every stream of every open device: what a teardown releases."""
    return [stream for device in _P.devices if device.is_open for stream in device.streams()]


@api("aclFinalizeReference", failure=(0,))
def aclFinalizeReference() -> int:
    """-> (refCount, ret): decrements the aclInit reference count; tears down when it reaches zero."""
    with _P.lock:
        _settled(_expect_initialised, lambda _: _open_streams() if _P.init_count == 1 else [])
        _P.init_count -= 1
        if _P.init_count == 0:
            _teardown("aclFinalizeReference")
        return _P.init_count


def _expect_initialised() -> None:
    if _P.init_count < 1:
        raise AclError(status.ACL_ERROR_REPEAT_FINALIZE, "call: expected an initialised runtime, found reference count 0")


def _teardown(when: str) -> None:
    found = [fault for device in _P.devices if device.is_open for fault in device.close(when)]
    _P.init_count, _P.finalized, _P.default_device = 0, True, None
    _report_leaks(when)
    faults.raise_faults(found)


def _report_leaks(when: str) -> None:
    """The leak report, unless NPUEMU_LEAK_CHECK turned it off (reading the settings applies it); with
    an unusable environment, the report is made anyway."""
    try:
        _P.config
    except ConfigError:
        pass
    leaks.report(when)


@value_call("aclGetRecentErrMsg", None)
def aclGetRecentErrMsg() -> Optional[str]:
    """-> str or None: this thread's messages, newest first; reading clears them."""
    return errors.get_recent_err_msg()


@api("aclrtGetVersion", failure=(0, 0, 0))
def aclrtGetVersion() -> tuple[int, int, int]:
    """-> (major, minor, patch, ret): the version of the runtime API emulated."""
    return status.ACL_MAJOR_VERSION, status.ACL_MINOR_VERSION, status.ACL_PATCH_VERSION


# ---------------------------------------------------------------------------------------------
# devices


@api("aclrtSetDevice", keywords=_DEVICE_ID)
def aclrtSetDevice(deviceId: int) -> None:
    """-> ret. Reference-counted; the first call opens the device and makes its default context current."""
    with _P.lock:
        _set_device(_device_id(deviceId))


def _set_device(device_id: int) -> None:
    context_module.set_current(_P.device(device_id).set())


def _open_device(value: Any) -> Device:
    device = _P.device(_device_id(value))
    if not device.is_open:
        raise AclError(status.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
                       "deviceId: expected a device set by aclrtSetDevice, found device %d not set (reference count 0)"
                       % device.id)
    return device


def _set_device_of(value: Any) -> Device:
    """The device of a reset: one that aclrtSetDevice set and no reset has released since (a context of
    aclrtCreateContext holds the device too, but only aclrtDestroyContext releases that)."""
    device = _P.device(_device_id(value))
    if device.set_count == 0:
        held = " (held by %d context(s) of aclrtCreateContext, released by aclrtDestroyContext)" % device.ref_count \
            if device.is_open else ""
        raise AclError(status.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
                       "deviceId: expected a device set by aclrtSetDevice, found device %d not set (aclrtSetDevice "
                       "reference count 0)%s" % (device.id, held))
    return device


@api("aclrtResetDevice", keywords=_DEVICE_ID)
def aclrtResetDevice(deviceId: int) -> None:
    """-> ret. One reference less; the last one runs the default context's queued work (its faults are
    this call's status) and releases the context, its streams and events; the device closes (its memory
    released) unless a context of aclrtCreateContext holds it."""
    with _P.lock:
        device = _settled(lambda: _set_device_of(deviceId), _released_by_reset)
        faults.raise_faults(device.reset("aclrtResetDevice(%d)" % device.id))


def _released_by_reset(device: Device) -> list:
    """The streams a reset of `device` releases: the last one, those of the default context."""
    return device.default_context.all_streams if device.set_count == 1 else []


@api("aclrtResetDeviceForce")
def aclrtResetDeviceForce(deviceId: int) -> None:
    """-> ret. Closes the device whatever its reference count."""
    with _P.lock:
        device = _settled(lambda: _open_device(deviceId), Device.streams)
        faults.raise_faults(device.close("aclrtResetDeviceForce(%d)" % device.id))


@api("aclrtGetDevice", failure=(0,))
def aclrtGetDevice() -> int:
    """-> (deviceId, ret) of the current context."""
    with _P.lock:
        return current_context().device.id


@api("aclrtGetDeviceCount", failure=(0,))
def aclrtGetDeviceCount() -> int:
    """-> (count, ret)."""
    return _P.config.device_count


@api("aclrtGetRunMode", failure=(status.ACL_HOST,))
def aclrtGetRunMode() -> int:
    """-> (runMode, ret): a PCIe card in a host, ACL_HOST, as the real runtime reports it."""
    return status.ACL_HOST


@value_call("aclrtGetSocName", None)
def aclrtGetSocName() -> Optional[str]:
    """-> str: the chip's name (NPUEMU_SOC); None, with a message, when NPUEMU_SOC is unusable."""
    return _P.config.soc_name


@api("aclrtSynchronizeDevice")
def aclrtSynchronizeDevice() -> None:
    """-> ret: runs the queued work of every stream of the current device; its faults are the status."""
    with _P.lock:
        device = current_context().device
        device.synchronize()
        faults.raise_faults(device.take_faults())


@api("aclrtSynchronizeDeviceWithTimeout")
def aclrtSynchronizeDeviceWithTimeout(timeout: int) -> None:
    """-> ret. `timeout` in ms (-1: forever); 507046 when work is still queued at the deadline."""
    with _P.lock:
        deadline = _deadline(timeout)
        device = current_context().device
        if not device.synchronize(deadline):
            raise AclError(status.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                           "timeout: expected device %d to finish its work within %d ms, found work still queued"
                           % (device.id, timeout))
        faults.raise_faults(device.take_faults())


# ---------------------------------------------------------------------------------------------
# contexts


@api("aclrtCreateContext", failure=(0,), keywords=_DEVICE_ID)
def aclrtCreateContext(deviceId: int) -> int:
    """-> (context, ret). Makes it current; it holds a reference to the device (opening it if needed)
    until aclrtDestroyContext, as the runtime retains and releases the device with each context."""
    with _P.lock:
        context = _P.device(_device_id(deviceId)).create_context(user_site())
        context_module.set_current(context)
        return context.handle


@api("aclrtDestroyContext", keywords={"ctx": "context"})
def aclrtDestroyContext(context: int) -> None:
    """-> ret. Its queued work runs (faults are the status); its streams and events go with it."""
    with _P.lock:
        target = _settled(lambda: _created_context(context), lambda target: target.all_streams)
        found = target.destroy(user_site())
        if context_module.current() is None:
            context_module.set_current(None)
        faults.raise_faults(found)


def _created_context(value: Any) -> Context:
    context = live(Context, "context", value)
    if context.is_default:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "context: expected a context made by aclrtCreateContext, found the default context of "
                       "device %d (released by aclrtResetDevice)" % context.device.id)
    return context


@api("aclrtSetCurrentContext", keywords={"ctx": "context"})
def aclrtSetCurrentContext(context: int) -> None:
    """-> ret."""
    with _P.lock:
        context_module.set_current(live(Context, "context", context))


@api("aclrtGetCurrentContext", failure=(0,))
def aclrtGetCurrentContext() -> int:
    """-> (context, ret)."""
    with _P.lock:
        return current_context().handle


# ---------------------------------------------------------------------------------------------
# streams


@api("aclrtCreateStream", failure=(0,))
def aclrtCreateStream() -> int:
    """-> (stream, ret) of the current context."""
    with _P.lock:
        return current_context().create_stream(site=user_site()).handle


@api("aclrtCreateStreamWithConfig", failure=(0,))
def aclrtCreateStreamWithConfig(priority: int, flag: int) -> int:
    """-> (stream, ret). `priority` 0 (highest) to 7, `flag` an OR of ACL_STREAM_* bits; streams run
    when synchronised whatever their priority."""
    with _P.lock:
        priority = cargs.integer("priority", priority, UINT32)
        flag = cargs.integer("flag", flag, UINT32)
        if not _STREAM_PRIORITIES[0] <= priority <= _STREAM_PRIORITIES[1]:
            raise AclError(status.ACL_ERROR_INVALID_PARAM, "priority: expected a priority in [%d, %d], found %d"
                           % (*_STREAM_PRIORITIES, priority))
        if flag & ~_STREAM_FLAGS:
            raise AclError(status.ACL_ERROR_INVALID_PARAM,
                           "flag: expected an OR of ACL_STREAM_* flags (mask 0x%x), found 0x%x" % (_STREAM_FLAGS, flag))
        return current_context().create_stream(priority, flag, user_site()).handle


def _created_stream(value: Any) -> Stream:
    """The stream a destroy names, checked as aclrtSynchronizeStream checks it (no current context → 107002,
    a stream of another device → 107003), except that null is 100000, not the default stream."""
    stream = live(Stream, "stream", value)
    stream_of(value)
    if stream.is_default:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID, "stream: expected a created stream, found a default stream")
    return stream


@api("aclrtDestroyStream")
def aclrtDestroyStream(stream: int) -> None:
    """-> ret. Queued work runs first (a fault in it is this call's status); then the stream is gone."""
    with _P.lock:
        _settled(lambda: _created_stream(stream), lambda target: [target]).destroy(user_site())


@api("aclrtDestroyStreamForce")
def aclrtDestroyStreamForce(stream: int) -> None:
    """-> ret. The stream is gone at once; its queued work is dropped, never run (so are its callbacks
    handed to their thread and not started)."""
    with _P.lock:
        target = _created_stream(stream)
        callback.drop(target)
        target.destroy(user_site(), force=True)  # raises the faults of work that ran before


@api("aclrtSynchronizeStream")
def aclrtSynchronizeStream(stream: Optional[int] = None) -> None:
    """-> ret: runs the stream's queued work; the faults of its work are the status."""
    with _P.lock:
        stream_of(stream).synchronize()


@api("aclrtSynchronizeStreamWithTimeout")
def aclrtSynchronizeStreamWithTimeout(stream: Optional[int], timeout: int) -> None:
    """-> ret. `timeout` in ms (-1: forever); 507046 when work is still queued at the deadline (it
    stays queued)."""
    with _P.lock:
        target = stream_of(stream)
        target.synchronize(_deadline(timeout))


@api("aclrtStreamQuery", failure=(status.ACL_STREAM_STATUS_NOT_READY,))
def aclrtStreamQuery(stream: Optional[int] = None) -> int:
    """-> (status, ret): ACL_STREAM_STATUS_COMPLETE or NOT_READY. The device makes progress while the
    host polls: queued work runs after a NOT_READY answer, so a polling loop ends as on hardware. It runs
    only as far as it can without waiting for another host thread: a query never blocks, and a blocking
    callback reaches its thread, which runs it in aclrtProcessReport (it may be the polling thread)."""
    with _P.lock:
        target = stream_of(stream)
        if not target.queue and target.busy is None:  # (a task another thread is inside has left the queue)
            if TRACKER.hazards:
                TRACKER.host_saw_stream(target)
            return status.ACL_STREAM_STATUS_COMPLETE
        target.drain(wait=False)
        return status.ACL_STREAM_STATUS_NOT_READY


@api("aclrtStreamWaitEvent")
def aclrtStreamWaitEvent(stream: Optional[int], event: int) -> None:
    """-> ret. The stream's later work waits for the event's latest record."""
    with _P.lock:
        target = stream_of(stream, for_work=True)
        live(Event, "event", event).make_wait(target, eager())


# ---------------------------------------------------------------------------------------------
# events


@api("aclrtCreateEvent", failure=(0,))
def aclrtCreateEvent() -> int:
    """-> (event, ret); it can time (ACL_EVENT_TIME_LINE)."""
    return _create_event(status.ACL_EVENT_TIME_LINE)


@api("aclrtCreateEventWithFlag", failure=(0,))
def aclrtCreateEventWithFlag(flag: int) -> int:
    """-> (event, ret) with the ACL_EVENT_* flags."""
    return _create_event(cargs.integer("flag", flag, UINT32))


@api("aclrtCreateEventExWithFlag", failure=(0,))
def aclrtCreateEventExWithFlag(flag: int) -> int:
    """-> (event, ret): the same as aclrtCreateEventWithFlag (the Ex form only lifts a limit on the
    number of events of the card)."""
    return _create_event(cargs.integer("flag", flag, UINT32))


def _create_event(flags: int) -> int:
    with _P.lock:
        return current_context().create_event(flags, user_site()).handle


@api("aclrtDestroyEvent")
def aclrtDestroyEvent(event: int) -> None:
    """-> ret."""
    with _P.lock:
        live(Event, "event", event).destroy(user_site())


@api("aclrtRecordEvent")
def aclrtRecordEvent(event: int, stream: Optional[int] = None) -> None:
    """-> ret. Queues the record; the event completes when the stream's work before it has run."""
    with _P.lock:
        marker = live(Event, "event", event)
        marker.record(_stream_of_device_of(marker, stream_of(stream, for_work=True)), eager())


@api("aclrtResetEvent")
def aclrtResetEvent(event: int, stream: Optional[int] = None) -> None:
    """-> ret. The event is as never recorded."""
    with _P.lock:
        marker = live(Event, "event", event)
        _stream_of_device_of(marker, stream_of(stream))
        marker.reset(user_site())


def _stream_of_device_of(marker: Event, stream: Stream) -> Stream:
    """The stream of a record or reset of `marker`: an event is a resource of its device's context, stamped
    with that device's clock, so a stream of another device is 107003 (as CUDA refuses a record across
    devices; a wait, a synchronisation or a query across devices is allowed)."""
    if stream.device_id != marker.context.device.id:
        raise AclError(status.ACL_ERROR_RT_STREAM_CONTEXT,
                       "stream: expected a stream of the event's device %d, found stream %s (event %s)"
                       % (marker.context.device.id, stream.describe(), marker.describe()))
    return stream


@api("aclrtQueryEventStatus", failure=(status.ACL_EVENT_RECORDED_STATUS_NOT_READY,))
def aclrtQueryEventStatus(event: int) -> int:
    """-> (status, ret): ACL_EVENT_RECORDED_STATUS_COMPLETE (1) or NOT_READY (0). As with
    aclrtStreamQuery, the work before the event runs after a NOT_READY answer, as far as it can without
    waiting for another host thread."""
    with _P.lock:
        complete = live(Event, "event", event).query()
        return status.ACL_EVENT_RECORDED_STATUS_COMPLETE if complete else status.ACL_EVENT_RECORDED_STATUS_NOT_READY


@api("aclrtQueryEvent", failure=(status.ACL_EVENT_STATUS_NOT_READY,))
def aclrtQueryEvent(event: int) -> int:
    """-> (status, ret): the deprecated form of aclrtQueryEventStatus, with the opposite polarity:
    ACL_EVENT_STATUS_COMPLETE (0) or NOT_READY (1)."""
    with _P.lock:
        complete = live(Event, "event", event).query()
        return status.ACL_EVENT_STATUS_COMPLETE if complete else status.ACL_EVENT_STATUS_NOT_READY


@api("aclrtQueryEventWaitStatus", failure=(status.ACL_EVENT_WAIT_STATUS_NOT_READY,))
def aclrtQueryEventWaitStatus(event: int) -> int:
    """-> (status, ret): ACL_EVENT_WAIT_STATUS_COMPLETE (0) when a stream waiting on the event would
    go on, NOT_READY (1) otherwise (the same progress rule as aclrtQueryEventStatus)."""
    with _P.lock:
        complete = live(Event, "event", event).query()
        return status.ACL_EVENT_WAIT_STATUS_COMPLETE if complete else status.ACL_EVENT_WAIT_STATUS_NOT_READY


@api("aclrtSynchronizeEvent")
def aclrtSynchronizeEvent(event: int) -> None:
    """-> ret: runs the recording stream's work up to the record; its faults are the status."""
    with _P.lock:
        live(Event, "event", event).synchronize()


@api("aclrtSynchronizeEventWithTimeout")
def aclrtSynchronizeEventWithTimeout(event: int, timeout: int) -> None:
    """-> ret. `timeout` in ms (-1: forever); 507047 when the record has not run by the deadline."""
    with _P.lock:
        marker = live(Event, "event", event)
        marker.synchronize(_deadline(timeout))


@api("aclrtEventElapsedTime", failure=(0.0,), keywords={"start": "startEvent", "end": "endEvent"})
def aclrtEventElapsedTime(startEvent: int, endEvent: int) -> float:
    """-> (ms, ret): device time between the two records (measured run time of the work between them,
    plus any time the stream sat idle waiting for the host to issue work)."""
    with _P.lock:
        start = live(Event, "startEvent", startEvent)
        return live(Event, "endEvent", endEvent).elapsed_since(start)


@api("aclrtEventGetTimestamp", failure=(0,))
def aclrtEventGetTimestamp(event: int) -> int:
    """-> (timestamp, ret): the device time of the event's completed record, in microseconds."""
    with _P.lock:
        return live(Event, "event", event).timestamp()


# ---------------------------------------------------------------------------------------------
# memory


def _allocation_size(value: Any) -> int:
    """size of aclrtMalloc & co: 0 and sizes that overflow once padded are 100000."""
    size = cargs.integer("size", value, (None, None))
    if size <= 0:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "size: expected a positive size, found %d" % size)
    if size > (1 << 63) - 64:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "size: expected a size that does not overflow, found %d" % size)
    return size


# ACL_MEM_MALLOC_HUGE1G_ONLY and _HUGE1G_ONLY_P2P: the runtime pads these as aclrtMallocAlign32 does.
HUGE1G_POLICIES = (6, 7)


def _malloc(size: Any, policy: Any, extra_padding: bool = True) -> int:
    with _P.lock:
        size = _allocation_size(size)
        policy = cargs.integer("policy", policy, (INT32[0], UINT32[1]))  # an enum with OR-able flag bits
        extra_padding = extra_padding and policy & 0xFF not in HUGE1G_POLICIES
        device = current_context().device
        site = user_site()
        allocation = _P.address_space().allocate(device.id, size, site, extra_padding)
        leaks.track("device memory", allocation,
                    "0x%x (%d bytes) on device %d" % (allocation.address, size, device.id), site)
        return allocation.address


@api("aclrtMalloc", failure=(0,))
def aclrtMalloc(size: int, policy: int = status.ACL_MEM_MALLOC_HUGE_FIRST) -> int:
    """-> (devPtr, ret). Device memory padded to ALIGN_UP(size, 32) + 32 bytes (ALIGN_UP(size, 32) alone
    for the 1 GB huge-page policies 6 and 7). Otherwise the policy only picks page sizes on hardware;
    any value is accepted, as the real runtime falls back to the default."""
    return _malloc(size, policy)


@api("aclrtMallocAlign32", failure=(0,))
def aclrtMallocAlign32(size: int, policy: int = status.ACL_MEM_MALLOC_HUGE_FIRST) -> int:
    """-> (devPtr, ret). As aclrtMalloc, but rounded up to a multiple of 32 bytes with no extra 32:
    an access past ALIGN_UP(size, 32) is an overrun."""
    return _malloc(size, policy, extra_padding=False)


@api("aclrtMallocCached", failure=(0,))
def aclrtMallocCached(size: int, policy: int = status.ACL_MEM_MALLOC_HUGE_FIRST) -> int:
    """-> (devPtr, ret). As aclrtMalloc (the cache only matters to the card's CPU)."""
    return _malloc(size, policy)


@api("aclrtFree", keywords=_DEV_PTR)
def aclrtFree(devPtr: int) -> None:
    """-> ret. Needs no context. Work still queued that uses the memory will fault when it runs."""
    with _P.lock:
        address = cargs.pointer("devPtr", devPtr)
        space = _P.address_space()
        if not space.is_device(address):
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "devPtr: expected a device address from aclrtMalloc, found host address 0x%x" % address)
        heap, site = space.heap_of(address), user_site()
        if TRACKER.hazards:
            allocation = heap.find(address)
            if allocation is not None and allocation.address == address:
                TRACKER.freeing(allocation, "aclrtFree", site)
        allocation = heap.free(address, site)
        leaks.untrack(allocation)


@api("aclrtMallocHost", failure=(0,))
def aclrtMallocHost(size: int) -> int:
    """-> (hostPtr, ret): page-locked host memory the device reaches by DMA."""
    with _P.lock:
        size = _allocation_size(size)
        site = user_site()
        host = _P.address_space().allocate_host(size, site)
        leaks.track("host memory", host, "0x%x (%d bytes)" % (host.address, size), site)
        return host.address


@api("aclrtFreeHost", keywords={"host_ptr": "hostPtr"})
def aclrtFreeHost(hostPtr: int) -> None:
    """-> ret."""
    with _P.lock:
        address = cargs.pointer("hostPtr", hostPtr)
        space = _P.address_space()
        host = space.host.get(address)
        if TRACKER.hazards and host is not None:
            TRACKER.host_freeing(host.address, host.address + host.size, "aclrtFreeHost", user_site())
        space.free_host(address)
        leaks.untrack(host)


@api("aclrtGetMemInfo", failure=(0, 0))
def aclrtGetMemInfo(attr: int) -> tuple[int, int]:
    """-> (free, total, ret) of the current device for the memory kind `attr` names: HBM on the training,
    A2, A3 and 950 chips, DDR on the inference series; the other kind reports (0, 0)."""
    with _P.lock:
        attr = cargs.integer("attr", attr, INT32)
        heap = current_context().device.heap
        if not 0 <= attr <= _MEM_ATTR_LAST:  # passed through to the driver, whose "invalid value" is 107000
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "attr: expected an aclrtMemAttr, one of 0 (ACL_DDR_MEM) to %d (ACL_MEM_P2P_HUGE1G), found %d"
                           % (_MEM_ATTR_LAST, attr))
        has_hbm = _P.config.profile.memory_is_hbm
        if (attr in _HBM_ATTRS and not has_hbm) or (attr in _DDR_ATTRS and has_hbm):
            return 0, 0
        return heap.capacity - heap.used, heap.capacity


def _memcpy_kind(value: Any) -> int:
    kind = cargs.integer("kind", value, INT32)
    if kind not in MEMCPY_KINDS:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "kind: expected an aclrtMemcpyKind in [0, 5], found %d" % kind)
    return kind


def _copy_of(dst: Any, destMax: Any, src: Any, count: Any, kind: Any) -> Optional[tuple[Copy, int]]:
    """A copy checked in the real order, with the current device; None when there is nothing to do."""
    count = cargs.size("count", count)
    if count == 0:
        return None
    dst, src = cargs.pointer("dst", dst), cargs.pointer("src", src)
    kind = _memcpy_kind(kind)
    device = current_context().device
    dest_max = cargs.size("destMax", destMax)
    if dest_max == 0 or count > dest_max:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "count: expected at most destMax (%d) bytes, found %d" % (dest_max, count))
    return Copy.plan(_P.address_space(), dst, src, kind, count), device.id


@api("aclrtMemcpy", keywords=_DEST_MAX)
def aclrtMemcpy(dst: int, destMax: int, src: int, count: int, kind: int) -> None:
    """-> ret. Copies now. It does not wait for queued stream work: synchronise first."""
    with _P.lock:
        planned = _copy_of(dst, destMax, src, count, kind)
        if planned is not None and planned[0].dst.address != planned[0].src.address:
            _copy_now("aclrtMemcpy", *planned)


def _enqueue_copy(copy: Copy, device_id: int, stream: Stream, name: str) -> None:
    """Queue a copy: what is already unusable is rejected now (107000), what becomes unusable before it
    runs (a free, an unmap) faults when it runs."""
    if not copy.involves_device:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "kind: expected a copy that involves device memory, found host-to-host (not supported on a stream)")
    space = _P.address_space()
    copy.pointers_now(space, device_id, access=False)  # checked again, and accessed, when it runs
    _check_overlap(name, copy)
    nbytes = copy.width * copy.height
    task = Task("%s(%d bytes)" % (name, nbytes), None, reads=copy.device_reads(), writes=copy.device_writes())
    _set_run(task, lambda: copy.run(space, device_id, run_unlocked), _sides(copy))
    enqueue(stream, task)


def run_unlocked(work: Callable[..., None], args: Sequence, touched: Sequence[tuple]) -> None:
    """From a task's `run`: `work(*args)`, a kernel's native compute or a queued copy's or memset's moving
    of bytes, which touches the host memory `touched` ((address, nbytes) pairs resolved before) and
    nothing of the runtime, runs with the runtime lock released, so that other host threads' calls (a
    query, a timed synchronisation, an allocation) go on meanwhile; the memory stays mapped until it ends,
    whoever frees it (emulator.stream.compute_unlocked). The layers above call it as interface.compute."""
    compute_unlocked(_P.lock, work, args, touched)


def _check_overlap(call: str, copy: Copy) -> None:
    """A copy onto memory it reads (other than a row onto itself) is reported (memcheck); it goes on."""
    if TRACKER.memory:
        where = copy.overlap()
        if where is not None:
            TRACKER.overlapping_copy(call, copy, where, user_site())


def _sides(copy: Copy) -> tuple:
    """(Span, "reads" or "writes", pitch, width) of the copy's source and target."""
    return (copy.src, "reads", copy.spitch, copy.width), (copy.dst, "writes", copy.dpitch, copy.width)


def _host_memory(spans: Sequence[tuple]) -> list:
    """(address, nbytes, role[, pitch, width]) of the host memory among the (Span, role[, pitch, width]) of a
    copy or memset (pitch and width: a 2-D copy's rows), as the sanitizer takes it."""
    return [(span.address, span.nbytes, role, *rows) for span, role, *rows in spans if not span.on_device]


def _set_run(task: Task, run: Callable[[], None], spans: Sequence[tuple]) -> None:
    """The task's work: `run`. The host memory among the (Span, role[, pitch, width]) it is handed must
    stay as it is until the program synchronises with the task (synccheck)."""
    handed = _host_memory(spans) if TRACKER.hazards else ()  # (no list made when nothing checks it)
    if not handed:
        task.run = run
        return
    for memory in handed:
        TRACKER.handed_to_copy(task, *memory)

    def checked_run() -> None:
        TRACKER.copy_running(task)
        run()
        TRACKER.copy_ran(task)
    task.run = checked_run


class _host_call:
    """`with _host_call(call) as access:` a synchronous call touches memory now: memcheck's reports of the
    device ranges it resolves name it, and `access.touches(reads, writes, spans)`, once they are resolved
    (a rejected call touches nothing), tells synccheck and initcheck what it reads and writes."""

    def __init__(self, call: str):
        self.call = call

    def __enter__(self) -> "_host_call":
        TRACKER.calling = self.call
        return self

    def touches(self, reads: Sequence[tuple], writes: Sequence[tuple], spans: Sequence[tuple] = ()) -> None:
        """`spans`: the (Span, role[, pitch, width]) of the copy or memset, whose host memory it reads and
        writes too."""
        if TRACKER.hazards:
            host = _host_memory(spans)
            if reads or writes or host:
                TRACKER.host_access(self.call, user_site(), reads, writes, host)

    def __exit__(self, *exception) -> None:
        TRACKER.calling = None


def _copy_now(call: str, copy: Copy, device_id: int) -> None:
    """A synchronous copy: its ranges resolved once (107000 for an unusable one), then the accesses told
    to the sanitizer, then the copy."""
    space = _P.address_space()
    with _host_call(call) as access:
        pointers = copy.pointers_now(space, device_id, access=False)
        copy.accessed(space, device_id)
        _check_overlap(call, copy)
        access.touches(copy.device_reads(), copy.device_writes(), _sides(copy))
        copy.move(*pointers)


@api("aclrtMemcpyAsync", keywords=_DEST_MAX)
def aclrtMemcpyAsync(dst: int, destMax: int, src: int, count: int, kind: int, stream: Optional[int] = None) -> None:
    """-> ret. Queued on the stream; the addresses are checked now and again when the copy runs."""
    with _P.lock:
        planned = _copy_of(dst, destMax, src, count, kind)
        if planned is not None:  # count 0 succeeds with no work, whatever the stream (as aclrtMemcpy)
            _enqueue_copy(*planned, stream_of(stream, for_work=True), "aclrtMemcpyAsync")


def _copy_2d_of(dst: Any, dpitch: Any, src: Any, spitch: Any, width: Any, height: Any, kind: Any) -> tuple[Copy, int]:
    """A 2-D copy: `height` rows of `width` bytes, rows `dpitch` / `spitch` bytes apart; a zero width
    or height, or a width above a pitch, is 100000. The rows' span (`pitch * (height - 1) + width`) is a
    range like any other: one that no memory holds (past 2**63 included) is 107000, from Copy's checks."""
    dst, src = cargs.pointer("dst", dst), cargs.pointer("src", src)
    dpitch, spitch = cargs.size("dpitch", dpitch), cargs.size("spitch", spitch)
    width, height = cargs.size("width", width), cargs.size("height", height)
    for name, value in (("width", width), ("height", height)):
        if value == 0:
            raise AclError(status.ACL_ERROR_INVALID_PARAM, "%s: expected a positive size, found 0" % name)
    for name, pitch in (("dpitch", dpitch), ("spitch", spitch)):
        if width > pitch:
            raise AclError(status.ACL_ERROR_INVALID_PARAM,
                           "%s: expected at least width (%d) bytes, found %d" % (name, width, pitch))
    kind = _memcpy_kind(kind)
    device = current_context().device
    return Copy.plan(_P.address_space(), dst, src, kind, width, height, dpitch, spitch), device.id


@api("aclrtMemcpy2d")
def aclrtMemcpy2d(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int) -> None:
    """-> ret. Copies `height` rows of `width` bytes now (no wait for queued stream work)."""
    with _P.lock:
        _copy_now("aclrtMemcpy2d", *_copy_2d_of(dst, dpitch, src, spitch, width, height, kind))


@api("aclrtMemcpy2dAsync")
def aclrtMemcpy2dAsync(dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int,
                       stream: Optional[int] = None) -> None:
    """-> ret. The 2-D copy queued on the stream; checked now and when it runs."""
    with _P.lock:
        planned = _copy_2d_of(dst, dpitch, src, spitch, width, height, kind)
        _enqueue_copy(*planned, stream_of(stream, for_work=True), "aclrtMemcpy2dAsync")


def _fill_of(devPtr: Any, maxCount: Any, value: Any, count: Any, pinned: bool) -> Optional[tuple[Fill, int]]:
    count = cargs.size("count", count)
    if count == 0:
        return None
    address = cargs.pointer("devPtr", devPtr)
    value = cargs.integer("value", value, INT32)
    device = current_context().device
    max_count = cargs.size("maxCount", maxCount)
    if count > max_count:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "count: expected at most maxCount (%d) bytes, found %d" % (max_count, count))
    return Fill.plan(_P.address_space(), address, value, count, pinned), device.id


@api("aclrtMemset", keywords=_MEMSET)
def aclrtMemset(devPtr: int, maxCount: int, value: int, count: int) -> None:
    """-> ret. Sets bytes now, device or host memory (the pyACL samples memset aclrtMallocHost memory)."""
    with _P.lock:
        planned = _fill_of(devPtr, maxCount, value, count, pinned=False)
        if planned is not None:
            fill, device_id = planned
            with _host_call("aclrtMemset") as access:
                target = fill.span.pointer_now(_P.address_space(), device_id)
                access.touches((), fill.device_writes(), [(fill.span, "writes")])
                fill.set_at(target)


@api("aclrtMemsetAsync", keywords=_MEMSET)
def aclrtMemsetAsync(devPtr: int, maxCount: int, value: int, count: int, stream: Optional[int] = None) -> None:
    """-> ret. Queued on the stream. Device memory, or pinned host memory from aclrtMallocHost (which the
    device reaches by DMA, as aclrtMemcpyAsync does); other host memory is rejected now."""
    with _P.lock:
        planned = _fill_of(devPtr, maxCount, value, count, pinned=True)
        if planned is None:  # count 0 succeeds with no work, whatever the stream
            return
        target = stream_of(stream, for_work=True)
        fill, device_id = planned
        space = _P.address_space()
        fill.span.pointer_now(space, device_id, access=False)
        task = Task("aclrtMemsetAsync(%d bytes)" % fill.span.nbytes, None, writes=fill.device_writes())
        _set_run(task, lambda: fill.run(space, device_id, run_unlocked), [(fill.span, "writes")])
        enqueue(target, task)


# ---------------------------------------------------------------------------------------------
# callbacks


def _thread_id(value: Any) -> int:
    return cargs.integer("threadId", value, UINT64)


@api("aclrtSubscribeReport")
def aclrtSubscribeReport(threadId: int, stream: Optional[int]) -> None:
    """-> ret. Host thread `threadId` (threading.get_ident(), pthread_self() in C) runs the stream's
    callbacks when it calls aclrtProcessReport; 100033 if a thread already does."""
    with _P.lock:
        thread_id = _thread_id(threadId)
        callback.subscribe(thread_id, stream_of(stream))


@api("aclrtUnSubscribeReport")
def aclrtUnSubscribeReport(threadId: int, stream: Optional[int]) -> None:
    """-> ret. 100034 if `threadId` is not the stream's subscribed thread."""
    with _P.lock:
        thread_id = _thread_id(threadId)
        callback.unsubscribe(thread_id, stream_of(stream))


@api("aclrtLaunchCallback")
def aclrtLaunchCallback(fn: Callable[[Any], None], userData: Any, blockType: int, stream: Optional[int] = None) -> None:
    """-> ret. Queues fn(userData) on the stream, run by its subscribed thread (100034 if none).
    ACL_CALLBACK_BLOCK holds the stream's later work until the callback has run."""
    with _P.lock:
        if not callable(fn):
            raise AclError(status.ACL_ERROR_INVALID_PARAM, "fn: expected a callable, found %s"
                           % ("null" if fn is None else cargs.shown(fn)))
        block = cargs.enum("blockType", blockType, _CALLBACK_BLOCK_TYPES, "aclrtCallbackBlockType")
        target = stream_of(stream, for_work=True)
        limit = _P.config.task_timeout or None
        task = callback.launch(target, fn, userData, block == status.ACL_CALLBACK_BLOCK, limit, _P.lock)
        if TRACKER.hazards:  # the callback runs after the work queued before it: so do its runtime calls
            task.run.seen = TRACKER.next_clock(target)
        enqueue(target, task)
        callback.launched(task)


@api("aclrtProcessReport")
def aclrtProcessReport(timeout: int) -> None:
    """-> ret. Runs the next callback that reached one of the calling thread's streams, waiting at most
    `timeout` ms (-1: forever; 0: a poll, which waits for nothing but still lets the streams get to their
    callbacks); 100035 if the thread subscribed to no stream, 100036 on expiry.
    Meanwhile its streams run up to their callbacks (on the card they get there by themselves), as far
    as they can without waiting for another host thread. It waits without holding the runtime, so
    other threads go on."""
    timeout = cargs.integer("timeout", timeout, INT32)
    if timeout < -1:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "timeout: expected milliseconds >= 0, or -1, found %d" % timeout)
    callback.process_report(threading.get_ident(), None if timeout == -1 else timeout / 1000.0)


# ---------------------------------------------------------------------------------------------
# errors


def _last_error(name: str, level: Any, clear: bool) -> int:
    try:
        cargs.enum("level", level, _LAST_ERROR_LEVELS, "aclrtLastErrLevel (ACL_RT_THREAD_LEVEL = 0)")
    except AclError as error:
        errors.record(error.code, name, error.message)
        return error.code
    return errors.last_error(clear)


@value_call("aclrtGetLastError", status.ACL_ERROR_INVALID_PARAM)
def aclrtGetLastError(level: int = status.ACL_RT_THREAD_LEVEL) -> int:
    """-> aclError: the code of this thread's latest failed call (0 if none), which it clears."""
    return _last_error("aclrtGetLastError", level, clear=True)


@value_call("aclrtPeekAtLastError", status.ACL_ERROR_INVALID_PARAM)
def aclrtPeekAtLastError(level: int = status.ACL_RT_THREAD_LEVEL) -> int:
    """-> aclError: the code of this thread's latest failed call (0 if none), left in place."""
    return _last_error("aclrtPeekAtLastError", level, clear=False)


# ---------------------------------------------------------------------------------------------
# data types


@value_call("aclFloat16ToFloat", 0.0)
def aclFloat16ToFloat(value: int) -> float:
    """-> float: the IEEE half-precision bit pattern `value` (a uint16) as a float (0.0 and a message
    for a value that is no uint16)."""
    try:
        bits = cargs.integer("value", value, (0, 0xFFFF))
    except AclError as error:
        errors.record(error.code, "aclFloat16ToFloat", error.message)
        return 0.0
    return float(np.frombuffer(struct.pack("<H", bits), np.float16)[0])


@value_call("aclFloatToFloat16", 0)
def aclFloatToFloat16(value: float) -> int:
    """-> int: the half-precision bit pattern nearest to `value` (rounded to nearest even; overflow
    gives infinity), as a uint16 (0 and a message for a value that is no number)."""
    try:
        number = cargs.double("value", value)
    except AclError as error:
        errors.record(error.code, "aclFloatToFloat16", error.message)
        return 0
    with np.errstate(over="ignore"):
        return int(np.array([number], np.float32).astype(np.float16).view(np.uint16)[0])


# ---------------------------------------------------------------------------------------------
# settings


def configure(**settings: Any) -> None:
    """Change settings (see emulator.config) while no device is set; raises ConfigError on bad values."""
    _P.configure(**settings)


def settings():
    """The settings in force (an emulator.config.Config)."""
    return _P.config


@atexit.register
def report_leaks_at_exit() -> None:
    """The leak report of the process's end (each leak once: reported, it is forgotten). At exit, and
    earlier from a process whose end its parent does not see, such as a pytest-xdist worker."""
    if leaks.pending():  # else nothing to read the settings for: a process that never used npuemu does nothing
        _report_leaks("exit")
