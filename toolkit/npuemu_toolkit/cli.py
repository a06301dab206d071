"""`npuemu toolkit path` and `npuemu toolkit install DIR`: where the C toolkit is, and a copy of it
elsewhere (e.g. /usr/local/Ascend/cann, the documentation's default root)."""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import filecmp
import functools
import os
import re
import shutil
import signal
import stat
import sys
import threading
from typing import Iterator, Optional

from emulator.report import reason

from . import INTERPRETER, ToolkitMissing, root

MARKER = "npuemu.info"  # in every tree of npuemu's (toolkit/CMakeLists.txt): an install replaces only those
STAGED = ".npuemu-new"  # in DIR: the new copy, made whole before any file of the earlier one changes
ASIDE = ".npuemu-old"   # in DIR: what the new copy replaced, kept until it is whole, to undo a failure


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
    if contents and os.path.isdir(target) and set(os.listdir(target)) - {STAGED, ASIDE} and \
            not os.path.isfile(os.path.join(target, MARKER)):
        return ("%s exists and is not a copy of npuemu's toolkit (no %s): not replaced; choose an empty or new "
                "directory" % (target, MARKER))
    return None


def install_copy(source: str, target: str) -> int:
    signals = Signals()
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
            with signals.handled():
                return replace(source, target, made, signals)
        finally:
            os.close(lock)  # the lock goes with it
    except Interrupted as stop:
        print("npuemu: stopped by %s while installing the toolkit to %s: %s" % (
            signal.Signals(stop.signum).name, target, signals.outcome), file=sys.stderr)
        return 128 + stop.signum
    except OSError as error:
        print("npuemu: cannot install the toolkit to %s: %s" % (target, failure(error, target)), file=sys.stderr)
        return 128 + signals.received if signals.received else 1


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


def replace(source: str, target: str, made: Optional[str], signals: "Signals") -> int:
    """Replace the copy in `target` (locked) with a copy of `source`; `made`: the outermost directory made
    for it, removed again if the copy fails. A signal stops the copy (Interrupted: its start undone) and
    waits for the switch (acted on once it is done or undone)."""
    problem = refusal(source, target)  # what DIR holds, now that no other install is copying into it
    if problem:
        print("npuemu: %s" % problem, file=sys.stderr)
        return 1
    staged, aside = os.path.join(target, STAGED), os.path.join(target, ASIDE)
    kept = False  # earlier files an undo could not put back are in `aside`: it stays
    try:
        with signals.deferred():
            remove_tree(staged)  # what an install killed midway left
            remove_tree(aside)
            os.mkdir(staged)
        fill(source, staged)
        with signals.deferred():
            switch(staged, target, aside)
            signals.outcome = INSTALLED
    except EarlierFilesKept:
        kept = True
        raise
    finally:  # a full disk, or a signal: the earlier copy stays whole, or nothing is left
        with signals.deferred():
            remove_tree(staged)
            if not kept:
                remove_tree(aside)
                remove_made(target, made)  # (none when it holds a copy)
    signals.act()
    print(target)
    return 0


# The directory itself is kept, and only its entries replaced: it may be one that cannot be removed or
# made again (a mount point, a volume at /usr/local/Ascend/cann, a directory in a read-only parent).
# Programs may run from it meanwhile (another CI job): the new copy is made whole beside the earlier one
# first, then each changed file is renamed onto its place, so that a program starting finds each file
# whole (the earlier one or the new one), and a running one keeps the file it mapped.

def fill(source: str, target: str) -> None:
    """Copy the tree's entries into `target`. The copy is outside any environment: it runs npuemu in the
    interpreter that installed it."""
    for name in os.listdir(source):
        path = os.path.join(source, name)
        if is_directory(path):
            shutil.copytree(path, os.path.join(target, name), symlinks=True)
        else:
            shutil.copy2(path, os.path.join(target, name), follow_symlinks=False)
    with open(os.path.join(target, INTERPRETER), "w") as record:
        record.write(sys.executable + "\n")


def switch(staged: str, target: str, aside: str) -> None:
    """Put the copy in `staged` in the place of the one in `target`: files that differ are renamed onto
    theirs, identical ones left as they are, and the entries the new copy lacks removed last. A failure
    (a rename refused) undoes every step: the earlier copy is whole. (Run with signals deferred: neither
    the switch nor its undo may stop halfway.)"""
    os.mkdir(aside)
    wanted = relative_paths(staged)  # (taken now: placing moves the files out of `staged`)
    undo: list = []
    try:
        place(staged, target, aside, undo)
        set_aside_stale(target, "", wanted, aside, undo)
    except BaseException as error:
        failed = undo_all(undo)
        if failed:  # the files not put back are in `aside`: it must outlive this install
            raise EarlierFilesKept("%s; and putting the earlier copy back failed too: %s; the earlier files are in %s"
                                   % (failure(error, target) if isinstance(error, OSError) else type(error).__name__,
                                      "; ".join(failed), aside)) from error
        raise


class EarlierFilesKept(OSError):
    """A switch failed and its undo did not put every earlier file back: they stay in DIR/.npuemu-old."""


def undo_all(undo: list) -> list:
    """Undo the steps taken, last first; one that cannot be undone does not stop the others. Returns what
    those that could not leave where (`path (kept as kept: why)`, for the message)."""
    failed = []
    for step in reversed(undo):
        try:
            step()
        except OSError as error:
            where = step.args[::-1] if step.func is os.replace else (step.args[0], "")
            failed.append("%s (kept as %s: %s)" % (where[0], where[1], error.strerror) if where[1]
                          else "%s (%s)" % (where[0], error.strerror))
    return failed


def place(staged: str, installed: str, aside: str, undo: list) -> None:
    """Put each entry of the directory `staged` in the directory `installed`, recording how to undo it.
    The marker first (and, undone, last): DIR holds none of the new copy's files without it, so that the
    next install takes up an install killed outright (SIGKILL) in its switch, not refuse its DIR."""
    for name in sorted(os.listdir(staged), key=lambda name: (name != MARKER, name)):
        new, old = os.path.join(staged, name), os.path.join(installed, name)
        if is_directory(new):
            if not is_directory(old):
                if os.path.lexists(old):
                    set_aside(old, aside, undo)
                os.mkdir(old)
                shutil.copymode(new, old)
                undo.append(functools.partial(os.rmdir, old))
            place(new, old, aside, undo)
        elif not identical(new, old):
            if is_directory(old):
                set_aside(old, aside, undo)
            elif os.path.lexists(old):  # the earlier file stays where it is until the new one replaces it
                kept = os.path.join(aside, str(len(undo)))
                try:
                    os.link(old, kept, follow_symlinks=False)
                except OSError:  # a file system without hard links
                    shutil.copy2(old, kept, follow_symlinks=False)
                undo.append(functools.partial(os.replace, kept, old))
            else:
                undo.append(functools.partial(remove_if_there, old))
            os.replace(new, old)


def set_aside_stale(installed: str, relative: str, wanted: set, aside: str, undo: list) -> None:
    """Move into `aside` what `installed` holds that the new copy lacks (but the install's own two)."""
    for name in sorted(os.listdir(installed)):
        path, inside = os.path.join(installed, name), os.path.join(relative, name)
        if not relative and name in (STAGED, ASIDE):
            continue
        if inside not in wanted:
            set_aside(path, aside, undo)
        elif is_directory(path):
            set_aside_stale(path, inside, wanted, aside, undo)


def set_aside(path: str, aside: str, undo: list) -> None:
    """Move an entry of the earlier copy into `aside` (a rename: no space needed, put back by an undo)."""
    kept = os.path.join(aside, str(len(undo)))
    os.replace(path, kept)
    undo.append(functools.partial(os.replace, kept, path))


def relative_paths(top: str) -> set:
    """Every entry under `top`, as a path relative to it (symbolic links not followed)."""
    found = set()
    for directory, names, files in os.walk(top):
        found.update(os.path.relpath(os.path.join(directory, name), top) for name in names + files)
    return found


def identical(new: str, old: str) -> bool:
    """Whether `old` is already what `new` would put there: the same symbolic link, or a file with the
    same permissions and the same bytes."""
    try:
        was, will = os.lstat(old), os.lstat(new)
    except FileNotFoundError:
        return False
    if (was.st_mode, was.st_size) != (will.st_mode, will.st_size):
        return False
    if stat.S_ISLNK(will.st_mode):
        return os.readlink(old) == os.readlink(new)
    return filecmp.cmp(new, old, shallow=False)


def is_directory(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def remove_if_there(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


UNCHANGED = "its earlier contents are as they were"  # what DIR holds when an install stops (Signals.outcome)
INSTALLED = "the new copy was put in place first"


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP stopped the install (a BaseException, as KeyboardInterrupt: no `except
    Exception` of the copy catches it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Signals:
    """SIGINT, SIGTERM and SIGHUP during an install: they stop the copy at once (Interrupted) and wait for
    the switch and its undo (deferred()), which must not stop halfway. Python-level handlers: the OS may
    give a signal to any thread (the runtime's native threads among them, whose mask a pthread_sigmask of
    this one does not change), and CPython runs its handler in the main thread. A signal the process
    ignores (nohup's SIGHUP) stays ignored. `outcome`: what DIR holds if it stops now."""

    CAUGHT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: Optional[int] = None  # the first signal received
        self.deferring = False
        self.outcome = UNCHANGED

    def _receive(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        if not self.deferring:
            raise Interrupted(self.received)

    @contextlib.contextmanager
    def handled(self) -> Iterator[None]:
        """The handlers in force for the block (only the main thread can set them: elsewhere, none)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {signum: signal.getsignal(signum) for signum in self.CAUGHT
                  if not _handled_outside_python(signum, signal.getsignal(signum))}
        for signum, handler in before.items():
            if handler != signal.SIG_IGN:
                signal.signal(signum, self._receive)
        try:
            yield
        finally:
            for signum, handler in before.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals received in the block wait (act() acts on them): it ends as it would without them."""
        was, self.deferring = self.deferring, True
        try:
            yield
        finally:
            self.deferring = was

    def act(self) -> None:
        """Stop now (Interrupted) if a signal was received while it waited."""
        if self.received is not None:
            raise Interrupted(self.received)


def _handled_outside_python(signum: int, handler: object) -> bool:
    """Whether the process's program (a C host running the install in its Python) handles `signum` with a
    handler of its own, which Python does not know (getsignal() says SIG_DFL or None): replaced and then
    "restored" by Python, it would be lost. Such a signal is left as it is. Read with sigaction(2), whose
    struct begins with the handler on Linux."""
    if handler not in (signal.SIG_DFL, None):
        return False  # Python's own handler (or SIG_IGN): the C-level handler is Python's
    try:
        action = ctypes.create_string_buffer(512)  # larger than any struct sigaction
        if ctypes.CDLL(None).sigaction(signum, None, action) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return ctypes.c_void_p.from_buffer(action).value not in (None, signal.SIG_DFL.value, signal.SIG_IGN.value)


def failure(error: OSError, target: str) -> str:
    """What failed, as `No space left on device: '<file>'`, the file named by its place in `target` (not
    in the new copy's hidden directory, which is gone): shutil.copytree gathers the failure of each file
    in a shutil.Error, a list of (source, destination, text) that says nothing as a whole."""
    failures = error.args[0] if isinstance(error, shutil.Error) and error.args else None
    if isinstance(failures, list) and failures:
        first = re.sub(r"^\[Errno \d+\] ", "", str(failures[0][-1]))
        text = first + ("" if len(failures) == 1 else " (and %d more files not copied)" % (len(failures) - 1))
    elif error.strerror and error.filename:
        text = "%s: %r" % (error.strerror, error.filename)
    else:
        text = reason(error)
    return text.replace(os.path.join(target, STAGED) + os.sep, target + os.sep)


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
