"""acl.util: host pointer helpers, and start_thread for the report threads of callbacks. Host pointers
are real host addresses; device pointers are not dereferenceable, so these helpers refuse them with a
message instead of crashing."""
from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any, Callable, Optional

import numpy as np

from emulator import errors, interface, status
from emulator.cargs import is_integer, shown
from emulator.errors import AclError

# NumPy C type numbers used by pyACL's ptr_to_numpy (NPY_BOOL=0 ... NPY_HALF=23).
NPY_TYPES = {0: np.bool_, 1: np.int8, 2: np.uint8, 3: np.int16, 4: np.uint16, 5: np.int32, 6: np.uint32,
             7: np.int64, 8: np.uint64, 9: np.int64, 10: np.uint64, 11: np.float32, 12: np.float64, 23: np.float16}


def _reject(api_name: str, message: str) -> None:
    errors.record(status.ACL_ERROR_INVALID_PARAM, api_name, message)


def _host_readable(api_name: str, ptr: Any, size: int) -> bool:
    if not is_integer(ptr) or ptr <= 0:
        _reject(api_name, "ptr: expected a non-null host address, found %r" % (ptr,))
        return False
    ptr, size = int(ptr), int(size)
    if interface.is_device_address(ptr):
        _reject(api_name, "ptr: expected a host address, found device address 0x%x (copy it to the host first)" % ptr)
        return False
    problem = interface.host_problem(ptr, size)
    if problem:
        _reject(api_name, "ptr: " + problem)
        return False
    return True


@errors.value_call("acl.util.bytes_to_ptr", 0, keywords={"b": "data"})
def bytes_to_ptr(data: bytes) -> int:
    """The address of the object's own buffer (a `bytes` or `bytearray`, empty ones included): a
    memcpy to it writes into the object in place, as pyACL allows. 0, with a message, for anything else."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    if isinstance(data, bytearray):
        return ctypes.addressof((ctypes.c_char * len(data)).from_buffer(data))
    _reject("acl.util.bytes_to_ptr", "data: expected bytes or a bytearray, found %s" % type(data).__name__)
    return 0


@errors.value_call("acl.util.ptr_to_bytes", None)
def ptr_to_bytes(ptr: int, size: int) -> Optional[bytes]:
    """A new bytes object with a copy of `size` bytes of host memory at `ptr`: a read of that memory now,
    checked as a synchronous copy's read is (synccheck: a download or memset not synchronised with)."""
    if not is_integer(size) or size < 0:
        _reject("acl.util.ptr_to_bytes", "size: expected a non-negative integer, found %r" % (size,))
        return None
    if not _host_readable("acl.util.ptr_to_bytes", ptr, size):
        return None
    interface.host_read("acl.util.ptr_to_bytes", int(ptr), int(size))
    return ctypes.string_at(int(ptr), int(size))


def _plain_array(api_name: str, array: Any) -> bool:
    """Whether `array` is a NumPy array of plain values, whose bytes a copy may write (with a message if
    not). **Choice** (pyACL would hand out the address): an array holding Python objects (dtype object, or
    a structured dtype with such a field) is refused, as device bytes written over its object pointers
    would crash the program later, outside any call."""
    if not isinstance(array, np.ndarray):
        _reject(api_name, "array: expected a numpy.ndarray, found %s" % type(array).__name__)
        return False
    if array.dtype.hasobject:
        _reject(api_name, "array: expected an array of plain values (numbers, bytes), found dtype %s, whose "
                "elements are Python objects that bytes copied there would corrupt" % array.dtype)
        return False
    return True


@errors.value_call("acl.util.numpy_to_ptr", 0, keywords={"arr": "array"})
def numpy_to_ptr(array: np.ndarray) -> int:
    """The address of the array's data (0, with a message, for a non-array or an array of Python objects:
    _plain_array). The address does not keep the array alive: hold the array in a variable for as long
    as the address is in use."""
    if not _plain_array("acl.util.numpy_to_ptr", array):
        return 0
    if not array.flags.c_contiguous:
        sys.stderr.write("acl.util.numpy_to_ptr: the array is not C-contiguous; "
                         "use acl.util.numpy_contiguous_to_ptr\n")
    return array.ctypes.data


@errors.value_call("acl.util.numpy_contiguous_to_ptr", (0, None))
def numpy_contiguous_to_ptr(array: np.ndarray) -> tuple:
    """(address, C-contiguous array): the caller keeps the array alive while the address is in use."""
    if not _plain_array("acl.util.numpy_contiguous_to_ptr", array):
        return 0, None
    contiguous = np.ascontiguousarray(array)
    return contiguous.ctypes.data, contiguous


def _dims(shape: Any) -> Optional[tuple]:
    """The shape as non-negative ints, or None."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        return None
    try:
        dims = tuple(shape)
    except TypeError:  # iterable in type only: a 0-d NumPy array
        return None
    if not all(hasattr(d, "__index__") and not isinstance(d, bool) and int(d) >= 0 for d in dims):
        return None
    return tuple(int(d) for d in dims)


@errors.value_call("acl.util.ptr_to_numpy", None, keywords={"np_type_code": "np_type"})
def ptr_to_numpy(ptr: int, shape: tuple, np_type: int) -> Optional[np.ndarray]:
    """A NumPy array viewing host memory at `ptr` (no copy), or None with a message. Making the view reads
    nothing: the program may read it after it synchronises, so no synchronisation is asked for here."""
    dtype = NPY_TYPES.get(int(np_type)) if is_integer(np_type) else None
    if dtype is None:
        _reject("acl.util.ptr_to_numpy", "np_type: expected a NumPy type number in %s, found %r" % (sorted(NPY_TYPES), np_type))
        return None
    dims = _dims(shape)
    if dims is None:
        _reject("acl.util.ptr_to_numpy", "shape: expected a tuple of non-negative dimensions, found %r" % (shape,))
        return None
    nbytes = np.dtype(dtype).itemsize
    for dim in dims:
        nbytes *= dim
    if not _host_readable("acl.util.ptr_to_numpy", ptr, nbytes):
        return None
    buffer = (ctypes.c_char * nbytes).from_address(int(ptr))
    return np.frombuffer(buffer, dtype=dtype).reshape(dims)


@errors.api("acl.util.start_thread", failure=(0,))
def start_thread(fn: Callable[[Any], Any], args: list) -> int:
    """-> (threadId, ret): a new host thread running fn(args), as pyACL starts the thread that calls
    acl.rt.process_report; threadId is what acl.rt.subscribe_report takes (the thread's
    threading.get_ident()). The thread does not hold the process at exit, as pyACL's native thread
    does not. 100000 for an `fn` that is not callable or `args` that are not a list (or tuple)."""
    if not callable(fn):
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "fn: expected a callable, found %s"
                       % ("null" if fn is None else shown(fn)))
    if not isinstance(args, (list, tuple)):
        raise AclError(status.ACL_ERROR_INVALID_PARAM, "args: expected a list of the arguments fn takes, found %s"
                       % ("null" if args is None else shown(args)))
    thread = threading.Thread(target=fn, args=(args,), daemon=True,
                              name="acl.util.start_thread(%s)" % getattr(fn, "__name__", "fn"))
    try:
        thread.start()
    except RuntimeError as error:  # the host has no thread left for the process
        raise AclError(status.ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, "thread: expected a thread the host can start "
                       "for fn, found %s" % error) from None
    return thread.ident
