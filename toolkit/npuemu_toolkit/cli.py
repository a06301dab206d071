"""`npuemu toolkit path` and `npuemu toolkit install DIR`: where the C toolkit is, and a copy of it
elsewhere (e.g. /usr/local/Ascend/cann, the documentation's default root)."""
from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import sys
import tempfile
from typing import Optional

from emulator.report import reason

from . import ToolkitMissing, root

MARKER = "npuemu.info"  # in every tree of npuemu's (toolkit/CMakeLists.txt): an install replaces only those
INTERPRETER = "npuemu.python"  # the interpreter a copied tree runs npuemu in (toolkit/src/bridge.cpp)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="npuemu toolkit", description="npuemu's CANN-shaped C toolkit")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("path", help="print the toolkit's root (source <root>/set_env.sh)")
    install = commands.add_parser("install", help="copy the toolkit to DIR (replacing an earlier npuemu copy)")
    install.add_argument("directory", metavar="DIR")
    args = parser.parse_args(argv)
    try:
        source = root()
    except ToolkitMissing as error:
        print("npuemu: %s" % error, file=sys.stderr)
        return 1
    if args.command == "path":
        print(source)
        return 0
    return install_copy(source, os.path.abspath(args.directory))


def refusal(source: str, target: str, contents: bool = True) -> Optional[str]:
    """Why `target` must not be replaced by a copy of `source`, or None. `contents` False: what can be told
    before the lock (what DIR holds then may be another install's copy in progress)."""
    real_source, real_target = os.path.realpath(source), os.path.realpath(target)
    if os.path.commonpath([real_source, real_target]) in (real_source, real_target):
        return "%s is the installed toolkit (%s), or inside it or around it: choose another directory" % (
            target, source)
    if os.path.exists(target) and not os.path.isdir(target):
        return "%s exists and is not a directory" % target
    if os.path.islink(target) and not os.path.exists(target):
        return "%s is a symbolic link to %s, which does not exist: make that directory, or choose another" % (
            target, os.readlink(target))
    if contents and os.path.isdir(target) and os.listdir(target) and not os.path.isfile(os.path.join(target, MARKER)):
        return ("%s exists and is not a copy of npuemu's toolkit (no %s): not replaced; choose an empty or new "
                "directory" % (target, MARKER))
    return None


def install_copy(source: str, target: str) -> int:
    try:
        problem = refusal(source, target, contents=False)
        if problem:
            print("npuemu: %s" % problem, file=sys.stderr)
            return 1
        try:
            lock, made = locked(target)
        except KeyboardInterrupt:
            print("npuemu: interrupted while waiting for another install into %s: nothing changed" % target,
                  file=sys.stderr)
            return 130
        try:
            return replace(source, target, made)
        finally:
            os.close(lock)  # the lock goes with it
    except OSError as error:
        print("npuemu: cannot install the toolkit to %s: %s" % (target, failure(error)), file=sys.stderr)
        return 1


def locked(target: str) -> tuple:
    """(a descriptor of `target` holding its exclusive lock, the outermost directory this call made for it
    or None): two installs into one DIR at once (parallel CI jobs) take turns, the second replacing the
    first's complete copy. The lock is on the directory itself, which may have a read-only parent; one
    removed by the install that held it before (a failed copy into a directory it made) is made again."""
    while True:
        made = outermost_missing(target)
        os.makedirs(target, exist_ok=True)
        lock = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print("npuemu: waiting for another install into %s to end" % target, file=sys.stderr)
                fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(lock), os.stat(target)):
                return lock, made
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(lock)
            raise
        os.close(lock)


def outermost_missing(target: str) -> Optional[str]:
    """The outermost directory of `target`'s path that does not exist (what makedirs will make), or None."""
    missing = None
    while not os.path.isdir(target):
        missing, target = target, os.path.dirname(target)
    return missing


def replace(source: str, target: str, made: Optional[str]) -> int:
    """Replace the copy in `target` (locked) with a copy of `source`; `made`: the outermost directory made
    for it, removed again if the copy fails."""
    problem = refusal(source, target)  # what DIR holds, now that no other install is copying into it
    if problem:
        print("npuemu: %s" % problem, file=sys.stderr)
        return 1
    previous = set_aside(target)
    try:
        fill(source, target)
    except BaseException:  # a full disk, or Ctrl-C: the earlier copy back, or nothing left, either way
        if previous is not None:
            restore(previous, target)
        else:
            remove_entries(target)
            remove_made(target, made)
        raise
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)
    print(target)
    return 0


# The directory itself is kept, and only its entries replaced: it may be one that cannot be removed or
# made again (a mount point, a volume at /usr/local/Ascend/cann, a directory in a read-only parent).

def set_aside(target: str) -> Optional[str]:
    """Move an earlier copy's entries into a hidden directory inside `target` (renames: no space needed,
    nothing lost if the new copy fails); that directory, or None if `target` was empty."""
    entries = os.listdir(target)
    if not entries:
        return None
    previous = tempfile.mkdtemp(prefix=".npuemu-previous-", dir=target)
    try:
        for name in entries:
            os.rename(os.path.join(target, name), os.path.join(previous, name))
    except OSError:
        put_back(previous, target)  # (what was not moved yet is the earlier copy's still: kept)
        raise
    return previous


def fill(source: str, target: str) -> None:
    """Copy the tree's entries into `target`. The copy is outside any environment: it runs npuemu in the
    interpreter that installed it."""
    for name in os.listdir(source):
        path = os.path.join(source, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.copytree(path, os.path.join(target, name), symlinks=True)
        else:
            shutil.copy2(path, os.path.join(target, name), follow_symlinks=False)
    with open(os.path.join(target, INTERPRETER), "w") as record:
        record.write(sys.executable + "\n")


def failure(error: OSError) -> str:
    """What failed, as `No space left on device: '<file>'`: shutil.copytree gathers the failure of each
    file in a shutil.Error, a list of (source, destination, text) that says nothing as a whole."""
    failures = error.args[0] if isinstance(error, shutil.Error) and error.args else None
    if isinstance(failures, list) and failures:
        first = re.sub(r"^\[Errno \d+\] ", "", str(failures[0][-1]))
        return first + ("" if len(failures) == 1 else " (and %d more files not copied)" % (len(failures) - 1))
    if error.strerror and error.filename:
        return "%s: %r" % (error.strerror, error.filename)
    return reason(error)


def remove_entries(target: str, keep: Optional[str] = None) -> None:
    """Remove what a failed copy left in `target`, except `keep` (the earlier copy set aside)."""
    for name in os.listdir(target):
        path = os.path.join(target, name)
        if path != keep:
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def remove_made(target: str, made: Optional[str]) -> None:
    """Remove the directories made for `target`, from it up to `made` (those still empty)."""
    if made is None:
        return
    while True:
        try:
            os.rmdir(target)
        except OSError:
            return  # not empty: another install's, made meanwhile
        if target == made:
            return
        target = os.path.dirname(target)


def restore(previous: str, target: str) -> None:
    """Put the entries set aside back, after removing what a failed copy left."""
    remove_entries(target, keep=previous)
    put_back(previous, target)


def put_back(previous: str, target: str) -> None:
    """Move the entries set aside back into `target`, and remove the directory that held them."""
    for name in os.listdir(previous):
        os.rename(os.path.join(previous, name), os.path.join(target, name))
    os.rmdir(previous)
