"""The README's example is a program users will paste: it must run and print what it says."""
import os
import re
import subprocess
import sys

from support import REPO


def test_readme_example_runs_and_prints_the_documented_values(tmp_path):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        example = re.findall(r"```python\n(.*?)```", handle.read(), re.S)[0]
    done = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)  # not the checkout: import the installed package
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.26894143 0.11920292 0.04742587 0.01798621]"
    assert "leak" not in done.stderr


def _python_sources():
    """(name, code) of every program users copy: the README's examples and the samples."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        for number, block in enumerate(re.findall(r"```python\n(.*?)```", handle.read(), re.S)):
            if not block.lstrip().startswith(">>>"):
                yield "README.md example %d" % number, block
    samples = os.path.join(REPO, "samples")
    for name in sorted(os.listdir(samples)):
        if name.endswith(".py"):
            with open(os.path.join(samples, name), encoding="utf-8") as handle:
                yield name, handle.read()


def test_examples_keep_the_host_arrays_they_pass_as_pointers_alive():
    """`numpy_to_ptr(np.ones_like(x))` hands out the address of a temporary that is freed before the
    copy reads it; the examples pass only arrays held by a name."""
    import ast
    for name, code in _python_sources():
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "numpy_to_ptr", "numpy_contiguous_to_ptr", "bytes_to_ptr"):
                argument = node.args[0]
                assert isinstance(argument, (ast.Name, ast.Attribute, ast.Subscript)), \
                    "%s line %d: a temporary passed as a pointer" % (name, node.lineno)
