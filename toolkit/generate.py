"""Write the toolkit's generated files from the one table of the C surface (toolkit/npuemu_toolkit/surface.py).

    python toolkit/generate.py OUTPUT_DIR

writes under OUTPUT_DIR:
    include/...            every header of the table (and its aliases)
    forward_<lib>.cpp      the exported functions of each library: each packs its arguments and
                           calls the bridge (toolkit/src/bridge.cpp) with its function's number
    <lib>.map              the library's export list (an anonymous version script: no version nodes)
    signatures.inc         the bridge's table: per function, its Python target and the kind of each
                           parameter, output and return value
    libraries.cmake        the libraries and their sources, for toolkit/CMakeLists.txt

It runs at build time with nothing but the standard library: the enum and constant values are read
from the runtime's Python modules as text (ast), not imported.
"""
from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from npuemu_toolkit import surface  # noqa: E402  (the table; the package imports nothing of npuemu's)
from npuemu_toolkit.surface import Constants, Enum, Function, Header, Text  # noqa: E402

# --------------------------------------------------------------------------------------------------
# Prototypes


@dataclass(frozen=True)
class Param:
    ctype: str   # the declared type, normalised ("const int64_t *", "aclrtStream", ...)
    name: str


@dataclass(frozen=True)
class Prototype:
    returns: str
    name: str
    params: tuple


def _normalise(ctype: str) -> str:
    return re.sub(r"\s*\*\s*", " *", " ".join(ctype.split())).replace("* *", "**").strip()


def parse(prototype: str) -> Prototype:
    """'aclError aclrtMalloc(void **devPtr, size_t size, ...)' -> Prototype."""
    match = re.fullmatch(r"\s*(.+?)\s*(\**)\s*(\w+)\s*\((.*)\)\s*", prototype)
    if not match:
        raise ValueError("not a prototype: %r" % prototype)
    returns = _normalise(match.group(1) + (" " + match.group(2) if match.group(2) else ""))
    params = []
    text = match.group(4).strip()
    if text and text != "void":
        for part in text.split(","):
            declaration = re.fullmatch(r"\s*(.+?[\s*])(\w+)\s*", part)
            if not declaration:
                raise ValueError("cannot read parameter %r of %r" % (part, prototype))
            params.append(Param(_normalise(declaration.group(1)), declaration.group(2)))
    return Prototype(returns, match.group(3), tuple(params))


# The kinds of parameters, outputs and return values the bridge converts (toolkit/src/forward.h).
SIGNED = {"int32_t", "int64_t", "int", "aclError"}
UNSIGNED = {"uint32_t", "uint64_t", "size_t", "const size_t", "aclFloat16"}
ENUMS = {block.name for header in surface.HEADERS for block in header.blocks if isinstance(block, Enum)}
OUT_SCALARS = {"int32_t": "NK_OUT_I32", "uint32_t": "NK_OUT_U32", "int64_t": "NK_OUT_I64", "uint64_t": "NK_OUT_U64",
               "size_t": "NK_OUT_U64", "float": "NK_OUT_F32"}
ARRAYS = {"const int64_t *": "NK_I64_ARRAY", "const float *": "NK_F32_ARRAY", "const bool *": "NK_BOOL_ARRAY"}
# aclnn objects: the core passes the live object itself (what a Python caller passes), not its handle,
# so that the Python layer need not look it up (its checks are the same either way).
OBJECT_CLASSES = ("aclTensor", "aclOpExecutor", "aclIntArray", "aclFloatArray", "aclBoolArray", "aclScalar",
                  "aclTensorList", "aclScalarList")
# The function-pointer types the headers declare (`typedef void (*aclrtCallback)(void *userData);`): their
# parameters are NK_FUNCTION, which the core refuses unless they point into executable memory.
FUNCTION_TYPES = {name for header in surface.HEADERS for block in header.blocks if isinstance(block, Text)
                  for name in re.findall(r"typedef[^;]*\(\s*\*\s*(\w+)\s*\)\s*\(", block.text)}
RETURNS = {"aclError": "NR_STATUS", "aclnnStatus": "NR_STATUS", "size_t": "NR_U64", "float": "NR_F32",
           "aclFloat16": "NR_U16"}


def layer(header: Header) -> str:
    """Which codes a failure of the call gets: the runtime's (acl/) or aclnn's (aclnn/, aclnnop/)."""
    return "NL_ACLNN" if header.path.startswith("aclnn") else "NL_RUNTIME"


def kinds(fn: Function) -> tuple:
    """(kind, aux) of each parameter; aux is the index of an array's count parameter (else 0)."""
    proto = parse(fn.prototype)
    index = {p.name: i for i, p in enumerate(proto.params)}
    count_params = set(fn.counts.values())
    result = []
    for param in proto.params:
        aux = index[fn.counts[param.name]] if param.name in fn.counts else 0
        ctype = param.ctype
        if param.name in fn.outputs:
            pointee = ctype[:-1].strip()
            if param.name in fn.counts:
                kind = "NK_OUT_I64_ARRAY"
            elif pointee in OUT_SCALARS:
                kind = OUT_SCALARS[pointee]
            elif pointee in ENUMS:
                kind = "NK_OUT_I32"
            elif pointee.endswith("*") or pointee in ("aclrtStream", "aclrtEvent", "aclrtContext"):
                kind = "NK_OUT_PTR"
            else:
                raise ValueError("%s: no output kind for %s %s" % (proto.name, ctype, param.name))
        elif param.name in count_params:
            out_array = any(fn.counts[o] == param.name for o in fn.outputs if o in fn.counts)
            kind = "NK_OUT_COUNT" if out_array else "NK_COUNT"
        elif param.name in fn.counts:
            kind = ARRAYS.get(ctype, "NK_PTR_ARRAY" if ctype.count("*") == 2 else None)
            if kind is None:
                raise ValueError("%s: no array kind for %s" % (proto.name, ctype))
        elif ctype == "const char *":
            kind = "NK_STR"
        elif ctype == "bool":
            kind = "NK_BOOL"
        elif ctype in ("double", "float"):
            kind = "NK_DOUBLE"
        elif ctype in SIGNED or ctype in ENUMS:
            kind = "NK_INT"
        elif ctype in UNSIGNED:
            kind = "NK_UINT"
        elif ctype.replace("const ", "").rstrip(" *") in OBJECT_CLASSES and ctype.count("*") == 1:
            kind, aux = "NK_OBJECT", OBJECT_CLASSES.index(ctype.replace("const ", "").rstrip(" *"))
        elif ctype.replace("const ", "") in FUNCTION_TYPES:
            kind = "NK_FUNCTION"
        elif ctype.endswith("*") or ctype.replace("const ", "") in ("aclrtStream", "aclrtEvent", "aclrtContext"):
            kind = "NK_PTR"
        else:
            raise ValueError("%s: no kind for parameter type %r" % (proto.name, ctype))
        result.append((kind, aux))
    for output in fn.outputs:
        if output not in index:
            raise ValueError("%s: output %s is no parameter" % (proto.name, output))
    return tuple(result)


def return_kind(fn: Function) -> str:
    returns = parse(fn.prototype).returns
    if returns == "const char *":
        return "NR_STR_THREAD" if fn.strings == "thread" else "NR_STR_STATIC"
    if returns.endswith("*"):
        return "NR_HANDLE"
    if returns not in RETURNS:
        raise ValueError("%s: no return kind for %r" % (fn.name, returns))
    return RETURNS[returns]


# --------------------------------------------------------------------------------------------------
# Values of the runtime's Python modules, read as text


_modules: dict = {}


def assignments(module: str) -> list:
    """[(name, value, value as written)] of the module's top-level `NAME = <integer>` lines, in file order."""
    if module not in _modules:
        with open(os.path.join(REPO, module), encoding="utf-8") as file:
            source = file.read()
        tree = ast.parse(source, module)
        found = []
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(value, int) and not isinstance(value, bool):
                    found.append((node.targets[0].id, value, ast.get_source_segment(source, node.value)))
        _modules[module] = found
    return _modules[module]


def values(spec: surface.Values) -> list:
    """[(name, value text as written in Python)] of the run `spec` names."""
    names = [name for name, _, _ in assignments(spec.module)]
    for end in (spec.first, spec.last):
        if end not in names:
            raise ValueError("%s has no %s" % (spec.module, end))
    run = assignments(spec.module)[names.index(spec.first):names.index(spec.last) + 1]
    return [(name, text) for name, _, text in run if name not in spec.skip]


# --------------------------------------------------------------------------------------------------
# Headers

NOTICE = "// npuemu's own header, generated from toolkit/npuemu_toolkit/surface.py by toolkit/generate.py: do not edit.\n"


def guard(path: str) -> str:
    return "NPUEMU_" + re.sub(r"\W", "_", path).upper() + "_"


def c_literal(text: str) -> str:
    return text if not text.startswith("-") else "(%s)" % text


def render_block(block, header: Header) -> str:
    if isinstance(block, Text):
        return block.text
    if isinstance(block, Constants):
        if block.style == "define":
            return "\n".join("#define %s %s" % (name, c_literal(text)) for name, text in values(block.values))
        return "\n".join("static const int %s = %s;" % (name, text) for name, text in values(block.values))
    if isinstance(block, Enum):
        members = "\n".join("    %s = %s," % (name, text) for name, text in values(block.values))
        return "typedef enum %s{\n%s\n} %s;" % (block.name + " " if block.tagged else "", members, block.name)
    if isinstance(block, Function):
        return "%s %s;" % (header.visibility, block.prototype)
    raise TypeError(block)


def render_header(header: Header) -> str:
    includes = "".join("#include %s\n" % include for include in header.includes)
    body = "\n\n".join(render_block(block, header) for block in header.blocks)
    if any(isinstance(block, Function) for block in header.blocks):
        body = "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n" + body + "\n\n#ifdef __cplusplus\n}\n#endif"
    cpp_check = ('#ifndef __cplusplus\n#error "%s is C++ only, as the aclnn headers are"\n#endif\n' % header.path
                 if header.cpp_only else "")
    return "%s#ifndef %s\n#define %s\n%s\n%s\n%s\n\n#endif  // %s\n" % (
        NOTICE, guard(header.path), guard(header.path), cpp_check, includes, body, guard(header.path))


# --------------------------------------------------------------------------------------------------
# Forwarders, export lists and the bridge's table

FIELD = {"NK_INT": "i", "NK_BOOL": "i", "NK_UINT": "u", "NK_COUNT": "u", "NK_DOUBLE": "d"}


def forwarder(number: int, fn: Function, header: Header) -> str:
    proto = parse(fn.prototype)
    lines = ["%s %s {" % (header.visibility, fn.prototype)]
    arguments = "nullptr"
    if proto.params:
        lines.append("  npuemu_value a[%d];" % len(proto.params))
        for i, (param, (kind, _)) in enumerate(zip(proto.params, kinds(fn))):
            field_name = FIELD.get(kind, "p")
            value = param.name
            if param.ctype == "bool":
                value = "%s ? 1 : 0" % param.name
            elif param.ctype in ENUMS:
                # An enum without negative members is unsigned to GCC: (aclrtMemcpyKind)-1 would widen to
                # 4294967295. The card's enums are 32-bit ints, so Python sees -1, as a Python caller passes it.
                value = "static_cast<int32_t>(%s)" % param.name
            elif kind == "NK_FUNCTION":
                value = "reinterpret_cast<const void *>(%s)" % param.name
            elif field_name == "p":
                value = "static_cast<const void *>(%s)" % param.name
            lines.append("  a[%d].%s = %s;" % (i, field_name, value))
        arguments = "a"
    call = "npuemu_forward(%d, %s, __builtin_return_address(0), __builtin_dwarf_cfa())" % (number, arguments)
    returns = proto.returns
    kind = return_kind(fn)
    if kind == "NR_STATUS":
        lines.append("  return static_cast<%s>(%s.i);" % (returns, call))
    elif kind in ("NR_U64", "NR_U16"):
        lines.append("  return static_cast<%s>(%s.u);" % (returns, call))
    elif kind == "NR_F32":
        lines.append("  return static_cast<float>(%s.d);" % call)
    elif kind in ("NR_STR_THREAD", "NR_STR_STATIC"):
        lines.append("  return static_cast<const char *>(%s.p);" % call)
    else:
        lines.append("  return static_cast<%s>(const_cast<void *>(%s.p));" % (returns, call))
    lines.append("}")
    return "\n".join(lines)


def numbered() -> list:
    """(number, header, function): the bridge's function numbers are positions in the table."""
    return [(number, header, fn) for number, (header, fn) in enumerate(surface.functions())]


def library_functions(library: str) -> list:
    return [(number, header, fn) for number, header, fn in numbered() if library in header.libraries]


def render_forwarders(library: str) -> str:
    entries = library_functions(library)
    headers = sorted({header.path for _, header, _ in entries})
    includes = "".join('#include "%s"\n' % path for path in headers)
    body = "\n\n".join(forwarder(number, fn, header) for number, header, fn in entries)
    return ("// The exported functions of %s.so, generated from toolkit/npuemu_toolkit/surface.py: each forwards to the\n"
            "// bridge, which calls the Python runtime. Do not edit.\n%s#include \"forward.h\"\n\n"
            "extern \"C\" {\n\n%s\n\n}  // extern \"C\"\n" % (library, includes, body))


def render_export_list(library: str) -> str:
    names = [fn.name for _, _, fn in library_functions(library)]
    exported = "".join("    %s;\n" % name for name in names)
    return "{\n  global:\n%s  local: *;\n};\n" % exported if names else "{\n  local: *;\n};\n"


MAX_PARAMETERS = 16  # kMaxParameters of toolkit/src/core.cpp
SITE_FRAMES = 3      # kCallerFrames of toolkit/src/core.cpp


def site_frames(fn: Function, header: Header) -> int:
    """How many of the program's frames the call's site keeps: three for the calls that make a resource
    (a helper of the program often makes them), so that a leak names the helper's callers as it does
    for Python programs; one (the caller) for the others, whose stack walk the hot path cannot afford."""
    makes = return_kind(fn) == "NR_HANDLE" or any(kind == "NK_OUT_PTR" for kind, _ in kinds(fn))
    return SITE_FRAMES if makes and header not in surface.OPERATORS else 1


def render_signatures() -> str:
    arrays, rows = [], []
    for number, header, fn in numbered():
        proto = parse(fn.prototype)
        if len(proto.params) > MAX_PARAMETERS:
            raise ValueError("%s: more than %d parameters (raise kMaxParameters in core.cpp)" % (proto.name, MAX_PARAMETERS))
        module, attribute = fn.target.split(":")
        index = {p.name: i for i, p in enumerate(proto.params)}
        params = ", ".join("{%s, %d}" % kind for kind in kinds(fn)) or "{NK_NONE, 0}"
        outputs = ", ".join(str(index[o]) for o in fn.outputs) or "0"
        names = ", ".join('"%s"' % p.name for p in proto.params) or '""'
        arrays.append("static const npuemu_param params_%d[] = {%s};\n"
                      "static const uint8_t outputs_%d[] = {%s};\n"
                      "static const char *const names_%d[] = {%s};" % (number, params, number, outputs, number, names))
        rows.append('  {"%s", "%s", "%s", %s, %s, %d, params_%d, %d, outputs_%d, names_%d, %d},'
                    % (proto.name, module, attribute, layer(header), return_kind(fn), len(proto.params), number,
                       len(fn.outputs), number, number, site_frames(fn, header)))
    classes = ", ".join('"%s"' % name for name in OBJECT_CLASSES)
    return ("// The bridge's table of the C surface, generated from toolkit/npuemu_toolkit/surface.py. Do not edit.\n%s\n\n"
            "static const npuemu_signature NPUEMU_SIGNATURES[] = {\n%s\n};\n\n"
            "static const char *const NPUEMU_OBJECT_CLASSES[] = {%s};\n" % ("\n".join(arrays), "\n".join(rows), classes))


def render_libraries_cmake() -> str:
    lines = ["# Generated from toolkit/npuemu_toolkit/surface.py: the public libraries, their dependencies, their headers."]
    for library in surface.LIBRARIES:
        needs = " ".join(need[3:] for need in surface.LIBRARY_NEEDS.get(library, ()))
        lines.append("npuemu_public_library(%s \"%s\")" % (library[3:], needs))
    return "\n".join(lines) + "\n"


def write(path: str, text: str) -> None:
    """Write only what changed, so that a rebuild recompiles only what depends on a change."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            if file.read() == text:
                return
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def main(argv: list) -> int:
    if len(argv) != 1:
        print("usage: generate.py OUTPUT_DIR", file=sys.stderr)
        return 2
    out = argv[0]
    for header in surface.HEADERS:
        text = render_header(header)
        for path in (header.path,) + header.aliases:
            write(os.path.join(out, "include", path), text)
    for library in surface.LIBRARIES:
        write(os.path.join(out, "forward_%s.cpp" % library), render_forwarders(library))
        write(os.path.join(out, "%s.map" % library), render_export_list(library))
    write(os.path.join(out, "signatures.inc"), render_signatures())
    write(os.path.join(out, "libraries.cmake"), render_libraries_cmake())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
