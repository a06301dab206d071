"""How the package is found: from the repository root (editable install), and what a checkout
without built kernels says."""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_python(code: str, cwd, env=None, flags=()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


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
