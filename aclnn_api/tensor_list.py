"""aclTensorList and aclScalarList: lists of tensors or scalars that an operator takes as one argument.

As in the library, creating a list copies the list of pointers, not the tensors or scalars, and
destroying a list destroys every element too: the program must not destroy them again (a second
destroy is 161002, naming where the list destroyed it). Elements must be live tensors (scalars)
when the list is made: **choice**, the library stores whatever pointer it is given, null included,
and fails later.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Type

from emulator import cargs
from emulator.cargs import ACLNN
from emulator.errors import AclError, api
from emulator.resource import Resource, live
from emulator.sites import user_site

from . import status
from .arrays import aclScalar, sequence
from .tensor import aclTensor


class ResourceList(Resource):
    """A list of aclnn objects of one kind (`element`), owned by the list once it is made."""

    layer = ACLNN
    element: Type[Resource] = Resource
    __slots__ = ("items",)

    def __init__(self, items: tuple):
        self.items = items
        super().__init__()

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Resource:
        return self.items[index]

    def describe(self) -> str:
        return "of %d %s(s)" % (len(self.items), self.element.kind)

    def destroy(self) -> None:
        """Release the list and every element it holds, each at the caller's site; 161002 afterwards
        if the program had already destroyed an element itself (the library would double free it)."""
        site = user_site()
        freed_before = [(index, item) for index, item in enumerate(self.items) if not item.alive]
        for item in self.items:
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
    items = tuple(live(cls.element, "value[%d]" % index, value)
                  for index, value in enumerate(sequence(cls.element.kind, values)))
    for index, item in enumerate(items):
        if items.index(item) != index:  # destroying the list would destroy it twice
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "value[%d]: expected a %s not already in the list, "
                           "found the one of value[%d]" % (index, cls.element.kind, items.index(item)))
    return items


def _make(cls: Type[ResourceList]):
    words = cls.__name__[3:]  # TensorList, ScalarList

    @api("aclCreate" + words, failure=(None,), internal_code=status.ACLNN_ERR_INNER, returns_status=False)
    def create(value: Optional[Sequence]) -> Optional[cls]:
        return cls(_elements(cls, value))

    @api("aclDestroy" + words, internal_code=status.ACLNN_ERR_INNER)
    def destroy(array: Any) -> int:
        if not cargs.is_null(array):
            live(cls, "array", array).destroy()

    @api("aclGet%sSize" % words, failure=(0,), internal_code=status.ACLNN_ERR_INNER)
    def size(array: Any) -> tuple:
        return len(live(cls, "array", array))

    create.__doc__ = ("The new %s holding the given %ss (objects or handles; None: an empty list), or None "
                      "with a message for an element that is not a live %s." % (cls.kind, cls.element.kind,
                                                                                 cls.element.kind))
    destroy.__doc__ = ("Returns the status: destroys the list and every %s in it (0, also for null); 161002 for "
                       "a list already destroyed." % cls.element.kind)
    create.__wrapped__.__annotations__["return"] = "Optional[%s]" % cls.kind  # the class, not "cls"
    size.__doc__ = "Returns (number of elements, status); (0, 161001) for null."
    create.__name__ = create.__qualname__ = "aclCreate" + words
    destroy.__name__ = destroy.__qualname__ = "aclDestroy" + words
    size.__name__ = size.__qualname__ = "aclGet%sSize" % words
    return create, destroy, size


aclCreateTensorList, aclDestroyTensorList, aclGetTensorListSize = _make(aclTensorList)
aclCreateScalarList, aclDestroyScalarList, aclGetScalarListSize = _make(aclScalarList)
