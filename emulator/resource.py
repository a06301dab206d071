"""Resources and the handle table: one model for every object a program makes and must release.

Runtime objects (contexts, streams, events) and aclnn objects (tensors, arrays, scalars, tensor and
scalar lists, executors) are all `Resource`s: each has an integer handle from one process-wide
table, the user's site where it was made, whether it is alive, a description, and `release()`. A C
caller passes any of them as a pointer-sized value; Python callers pass the handle (runtime objects,
as pyACL does) or the object itself (aclnn objects, as `aclCreateTensor` returns them). `live()` is
the one check of such an argument: null, a handle never made, one already released, or one of
another kind each gets its layer's code and a message naming the argument and, for a released
handle, where it was made and released.
"""
from __future__ import annotations

import collections
import itertools
from typing import Any, ClassVar, Optional, Type, TypeVar, Union

from . import leaks
from .cargs import RUNTIME, Layer, is_integer, is_null, shown
from .errors import AclError
from .sites import Released, Site, user_site

HANDLE_BASE = 0x5E000000
HANDLE_STEP = 0x40        # handles look like aligned pointers, as the real ones do
RETIRED_HISTORY = 4096    # released handles remembered, to name them in messages


class Resource:
    """An object of the runtime or of aclnn that a handle names.

    Subclasses set `kind` (the name messages use), `layer` (which status codes their arguments get)
    and `leak_checked` (whether the program must release it itself)."""

    kind: ClassVar[str] = "resource"
    layer: ClassVar[Layer] = RUNTIME
    leak_checked: ClassVar[bool] = True

    __slots__ = ("handle", "site", "alive", "released_site")

    def __init__(self, site: Optional[Site] = None):
        self.site: Site = site if site is not None else user_site()
        self.alive = True
        self.released_site: Optional[Union[Site, Released]] = None  # the program's release, or the runtime's
        self.handle = HANDLES.add(self)  # the table is also the leak tracker's list of what is unreleased

    def describe(self) -> str:
        """What the object is, in a few words (messages and leak reports add the kind and the site)."""
        return "0x%x" % self.handle

    def release(self, site: Optional[Site] = None) -> None:
        """The program releases the object: its handle becomes stale."""
        if self.alive:
            self.alive = False
            self.released_site = site if site is not None else user_site()
            HANDLES.retire(self)

    def orphan(self, released: Released) -> None:
        """The runtime releases the object (`released`: a reset, a context destroyed, and where the
        program called it): still a leak when the program never released it. A stale handle's message
        names that release, as it names the program's own."""
        if self.alive:
            self.alive = False
            self.released_site = released
            HANDLES.retire(self)
            if self.leak_checked and HANDLES.unreported(self):
                leaks.orphaned(self.kind, self.describe, self.site, released.how)

    def __repr__(self) -> str:
        return "<%s %s>" % (self.kind, self.describe())


R = TypeVar("R", bound=Resource)


class HandleTable:
    """Every live resource by handle, and a bounded memory of released ones. Handles are never reused,
    so a stale handle is always recognised as such. The live ones that the program must release are
    what the leak report lists (`unreleased`), so making and releasing a resource is one dict update.

    No lock: each step is one operation on a dict or counter, atomic under the GIL, and a launch
    makes and releases an executor, so this is on every call's path."""

    def __init__(self) -> None:
        self._live: dict[int, Resource] = {}
        # the live ones not reported (nor forgotten) yet: a leak report lists these, not every leak of every
        # earlier init/finalize cycle again (a suite's leaked tensors made each aclFinalize walk all of them)
        self._unreported: dict[int, Resource] = {}
        self._retired: dict[int, Resource] = {}
        self._retired_order: collections.deque[int] = collections.deque()  # oldest first, to forget them
        self._handles = itertools.count(HANDLE_BASE + HANDLE_STEP, HANDLE_STEP)
        self._reported_below = HANDLE_BASE  # handles under this were reported (or forgotten) already

    def add(self, resource: Resource) -> int:
        handle = next(self._handles)
        self._live[handle] = self._unreported[handle] = resource
        return handle

    def retire(self, resource: Resource) -> None:
        handle = resource.handle
        self._unreported.pop(handle, None)
        if self._live.pop(handle, None) is not None:
            self._retired[handle] = resource
            order = self._retired_order
            order.append(handle)
            if len(order) > RETIRED_HISTORY:
                self._retired.pop(order.popleft(), None)

    def unreported(self, resource: Resource) -> bool:
        """Whether a leak of `resource` has not been reported (or forgotten) yet."""
        return resource.handle >= self._reported_below

    def unreleased(self) -> list:
        """(kind, description, site) of every live resource the program must still release, oldest first."""
        return [(r.kind, r.describe, r.site) for r in list(self._unreported.values()) if r.leak_checked]

    def forget_unreleased(self) -> None:
        """The leak report has listed them: report each leak once (at aclFinalize, not again at exit). They
        stay live: a leaked tensor destroyed later is released as any other."""
        self._reported_below = next(self._handles)
        self._unreported = {}

    def get(self, handle: int) -> Optional[Resource]:
        return self._live.get(handle)

    def retired(self, handle: int) -> Optional[Resource]:
        return self._retired.get(handle)

    def live_resources(self) -> list:
        return list(self._live.values())


HANDLES = HandleTable()
leaks.add_source(HANDLES.unreleased, HANDLES.forget_unreleased)


def article(word: str) -> str:
    """The indefinite article a message puts before `word` ("an aclTensor", "a tensor index")."""
    return "an" if word[:1].lower() in "aeio" else "a"


def _stale(kind: Type[Resource], name: str, value: Any, found: Resource, null_code: Optional[int]) -> AclError:
    released = " at %s" % found.released_site if found.released_site is not None else ""
    return AclError(kind.layer.stale_code,
                    "%s: expected a live %s, found %s %s already released%s (made at %s)"
                    % (name, kind.kind, found.kind, found.describe(), released, found.site))


def live(kind: Type[R], name: str, value: Any, null_code: Optional[int] = None) -> R:
    """The live resource of type `kind` that the argument `name` names, by handle or as the object.

    Null gets `null_code` (default: the layer's); anything else that is not a live `kind` gets the
    layer's stale-handle code, with a message that says what was found."""
    if type(value) is int:  # the common case first: a live handle, checked at every launch
        found = HANDLES.get(value)
        if found is not None and isinstance(found, kind) and found.alive:
            return found
    if is_null(value):
        raise AclError(kind.layer.null_code if null_code is None else null_code,
                       "%s: expected %s %s, found null" % (name, article(kind.kind), kind.kind))
    if isinstance(value, Resource):
        found: Optional[Resource] = value
    elif is_integer(value):
        found = HANDLES.get(int(value))
        if found is None:
            found = HANDLES.retired(int(value))
    else:
        raise AclError(kind.layer.invalid_code, "%s: expected %s %s, found %s"
                       % (name, article(kind.kind), kind.kind, shown(value)))
    if found is None:
        raise AclError(kind.layer.stale_code, "%s: expected a live %s, found %s, which no call made (a garbage or "
                       "long-destroyed handle)" % (name, kind.kind, shown(value)))
    if not isinstance(found, kind):
        raise AclError(kind.layer.stale_code, "%s: expected %s %s, found %s %s"
                       % (name, article(kind.kind), kind.kind, article(found.kind), found.kind))
    if not found.alive:
        raise _stale(kind, name, value, found, null_code)
    return found


def optional(kind: Type[R], name: str, value: Any) -> Optional[R]:
    """`live()` for an argument that may be null."""
    if value is None:
        return None
    if type(value) is int and value:  # a handle: live() checks it
        return live(kind, name, value)
    return None if is_null(value) else live(kind, name, value)
