"""Sites of C and C++ callers (docs/toolkit.md, "How a call is forwarded", 5): the cost of a report of
many leaks. The programs are built once for the module, two at a time."""
from __future__ import annotations

import os
import shutil

import pytest

import ctoolkit
from test_toolkit_behaviour import Program, build_all, run

MANY_LEAKS = 20


def many_leaks_program() -> str:
    """A tensor leaked at each of MANY_LEAKS lines, by a helper; reported at exit (no aclFinalize)."""
    calls = "".join("  Make(dev);  // @leak-%d\n" % number for number in range(MANY_LEAKS))
    return r"""#include "acl/acl.h"
#include "aclnn/acl_meta.h"

static aclTensor* Make(void* dev) {
  int64_t shape[1] = {4}, strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, dev);  // @many-create
}

int main() {
  aclInit(nullptr);
  aclrtSetDevice(0);
  void* dev = nullptr;
  aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST);
%s  return 0;
}
""" % calls


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    ctoolkit.require_compilers()
    directory = tmp_path_factory.mktemp("sites")
    return build_all([Program("many_leaks", many_leaks_program())], directory)


def counting_addr2line(directory) -> tuple:
    """(environment changes, log): both addr2line commands, each writing a line to the log per run."""
    tools = directory / "counting"
    tools.mkdir(exist_ok=True)
    log = directory / "addr2line.log"
    for name in ("addr2line", "llvm-addr2line"):
        real = shutil.which(name)
        if real is not None:
            (tools / name).write_text('#!/bin/sh\necho run >> "%s"\nexec "%s" "$@"\n' % (log, real))
            (tools / name).chmod(0o755)
    return {"PATH": "%s:%s" % (tools, os.environ.get("PATH", ""))}, log


# ------------------------------------------------------------------------------------------------
# The cost of looking lines up


def test_with_the_leak_check_off_exit_looks_no_line_up(built, tmp_path):
    """Whether anything was left at exit was learnt by making every leak's line, each of its frames an
    addr2line process of its own, with nothing to print (seconds for a few hundred leaks)."""
    changes, log = counting_addr2line(tmp_path)
    done = run(built["many_leaks"], NPUEMU_LEAK_CHECK="0", **changes)
    assert done.returncode == 0 and "leak" not in done.stderr, done.stderr
    assert not log.exists(), "addr2line ran %d times with the leak check off" % len(log.read_text().splitlines())
