"""How the package is found: from the repository root (editable install), and what a checkout
without built kernels says."""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy
import pytest

from support import TESTS_THE_CHECKOUT

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_python(code: str, cwd, env=None, flags=()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not TESTS_THE_CHECKOUT, reason="the package under test is installed elsewhere, not "
                    "editable from this checkout: the checkout's sources hold no kernels")
def test_import_from_the_repository_root_finds_the_kernels():
    result = run_python("import acl, aclnn_api; from aclnn_api import _kernels; print(aclnn_api.__file__)", ROOT)
    assert result.returncode == 0, result.stderr
    assert pathlib.Path(result.stdout.strip()).resolve().parent == ROOT / "aclnn_api"


def test_a_tree_without_built_kernels_says_so(tmp_path):
    for package in ("emulator", "acl", "aclnn_api"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    # -S: no site-packages hooks (the editable install's finder); NumPy's directory by hand.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(pathlib.Path(numpy.__file__).parent.parent)]))
    assert run_python("import acl", tmp_path, env, flags=("-S",)).returncode == 0  # the runtime needs no kernels
    result = run_python("import aclnn_api", tmp_path, env, flags=("-S",))
    assert result.returncode != 0
    assert "kernels not built: run `make install`" in result.stderr
    assert "circular import" not in result.stderr


def test_the_runtime_package_imports_none_of_the_layers_built_on_it():
    import ast
    for path in sorted((ROOT / "emulator").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            assert not any(n.split(".")[0] in ("acl", "aclnn_api") for n in names), (path.name, names)


def test_npuemu_info_names_the_kernels_through_their_entry_point():
    result = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, NPUEMU_THREADS="1", NPUEMU_VECTOR_ISA="avx2"))
    assert result.returncode == 0, result.stderr
    line = [l for l in result.stdout.splitlines() if l.startswith("kernels")][0]
    assert "1 thread(s)" in line and "avx2" in line, line
