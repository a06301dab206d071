"""npuemu's C toolkit: a CANN-shaped tree (headers, lib64/libascendcl.so & co., set_env.sh) whose
functions forward to npuemu's Python runtime through an embedded interpreter (docs/toolkit.md).

`root()` is the installed tree; `surface` is the one table of the C surface that its headers, its
libraries' forwarders and export lists are generated from (toolkit/generate.py, at build time).
"""
from __future__ import annotations

import os

INTERPRETER = "npuemu.python"  # in a copied tree: the interpreter it runs npuemu in (toolkit/src/bridge.cpp)


class ToolkitMissing(RuntimeError):
    """The package was installed without its C toolkit (a build that skipped it)."""


def root() -> str:
    """The absolute path of the installed CANN-shaped tree (what ASCEND_CUSTOM_PATH should name)."""
    try:
        from . import _installed  # written by the build beside the tree
    except ImportError:
        raise ToolkitMissing("npuemu's C toolkit is not built: run `make install` (or `pip install .`) in the "
                             "npuemu checkout") from None
    path = _installed.ROOT
    if not os.path.isfile(os.path.join(path, "set_env.sh")):
        raise ToolkitMissing("npuemu's C toolkit is missing from %s: reinstall npuemu (`make install`)" % path)
    return path
