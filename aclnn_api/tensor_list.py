"""aclTensorList and aclScalarList: lists of tensors or scalars that an operator takes as one argument.

As in the library, creating a list copies the list of pointers, not the tensors or scalars, and
destroying a list destroys every element too: the program must not destroy them again (a second
destroy is 161002, naming where the list destroyed it). Elements must be live tensors (scalars)
when the list is made: **choice**, the library stores whatever pointer it is given, null included,
and fails later.
"""
from __future__ import annotations

from typing import Any, Type

from emulator import cargs
from emulator.errors import AclError
from emulator.resource import Resource, article, live
from emulator.sites import user_site

from . import status
from .arrays import HostArray, aclScalar, array_calls, sequence
from .tensor import aclTensor


class ResourceList(HostArray):
    """A list of aclnn objects of one kind (`element`), owned by the list once it is made."""

    element: Type[Resource] = Resource
    __slots__ = ()

    def describe(self) -> str:
        return "of %d %s(s)" % (len(self.values), self.element.kind)

    def destroy(self) -> None:
        """Destroys every element too; 161002 (after destroying the rest) if the program had already
        destroyed one itself (the library would double free it)."""
        site = user_site()
        freed_before = [(index, item) for index, item in enumerate(self.values) if not item.alive]
        for item in self.values:
            item.release(site)
        self.release(site)
        if freed_before:
            index, item = freed_before[0]
            raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                           "array: expected a list whose elements are alive (destroying the list destroys them), "
                           "found value[%d], %s %s, already destroyed at %s (made at %s); the list is destroyed"
                           % (index, item.kind, item.describe(), item.released_site, item.site))


class aclTensorList(ResourceList):
    kind = "aclTensorList"
    element = aclTensor
    __slots__ = ()


class aclScalarList(ResourceList):
    kind = "aclScalarList"
    element = aclScalar
    __slots__ = ()


def _elements(cls: Type[ResourceList], values: Any) -> tuple:
    if values is cargs.C_NULL:
        raise AclError(status.ACLNN_ERR_PARAM_NULLPTR,
                       "value: expected an array of %s pointers, found null" % cls.element.kind)
    items = tuple(live(cls.element, "value[%d]" % index, value)
                  for index, value in enumerate(sequence(cls.element.kind, values)))
    for index, item in enumerate(items):
        if items.index(item) != index:  # destroying the list would destroy it twice
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "value[%d]: expected %s %s not already in the list, "
                           "found the one of value[%d]" % (index, article(cls.element.kind), cls.element.kind,
                                                           items.index(item)))
    return items


aclCreateTensorList, aclDestroyTensorList, aclGetTensorListSize = array_calls(
    aclTensorList, lambda value: _elements(aclTensorList, value), "the given aclTensors (objects or handles)",
    size_parameter="tensorList")
aclCreateScalarList, aclDestroyScalarList, aclGetScalarListSize = array_calls(
    aclScalarList, lambda value: _elements(aclScalarList, value), "the given aclScalars (objects or handles)",
    size_parameter="scalarList")
