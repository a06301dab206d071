"""The ACL runtime calls, by their C names (aclInit, aclrtMalloc, ...), with pyACL conventions:
outputs first, the aclError status last. Semantics and codes follow spec/RUNTIME.md §1.5."""
from __future__ import annotations

import atexit
import ctypes
import json
from typing import Any, Optional

from . import context as context_module
from . import leaks, status
from .config import ConfigError
from .context import Context
from .device import Device
from .errors import AclError, api, get_recent_err_msg as _get_recent_err_msg, record, user_site
from .event import Event
from .memory import Allocation, DeviceFault, host_range_is_mapped
from .state import PROCESS
from .stream import RecordTask, Stream, Task, WaitTask

_P = PROCESS
_EVENT_NO_TIMING = status.ACL_EVENT_EXTERNAL | status.ACL_EVENT_IPC   # these events cannot time
_MEMCPY_KINDS = {0: "ACL_MEMCPY_HOST_TO_HOST", 1: "ACL_MEMCPY_HOST_TO_DEVICE", 2: "ACL_MEMCPY_DEVICE_TO_HOST",
                 3: "ACL_MEMCPY_DEVICE_TO_DEVICE", 4: "ACL_MEMCPY_DEFAULT", 5: "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE"}
_HBM_ATTRS = {1, 4, 5, 8, 9, 10, 11}
_DDR_ATTRS = {0, 2, 3, 6, 7}


# ---------------------------------------------------------------------------------------------
# argument helpers: Python values that a C prototype would not even accept become 100000


INT32 = (-(1 << 31), (1 << 31) - 1)
UINT32 = (0, (1 << 32) - 1)
SIZE_T = (0, (1 << 64) - 1)


def _integer(name: str, value: Any, bounds: tuple = (None, None)) -> int:
    """An integer argument within the (minimum, maximum) its C type and meaning allow (None: unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "%s: expected an integer, found %r" % (name, value))
    minimum, maximum = bounds
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "%s: expected an integer in [%s, %s], found %d"
                       % (name, minimum if minimum is not None else "-inf", maximum if maximum is not None else "inf", value))
    return value


def _pointer(name: str, value: Any) -> int:
    """A pointer argument: a non-null int address (pyACL passes pointers as plain ints)."""
    if value is None or value == 0:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "%s: expected a non-null pointer, found null" % name)
    return _integer(name, value, (1, SIZE_T[1]))


def _handle(name: str, value: Any, kind: type, allow_null: bool = False):
    """The live object behind a handle; a destroyed or garbage handle gives 107017 (spec §1.5)."""
    if value is None or value == 0:
        if allow_null:
            return None
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "%s: expected a %s handle, found null" % (name, kind.__name__.lower()))
    obj = _P.handles.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if not isinstance(obj, kind) or not obj.alive:
        shown = "0x%x" % value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else repr(value)
        raise AclError(status.ACL_ERROR_RT_INVALID_HANDLE,
                       "%s: expected a live %s handle, found %s (destroyed, or never created)"
                       % (name, kind.__name__.lower(), shown))
    return obj


def _device_id(value: Any) -> int:
    device_id = _integer("deviceId", value, INT32)
    count = _P.config.device_count
    if not 0 <= device_id < count:
        raise AclError(status.ACL_ERROR_RT_INVALID_DEVICEID,
                       "deviceId: expected a device id in [0, %d), found %d" % (count, device_id))
    return device_id


def current_context() -> Context:
    """The calling thread's context, or 107002 (an aclInit `defaultDevice` sets one implicitly)."""
    context = context_module.current()
    if context is None and _P.default_device is not None:
        _set_device(_P.default_device)
        context = context_module.current()
    if context is None:
        raise AclError(status.ACL_ERROR_RT_CONTEXT_NULL,
                       "context: expected a current context on this thread (call aclrtSetDevice or "
                       "aclrtSetCurrentContext first), found none")
    return context


def stream_of(value: Any, name: str = "stream", for_work: bool = False) -> Stream:
    """A stream argument: null means the default stream of the current context. A stream of another
    device than the current one gives 107003; so does, for calls that put work on the stream
    (`for_work`: launches, async copies and memsets, event records and waits), a stream of another
    context of the same device, as the runtime checks "stream is not in current ctx"."""
    stream = _handle(name, value, Stream, allow_null=True)
    context = current_context()
    if stream is None:
        return context.default_stream
    if stream.device_id != context.device.id:
        raise AclError(status.ACL_ERROR_RT_STREAM_CONTEXT,
                       "%s: expected a stream of the current device %d, found %s"
                       % (name, context.device.id, stream.describe()))
    if for_work and stream.context is not context:
        raise AclError(status.ACL_ERROR_RT_STREAM_CONTEXT,
                       "%s: expected a stream of the current context 0x%x, found %s, which belongs to context 0x%x"
                       % (name, context.handle, stream.describe(), stream.context.handle))
    return stream


def enqueue(stream: Stream, task: Task) -> None:
    """Queue work on a stream; in eager mode it runs at once (faults surface at the next sync)."""
    stream.enqueue(task)
    if _P.config.execution == "eager":
        stream.drain()


def _raise_faults(streams: list[Stream]) -> None:
    faults = [fault for fault in (s.take_fault() for s in streams) if fault]
    if faults:
        raise AclError(status.ACL_ERROR_RT_AICORE_EXCEPTION,
                       "the device raised an exception while running queued work: " + "; ".join(faults))


# ---------------------------------------------------------------------------------------------
# aclInit / aclFinalize


@api("aclInit")
def aclInit(config_path: Optional[str] = None) -> None:
    with _P.lock:
        text = _read_init_config(config_path)
        if _P.init_count > 0:
            if text != _P.init_config:
                raise AclError(status.ACL_ERROR_INVALID_PARAM,
                               "configPath: expected the same configuration as the first aclInit, found a different one")
            _P.init_count += 1
            raise AclError(status.ACL_ERROR_REPEAT_INITIALIZE,
                           "aclInit: expected a single initialisation, found a repeated call (harmless; "
                           "reference count is now %d)" % _P.init_count)
        default_device = _default_device_of(text)  # may reject the file: nothing is committed before
        _P.init_count, _P.finalized, _P.init_config, _P.default_device = 1, False, text, default_device


def _read_init_config(config_path: Optional[str]) -> str:
    if config_path is None or config_path == "":
        return ""
    if not isinstance(config_path, str):
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "configPath: expected a path string, found %r" % (config_path,))
    try:
        with open(config_path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise AclError(status.ACL_ERROR_INVALID_FILE, "configPath: expected a readable JSON file, found %r (%s)"
                       % (config_path, error.strerror)) from None
    try:
        if not isinstance(json.loads(text or "{}"), dict):
            raise ValueError("not an object")
    except ValueError as error:
        raise AclError(status.ACL_ERROR_PARSE_FILE,
                       "configPath: expected a JSON object, found invalid content in %r (%s)" % (config_path, error)) from None
    return text


def _default_device_of(text: str) -> Optional[int]:
    """The device of {"defaultDevice": {"default_device": "<id>"}}, or None."""
    settings = json.loads(text) if text.strip() else {}
    section = settings.get("defaultDevice")
    value = section.get("default_device") if isinstance(section, dict) else None
    if value is None:
        return None
    try:
        device_id = int(value)
    except (TypeError, ValueError):
        raise AclError(status.ACL_ERROR_INVALID_PARAM,
                       "defaultDevice.default_device: expected a device id, found %r" % (value,)) from None
    try:
        return _device_id(device_id)
    except AclError as error:
        raise AclError(error.code, "defaultDevice.default_device: " + error.message.split(": ", 1)[1]) from None


@api("aclFinalize")
def aclFinalize() -> None:
    with _P.lock:
        if _P.finalized:
            raise AclError(status.ACL_ERROR_REPEAT_FINALIZE,
                           "aclFinalize: expected one call per aclInit, found a repeated call")
        _teardown("aclFinalize")


@api("aclFinalizeReference", failure=(0,))
def aclFinalizeReference() -> int:
    """Decrements the aclInit reference count; tears down when it reaches zero. Returns the count left."""
    with _P.lock:
        if _P.init_count < 1:
            raise AclError(status.ACL_ERROR_REPEAT_FINALIZE,
                           "aclFinalizeReference: expected an initialised runtime, found reference count 0")
        _P.init_count -= 1
        if _P.init_count == 0:
            _teardown("aclFinalizeReference")
        return _P.init_count


def _teardown(when: str) -> None:
    for device in _P.devices:
        if device.is_open:
            _close_device(device, when)
    _P.init_count, _P.finalized, _P.default_device = 0, True, None
    _report_leaks(when)


def _report_leaks(when: str) -> None:
    """The leak report, unless NPUEMU_LEAK_CHECK turned it off (reading the settings applies it); with
    an unusable environment, the report is made anyway."""
    try:
        _P.config
    except ConfigError:
        pass
    leaks.report(when)


def aclGetRecentErrMsg() -> Optional[str]:
    return _get_recent_err_msg()


# ---------------------------------------------------------------------------------------------
# devices


@api("aclrtSetDevice")
def aclrtSetDevice(deviceId: int) -> None:
    with _P.lock:
        _set_device(_device_id(deviceId))


def _set_device(device_id: int) -> None:
    device = _retain(_P.device(device_id))
    context_module.set_current(device.default_context)


def _retain(device: Device) -> Device:
    """One more reference to the device (aclrtSetDevice, or a context made by aclrtCreateContext);
    the first one opens it with its default context and default stream."""
    if device.ref_count == 0:
        device.default_context = _new_context(device, is_default=True, site="aclrtSetDevice(%d)" % device.id)
    device.ref_count += 1
    return device


def _release(device: Device, how: str) -> None:
    """One reference less; the last one closes the device."""
    device.ref_count -= 1
    if device.ref_count == 0:
        _close_device(device, how)


def _new_context(device: Device, is_default: bool, site: str) -> Context:
    context = Context(0, device, is_default, site)
    context.handle = _P.new_handle(context)
    context.default_stream = Stream(0, context, True, site)
    context.default_stream.handle = _P.new_handle(context.default_stream)
    device.contexts.append(context)
    return context


@api("aclrtResetDevice")
def aclrtResetDevice(deviceId: int) -> None:
    with _P.lock:
        device = _P.device(_device_id(deviceId))
        if device.ref_count == 0:
            raise AclError(status.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
                           "deviceId: expected a device set by aclrtSetDevice, found device %d with reference count 0"
                           % device.id)
        _release(device, "aclrtResetDevice(%d)" % device.id)


@api("aclrtResetDeviceForce")
def aclrtResetDeviceForce(deviceId: int) -> None:
    with _P.lock:
        device = _P.device(_device_id(deviceId))
        if device.ref_count == 0:
            raise AclError(status.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
                           "deviceId: expected a device set by aclrtSetDevice, found device %d not set" % device.id)
        _close_device(device, "aclrtResetDeviceForce(%d)" % device.id)


def _close_device(device: Device, how: str) -> None:
    """Release everything of the device: queued work runs first; what the program never released
    is a leak (reported at finalize)."""
    for stream in device.streams():
        stream.drain()
        fault = stream.take_fault()
        if fault:
            record(status.ACL_ERROR_RT_AICORE_EXCEPTION, how, fault)
    for context in list(device.contexts):
        _destroy_context_objects(context, how)
    for allocation in device.heap.release_all(how):
        leaks.orphan(allocation, how)
    device.contexts, device.default_context, device.ref_count = [], None, 0


def _destroy_context_objects(context: Context, how: str) -> None:
    for stream in [*context.streams, context.default_stream]:
        stream.alive = False
        _P.drop_handle(stream.handle)
        leaks.orphan(stream, how)
    for event in context.events:
        event.alive = False
        _P.drop_handle(event.handle)
        leaks.orphan(event, how)
    context.streams, context.events, context.alive = [], [], False
    _P.drop_handle(context.handle)
    leaks.orphan(context, how)


@api("aclrtGetDevice", failure=(0,))
def aclrtGetDevice() -> int:
    with _P.lock:
        return current_context().device.id


@api("aclrtGetDeviceCount", failure=(0,))
def aclrtGetDeviceCount() -> int:
    return _P.config.device_count


@api("aclrtGetRunMode", failure=(status.ACL_HOST,))
def aclrtGetRunMode() -> int:
    """A PCIe card in a host: ACL_HOST, as the real runtime reports it."""
    return status.ACL_HOST


def aclrtGetSocName() -> str:
    return _P.config.soc_name


@api("aclrtSynchronizeDevice")
def aclrtSynchronizeDevice() -> None:
    with _P.lock:
        streams = current_context().device.streams()
        for stream in streams:
            stream.drain()
        _raise_faults(streams)


# ---------------------------------------------------------------------------------------------
# contexts


@api("aclrtCreateContext", failure=(0,))
def aclrtCreateContext(deviceId: int) -> int:
    """Creates a context on the device and makes it current. The context holds a reference to the
    device (opening it if needed), which aclrtDestroyContext gives back, as the runtime retains and
    releases the device with each context."""
    with _P.lock:
        device = _retain(_P.device(_device_id(deviceId)))
        context = _new_context(device, is_default=False, site=user_site())
        leaks.track("context", context, "0x%x on device %d" % (context.handle, device.id), context.site)
        context_module.set_current(context)
        return context.handle


@api("aclrtDestroyContext")
def aclrtDestroyContext(context: int) -> None:
    with _P.lock:
        ctx = _handle("context", context, Context)
        if ctx.is_default:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "context: expected a context made by aclrtCreateContext, found the default context of "
                           "device %d (released by aclrtResetDevice)" % ctx.device.id)
        for stream in [*ctx.streams, ctx.default_stream]:
            stream.drain()
        leaks.untrack(ctx)
        _destroy_context_objects(ctx, "aclrtDestroyContext")
        ctx.device.contexts.remove(ctx)
        if context_module.current() is None:
            context_module.set_current(None)
        _release(ctx.device, "aclrtDestroyContext")


@api("aclrtSetCurrentContext")
def aclrtSetCurrentContext(context: int) -> None:
    with _P.lock:
        context_module.set_current(_handle("context", context, Context))


@api("aclrtGetCurrentContext", failure=(0,))
def aclrtGetCurrentContext() -> int:
    with _P.lock:
        return current_context().handle


# ---------------------------------------------------------------------------------------------
# streams


@api("aclrtCreateStream", failure=(0,))
def aclrtCreateStream() -> int:
    with _P.lock:
        context = current_context()
        stream = Stream(0, context, False, user_site())
        stream.handle = _P.new_handle(stream)
        context.streams.append(stream)
        leaks.track("stream", stream, lambda: stream.describe(), stream.site)
        return stream.handle


@api("aclrtDestroyStream")
def aclrtDestroyStream(stream: int) -> None:
    """Queued work runs first (a fault in it is reported here); then the stream is gone."""
    with _P.lock:
        target = _handle("stream", stream, Stream)
        if target.is_default:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID, "stream: expected a created stream, found a default stream")
        target.drain()
        target.alive = False
        target.context.streams.remove(target)
        _P.drop_handle(target.handle)
        leaks.untrack(target)
        _raise_faults([target])


@api("aclrtSynchronizeStream")
def aclrtSynchronizeStream(stream: Optional[int] = None) -> None:
    with _P.lock:
        target = stream_of(stream)
        target.drain()
        if target.fault:
            _raise_faults([target])


@api("aclrtStreamQuery", failure=(status.ACL_STREAM_STATUS_NOT_READY,))
def aclrtStreamQuery(stream: Optional[int] = None) -> int:
    """NOT_READY while work is queued. The device makes progress while the host polls: the queued
    work runs after this answer, so a polling loop ends as it would on hardware."""
    with _P.lock:
        target = stream_of(stream)
        if not target.queue:
            return status.ACL_STREAM_STATUS_COMPLETE
        target.drain()
        return status.ACL_STREAM_STATUS_NOT_READY


@api("aclrtStreamWaitEvent")
def aclrtStreamWaitEvent(stream: Optional[int], event: int) -> None:
    with _P.lock:
        target = stream_of(stream, for_work=True)
        marker = _handle("event", event, Event)
        enqueue(target, WaitTask(marker.handle, marker.record))


# ---------------------------------------------------------------------------------------------
# events


@api("aclrtCreateEvent", failure=(0,))
def aclrtCreateEvent() -> int:
    return _create_event(status.ACL_EVENT_TIME_LINE)


@api("aclrtCreateEventWithFlag", failure=(0,))
def aclrtCreateEventWithFlag(flag: int) -> int:
    return _create_event(_integer("flag", flag, UINT32))


def _create_event(flags: int) -> int:
    with _P.lock:
        context = current_context()
        event = Event(0, context, flags, user_site())
        event.handle = _P.new_handle(event)
        context.events.append(event)
        leaks.track("event", event, "0x%x on device %d" % (event.handle, context.device.id), event.site)
        return event.handle


@api("aclrtDestroyEvent")
def aclrtDestroyEvent(event: int) -> None:
    with _P.lock:
        marker = _handle("event", event, Event)
        marker.alive = False
        marker.context.events.remove(marker)
        _P.drop_handle(marker.handle)
        leaks.untrack(marker)


@api("aclrtRecordEvent")
def aclrtRecordEvent(event: int, stream: Optional[int] = None) -> None:
    with _P.lock:
        marker = _handle("event", event, Event)
        target = stream_of(stream, for_work=True)
        marker.record = RecordTask(marker.handle)
        enqueue(target, marker.record)


@api("aclrtResetEvent")
def aclrtResetEvent(event: int, stream: Optional[int] = None) -> None:
    with _P.lock:
        marker = _handle("event", event, Event)
        stream_of(stream)
        marker.record = None


@api("aclrtQueryEventStatus", failure=(status.ACL_EVENT_RECORDED_STATUS_NOT_READY,))
def aclrtQueryEventStatus(event: int) -> int:
    """aclrtEventRecordedStatus: COMPLETE (1) or NOT_READY (0). As with aclrtStreamQuery, the device
    makes progress while polled: the work before the event runs after a NOT_READY answer."""
    with _P.lock:
        marker = _handle("event", event, Event)
        if marker.complete:
            return status.ACL_EVENT_RECORDED_STATUS_COMPLETE
        marker.record.stream.drain(upto=marker.record)
        return status.ACL_EVENT_RECORDED_STATUS_NOT_READY


@api("aclrtSynchronizeEvent")
def aclrtSynchronizeEvent(event: int) -> None:
    with _P.lock:
        marker = _handle("event", event, Event)
        if marker.record is not None and not marker.record.done:
            stream = marker.record.stream
            stream.drain(upto=marker.record)
            _raise_faults([stream])


@api("aclrtEventElapsedTime", failure=(0.0,))
def aclrtEventElapsedTime(startEvent: int, endEvent: int) -> float:
    """Milliseconds of device time between the two records: the measured run time of the work
    between them, plus any time the stream sat idle waiting for the host to issue work."""
    with _P.lock:
        start = _handle("startEvent", startEvent, Event)
        end = _handle("endEvent", endEvent, Event)
        for name, marker in (("startEvent", start), ("endEvent", end)):
            if marker.flags & _EVENT_NO_TIMING:
                raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                               "%s: expected an event that can time, found flags 0x%x (EXTERNAL/IPC)" % (name, marker.flags))
            if marker.record is None:
                raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                               "%s: expected a recorded event, found one never passed to aclrtRecordEvent" % name)
            if not marker.record.done:
                raise AclError(status.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                               "%s: expected a completed event, found its record still queued (synchronise first)" % name)
        if end.record.timestamp < start.record.timestamp:
            raise AclError(status.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                           "endEvent: expected a record that completed after startEvent's, found one %.3f ms earlier"
                           % ((start.record.timestamp - end.record.timestamp) * 1000.0))
        return float((end.record.timestamp - start.record.timestamp) * 1000.0)


# ---------------------------------------------------------------------------------------------
# memory


def _allocation_size(value: Any) -> int:
    """size of aclrtMalloc/aclrtMallocHost: 0 and sizes that overflow once padded are 100000 (spec §1.5)."""
    size = _integer("size", value)
    if size <= 0:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "size: expected a positive size, found %d" % size)
    if size > (1 << 63) - 64:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "size: expected a size that does not overflow, found %d" % size)
    return size


@api("aclrtMalloc", failure=(0,))
def aclrtMalloc(size: int, policy: int = status.ACL_MEM_MALLOC_HUGE_FIRST) -> int:
    """Device memory, padded to ALIGN_UP(size, 32) + 32 bytes. The policy only picks page sizes on
    hardware; any value is accepted, as the real runtime falls back to the default."""
    with _P.lock:
        size = _allocation_size(size)
        _integer("policy", policy, (INT32[0], UINT32[1]))  # an enum with OR-able flag bits
        device = current_context().device
        site = user_site()
        allocation = _P.address_space().allocate(device.id, size, site)
        leaks.track("device memory", allocation,
                    "0x%x (%d bytes) on device %d" % (allocation.address, size, device.id), site)
        return allocation.address


@api("aclrtFree")
def aclrtFree(devPtr: int) -> None:
    """Needs no context. Work still queued that uses the memory will fault when it runs."""
    with _P.lock:
        address = _pointer("devPtr", devPtr)
        space = _P.address_space()
        if not space.is_device(address):
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "devPtr: expected a device address from aclrtMalloc, found host address 0x%x" % address)
        allocation = space.heap_of(address).free(address, user_site())
        leaks.untrack(allocation)


@api("aclrtMallocHost", failure=(0,))
def aclrtMallocHost(size: int) -> int:
    with _P.lock:
        size = _allocation_size(size)
        site = user_site()
        host = _P.address_space().allocate_host(size, site)
        leaks.track("host memory", host, "0x%x (%d bytes)" % (host.address, size), site)
        return host.address


@api("aclrtFreeHost")
def aclrtFreeHost(hostPtr: int) -> None:
    with _P.lock:
        address = _pointer("hostPtr", hostPtr)
        space = _P.address_space()
        host = space.host.get(address)
        space.free_host(address)
        leaks.untrack(host)


@api("aclrtGetMemInfo", failure=(0, 0))
def aclrtGetMemInfo(attr: int) -> tuple[int, int]:
    """(free, total) of the current device for the memory kind `attr` names: HBM on the training,
    A2, A3 and 950 chips, DDR on the inference series; the other kind reports (0, 0)."""
    with _P.lock:
        attr = _integer("attr", attr, INT32)
        if not 0 <= attr <= 17:
            raise AclError(status.ACL_ERROR_INVALID_PARAM, "attr: expected an aclrtMemAttr in [0, 17], found %d" % attr)
        heap = current_context().device.heap
        has_hbm = _P.config.profile.memory_is_hbm
        if (attr in _HBM_ATTRS and not has_hbm) or (attr in _DDR_ATTRS and has_hbm):
            return 0, 0
        return heap.capacity - heap.used, heap.capacity


def _span(address: int, nbytes: int, device_id: int, name: str) -> int:
    """Host address backing a device range, checked now (synchronous calls): 107000 if unusable."""
    try:
        return _P.address_space().resolve(address, nbytes, device_id, name)[1]
    except DeviceFault as fault:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID, str(fault)) from None


def _check_host(address: int, nbytes: int, name: str) -> None:
    if not host_range_is_mapped(address, nbytes):
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "%s: expected %d bytes of mapped host memory at 0x%x, found unmapped memory" % (name, nbytes, address))


def _memcpy_plan(dst: Any, destMax: Any, src: Any, count: Any, kind: Any):
    """Validate a copy in the real order: (dst, src, count, dst_is_device, src_is_device, device), or None for no work."""
    count = _integer("count", count, SIZE_T)
    if count == 0:
        return None
    dst, src = _pointer("dst", dst), _pointer("src", src)
    kind = _integer("kind", kind, INT32)
    if kind not in _MEMCPY_KINDS:
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "kind: expected an aclrtMemcpyKind in [0, 5], found %d" % kind)
    device = current_context().device
    dest_max = _integer("destMax", destMax, SIZE_T)
    if dest_max == 0 or count > dest_max:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "count: expected at most destMax (%d) bytes, found %d" % (dest_max, count))
    space = _P.address_space()
    dst_device, src_device = space.is_device(dst), space.is_device(src)
    if kind != status.ACL_MEMCPY_DEFAULT:
        expected = {0: (False, False), 1: (True, False), 2: (False, True), 3: (True, True), 5: (True, False)}[kind]
        if (dst_device, src_device) != expected:
            where = lambda is_dev: "device" if is_dev else "host"
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "kind: expected %s (dst %s, src %s), found dst 0x%x in %s memory and src 0x%x in %s memory"
                           % (_MEMCPY_KINDS[kind], where(expected[0]), where(expected[1]),
                              dst, where(dst_device), src, where(src_device)))
    return dst, src, count, dst_device, src_device, device


@api("aclrtMemcpy")
def aclrtMemcpy(dst: int, destMax: int, src: int, count: int, kind: int) -> None:
    """Copies now. It does not wait for queued stream work (spec §1.5): synchronise first."""
    with _P.lock:
        plan = _memcpy_plan(dst, destMax, src, count, kind)
        if plan is None:
            return
        dst, src, count, dst_device, src_device, device = plan
        if dst == src:
            return
        target = _span(dst, count, device.id, "dst") if dst_device else (_check_host(dst, count, "dst") or dst)
        source = _span(src, count, device.id, "src") if src_device else (_check_host(src, count, "src") or src)
        ctypes.memmove(target, source, count)


@api("aclrtMemcpyAsync")
def aclrtMemcpyAsync(dst: int, destMax: int, src: int, count: int, kind: int, stream: Optional[int] = None) -> None:
    """Queued on the stream; the addresses are resolved, and checked, when the copy runs."""
    with _P.lock:
        plan = _memcpy_plan(dst, destMax, src, count, kind)
        target_stream = stream_of(stream, for_work=True)
        if plan is None:
            return
        dst, src, count, dst_device, src_device, device = plan
        if not dst_device and not src_device:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "kind: expected a copy that involves device memory, found host-to-host (not supported on a stream)")
        # What is already unusable is rejected now, as by aclrtMemcpy; what becomes unusable before the
        # copy runs (a free, an unmap) faults when it runs.
        for address, on_device, name in ((dst, dst_device, "dst"), (src, src_device, "src")):
            _span(address, count, device.id, name) if on_device else _check_host(address, count, name)
        space = _P.address_space()

        def run() -> None:
            target = space.resolve(dst, count, device.id, "dst")[1] if dst_device else _host_or_fault(dst, count, "dst")
            source = space.resolve(src, count, device.id, "src")[1] if src_device else _host_or_fault(src, count, "src")
            ctypes.memmove(target, source, count)
        enqueue(target_stream, Task("aclrtMemcpyAsync(%d bytes)" % count, run))


def _host_or_fault(address: int, nbytes: int, name: str) -> int:
    if not host_range_is_mapped(address, nbytes):
        raise DeviceFault("%s: host memory [0x%x, 0x%x) is no longer mapped" % (name, address, address + nbytes))
    return address


def _memset_plan(devPtr: Any, maxCount: Any, value: Any, count: Any):
    count = _integer("count", count, SIZE_T)
    if count == 0:
        return None
    address = _pointer("devPtr", devPtr)
    value = _integer("value", value, INT32)
    device = current_context().device
    max_count = _integer("maxCount", maxCount, SIZE_T)
    if count > max_count:
        raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                       "count: expected at most maxCount (%d) bytes, found %d" % (max_count, count))
    return address, value & 0xFF, count, device


@api("aclrtMemset")
def aclrtMemset(devPtr: int, maxCount: int, value: int, count: int) -> None:
    """Sets bytes now, device or host memory (the pyACL samples memset aclrtMallocHost memory)."""
    with _P.lock:
        plan = _memset_plan(devPtr, maxCount, value, count)
        if plan is None:
            return
        address, byte, count, device = plan
        if _P.address_space().is_device(address):
            target = _span(address, count, device.id, "devPtr")
        else:
            _check_host(address, count, "devPtr")
            target = address
        ctypes.memset(target, byte, count)


@api("aclrtMemsetAsync")
def aclrtMemsetAsync(devPtr: int, maxCount: int, value: int, count: int, stream: Optional[int] = None) -> None:
    """Queued on the stream. Device memory, or pinned host memory from aclrtMallocHost (which the device
    reaches by DMA, as aclrtMemcpyAsync does); other host memory is rejected now."""
    with _P.lock:
        plan = _memset_plan(devPtr, maxCount, value, count)
        target_stream = stream_of(stream, for_work=True)
        if plan is None:
            return
        address, byte, count, device = plan
        space = _P.address_space()
        on_device = space.is_device(address)
        if not on_device and space.find_host(address, count) is None:
            raise AclError(status.ACL_ERROR_RT_PARAM_INVALID,
                           "devPtr: expected device memory or aclrtMallocHost memory for %d bytes, found host "
                           "address 0x%x" % (count, address))

        def run() -> None:
            if on_device:
                target = space.resolve(address, count, device.id, "devPtr")[1]
            elif space.find_host(address, count) is None:
                raise DeviceFault("devPtr [0x%x, 0x%x): expected aclrtMallocHost memory, found it freed"
                                  % (address, address + count))
            else:
                target = address
            ctypes.memset(target, byte, count)
        enqueue(target_stream, Task("aclrtMemsetAsync(%d bytes)" % count, run))


def resolve_device_range(address: int, nbytes: int, device_id: int, what,
                         base: Optional[int] = None) -> tuple[Allocation, int]:
    """For kernels at execution time: DeviceFault if the range is not inside the live allocation that
    holds `base` (default: `address`; a tensor's data address, so a view cannot stray into a neighbour)."""
    return _P.address_space().resolve(address, nbytes, device_id, what, base)


def configure(**settings: Any) -> None:
    """Change settings (see emulator.config) while no device is set; raises ConfigError on bad values."""
    _P.configure(**settings)


def settings():
    """The settings in force (an emulator.config.Config)."""
    return _P.config


@atexit.register
def _report_at_exit() -> None:
    _report_leaks("exit")
