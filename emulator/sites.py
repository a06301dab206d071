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
import itertools
import os
import re
import shutil
import struct
import subprocess
import sys
from typing import Callable, Iterable, Optional

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
try:  # where a relative name the program was started by is found when /proc cannot tell (AT_EXECFN)
    _START_DIRECTORY = os.getcwd()
except OSError:
    _START_DIRECTORY = "/"
_native_sites: dict = {}  # return addresses -> their NativeSite
# return address -> its call (module, offset, exported symbol), or _SYSTEM_FRAME: a new stack of known
# addresses (a helper called from a new line) is made of dictionary look-ups, not of three dladdr calls
_pinned_calls: dict = {}
_SYSTEM_FRAME = ("system",)  # a frame in the C or C++ runtime: never the program's
KNOWN_ADDRESSES = 4 * KNOWN_SITES


_modules_generation: Callable[[], int] = lambda: 0
_generation_seen: list = [None]  # what _modules_generation() said when the caches above were filled


def set_native_caller(read: Callable[[], tuple], modules_generation: Callable[[], int] = lambda: 0) -> None:
    """`read()` gives the return addresses of the C call in progress on this thread, innermost first
    (empty when none); `modules_generation()` a number that changes whenever a module is loaded or
    unloaded: an address pinned to a library unloaded since may be another library's now (one loaded
    at the same base), so the modules pinned to addresses are forgotten then."""
    global _native_caller, _modules_generation
    _native_caller, _modules_generation = read, modules_generation


def native_site() -> Site:
    """The site of the C call in progress, or UNKNOWN (no C call, or none of its frames the program's)."""
    addresses = _native_caller() if _native_caller is not None else ()
    if not addresses:
        return UNKNOWN
    generation = _modules_generation()
    if generation != _generation_seen[0]:
        _forget_modules(generation)
    site = _native_sites.get(addresses)
    if site is None:
        _make_room(_native_sites, KNOWN_SITES)
        calls = _program_calls(addresses[:DEPTH])
        site = _native_sites[addresses] = NativeSite(addresses[:DEPTH], calls) if calls else UNKNOWN
    return site


def _forget_modules(generation: int) -> None:
    """Modules were loaded or unloaded: the addresses are pinned again at their next site. (The sites
    taken before keep the modules they were pinned to, and their lines.)"""
    _native_sites.clear()
    _pinned_calls.clear()
    _modules.clear()
    _generation_seen[0] = generation


def _make_room(cache: dict, limit: int) -> None:
    """Forget the older half of a full `cache` (dicts keep their insertion order): a program with more
    distinct call stacks than the cache holds still finds its recent ones, as it would not if the whole
    cache went at once."""
    if len(cache) >= limit:
        for key in list(itertools.islice(cache, limit // 2)):
            del cache[key]


class NativeSite(Site):
    """The C caller's frames, pinned to their modules when the site is taken (`calls`: (module, offset,
    exported symbol) each); resolved to source lines only when shown."""

    __slots__ = ("addresses", "calls")

    def __init__(self, addresses: tuple, calls: tuple):
        super().__init__(())
        self.addresses, self.calls = addresses, calls

    @property
    def frames(self) -> tuple:
        if self._frames is None:
            _symbolise(self.calls)  # one addr2line run per module
            frames: tuple = ()
            for call in self.calls:  # an inlined function's frame, then the frames it was inlined into
                frames += _frames_of(*call)
            self._frames = frames[:DEPTH]
        return self._frames

    @property
    def location(self) -> str:
        filename, line, _ = self.frames[0]
        return "%s:%d" % (filename, line) if line else filename

    def __str__(self) -> str:
        return " <- ".join(_shown(frame) for frame in self.frames)

    # by the pinned calls: comparing must not resolve (a subprocess), and the same addresses are another
    # site once another library is loaded where an unloaded one was
    def __eq__(self, other: object) -> bool:
        return isinstance(other, NativeSite) and other.calls == self.calls

    def __hash__(self) -> int:
        return hash(self.calls)


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
_AT_PHDR = 3         # getauxval's key of the main program's program headers
_AT_EXECFN = 31      # getauxval's key of the file name the program was started by (as execve was given it)
_SHT_SYMTAB = 2      # the ELF section type of the full symbol table
# Never the program's own code: the C and C++ runtimes. A frame in one is the C library's start-up code
# that called main, a thread's start, or a function of theirs that ended in a tail call to the toolkit.
_SYSTEM_LIBRARIES = ("libc.so", "ld-linux", "libstdc++.so", "libgcc_s.so", "libpthread.so", "libm.so", "libdl.so")
# Nor Python's (the interpreter, libpython, libffi under ctypes) or npuemu's own libraries (the toolkit's
# lib64, register_native_dir): a C callback of the program returns into them.
_PYTHON_LIBRARIES = ("libpython", "libffi.so")
_native_dirs: tuple = ()


def register_native_dir(directory: str) -> None:
    """The C libraries in `directory` are npuemu's own: a site ends at a frame in them."""
    global _native_dirs
    if directory:
        _native_dirs += (os.path.realpath(directory) + os.sep,)


_PYTHON_PROGRAM = re.compile(r"python[0-9.]*[a-z]?$")  # python, python3, python3.11, python3.13t


def _not_the_programs(path: str, main: bool) -> bool:
    """Whether the module at `path` is a runtime the program's frames return into, never its own code."""
    if main:  # a Python host: the interpreter is the program that runs (a program that embeds Python and
        # names itself sys.executable, with Py_SetProgramName(argv[0]), is still the program: not "python")
        try:
            return (bool(sys.executable) and _PYTHON_PROGRAM.match(os.path.basename(path)) is not None
                    and os.path.samefile(path, sys.executable))
        except OSError:
            return False
    return (os.path.basename(path).startswith(_SYSTEM_LIBRARIES + _PYTHON_LIBRARIES)
            or os.path.realpath(path).startswith(_native_dirs))


@functools.lru_cache(maxsize=None)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


def _dladdr(address: int) -> tuple:
    """(dladdr's info, the symbol's table entry or None) of `address`; (None, None) outside any module."""
    info = _DlInfo()
    libc = _libc()
    if not hasattr(libc, "dladdr1"):  # not glibc: dladdr, without the symbol's size
        found = libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info))
        return (info, None) if found else (None, None)
    symbol_entry = ctypes.POINTER(_Elf64Symbol)()
    found = libc.dladdr1(ctypes.c_void_p(address), ctypes.byref(info), ctypes.byref(symbol_entry), _RTLD_DL_SYMENT)
    return (info, symbol_entry) if found else (None, None)


def _program_calls(addresses: tuple) -> tuple:
    """(module, offset of the return address, exported symbol holding the call) of each of the program's
    frames at these return addresses, innermost first; taken now, while the modules are the ones loaded.
    The frames in the C and C++ runtimes are not the program's: those before its first frame are skipped
    (a tail call's caller cannot be known), the first one after its frames ends them (the start-up)."""
    calls: tuple = ()
    for address in addresses:
        call = _pinned_calls.get(address)
        if call is None:
            _make_room(_pinned_calls, KNOWN_ADDRESSES)
            call = _pinned_calls[address] = _pin(address)
        if call is _SYSTEM_FRAME:
            if calls:
                break
            continue
        calls += (call,)
    return calls


def _pin(address: int) -> tuple:
    """The call at return address `address`: (module, offset, exported symbol holding it), (None,
    address, "") outside any module, or _SYSTEM_FRAME in the C or C++ runtime."""
    info, symbol_entry = _dladdr(address)
    if info is None:
        return None, address, ""
    module = _module(info.dli_fname, info.dli_fbase or 0)
    if module.system:
        return _SYSTEM_FRAME
    offset = address - (info.dli_fbase or 0) if module.relocatable else address
    # dladdr names the nearest exported symbol below the address, even past its end: kept if it holds it
    exported = os.fsdecode(info.dli_sname) if _symbol_holds(info, symbol_entry, address - 1) else ""
    return module, offset, exported


class _Module:
    """A loaded module (the program or a library), pinned when a site in it is first taken: its absolute
    path, and the identity of the file (device, inode, modification time) so that a report shown after
    the file was replaced (a program rebuilt while it runs, a library file rebuilt after it was loaded)
    says so instead of showing another file's lines."""

    __slots__ = ("path", "main", "relocatable", "system", "identity", "replaced")

    def __init__(self, name: bytes, base: int):
        given = os.fsdecode(name or b"")
        main_base = _main_program_base()
        self.main = base == main_base if main_base is not None else not os.path.isabs(given)
        mapped, deleted = _mapped_path(base)
        if os.path.isabs(given) and not self.main:
            self.path = given  # as the program named it (a symbolic link's name)
        else:  # the program ("" or argv[0]), or a library found by a relative path (LD_LIBRARY_PATH=.)
            self.path = mapped or (_main_program_path() if self.main else os.path.abspath(given))
        self.replaced = deleted  # /proc/self/maps: the file loaded is no longer at its path
        self.identity = _identity(self.path)  # None: unknown (not to be read as "changed")
        self.relocatable = _is_relocatable(self.path)
        self.system = _not_the_programs(self.path, self.main)

    def current_path(self) -> Optional[str]:
        """The path of the pinned file if it is there still (a moved program: where it is now), else None.
        A file whose identity could not be taken (no /proc, an unreadable directory) is taken to be the
        one loaded: what cannot be known is not said to have changed."""
        if self.replaced:
            return None
        if self.identity is None:
            return self.path
        for path in (self.path, _running_program()) if self.main else (self.path,):
            if path and _identity(path) == self.identity:
                return path
        return None

    def _same_file(self) -> tuple:
        return self.path, self.identity, self.replaced

    # One file loaded again (after dlopen/dlclose elsewhere made the modules be taken anew) is the same
    # module: a site in it taken before and after is one site, and a finding repeated is counted, not new.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Module) and self._same_file() == other._same_file()

    def __hash__(self) -> int:
        return hash(self._same_file())

    @property
    def changed(self) -> str:
        """What a frame in it says when its file is no longer the one loaded."""
        return "file changed since the program started" if self.main else "file changed since the library was loaded"


_modules: dict = {}  # (dladdr's file name, base address) -> _Module


def _module(name: bytes, base: int) -> _Module:
    module = _modules.get((name, base))
    if module is None:
        module = _modules[(name, base)] = _Module(name, base)
    return module


@functools.lru_cache(maxsize=None)
def _main_program_base() -> Optional[int]:
    """The main program's base address (what dladdr says of an address in it), or None if unknown: its
    name in dladdr is "" or argv[0], a relative path as a library found by a relative path has."""
    headers = _auxiliary_value(_AT_PHDR)
    info, _ = _dladdr(headers) if headers else (None, None)
    return info.dli_fbase if info is not None else None


def _auxiliary_value(key: int) -> int:
    """getauxval(key): what the kernel told the program at its start (0 when unknown, or not glibc)."""
    libc = _libc()
    if not hasattr(libc, "getauxval"):
        return 0
    libc.getauxval.restype = ctypes.c_ulong
    libc.getauxval.argtypes = [ctypes.c_ulong]
    return libc.getauxval(key)


def _main_program_path() -> str:
    """The main program's absolute path: where /proc/self/exe leads, else (no /proc: a container or a
    chroot without it) the name it was started by, made absolute against the working directory npuemu
    started in (the program may have changed directory since it was started: the best known)."""
    running = _running_program()
    if running:
        return running
    name = _auxiliary_value(_AT_EXECFN)
    return os.path.normpath(os.path.join(_START_DIRECTORY, os.fsdecode(ctypes.string_at(name)))) if name else ""


def _running_program() -> str:
    """The file of the running program as /proc/self/exe says now; "" without /proc."""
    try:
        return os.path.realpath(os.readlink("/proc/self/exe"))
    except OSError:
        return ""


def _mapped_path(base: int) -> tuple:
    """(absolute path, whether it was deleted or replaced) of the file mapped at `base`, from
    /proc/self/maps; ("", False) where it cannot be read."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            for line in maps:
                fields = line.rstrip(b"\n").split(None, 5)
                if len(fields) == 6 and int(fields[0].partition(b"-")[0], 16) == base:
                    path = os.fsdecode(fields[5])
                    deleted = path.endswith(" (deleted)")
                    return (path[:-len(" (deleted)")] if deleted else path), deleted
    except (OSError, ValueError):
        pass
    return "", False


def _identity(path: str) -> Optional[tuple]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino, status.st_mtime_ns


def _symbol_holds(info: _DlInfo, symbol_entry, address: int) -> bool:
    """Whether the dynamic symbol dladdr1 found spans `address` (a symbol of unknown size holds none)."""
    if not info.dli_sname or not info.dli_saddr or not symbol_entry or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    return info.dli_saddr <= address < info.dli_saddr + symbol_entry.contents.st_size


_symbolised: dict = {}  # (module, offset) -> (the file's path then, ((function, file, line), ...)), or None


def resolve(sites: Iterable) -> None:
    """Look the lines of the C frames of `sites` up together: one addr2line run per module for all their
    offsets (a report of many leaks), each offset once."""
    _symbolise(call for site in sites if isinstance(site, NativeSite) and site._frames is None for call in site.calls)


def _symbolise(calls: Iterable) -> None:
    """Look up the lines of the (module, offset, symbol) `calls` not looked up before."""
    wanted: dict = {}
    for module, offset, _ in calls:
        if module is not None and (module, offset) not in _symbolised:
            wanted.setdefault(module, set()).add(offset)
    if len(_symbolised) + sum(len(offsets) for offsets in wanted.values()) > 4 * KNOWN_SITES:
        _symbolised.clear()
    for module, offsets in wanted.items():
        path = module.current_path()
        found = _addr2line(path, sorted(offsets)) if path is not None else {}
        for offset in offsets:
            _symbolised[(module, offset)] = (path, found.get(offset, ())) if path is not None else None


def _frames_of(module: Optional[_Module], offset: int, exported: str) -> tuple:
    """The (file, line, function) frames of one call, innermost first: the source lines when the module
    has debug information (an inlined function's, then its callers'), else (module+0xoffset, 0, symbol)."""
    if module is None:
        return (("0x%x" % offset, 0, ""),)
    if (module, offset) not in _symbolised:  # a site shown alone
        _symbolise(((module, offset, exported),))
    symbolised = _symbolised.get((module, offset), (module.path, ()))
    if symbolised is None:  # not the file the site was taken in: its lines would be another's
        return (("%s+0x%x (%s)" % (module.path, offset, module.changed), 0, exported),)
    path, found = symbolised
    lines = tuple((filename, line, function) for function, filename, line in found if line)
    if lines:
        return lines
    # Without a full symbol table addr2line, as dladdr, names the nearest exported function below the
    # address, even past that function's end (inside a non-exported one): named only when it holds it.
    function = found[0][0] if found and (exported or _has_symbol_table(path)) else ""
    return (("%s+0x%x" % (path, offset), 0, function or exported),)


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


@functools.lru_cache(maxsize=None)
def _symboliser() -> Optional[str]:
    """LLVM's addr2line where installed, else binutils': binutils 2.40 reads GCC 12's default DWARF 5
    wrong (a line of a header, or after #line, is named in the .cpp file), and neither link-time
    optimised (<artificial>) nor split DWARF files. Both take the same options."""
    for name in ("llvm-addr2line", "addr2line"):
        path = shutil.which(name)
        if path is not None:
            return path
    return None


def _addr2line(module: str, offsets: list) -> dict:
    """offset -> ((function, file, line), ...) of the call instruction before each return address
    `offset` of `module`, innermost first (an inlined function, then the functions it was inlined into):
    the lines from its debug information, the function from its symbol table; "" and 0 for what it
    does not have. {} without an addr2line or when it fails."""
    tool = _symboliser()
    if tool is None or not offsets:
        return {}
    try:
        # Paths are bytes: one that is not UTF-8 (a Latin-1 directory) is kept as os.fsdecode keeps it.
        done = subprocess.run([tool, "-a", "-f", "-C", "-i", "-e", module],
                              input="".join("0x%x\n" % (offset - 1) for offset in offsets), capture_output=True,
                              text=True, errors="surrogateescape", timeout=30 + len(offsets) / 100)
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    found: dict = {}
    lines, position = done.stdout.splitlines(), 0
    for index, offset in enumerate(offsets):  # each: its address (-a), then function and file:line per frame (-i)
        if position >= len(lines) or not _is_address(lines[position], offset - 1):
            break
        position += 1
        following = offsets[index + 1] - 1 if index + 1 < len(offsets) else None
        frames: tuple = ()
        while position + 1 < len(lines) and not _is_address(lines[position], following):
            frames += (_frame(lines[position], lines[position + 1]),)
            position += 2
        found[offset] = frames
    return found


def _is_address(line: str, value: Optional[int]) -> bool:
    """Whether `line` of addr2line's output is the address `value` (-a prints it before its frames)."""
    if value is None or not line.startswith("0x"):
        return False
    try:
        return int(line, 16) == value
    except ValueError:
        return False


def _frame(function: str, location: str) -> tuple:
    """(function, file, line) of one frame of addr2line's output; "" and 0 for what it does not know."""
    # not the names of GCC's copies of a function (binutils: " [clone .isra.0]", LLVM: " (.isra.0)")
    function = function.split(" [clone ")[0].split(" (.")[0] if function != "??" else ""
    filename, _, line = location.split(" (discriminator")[0].rpartition(":")  # a path may hold a ':'
    line = line.strip()
    if filename.startswith("??") or os.path.basename(filename) == "<artificial>" or not line.isdigit():
        return function, "", 0  # <artificial>: what link-time optimisation made (binutils names no file)
    return function, filename, int(line)


_lines: dict = {}  # (id(code), offset) -> (code, its line): a leak in a loop shows one site many times


def _line_of(code, offset: int) -> int:
    """The source line of the instruction at byte `offset` of `code` (what frame.f_lineno computes, done
    only when a site is shown), looked up once per instruction: the look-up walks the code's line table."""
    key = (id(code), offset)
    known = _lines.get(key)
    if known is not None and known[0] is code:  # (not an id reused by a new code object)
        return known[1]
    _make_room(_lines, KNOWN_SITES)
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
