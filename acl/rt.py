"""acl.rt: devices, contexts, streams, events and memory (pyACL names over the C calls)."""
from emulator import runtime as _r

set_device = _r.aclrtSetDevice
reset_device = _r.aclrtResetDevice
reset_device_force = _r.aclrtResetDeviceForce
get_device = _r.aclrtGetDevice
get_device_count = _r.aclrtGetDeviceCount
get_run_mode = _r.aclrtGetRunMode
get_soc_name = _r.aclrtGetSocName
synchronize_device = _r.aclrtSynchronizeDevice

create_context = _r.aclrtCreateContext
destroy_context = _r.aclrtDestroyContext
set_context = _r.aclrtSetCurrentContext
get_context = _r.aclrtGetCurrentContext

create_stream = _r.aclrtCreateStream
destroy_stream = _r.aclrtDestroyStream
synchronize_stream = _r.aclrtSynchronizeStream
stream_query = _r.aclrtStreamQuery
stream_wait_event = _r.aclrtStreamWaitEvent

create_event = _r.aclrtCreateEvent
create_event_with_flag = _r.aclrtCreateEventWithFlag
destroy_event = _r.aclrtDestroyEvent
record_event = _r.aclrtRecordEvent
reset_event = _r.aclrtResetEvent
query_event_status = _r.aclrtQueryEventStatus
synchronize_event = _r.aclrtSynchronizeEvent
event_elapsed_time = _r.aclrtEventElapsedTime

malloc = _r.aclrtMalloc
free = _r.aclrtFree
malloc_host = _r.aclrtMallocHost
free_host = _r.aclrtFreeHost
memcpy = _r.aclrtMemcpy
memcpy_async = _r.aclrtMemcpyAsync
memset = _r.aclrtMemset
memset_async = _r.aclrtMemsetAsync
get_mem_info = _r.aclrtGetMemInfo
