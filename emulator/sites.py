"""Source sites: where in the user's program a resource was made, freed, or work was launched.

A site is the user's short call stack (the innermost few frames outside npuemu's own packages), so
that a leak or a fault made inside a helper of the program still names the line that called the
helper. Frames are captured as (file, line, function) when the call is made and formatted only when
a report or a message needs them.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

DEPTH = 3  # frames kept: the call itself and two callers are enough to find it in a helper

_package_dirs: tuple = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)


_own_file: dict = {}  # co_filename -> whether it is npuemu's (or frozen) code: asked on every call


def register_package_dir(path: str) -> None:
    """Frames in the directory of `path` are npuemu's own: sites skip them to reach the user's code."""
    global _package_dirs
    directory = os.path.dirname(os.path.abspath(path)) + os.sep
    if directory not in _package_dirs:
        _package_dirs = _package_dirs + (directory,)
        _own_file.clear()


def _is_own(filename: str) -> bool:
    own = _own_file.get(filename)
    if own is None:
        own = _own_file[filename] = filename.startswith(_package_dirs) or filename.startswith("<frozen")
    return own


class Site:
    """The user's innermost `DEPTH` frames at one call; str() is `file:line in function`, then the
    callers after ` <- `. `unknown()` is the site of a call with no user frame (a C caller)."""

    __slots__ = ("frames",)

    def __init__(self, frames: tuple):
        self.frames = frames  # ((filename, line, function), ...), innermost first

    @property
    def location(self) -> str:
        """`file:line` of the innermost user frame."""
        if not self.frames:
            return "<unknown>"
        filename, line, _ = self.frames[0]
        return "%s:%d" % (filename, line)

    def __str__(self) -> str:
        if not self.frames:
            return "<unknown>"
        return " <- ".join("%s:%d in %s" % frame for frame in self.frames)

    def __repr__(self) -> str:
        return "<Site %s>" % self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Site) and other.frames == self.frames

    def __hash__(self) -> int:
        return hash(self.frames)


UNKNOWN = Site(())


def user_site(depth: int = DEPTH) -> Site:
    """The calling program's short stack: the first `depth` frames outside npuemu's packages."""
    frame: Optional[object] = sys._getframe(1)
    frames = []
    own = _own_file.get
    while frame is not None and len(frames) < depth:
        code = frame.f_code
        filename = code.co_filename
        is_own = own(filename)
        if not (_is_own(filename) if is_own is None else is_own):
            frames.append((filename, frame.f_lineno, code.co_name))
        elif frames:
            break  # back inside npuemu (a callback of ours): the user's part of the stack ended
        frame = frame.f_back
    return Site(tuple(frames)) if frames else UNKNOWN
