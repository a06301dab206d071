"""Source sites: where in the user's program a resource was made, freed, or work was launched.

A site is the user's short call stack (the innermost few frames outside npuemu's own packages), so
that a leak or a fault made inside a helper of the program still names the line that called the
helper. Frames are captured as (code, instruction offset) when the call is made; their lines are
looked up, and the text made, only when a report or a message shows them. A site is taken on every
launch, so the capture is kept cheap: files are classified once, the two phases say which wrapper
frame to skip, and a site taken again at the same three frames is the one made before.
"""
from __future__ import annotations

import ctypes
import dis
import functools
import os
import struct
import subprocess
import sys
from typing import Callable, Optional

DEPTH = 3  # frames kept: the call itself and two callers are enough to find it in a helper

_package_dirs: tuple = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
_is_ours: dict = {}  # file name -> whether it is npuemu's own (a site is taken at every launch: keep it cheap)


def register_package_dir(path: str) -> None:
    """Frames in the directory of `path` are npuemu's own: sites skip them to reach the user's code."""
    global _package_dirs
    directory = os.path.dirname(os.path.abspath(path)) + os.sep
    if directory not in _package_dirs:
        _package_dirs = _package_dirs + (directory,)
        _is_ours.clear()


class Site:
    """The user's innermost `DEPTH` frames at one call; str() is `file:line in function`, then the
    callers after ` <- `. `unknown()` is the site of a call with no user frame (a C caller)."""

    __slots__ = ("_raw", "_frames")

    def __init__(self, raw: tuple = (), frames: Optional[tuple] = None):
        self._raw = raw          # ((code, instruction offset), ...), innermost first: lines are looked up when shown
        self._frames = frames    # ((filename, line, function), ...), made from _raw when first needed

    @property
    def frames(self) -> tuple:
        """((filename, line, function), ...), innermost first."""
        if self._frames is None:
            self._frames = tuple((code.co_filename, _line_of(code, offset), code.co_name) for code, offset in self._raw)
        return self._frames

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


class Released:
    """How the runtime released an object the program had not (`how`: "aclrtResetDevice(0)",
    "aclrtDestroyContext(0x...)") and the program's site of that call. str() is what a message says
    after "released at" or "freed at": the call and its site, or the call alone when no frame of the
    program is known (at interpreter exit). The site is resolved only when a message shows it."""

    __slots__ = ("how", "site")

    def __init__(self, how: str, site: Site):
        self.how, self.site = how, site

    def __str__(self) -> str:
        return "%s at %s" % (self.how, self.site) if self.site.frames else self.how

    def __repr__(self) -> str:
        return "<Released %s>" % self


_known: dict = {}  # (code, offset) of the innermost three frames -> their Site: most calls repeat one
KNOWN_SITES = 4096


def user_site(depth: int = DEPTH, skip: int = 0) -> Site:
    """The calling program's short stack: the first `depth` frames outside npuemu's packages.

    `skip`: how many of npuemu's frames the caller knows sit between it and the program (1 for a
    function called by the `errors.api` wrapper of a public call). The walk then starts beyond them,
    if they are npuemu's indeed: on Python 3.11 every frame a walk touches is made into an object,
    and those were most of the cost. A site taken again at the same three (code, instruction) is
    the one made before."""
    frame: Optional[object] = sys._getframe(1)  # the caller
    if skip:
        inner = sys._getframe(1 + skip)  # the last frame to skip: npuemu's, if called as the caller thinks
        if _is_ours.get(inner.f_code.co_filename) is True:
            frame = inner.f_back
    if depth == DEPTH and frame is not None and _is_ours.get(frame.f_code.co_filename) is False:
        caller = frame.f_back
        further = caller.f_back if caller is not None else None
        # ids, not the code objects: hashing a code object hashes its bytecode
        key = (id(frame.f_code), frame.f_lasti,
               caller and id(caller.f_code), caller and caller.f_lasti,
               further and id(further.f_code), further and further.f_lasti)
        site = _known.get(key)
        if site is None or site._raw[0][0] is not frame.f_code:  # an id reused by a new code object
            if len(_known) >= KNOWN_SITES:
                _known.clear()
            site = _known[key] = _walk(frame, depth)
        return site
    return _walk(frame, depth)


def _walk(frame: Optional[object], depth: int) -> Site:
    """The site of the first `depth` user frames from `frame` outwards."""
    is_ours = _is_ours.get
    while frame is not None:  # npuemu's own frames first (none when called from a public call)
        code = frame.f_code
        ours = is_ours(code.co_filename)
        if not (_classify(code.co_filename) if ours is None else ours):
            break
        frame = frame.f_back
    if frame is None:
        return native_site()
    raw = ((code, frame.f_lasti),)
    while len(raw) < depth:  # then the user's, up to `depth` or back into npuemu (a callback of ours)
        frame = frame.f_back
        if frame is None:
            break
        code = frame.f_code
        ours = is_ours(code.co_filename)
        if _classify(code.co_filename) if ours is None else ours:
            break
        raw += ((code, frame.f_lasti),)
    return Site(raw)


# --------------------------------------------------------------------------------------------------
# C callers: a program that calls npuemu through its C toolkit has no Python frame of its own; the
# toolkit tells the return addresses of the program's innermost frames of the C call in progress, which
# are named file:line when the program was built with -g (addr2line), else module+offset.

_native_caller: Optional[Callable[[], tuple]] = None
_native_sites: dict = {}  # return addresses -> their NativeSite


def set_native_caller(read: Callable[[], tuple]) -> None:
    """`read()` gives the return addresses of the C call in progress on this thread, innermost first
    (empty when none)."""
    global _native_caller
    _native_caller = read


def native_site() -> Site:
    """The site of the C call in progress, or UNKNOWN."""
    addresses = _native_caller() if _native_caller is not None else ()
    if not addresses:
        return UNKNOWN
    site = _native_sites.get(addresses)
    if site is None:
        if len(_native_sites) >= KNOWN_SITES:
            _native_sites.clear()
        site = _native_sites[addresses] = NativeSite(addresses[:DEPTH])
    return site


class NativeSite(Site):
    """The C caller's frames at their return addresses; resolved to source lines only when shown."""

    __slots__ = ("addresses",)

    def __init__(self, addresses: tuple):
        super().__init__(())
        self.addresses = addresses

    @property
    def frames(self) -> tuple:
        if self._frames is None:
            frames = []
            for address in self.addresses:
                module, frame = _resolve(address)
                if frames and os.path.basename(module).startswith(_RUNTIME_LIBRARIES):
                    break  # the C library's start-up code that called main: not the program's
                frames.append(frame)
            self._frames = tuple(frames)
        return self._frames

    @property
    def location(self) -> str:
        filename, line, _ = self.frames[0]
        return "%s:%d" % (filename, line) if line else filename

    def __str__(self) -> str:
        return " <- ".join(_shown(frame) for frame in self.frames)

    def __eq__(self, other: object) -> bool:  # by address: comparing must not resolve (a subprocess)
        return isinstance(other, NativeSite) and other.addresses == self.addresses

    def __hash__(self) -> int:
        return hash(self.addresses)


def _shown(frame: tuple) -> str:
    filename, line, function = frame
    where = "%s:%d" % (filename, line) if line else filename
    return "%s in %s" % (where, function) if function else where


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


class _Elf64Symbol(ctypes.Structure):  # Elf64_Sym, which dladdr1(..., RTLD_DL_SYMENT) points at
    _fields_ = [("st_name", ctypes.c_uint32), ("st_info", ctypes.c_uint8), ("st_other", ctypes.c_uint8),
                ("st_shndx", ctypes.c_uint16), ("st_value", ctypes.c_uint64), ("st_size", ctypes.c_uint64)]


_RTLD_DL_SYMENT = 1  # dladdr1's flag for the symbol's table entry
_SHT_SYMTAB = 2      # the ELF section type of the full symbol table
_RUNTIME_LIBRARIES = ("libc.so", "ld-linux")


def _resolve(address: int) -> tuple:
    """(module, (file, line, function)) of the instruction that made the call returning to `address`:
    the source line when the module has debug information, else (module+0xoffset, 0, symbol or "")."""
    info = _DlInfo()
    symbol_entry = ctypes.POINTER(_Elf64Symbol)()
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "dladdr1"):  # not glibc: dladdr, without the symbol's size
        symbol_entry = None
        found = libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info))
    else:
        found = libc.dladdr1(ctypes.c_void_p(address), ctypes.byref(info), ctypes.byref(symbol_entry), _RTLD_DL_SYMENT)
    if not found:
        return "", ("0x%x" % address, 0, "")
    module = os.fsdecode(info.dli_fname or b"")
    if not os.path.isabs(module):  # the main program, named as it was started ("" or argv[0])
        module = os.path.realpath("/proc/self/exe")
    offset = address - (info.dli_fbase or 0) if _is_relocatable(module) else address
    function, filename, line = _addr2line(module, offset - 1)  # the call instruction ends before the return address
    if line:
        return module, (filename, line, function)
    # Without a full symbol table addr2line, as dladdr, names the nearest exported function below the
    # address, even past that function's end (inside a non-exported one): named only when it holds it.
    if not _symbol_holds(info, symbol_entry, address - 1):
        if not _has_symbol_table(module):
            function = ""
        info.dli_sname = None
    symbol = function or (os.fsdecode(info.dli_sname) if info.dli_sname else "")
    return module, ("%s+0x%x" % (module, offset), 0, symbol)


def _symbol_holds(info: _DlInfo, symbol_entry, address: int) -> bool:
    """Whether the dynamic symbol dladdr1 found spans `address` (a symbol of unknown size holds none)."""
    if not info.dli_sname or not info.dli_saddr or not symbol_entry or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    return info.dli_saddr <= address < info.dli_saddr + symbol_entry.contents.st_size


@functools.lru_cache(maxsize=None)
def _has_symbol_table(module: str) -> bool:
    """Whether the 64-bit ELF `module` keeps its full symbol table (.symtab, a section of type
    SHT_SYMTAB: static functions too), not only the dynamic one. Unknown (not ELF-64, unreadable): no."""
    try:
        with open(module, "rb") as file:
            header = file.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2:
                return False
            section_headers, = struct.unpack_from("<Q", header, 0x28)   # e_shoff
            entry_size, count = struct.unpack_from("<HH", header, 0x3A)  # e_shentsize, e_shnum
            file.seek(section_headers)
            table = file.read(entry_size * count)
    except OSError:
        return False
    return any(struct.unpack_from("<I", table, index * entry_size + 4)[0] == _SHT_SYMTAB
               for index in range(len(table) // entry_size if entry_size else 0))



def _is_relocatable(module: str) -> bool:
    """A shared object or position-independent executable (ELF type ET_DYN): addresses are offsets."""
    try:
        with open(module, "rb") as file:
            header = file.read(18)
    except OSError:
        return True
    return len(header) == 18 and header[16] == 3


def _addr2line(module: str, offset: int) -> tuple:
    """(function, file, line) at `offset` of `module`: the line from its debug information, the function
    from its symbol table; "" and 0 for what it does not have (or without binutils' addr2line)."""
    try:
        # Paths are bytes: one that is not UTF-8 (a Latin-1 directory) is kept as os.fsdecode keeps it.
        done = subprocess.run(["addr2line", "-f", "-C", "-e", module, "0x%x" % offset], capture_output=True,
                              text=True, errors="surrogateescape", timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "", "", 0
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) < 2:
        return "", "", 0
    function = lines[0].split(" [clone ")[0] if lines[0] != "??" else ""  # not GCC's names of its copies
    filename, _, line = lines[1].split(" (discriminator")[0].rpartition(":")  # a path may hold a ':'
    line = line.strip()
    if filename.startswith("??") or not line.isdigit():
        return function, "", 0
    return function, filename, int(line)


_lines: dict = {}  # (id(code), offset) -> (code, its line): a leak in a loop shows one site many times


def _line_of(code, offset: int) -> int:
    """The source line of the instruction at byte `offset` of `code` (what frame.f_lineno computes, done
    only when a site is shown), looked up once per instruction: the look-up walks the code's line table."""
    key = (id(code), offset)
    known = _lines.get(key)
    if known is not None and known[0] is code:  # (not an id reused by a new code object)
        return known[1]
    if len(_lines) >= KNOWN_SITES:
        _lines.clear()
    line = _look_up_line(code, offset)
    _lines[key] = (code, line)
    return line


def _look_up_line(code, offset: int) -> int:
    line = code.co_firstlineno
    if not hasattr(code, "co_lines"):  # Python 3.9: the table of line starts
        for start, number in dis.findlinestarts(code):
            if start > offset:
                break
            line = number
        return line
    for start, end, number in code.co_lines():
        if start <= offset < end:
            return number if number is not None else line
        if number is not None:
            line = number
    return line


def _classify(filename: str) -> bool:
    """Whether a file is npuemu's own (or one of the interpreter's frozen modules); remembered."""
    ours = _is_ours[filename] = filename.startswith(_package_dirs) or filename.startswith("<frozen")
    return ours
