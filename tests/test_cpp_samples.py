"""The C++ calling examples of samples/cpp, built against the toolkit (`python -m emulator toolkit
path`) with the documentation's steps: source set_env.sh, cmake, make, run from bin/. Each prints
exactly what its Python port in samples/ prints (those are checked against the documented values),
and both run under the whole sanitizer without a single report (a leak included)."""
import os
import shutil
import subprocess
import sys

import pytest

import ctoolkit
from support import REPO, SANITIZED, run_sample
from test_training_step import CHIPS, assert_every_pair_agrees

# cmake comes with the venv (the Makefile installs it there), as pytest does
VENV_BIN = os.path.dirname(sys.executable)
if shutil.which("cmake", path=VENV_BIN + os.pathsep + os.environ.get("PATH", "")) is None or shutil.which("g++") is None:
    pytest.skip("building the C++ samples needs cmake and g++", allow_module_level=True)

SAMPLES = ("binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_backward", "ctc_loss",
           "ctc_loss_backward", "kl_div", "kl_div_backward", "log_sigmoid", "log_sigmoid_forward",
           "log_sigmoid_backward", "scaled_masked_softmax", "scaled_masked_softmax_backward")
SOURCES = os.path.join(REPO, "samples", "cpp")
BUILD_TIMEOUT = 600
RUN_TIMEOUT = 120


def run(args, cwd, env, timeout=RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def toolkit_env() -> dict:
    """The environment a shell has after `source <toolkit>/set_env.sh` (with the venv's cmake first)."""
    env = ctoolkit.toolkit_environment()
    assert env.get("ASCEND_CUSTOM_PATH"), "set_env.sh does not set ASCEND_CUSTOM_PATH"
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    return env


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory, toolkit_env) -> str:
    """samples/cpp built once, as the documentation builds it: a copy of the directory, then
    `mkdir -p build; cd build; cmake ../ -DCMAKE_CXX_COMPILER=g++ -DCMAKE_SKIP_RPATH=TRUE; make`.
    Returns build/bin."""
    sources = tmp_path_factory.mktemp("cpp_samples") / "cpp"
    shutil.copytree(SOURCES, str(sources), ignore=shutil.ignore_patterns("build"))
    build = sources / "build"
    build.mkdir()
    done = run(["cmake", "../", "-DCMAKE_CXX_COMPILER=g++", "-DCMAKE_SKIP_RPATH=TRUE"], build, toolkit_env,
               BUILD_TIMEOUT)
    assert done.returncode == 0, "cmake failed:\n" + done.stdout + done.stderr
    # `make` as the documentation says, unless CMAKE_GENERATOR chose another build tool
    command = ["make"] if (build / "Makefile").exists() else ["cmake", "--build", "."]
    done = run(command, build, toolkit_env, BUILD_TIMEOUT)
    assert done.returncode == 0, " ".join(command) + " failed:\n" + done.stdout + done.stderr
    return str(build / "bin")


@pytest.mark.parametrize("name", SAMPLES)
def test_cpp_sample_prints_what_the_python_sample_prints_and_reports_nothing(bin_dir, toolkit_env, name):
    done = run(["./" + name], bin_dir, dict(toolkit_env, **SANITIZED))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    python = run_sample(name)
    assert python.returncode == 0, python.stdout + python.stderr
    assert python.stderr == "", python.stderr
    assert python.stdout.splitlines(), "samples/%s.py printed nothing" % name
    assert done.stdout.splitlines() == python.stdout.splitlines()


@pytest.mark.parametrize("soc", CHIPS)
def test_cpp_training_step_checks_every_gradient_against_finite_differences(bin_dir, toolkit_env, soc):
    """samples/cpp/training_step.cpp, the twin of samples/training_step.py (its random inputs and
    timings differ: the lines agree in their pairs and verdicts, skips included), on every chip."""
    done = run(["./training_step"], bin_dir, dict(toolkit_env, NPUEMU_SOC=soc, **SANITIZED))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    assert_every_pair_agrees(done.stdout, soc)


def test_documented_example_builds_with_the_gxx_one_liner(tmp_path, toolkit_env):
    shutil.copy(os.path.join(SOURCES, "log_sigmoid_backward.cpp"), str(tmp_path / "x.cpp"))
    one_liner = ('g++ -std=c++11 x.cpp -I "$ASCEND_CUSTOM_PATH/include" -I "$ASCEND_CUSTOM_PATH/include/aclnnop"'
                 ' -I "$ASCEND_CUSTOM_PATH/include/aclnn" -L "$ASCEND_CUSTOM_PATH/lib64" -lopapi_nn -lopapi_math'
                 ' -lascendcl -lnnopbase -o x')
    done = run(["bash", "-c", one_liner], tmp_path, toolkit_env, BUILD_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run(["./x"], tmp_path, toolkit_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["result[0] is: 0.268941", "result[1] is: 0.119203",
                                        "result[2] is: 0.047426", "result[3] is: 0.017986"]
    assert "leak" not in done.stderr.lower(), done.stderr
