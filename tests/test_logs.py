"""Logs as the card's stack writes them (docs/logs.md): ASCEND_GLOBAL_LOG_LEVEL, ASCEND_SLOG_PRINT_TO_STDOUT,
ASCEND_PROCESS_LOG_PATH and plog lines.

1. Levels 0..4 each write exactly the lines at or above them (generated over the levels).
2. Every line matches plog's format: level, module, pid and process name, time to the microsecond,
   [file:line], the kernel's thread id, the call; modules ASCENDCL, OP, RUNTIME, NPUEMU.
3. ERROR: every failed call's message, as aclGetRecentErrMsg has it; sanitizer findings. WARNING: leaks.
   DEBUG: every call with its arguments (pointers and handles in hex, nullptr, lists) and its status.
4. Where lines go: stdout, the plog file under ASCEND_PROCESS_LOG_PATH or ~/ascend/log, or nowhere
   (and nothing attached) when none of the variables is set.
5. From C: the same lines, with the C program's name and arguments."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import aclnn_api as nn
import ctoolkit
import emulator
from emulator import hooks, log
from emulator import runtime as rt

LINE = re.compile(r"^\[(?P<level>DEBUG|INFO|WARNING|ERROR)\] (?P<module>ASCENDCL|OP|RUNTIME|NPUEMU)"
                  r"\((?P<pid>\d+),(?P<process>[^)]+)\):"
                  r"(?P<time>\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3}) "
                  r"\[(?P<origin>[\w.+-]+:\d+)\](?P<tid>\d+) (?P<function>\w+): (?P<text>.*)$")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
VARIABLES = (log.LEVEL_VARIABLE, log.STDOUT_VARIABLE, log.PATH_VARIABLE)


@pytest.fixture
def environment(monkeypatch, tmp_path):
    """Set the log variables (None: unset) and apply them, as a program's configure() does; HOME is a
    temporary directory, so that the default plog root is there."""
    monkeypatch.setenv("HOME", str(tmp_path))

    def set_variables(level=None, stdout=None, path=None):
        for name, value in zip(VARIABLES, (level, stdout, path)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, str(value))
        emulator.configure()
    yield set_variables
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    log.apply()


def parsed(text: str) -> list:
    """The lines of `text` that are log lines (each must match the format entirely)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("[") and "] " in line[:10]:
            match = LINE.match(line)
            assert match is not None, "not a plog line: %r" % line
            lines.append(match)
    return lines


def workload() -> str:
    """Calls that succeed and one that fails (aclrtMalloc of 0 bytes); the failure's message."""
    assert rt.aclrtSetDevice(0) == 0
    address, ret = rt.aclrtMalloc(64, 0)
    assert ret == 0
    assert rt.aclrtMalloc(0, 0) == (0, 100000)
    text = rt.aclGetRecentErrMsg()
    assert rt.aclrtFree(address) == 0
    assert rt.aclrtResetDevice(0) == 0
    return text.split(": ", 1)[1]  # without "[PID:n] time TITLE(code)"


# ------------------------------------------------------------------------------------------------
# 1. Levels


@pytest.mark.parametrize("level", range(5))
def test_each_level_writes_exactly_the_lines_at_or_above_it(level, environment, capsys):
    environment(level=level, stdout=1)
    message = workload()
    lines = parsed(capsys.readouterr().out)
    expected_levels = {"DEBUG": level <= 0, "INFO": level <= 1, "ERROR": level <= 3}
    for name, present in expected_levels.items():
        assert any(m["level"] == name for m in lines) == present, (name, [m.group(0) for m in lines])
    errors = [m for m in lines if m["level"] == "ERROR"]
    if level <= 3:
        assert [(m["module"], m["function"], m["text"]) for m in errors] == [
            ("ASCENDCL", "aclrtMalloc", "ErrCode=100000(ACL_ERROR_INVALID_PARAM), " + message.split(": ", 1)[1])]
    else:
        assert lines == []


@pytest.mark.parametrize("level, warned", [(2, True), (3, False)])
def test_leaks_are_warnings_and_findings_errors(level, warned, tmp_path):
    source = """
import numpy as np
from emulator import runtime as rt
rt.aclrtSetDevice(0)
stream, _ = rt.aclrtCreateStream()
address, _ = rt.aclrtMalloc(16, 0)
host = np.ones(4, np.float32)
rt.aclrtMemcpyAsync(address, 16, host.ctypes.data, 16, 1, stream)
rt.aclrtFree(address)                       # freed while the copy is queued: synccheck, then memcheck
rt.aclrtSynchronizeStream(stream)
rt.aclrtDestroyStream(stream)
leaked, _ = rt.aclrtMalloc(16, 0)           # never freed: leakcheck at exit
"""
    path = tmp_path / "leaky.py"
    path.write_text(source)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, log.LEVEL_VARIABLE: str(level), log.STDOUT_VARIABLE: "1"})
    lines = parsed(done.stdout)
    findings = [(m["level"], m["function"], m["text"].split(":")[0]) for m in lines if m["module"] == "NPUEMU"]
    assert ("ERROR", "memcheck", "invalid device access") in findings
    assert all(level == ("WARNING" if tool == "leakcheck" else "ERROR") for level, tool, _ in findings)
    assert (("WARNING", "leakcheck", "leak") in findings) == warned
    memcheck = next(m for m in lines if m["function"] == "memcheck")
    assert memcheck["origin"] == "leaky.py:8"  # where the faulting copy was launched
    assert "launched at %s:8 in <module>" % path in memcheck["text"]


# ------------------------------------------------------------------------------------------------
# 2-3. The lines


def test_every_line_has_plogs_format_with_this_process_and_thread(environment, capsys):
    environment(level=0, stdout=1)
    workload()
    lines = parsed(capsys.readouterr().out)
    assert len(lines) >= 12
    for m in lines:
        assert int(m["pid"]) == os.getpid()
        assert int(m["tid"]) == threading.get_native_id()
        assert m["process"] == open("/proc/self/comm").read().strip()
    malloc = [m for m in lines if m["function"] == "aclrtMalloc"]
    code = rt.aclrtMalloc.__wrapped__.__code__
    assert {m["origin"] for m in malloc} == {"runtime.py:%d" % code.co_firstlineno}
    assert [m["text"] for m in malloc if m["level"] == "DEBUG"] == [
        "start to execute aclrtMalloc(size=64, policy=0)", "aclrtMalloc returned 0 (ACL_SUCCESS)",
        "start to execute aclrtMalloc(size=0, policy=0)", "aclrtMalloc returned 100000 (ACL_ERROR_INVALID_PARAM)"]


def test_lines_from_another_thread_carry_its_id(environment, capsys):
    environment(level=3, stdout=1)
    ids = []

    def fail():
        ids.append(threading.get_native_id())
        rt.aclrtFree(None)
    thread = threading.Thread(target=fail)
    thread.start()
    thread.join()
    [line] = parsed(capsys.readouterr().out)
    assert int(line["tid"]) == ids[0] != threading.get_native_id()


def test_debug_shows_arguments_as_c_passes_them_and_tasks_with_their_stream(environment, capsys):
    environment(level=0, stdout=1)
    assert rt.aclrtSetDevice(0) == 0
    stream, _ = rt.aclrtCreateStream()
    buffers = [rt.aclrtMalloc(16, 0)[0] for _ in range(4)]
    host = np.arange(4, dtype=np.float32)
    for address in buffers:
        rt.aclrtMemcpy(address, 16, host.ctypes.data, 16, 1)
    tensors = [nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], address) for address in buffers]
    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[2], 1, False,
                                                                 tensors[3])
    assert ret == 0
    assert nn.aclnnKlDivBackward(None, size, executor, stream) == 0
    assert rt.aclrtSynchronizeStream(stream) == 0
    for tensor in tensors:
        nn.aclDestroyTensor(tensor)
    for address in buffers:
        rt.aclrtFree(address)
    rt.aclrtDestroyStream(stream)
    rt.aclrtResetDevice(0)
    lines = parsed(capsys.readouterr().out)
    starts = {m["function"]: m for m in lines if m["text"].startswith("start to execute")}
    assert starts["aclrtMemcpy"]["text"] == "start to execute aclrtMemcpy(dst=0x%x, destMax=16, src=0x%x, count=16, " \
                                           "kind=1)" % (buffers[3], host.ctypes.data)
    assert starts["aclCreateTensor"]["text"] == (
        "start to execute aclCreateTensor(view_dims=[4], data_type=0, strides=nullptr, offset=0, format=2, "
        "storage_dims=[4], tensor_data=0x%x)" % buffers[3])
    assert starts["aclnnKlDivBackwardGetWorkspaceSize"]["text"] == (
        "start to execute aclnnKlDivBackwardGetWorkspaceSize(gradOutput=0x%x, self=0x%x, target=0x%x, reduction=1, "
        "logTarget=false, out=0x%x)" % tuple(t.handle for t in tensors))
    assert starts["aclnnKlDivBackward"]["text"] == (
        "start to execute aclnnKlDivBackward(workspace=nullptr, workspaceSize=0, executor=0x%x, stream=0x%x)"
        % (executor.handle, stream))
    modules = {(m["function"], m["module"]) for m in lines}
    assert {("aclrtMemcpy", "ASCENDCL"), ("aclCreateTensor", "OP"), ("aclnnKlDivBackward", "OP"),
            ("aclDestroyTensor", "OP")} <= modules
    [task] = [m for m in lines if m["module"] == "RUNTIME"]
    assert task["level"] == "DEBUG" and task["function"] == "aclnnKlDivBackward"
    assert re.match(r"task aclnnKlDivBackward ran on stream 0x%x of device 0 in \d+\.\d us$" % stream, task["text"])
    order = [m["function"] for m in lines if m["module"] != "NPUEMU"]
    sync = order.index("aclrtSynchronizeStream")
    assert order[sync:sync + 3] == ["aclrtSynchronizeStream", "aclnnKlDivBackward", "aclrtSynchronizeStream"]


@pytest.mark.parametrize("value, shown", [
    (None, "nullptr"), (True, "true"), (7, "7"), (np.int64(9), "9"), (2.5, "2.5"), ("cfg.json", "'cfg.json'"),
    ([1, [2, None]], "[1, [2, nullptr]]"), (list(range(20)), "[%s, ... (4 more)]" % ", ".join(map(str, range(16)))),
    (len, "len")])
def test_arguments_are_shown_as_a_c_caller_passes_them(value, shown):
    assert log._argument("value", value) == shown


def test_pointer_parameters_are_hexadecimal_and_handles_whatever_their_name():
    assert log._argument("devPtr", 4096) == "0x1000"
    assert log._argument("size", 4096) == "4096"
    event, ret = 0, 1
    assert rt.aclrtSetDevice(0) == 0
    try:
        event, ret = rt.aclrtCreateEvent()
        assert ret == 0
        assert log._argument("anything", event) == "0x%x" % event
    finally:
        rt.aclrtDestroyEvent(event)
        rt.aclrtResetDevice(0)


def test_a_message_of_several_lines_is_one_line(environment, capsys):
    environment(level=3, stdout=1)
    from emulator import errors
    errors.record(100000, "aclrtMalloc", "first\nsecond")
    rt.aclGetRecentErrMsg()
    [line] = parsed(capsys.readouterr().out)
    assert line["text"] == "ErrCode=100000(ACL_ERROR_INVALID_PARAM), first | second"


def test_the_settings_line_names_the_chip_as_the_calls_report_it(environment, capsys):
    """The line showed the NPUEMU_SOC text as written (soc=ascend310p1) where every call says Ascend310P1."""
    environment(level=1, stdout=1)
    emulator.configure(soc="ascend310p1")
    line = [m for m in parsed(capsys.readouterr().out) if "settings in force" in m["text"]][-1]
    assert "soc=Ascend310P1," in line["text"] and rt.aclrtGetSocName() == "Ascend310P1"


def test_the_config_sections_aclinit_ignores_are_named_at_info(environment, capsys, tmp_path):
    """dump, profiler, max_opqueue_num... are accepted and not emulated: said once, at INFO."""
    path = tmp_path / "acl.json"
    path.write_text('{"dump": {"dump_path": 42}, "defaultDevice": {"default_device": 0}, "err_msg_mode": 7}')
    environment(level=1, stdout=1)
    assert rt.aclInit(str(path)) == 0
    assert rt.aclInit(str(path)) == 100002  # the repeat reads nothing new: no second line
    rt.aclGetRecentErrMsg()
    lines = [m for m in parsed(capsys.readouterr().out) if m["level"] == "INFO" and m["function"] == "aclInit"]
    assert [m["text"] for m in lines] == ['configPath: sections not emulated, accepted and ignored: "dump", '
                                          '"err_msg_mode"']


# ------------------------------------------------------------------------------------------------
# 4. Where lines go


def plogs(root) -> list:
    return sorted(glob.glob(os.path.join(str(root), "debug", "plog", "plog-*.log")))


@pytest.mark.parametrize("level, stdout, path, where, written", [
    (None, None, None, None, ()),                    # nothing set: nothing logged, nothing made
    (None, "0", None, None, ()),                     # not 1: not set
    (None, "1", None, "stdout", ("ERROR",)),         # the default level: 3
    (1, "1", "PATH", "stdout", ("INFO", "ERROR")),   # stdout wins: no file
    (None, None, "PATH", "PATH", ("ERROR",)),
    (2, None, "PATH", "PATH", ("ERROR",)),
    (0, None, None, "HOME", ("DEBUG", "INFO", "ERROR")),  # ~/ascend/log
    (4, "1", "PATH", None, ()),
    ("9", "1", None, "stdout", ("ERROR",)),          # unusable: the default, with a note
])
def test_lines_go_to_stdout_to_the_plog_file_or_nowhere(level, stdout, path, where, written, environment, capsys,
                                                       tmp_path):
    root = tmp_path / "logs"
    environment(level=level, stdout=stdout, path=str(root) if path else None)
    workload()
    captured = capsys.readouterr()
    home_root = tmp_path / "ascend" / "log"
    files = plogs(root) + plogs(home_root)
    if where == "stdout":
        text = captured.out
        assert files == []
    elif where is None:
        text = ""
        assert files == [] and parsed(captured.out) == []
        assert not root.exists() and not (tmp_path / "ascend").exists()
    else:
        assert parsed(captured.out) == []
        [file] = files
        assert file.startswith(str(root if where == "PATH" else home_root))
        assert re.search(r"/debug/plog/plog-%d_\d{17}\.log$" % os.getpid(), file), file
        log.current().sink.close()
        text = open(file, encoding="utf-8").read()
    assert {m["level"] for m in parsed(text)} == set(written)
    assert ("ASCEND_GLOBAL_LOG_LEVEL: expected 0 (debug)" in captured.err) == (level == "9")


def test_with_nothing_set_nothing_is_attached_and_at_error_only_messages_and_findings(environment):
    def attached():
        logger = log.current()
        return tuple(logger is not None and logger in observers
                     for observers in (hooks.CALLS, hooks.TASKS, hooks.MESSAGES, hooks.REPORTS))
    environment()
    assert log.current() is None and attached() == (False, False, False, False)
    environment(level=3, stdout=1)
    assert attached() == (False, False, True, True)
    environment(level=0, stdout=1)
    assert attached() == (True, True, True, True)
    environment(level=4, stdout=1)
    assert log.current() is None and attached() == (False, False, False, False)


def test_the_first_call_of_a_process_is_logged():
    done = subprocess.run([sys.executable, "-c", "from emulator import runtime as rt; rt.aclrtGetDeviceCount()"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, log.LEVEL_VARIABLE: "0", log.STDOUT_VARIABLE: "1"})
    lines = parsed(done.stdout)
    assert lines[0]["text"] == "start to execute aclrtGetDeviceCount()"
    assert lines[-1]["text"] == "aclrtGetDeviceCount returned 0 (ACL_SUCCESS)"


# ------------------------------------------------------------------------------------------------
# 5. From C

C_PROGRAM = r"""#include <cstdio>
#include "acl/acl.h"

int main() {
  aclrtSetDevice(0);
  void *buffer = nullptr;
  aclError ok = aclrtMalloc(&buffer, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  aclError bad = aclrtMalloc(nullptr, 64, ACL_MEM_MALLOC_HUGE_FIRST);  // rejected by the toolkit itself
  aclError zero = aclrtMemset(buffer, 64, 0, 0);
  std::printf("@ %d %d %d\n", ok, bad, zero);
  std::fflush(stdout);
  aclrtFree(buffer);
  aclrtResetDevice(0);
  return 0;
}
"""


@pytest.fixture(scope="module")
def c_program(tmp_path_factory):
    ctoolkit.require_compilers()
    return ctoolkit.compile_program(C_PROGRAM, tmp_path_factory.mktemp("logs_c"), "logged")


def run_c(executable: str, level: str) -> tuple:
    done = ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(
        ASCEND_GLOBAL_LOG_LEVEL=level, ASCEND_SLOG_PRINT_TO_STDOUT="1"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "@ 0 100000 0" in done.stdout.splitlines()
    return parsed(done.stdout)


def test_from_c_at_debug_every_call_with_its_c_arguments(c_program):
    lines = run_c(c_program, "0")
    assert {m["process"] for m in lines} == {"logged"}
    calls = [(m["function"], m["text"]) for m in lines if m["level"] == "DEBUG"]
    starts = [text for _, text in calls if text.startswith("start")]
    assert starts[:4] == ["start to execute aclrtSetDevice(deviceId=0)", "start to execute aclrtMalloc(size=64, policy=0)",
                          # rejected by the toolkit itself, before Python's aclrtMalloc: its C arguments
                          "start to execute aclrtMalloc(devPtr=nullptr, size=64, policy=0)",
                          "start to execute aclrtMemset(devPtr=0x%s, maxCount=64, value=0, count=0)"
                          % re.search(r"devPtr=0x([0-9a-f]+)", starts[3]).group(1)]
    assert starts[4].startswith("start to execute aclrtFree(devPtr=0x") and starts[5].startswith(
        "start to execute aclrtResetDevice(deviceId=0)")
    [error] = [m for m in lines if m["level"] == "ERROR"]
    assert (error["module"], error["function"]) == ("ASCENDCL", "aclrtMalloc")
    assert error["text"].startswith("ErrCode=100000(ACL_ERROR_INVALID_PARAM), ") and "devPtr" in error["text"]


def test_from_c_at_error_only_the_failing_calls_message(c_program):
    lines = run_c(c_program, "3")
    assert [(m["level"], m["module"], m["function"]) for m in lines] == [("ERROR", "ASCENDCL", "aclrtMalloc")]


# ------------------------------------------------------------------------------------------------
# 6. A log that cannot be written: one line on stderr, nothing logged, every call as without logs

LOGGING_PROGRAM = """
import os
import acl
statuses = [acl.init(), acl.rt.set_device(0)]
for _ in range(200):
    address, ret = acl.rt.malloc(64, 0)
    statuses += [ret, acl.rt.free(address), acl.rt.malloc(0, 0)[1]]  # a rejected call: an ERROR line
statuses += [acl.rt.reset_device(0), acl.finalize()]
os.write(2, ("statuses %s\\n" % sorted(set(statuses))).encode())
"""
CANNOT_LOG = "npuemu: cannot write the log to stdout (%s): nothing more is logged"


def run_logging(tmp_path, stdout: str) -> subprocess.CompletedProcess:
    """The program at DEBUG on stdout, which is `/dev/full`, closed, or a pipe whose reader is gone."""
    program = tmp_path / "logging.py"
    program.write_text(LOGGING_PROGRAM)
    env = {**os.environ, log.LEVEL_VARIABLE: "0", log.STDOUT_VARIABLE: "1"}
    command = [sys.executable, str(program)]
    if stdout == "pipe":
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        process.stdout.close()
        stderr = process.stderr.read().decode()
        return subprocess.CompletedProcess(command, process.wait(timeout=120), "", stderr)
    if stdout == "closed":
        return subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *command], capture_output=True, text=True,
                              timeout=120, env=env)
    with open(stdout, "w") as target:
        return subprocess.run(command, stdout=target, stderr=subprocess.PIPE, text=True, timeout=120, env=env)


@pytest.mark.parametrize("stdout,reason", [("/dev/full", "No space left on device"), ("closed", "Bad file descriptor"),
                                           ("pipe", "Broken pipe")])
def test_a_stdout_that_cannot_take_the_log_costs_one_line_on_stderr(stdout, reason, tmp_path):
    done = run_logging(tmp_path, stdout)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [CANNOT_LOG % reason, "statuses [0, 100000]"], done.stderr


def test_a_plog_file_that_cannot_be_written_costs_one_line_on_stderr(environment, tmp_path, capfd):
    environment(level=3, path=str(tmp_path / "logs"))
    assert rt.aclrtMalloc(0, 0)[1] == 100000  # the file is made and written
    sink = log.current().sink

    class Full:
        def write(self, *_):
            raise OSError(28, "No space left on device")
        flush = close = write

    sink.file = Full()
    assert [rt.aclrtMalloc(0, 0)[1] for _ in range(3)] == [100000] * 3
    assert rt.aclGetRecentErrMsg() is not None
    assert capfd.readouterr().err.splitlines() == [
        "npuemu: cannot write the plog file %s (No space left on device): nothing more is logged" % sink.path]


def test_from_c_a_log_that_cannot_be_written_is_no_internal_error(tmp_path):
    ctoolkit.require_compilers()
    program = ctoolkit.compile_program(r"""#include <cstdio>
        #include "acl/acl.h"

        int main() {
          aclError last = aclInit(nullptr);
          for (int i = 0; i < 400; i++) {
            void *p = nullptr;
            last = aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST);
          }
          std::fprintf(stderr, "last %d\n", last);
          return aclFinalize();
        }
    """, tmp_path, "full_log")
    env = ctoolkit.toolkit_environment(ASCEND_GLOBAL_LOG_LEVEL="3", ASCEND_SLOG_PRINT_TO_STDOUT="1")
    with open("/dev/full", "w") as full:
        done = subprocess.run([program], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [CANNOT_LOG % "No space left on device", "last 100000"], done.stderr
