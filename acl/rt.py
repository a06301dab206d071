"""acl.rt: devices, contexts, streams, events, memory and callbacks (pyACL names over the C calls).

Every call returns its outputs first and the aclError status last (`ptr, ret = acl.rt.malloc(n, 0)`);
a call with no outputs returns only `ret`. help() on any of them shows what it returns."""
from emulator import runtime as _r

# devices
set_device = _r.aclrtSetDevice
reset_device = _r.aclrtResetDevice
reset_device_force = _r.aclrtResetDeviceForce
get_device = _r.aclrtGetDevice
get_device_count = _r.aclrtGetDeviceCount
get_run_mode = _r.aclrtGetRunMode
get_soc_name = _r.aclrtGetSocName
get_version = _r.aclrtGetVersion
synchronize_device = _r.aclrtSynchronizeDevice
synchronize_device_with_timeout = _r.aclrtSynchronizeDeviceWithTimeout

# contexts
create_context = _r.aclrtCreateContext
destroy_context = _r.aclrtDestroyContext
set_context = _r.aclrtSetCurrentContext
get_context = _r.aclrtGetCurrentContext

# streams
create_stream = _r.aclrtCreateStream
create_stream_with_config = _r.aclrtCreateStreamWithConfig
destroy_stream = _r.aclrtDestroyStream
destroy_stream_force = _r.aclrtDestroyStreamForce
synchronize_stream = _r.aclrtSynchronizeStream
synchronize_stream_with_timeout = _r.aclrtSynchronizeStreamWithTimeout
stream_query = _r.aclrtStreamQuery
stream_wait_event = _r.aclrtStreamWaitEvent

# events
create_event = _r.aclrtCreateEvent
create_event_with_flag = _r.aclrtCreateEventWithFlag
create_event_ex_with_flag = _r.aclrtCreateEventExWithFlag
destroy_event = _r.aclrtDestroyEvent
record_event = _r.aclrtRecordEvent
reset_event = _r.aclrtResetEvent
query_event = _r.aclrtQueryEvent
query_event_status = _r.aclrtQueryEventStatus
query_event_wait_status = _r.aclrtQueryEventWaitStatus
synchronize_event = _r.aclrtSynchronizeEvent
synchronize_event_with_timeout = _r.aclrtSynchronizeEventWithTimeout
event_elapsed_time = _r.aclrtEventElapsedTime
event_get_timestamp = _r.aclrtEventGetTimestamp

# memory
malloc = _r.aclrtMalloc
malloc_align32 = _r.aclrtMallocAlign32
malloc_cached = _r.aclrtMallocCached
free = _r.aclrtFree
malloc_host = _r.aclrtMallocHost
free_host = _r.aclrtFreeHost
memcpy = _r.aclrtMemcpy
memcpy_async = _r.aclrtMemcpyAsync
memcpy_2d = _r.aclrtMemcpy2d
memcpy_2d_async = _r.aclrtMemcpy2dAsync
memset = _r.aclrtMemset
memset_async = _r.aclrtMemsetAsync
get_mem_info = _r.aclrtGetMemInfo

# callbacks
subscribe_report = _r.aclrtSubscribeReport
unsubscribe_report = _r.aclrtUnSubscribeReport
launch_callback = _r.aclrtLaunchCallback
process_report = _r.aclrtProcessReport

# errors
get_last_error = _r.aclrtGetLastError
peek_at_last_error = _r.aclrtPeekAtLastError

# data types (acl_base: aclFloat16 is the uint16 bit pattern)
float16_to_float = _r.aclFloat16ToFloat
float_to_float16 = _r.aclFloatToFloat16
