"""aclDataBuffer (acl_base.h): an address and a size, which the model and single-operator calls take.
A buffer only records the two values: it neither allocates nor frees the memory, and its address is
not checked (null and host addresses included), as in the real call. It is a resource of the one
handle table, so a stale or garbage buffer gets a named error and one never destroyed is a leak."""
from __future__ import annotations

from typing import Any

from . import cargs
from .errors import api
from .resource import Resource, live


class aclDataBuffer(Resource):
    kind = "aclDataBuffer"
    __slots__ = ("data", "size")

    def __init__(self, data: int, size: int):
        self.data, self.size = data, size
        super().__init__()

    def describe(self) -> str:
        return "of 0x%x (%d bytes)" % (self.data, self.size)


@api("aclCreateDataBuffer", failure=(0,), returns_status=False)
def aclCreateDataBuffer(data: int, size: int) -> int:
    """-> the new buffer (its handle, a pointer-sized int as pyACL gives it); 0 with a message for a
    value no C argument holds."""
    return aclDataBuffer(cargs.optional_pointer("data", data), cargs.size("size", size)).handle


@api("aclDestroyDataBuffer")
def aclDestroyDataBuffer(dataBuffer: Any) -> None:
    """-> ret: 100000 for null, 107017 for a buffer already destroyed (naming where) or never made."""
    live(aclDataBuffer, "dataBuffer", dataBuffer).release()


@api("aclGetDataBufferAddr", failure=(0,), returns_status=False)
def aclGetDataBufferAddr(dataBuffer: Any) -> int:
    """-> the address the buffer was made with (0, with a message, for a null or stale buffer)."""
    return live(aclDataBuffer, "dataBuffer", dataBuffer).data


@api("aclGetDataBufferSizeV2", failure=(0,), returns_status=False)
def aclGetDataBufferSizeV2(dataBuffer: Any) -> int:
    """-> the size the buffer was made with, in bytes (0, with a message, for a null or stale buffer)."""
    return live(aclDataBuffer, "dataBuffer", dataBuffer).size


@api("aclGetDataBufferSize", failure=(0,), returns_status=False)
def aclGetDataBufferSize(dataBuffer: Any) -> int:
    """-> the size as the deprecated call's uint32_t holds it (the low 32 bits); aclGetDataBufferSizeV2
    gives it whole."""
    return live(aclDataBuffer, "dataBuffer", dataBuffer).size & 0xFFFFFFFF
