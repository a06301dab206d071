"""The entry points of the packages built on the runtime (pyproject's [project.entry-points]: the
aclnn layer, its kernels, the toolkit's commands), read alike on every Python npuemu supports (3.9's
importlib.metadata takes no `group` argument)."""
from __future__ import annotations

from importlib import metadata
from typing import Optional


def entry_points(group: str, name: Optional[str] = None) -> list:
    """The installed entry points of `group` (only the one called `name`, if given)."""
    try:
        found = metadata.entry_points(group=group)
    except TypeError:  # Python 3.9: a dict of groups
        found = metadata.entry_points().get(group, [])
    return [entry for entry in found if name is None or entry.name == name]
