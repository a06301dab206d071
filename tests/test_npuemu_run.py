"""`npuemu run [OPTIONS] [--] PROGRAM ARGS` (emulator/launcher.py, docs/run.md): Python scripts and C programs
run under the options' settings, in the toolkit's environment for executables; the exit status is the
program's (or the sanitizer's), 128+N for a signal, 127 for a missing program, 2 for a bad option."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ctoolkit


def npuemu_run(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([*ctoolkit.npuemu_command(), "run", *args], capture_output=True, text=True, timeout=120,
                          cwd=None if cwd is None else str(cwd), env=clean_environment() if env is None else env)


def clean_environment() -> dict:
    """This environment without NPUEMU_* settings (the options under test set them)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("NPUEMU_")}


def script(directory, text: str, name: str = "program.py") -> str:
    path = os.path.join(str(directory), name)
    with open(path, "w", encoding="utf-8") as file:
        file.write(textwrap.dedent(text))
    return path


SETTINGS_SCRIPT = """
    import os
    import sys
    import acl
    import emulator
    settings = emulator.settings()
    print(acl.rt.get_soc_name(), settings.device_count, settings.execution, settings.sanitize, sys.argv[1:])
    sys.exit(int(os.environ.get("EXIT_WITH", "0")))
"""

LEAKING_SCRIPT = """
    import sys
    import acl
    acl.init()
    acl.rt.set_device(0)
    address, ret = acl.rt.malloc(64, 0)
    assert ret == 0
    if "--free" in sys.argv:
        acl.rt.free(address)
    acl.rt.reset_device(0)
    acl.finalize()
"""


def test_a_script_runs_with_the_settings_and_its_exit_code(tmp_path):
    path = script(tmp_path, SETTINGS_SCRIPT)
    done = npuemu_run("--soc", "Ascend310P", "--devices", "2", "--execution", "eager", "--sanitize", "memcheck",
                      "--", path, "-v", "--soc", "x", env={**clean_environment(), "EXIT_WITH": "3"})
    assert done.returncode == 3, done.stderr
    assert done.stdout.split("\n")[0] == "Ascend310P3 2 eager memcheck ['-v', '--soc', 'x']"
    done = npuemu_run(path, cwd=tmp_path)  # no `--`, no option: the environment's settings
    assert (done.returncode, done.stdout.split(" ")[0]) == (0, "Ascend910B3"), done.stderr


def test_a_shebang_script_runs_with_this_interpreter(tmp_path):
    path = script(tmp_path, "#!/usr/bin/env python3\n" + textwrap.dedent(SETTINGS_SCRIPT), name="tool")
    done = npuemu_run("--soc", "Ascend910", "./tool", cwd=tmp_path)  # not executable: it is read as Python
    assert (done.returncode, done.stdout.split(" ")[0]) == (0, "Ascend910A"), done.stderr


def test_error_exitcode_is_the_status_of_a_program_that_reported(tmp_path):
    path = script(tmp_path, LEAKING_SCRIPT)
    done = npuemu_run("--error-exitcode", "9", path)
    assert done.returncode == 9, done.stderr
    assert "npuemu: leak: device memory" in done.stderr and "SUMMARY: 1 report(s) (1 leak)" in done.stderr
    done = npuemu_run("--error-exitcode", "9", path, "--free")
    assert (done.returncode, done.stderr) == (0, "")


def test_faults_make_the_programs_call_fail(tmp_path):
    path = script(tmp_path, """
        import acl
        acl.init()
        acl.rt.set_device(0)
        first, ret1 = acl.rt.malloc(64, 0)
        second, ret2 = acl.rt.malloc(64, 0)
        print(ret1, ret2)
        acl.rt.free(second)
        acl.rt.reset_device(0)
        acl.finalize()
    """)
    done = npuemu_run("--faults", "aclrtMalloc#1=207001", path)
    assert (done.returncode, done.stdout) == (0, "207001 0\n"), done.stderr


def test_bad_options_stop_before_the_program_starts(tmp_path):
    marker = tmp_path / "started"
    path = script(tmp_path, "open(%r, 'w').close()\n" % str(marker))
    for option, value, message in (
            ("--sanitize", "bogus", "npuemu run: NPUEMU_SANITIZE: expected one of off, memcheck, full, found 'bogus'"),
            ("--soc", "Ascend123", "npuemu run: NPUEMU_SOC: "),
            ("--error-exitcode", "300", "npuemu run: NPUEMU_SANITIZE_EXITCODE: expected an exit code in [0, 255]"),
            ("--devices", "two", "npuemu run: NPUEMU_DEVICE_COUNT: expected an integer, found 'two'"),
            ("--faults", "aclrtMaloc#1=207001", "npuemu run: NPUEMU_FAULTS: "),
            ("--trace", str(tmp_path), "npuemu run: NPUEMU_TRACE: expected a file in an existing directory, found "
                                       "%r, a directory" % str(tmp_path))):
        done = npuemu_run(option, value, path)
        assert done.returncode == 2 and done.stderr.startswith(message), (option, done.stderr)
        assert not marker.exists()
    done = npuemu_run("--sanitize", "full")
    assert done.returncode == 2 and "expected a program to run" in done.stderr


def test_a_relative_trace_from_a_deleted_current_directory_is_a_bad_option(tmp_path):
    """`npuemu run --trace t.json` where the current directory was deleted printed a traceback (os.getcwd)
    and exited 1: now a one-line message and status 2, before the program starts; `npuemu` itself, with
    NPUEMU_TRACE=t.json, shows its settings."""
    marker = tmp_path / "started"
    path = script(tmp_path, "open(%r, 'w').close()\n" % str(marker))
    gone = tmp_path / "gone"
    gone.mkdir()
    in_gone = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    # npuemu as `python -m emulator`: in a checkout whose path has a space, pip's console script is a /bin/sh
    # trampoline, and dash says "getcwd() failed" on stderr in a deleted directory before npuemu runs
    npuemu = [sys.executable, "-m", "emulator"]
    done = subprocess.run(["bash", "-c", in_gone, "bash", str(gone), *npuemu, "run", "--trace", "t.json", path],
                          capture_output=True, text=True, timeout=120, env=clean_environment())
    assert done.returncode == 2 and not marker.exists(), done.stderr
    assert done.stderr.splitlines() == [
        "npuemu run: NPUEMU_TRACE: expected a file in an existing directory, found 't.json', relative to a current "
        "directory that cannot be found (No such file or directory: deleted?): give an absolute path"], done.stderr
    gone.mkdir()
    done = subprocess.run(["bash", "-c", in_gone, "bash", str(gone), *npuemu], capture_output=True, text=True,
                          timeout=120, env={**clean_environment(), "NPUEMU_TRACE": "t.json"})
    assert done.returncode == 0 and "trace          t.json" in done.stdout and done.stderr == "", done.stderr


NO_TEMPORARY_DIRECTORY = """import sys, tempfile
from emulator.__main__ import main
tempfile.tempdir = sys.argv[1]  # as when TMPDIR, /tmp, /var/tmp and the current directory are all unusable
sys.exit(main(["run", *sys.argv[2:]]))
"""


def test_error_exitcode_without_a_usable_temporary_directory_runs_the_program_with_a_note(tmp_path):
    """`npuemu run --error-exitcode N` made its directory of reports with tempfile.mkdtemp, and with no
    usable temporary directory ended in a traceback, status 1, the program never run. Now the program
    runs and exits with N itself; a note says what cannot be seen (docs/run.md)."""
    path = script(tmp_path, LEAKING_SCRIPT)
    done = subprocess.run([sys.executable, "-c", NO_TEMPORARY_DIRECTORY, str(tmp_path / "missing"), "--error-exitcode",
                           "9", path], capture_output=True, text=True, timeout=120, env=clean_environment())
    assert done.returncode == 9, done.stderr
    assert "Traceback" not in done.stderr and "npuemu: leak: device memory" in done.stderr, done.stderr
    assert done.stderr.startswith("npuemu run: note: --error-exitcode: no temporary directory is usable (No such file "
                                  "or directory): a program that ends without its exit work"), done.stderr


def test_missing_programs_signals_and_files_that_cannot_run(tmp_path):
    done = npuemu_run(str(tmp_path / "missing.py"))
    assert done.returncode == 127 and "missing.py: no such file or program" in done.stderr
    done = npuemu_run("npuemu-no-such-program-anywhere")
    assert done.returncode == 127 and "npuemu-no-such-program-anywhere: no such file or program" in done.stderr
    data = tmp_path / "data.txt"
    data.write_text("not a program\n")
    done = npuemu_run(str(data))
    assert done.returncode == 126 and "not executable" in done.stderr
    done = npuemu_run("--", "sh", "-c", "kill -TERM $$")
    assert done.returncode == 128 + 15, done.stderr


def test_a_bare_name_of_a_file_in_the_current_directory_runs_that_file(tmp_path):
    """As run.md says, not the program of that name in PATH (`test` is /usr/bin/test), nor "No such file"."""
    for name in ("test", "my-program"):
        path = tmp_path / name
        path.write_text("#!/bin/sh\necho \"this is ./%s $1\"\nexit 4\n" % name)
        path.chmod(0o755)
        done = npuemu_run(name, "arg", cwd=tmp_path)
        assert (done.returncode, done.stdout) == (4, "this is ./%s arg\n" % name), done.stderr
    done = npuemu_run("sh", "-c", "exit 6", cwd=tmp_path)  # a bare name found nowhere here: PATH's
    assert done.returncode == 6, done.stderr


SKIPS_ITS_EXIT_WORK = """
    import os
    import signal
    import sys
    import numpy as np
    import acl
    import emulator
    acl.init()
    acl.rt.set_device(0)
    stream, _ = acl.rt.create_stream()
    host = np.ones(4, np.float32)
    device, _ = acl.rt.malloc(16, 0)
    acl.rt.memcpy_async(device, 16, host.ctypes.data, 16, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream)
    acl.rt.memcpy(host.ctypes.data, 16, device, 16, acl.ACL_MEMCPY_DEVICE_TO_HOST)  # never synchronised
    if "--checked" in sys.argv:
        emulator.report.clear()  # a harness that delivered the reports itself (the pytest fixture)
    if sys.argv[-1] == "term":
        os.kill(os.getpid(), signal.SIGTERM)
    os._exit(int(sys.argv[-1]))  # exit functions skipped: NPUEMU_SANITIZE_EXITCODE's included
"""


def test_error_exitcode_holds_for_a_program_that_skips_its_exit_work(tmp_path):
    path = script(tmp_path, SKIPS_ITS_EXIT_WORK)
    done = npuemu_run("--error-exitcode", "9", path, "0")
    assert done.returncode == 9, done.stderr
    assert "npuemu: synccheck: missing synchronisation" in done.stderr
    assert npuemu_run("--error-exitcode", "9", path, "3").returncode == 9
    assert npuemu_run(path, "3").returncode == 3  # without the option: the program's status
    assert npuemu_run("--error-exitcode", "9", path, "--checked", "0").returncode == 0
    assert npuemu_run("--error-exitcode", "9", path, "term").returncode == 128 + 15  # a signal says more


INTERRUPTED = """
    import os
    import signal
    import time
    import acl
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell may start us with SIGINT ignored
    acl.init()
    acl.rt.set_device(0)
    address, _ = acl.rt.malloc(1 << 20, 0)
    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends
    time.sleep(5)
"""


def test_a_python_program_interrupted_by_ctrl_c_ends_with_130_even_with_error_exitcode(tmp_path):
    """It reported its live memory as leaks at exit and exited with N (9); docs/run.md's table says 128+N
    for a program that died of a signal, reports or not. The leaks are still reported."""
    done = npuemu_run("--error-exitcode", "9", script(tmp_path, INTERRUPTED))
    assert done.returncode == 128 + 2, done.stderr
    assert "KeyboardInterrupt" in done.stderr and "leak" in done.stderr and "SUMMARY" in done.stderr, done.stderr


def test_error_exitcode_holds_for_a_c_program_that_ends_with_exit_(tmp_path):
    ctoolkit.require_compilers()
    program = ctoolkit.compile_program(r"""
        #include <unistd.h>
        #include "acl/acl.h"

        int main()
        {
            void *address = nullptr;
            if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS ||
                aclrtMalloc(&address, 64, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
                _exit(10);
            }
            aclrtResetDevice(0);
            aclFinalize();  // reports the leak of `address`
            _exit(0);
        }
    """, tmp_path)
    env = {key: value for key, value in ctoolkit.untouched_environment().items() if not key.startswith("NPUEMU_")}
    done = npuemu_run("--error-exitcode", "9", program, env=env)
    assert done.returncode == 9, done.stdout + done.stderr
    assert "npuemu: leak: device memory" in done.stderr


def test_a_c_program_runs_without_sourcing_set_env(tmp_path):
    ctoolkit.require_compilers()
    program = ctoolkit.compile_program(r"""
        #include <cstdio>
        #include <cstdlib>
        #include <cstring>
        #include "acl/acl.h"

        int main(int argc, char **argv)
        {
            if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
                return 10;
            }
            void *address = nullptr;
            if (aclrtMalloc(&address, 64, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
                return 11;
            }
            std::printf("%s %s\n", aclrtGetSocName(), std::getenv("ASCEND_CUSTOM_PATH") ? "toolkit" : "no toolkit");
            if (argc < 2 || std::strcmp(argv[1], "leak") != 0) {
                aclrtFree(address);
            }
            aclrtResetDevice(0);
            aclFinalize();
            return argc > 2 ? std::atoi(argv[2]) : 0;
        }
    """, tmp_path)
    env = ctoolkit.untouched_environment()
    env = {key: value for key, value in env.items() if not key.startswith("NPUEMU_")}
    direct = subprocess.run([program], capture_output=True, text=True, timeout=120, env=env)
    assert direct.returncode != 0, "the program should not find libascendcl.so without the toolkit's environment"
    done = npuemu_run("--soc", "Ascend910_93", "--", program, "free", "5", env=env)
    assert (done.returncode, done.stdout) == (5, "Ascend910_9391 toolkit\n"), done.stderr
    done = npuemu_run("--error-exitcode", "9", program, "leak", env=env)
    assert done.returncode == 9, done.stdout + done.stderr
    assert "npuemu: leak: device memory" in done.stderr


def test_the_toolkit_environment_is_what_set_env_gives():
    from emulator import launcher
    root = ctoolkit.toolkit_root()
    env = launcher.toolkit_environment(ctoolkit.untouched_environment())
    assert env["LD_LIBRARY_PATH"].split(":")[0] == os.path.join(root, "lib64")
    assert env["ASCEND_CUSTOM_PATH"] == env["ASCEND_HOME_PATH"] == root


def test_npuemu_help_names_run():
    done = subprocess.run([*ctoolkit.npuemu_command(), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "{info,socs,run" in done.stdout
    done = subprocess.run([sys.executable, "-m", "emulator", "run", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "npuemu run [OPTIONS] [--] PROGRAM [ARGS...]" in done.stdout


def trace_argv(path) -> str:
    import json
    with open(str(path), encoding="utf-8") as file:
        return json.load(file)["otherData"]["argv"]


def test_the_trace_is_the_programs_whichever_way_it_is_asked_for(tmp_path):
    """NPUEMU_TRACE in the environment or --trace (with `~`, as NPUEMU_TRACE takes it): the file holds
    the program's trace, not an empty one of the `npuemu` process that ran it (whose exit came last)."""
    program = script(tmp_path, LEAKING_SCRIPT.replace("if \"--free\" in sys.argv:", "if True:"))
    traced = str(tmp_path / "from-environment.json")
    done = npuemu_run(program, env={**clean_environment(), "NPUEMU_TRACE": traced})
    assert done.returncode == 0, done.stderr
    assert trace_argv(traced).endswith("program.py")
    home = tmp_path / "home"
    home.mkdir()
    done = npuemu_run("--trace", "~/from-option.json", program, env={**clean_environment(), "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert trace_argv(home / "from-option.json").endswith("program.py")
    info = subprocess.run(ctoolkit.npuemu_command(), capture_output=True, text=True, timeout=120,
                          env={**clean_environment(), "NPUEMU_TRACE": traced})
    assert info.returncode == 0 and trace_argv(traced).endswith("program.py"), "`npuemu` rewrote the trace"


def test_npuemu_whose_reader_goes_away_ends_quietly():
    """`npuemu | head -1`: the status of a command whose pipe closed (128 + SIGPIPE), no traceback. (The
    reading end is closed before npuemu writes anything.)"""
    import signal
    process = subprocess.Popen(ctoolkit.npuemu_command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=clean_environment())
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 128 + signal.SIGPIPE and stderr == "", stderr


def test_a_python_interpreter_of_another_environment_named_as_the_program_gets_a_note(tmp_path):
    """`npuemu run -- python3 x.py` runs PATH's python3, as asked; when that is not the interpreter npuemu
    is installed in (which may lack npuemu), a note says so and how to run the script with npuemu's.
    npuemu's own interpreter, named so, gets no note."""
    path = script(tmp_path, "print('ran')\n")
    other = tmp_path / "elsewhere" / "python3"
    other.parent.mkdir()
    other.symlink_to(os.path.realpath(sys.executable))
    done = npuemu_run("--", str(other), path)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
    assert "npuemu run: note: %s" % other in done.stderr and "npuemu run -- script.py" in done.stderr, done.stderr
    done = npuemu_run("--", sys.executable, path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ran\n", ""), done.stderr
