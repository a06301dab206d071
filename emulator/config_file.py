"""The JSON configuration file of aclInit and aclnnInit (`configPath`), read without trusting it.

Only a regular file is read: what the path names is looked at (stat) before it is opened, and again
once it is open (without blocking: O_NONBLOCK, fstat), before a byte is read, because a FIFO or a
terminal would block the call for ever and /dev/zero never ends. A file over MAX_BYTES is not read
either (an acl.json is a few hundred bytes). What a caller does with each failure is its layer's
business: ConfigFileError says which kind it is, and its message what was found (docs/runtime.md,
"Initialisation").
"""
from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any

from .resource import article

MAX_BYTES = 1 << 20  # 1 MiB: far above any real acl.json, far below a size that strains the host

# kinds of failure
BAD_PATH = "path"            # no file name at all (a NUL byte, a lone surrogate): an invalid parameter
UNREADABLE = "unreadable"    # missing, no permission, a directory, a FIFO, a device...
TOO_LARGE = "size"           # a regular file over MAX_BYTES
BAD_CONTENT = "content"      # not UTF-8 JSON text holding an object

_FILE_TYPES = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


class ConfigFileError(Exception):
    """A configuration file that cannot be used: `kind` (one of the kinds above) and what was found."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def read_json_object(path: str) -> tuple[str, dict[str, Any]]:
    """The text of the file at `path` and the JSON object it holds; a file with nothing but white space
    holds no settings ({}). Raises ConfigFileError, or OSError EMFILE/ENFILE (no descriptor left: the
    host's resources, not the file, which emulator.errors reports as such)."""
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8")  # (UnicodeDecodeError is a ValueError: a file that is not text is no JSON)
        settings = json.loads(text, parse_constant=_not_json) if text.strip() else {}
    except (ValueError, RecursionError) as error:  # RecursionError: arrays or objects nested too deep
        raise ConfigFileError(BAD_CONTENT, "expected a JSON object, found invalid content in %r (%s)"
                              % (path, _reason(error))) from None
    if not isinstance(settings, dict):
        kind = type(settings).__name__
        raise ConfigFileError(BAD_CONTENT, "expected a JSON object in %r, found %s %s" % (path, article(kind), kind))
    return text, settings


def _not_json(name: str) -> None:
    """NaN, Infinity and -Infinity: Python's parser takes them, JSON (RFC 8259) and a C parser do not."""
    raise ValueError("%s is not a JSON value" % name)


def _reason(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return str(error)


def _read_bytes(path: str) -> bytes:
    """Looked at by name first, as opening some devices has effects of its own (a watchdog starts), then
    again once open, in case the name now leads elsewhere."""
    try:
        _expect_regular_file(path, os.stat(path))
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except ValueError as error:  # an embedded NUL byte; UnicodeEncodeError: a lone surrogate
        raise ConfigFileError(BAD_PATH, "expected a file path, found %r, which no file can have (%s)"
                              % (path, error)) from None
    except OSError as error:
        raise _unreadable(path, error) from None
    try:
        _expect_regular_file(path, os.fstat(descriptor))
        return _read_at_most(path, descriptor)
    except OSError as error:
        raise _unreadable(path, error) from None
    finally:
        os.close(descriptor)


def _unreadable(path: str, error: OSError) -> Exception:
    if error.errno in (errno.EMFILE, errno.ENFILE):
        return error  # no descriptor left: reported as the host's resources by emulator.errors
    return ConfigFileError(UNREADABLE, "expected a readable JSON file, found %r (%s)" % (path, error.strerror))


def _expect_regular_file(path: str, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        what = next((name for test, name in _FILE_TYPES if test(status.st_mode)), "no regular file")
        raise ConfigFileError(UNREADABLE, "expected a readable JSON file, found %r, which is %s: only a regular "
                              "file is read" % (path, what))
    if status.st_size > MAX_BYTES:
        raise _too_large(path, "%d bytes" % status.st_size)


def _too_large(path: str, found: str) -> ConfigFileError:
    return ConfigFileError(TOO_LARGE, "expected a JSON file of at most %d bytes, found %r of %s"
                           % (MAX_BYTES, path, found))


def _read_at_most(path: str, descriptor: int) -> bytes:
    """The file's bytes, refused once past MAX_BYTES (it may have grown since fstat)."""
    chunks, size = [], 0
    while True:
        chunk = os.read(descriptor, MAX_BYTES + 1 - size)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BYTES:
            raise _too_large(path, "more than %d bytes" % MAX_BYTES)
