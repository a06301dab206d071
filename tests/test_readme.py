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
