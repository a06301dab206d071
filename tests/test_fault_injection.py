"""Fault injection (docs/faults.md): NPUEMU_FAULTS, emulator.configure(faults=...) and
emulator.inject_faults() make the N-th call of a named API, or the N-th task of a name, fail.

1. Every spec form picks the right calls: #N, #N+, #N-M, no number, `*`, several entries, whitespace;
   codes by number, hexadecimal and name. Generated over several runtime and aclnn calls and codes.
2. A failing call does not run, returns the code (null for a creator) and leaves a message naming the
   injection; a failing task fails its synchronisation, naming the injection and the launch line, and
   writes nothing.
3. Counting: per spec, from when it is applied, across threads (exactly one N-th); the context
   manager nests and restores; the same NPUEMU_FAULTS keeps its counts, a new one restarts.
4. A malformed spec is a ConfigError naming NPUEMU_FAULTS (or inject_faults), the entry, what was
   expected and what was found; from the environment, the first call's 100000 / 161002.
5. Nothing is attached without a spec.
6. From C: a program built against the toolkit sees the codes, the messages and NULL."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import aclnn_api as nn
import ctoolkit
import emulator
from emulator import hooks, injection
from emulator import runtime as rt

HERE = os.path.abspath(__file__)


def message() -> str:
    return rt.aclGetRecentErrMsg() or ""


def line_of(marker: str) -> int:
    """The line of this file that ends with the comment `# @marker`."""
    with open(HERE, encoding="utf-8") as file:
        lines = [n for n, text in enumerate(file.read().splitlines(), 1) if text.endswith("# @" + marker)]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


class Device:
    """Device 0 with a stream and four float tensors of four values; released by close()."""

    def __init__(self):
        assert rt.aclrtSetDevice(0) == 0
        self.stream, ret = rt.aclrtCreateStream()
        assert ret == 0
        self.host = np.arange(4, dtype=np.float32) + 1
        self.buffers, self.tensors = [], []
        for _ in range(4):
            address, ret = rt.aclrtMalloc(16, 0)
            assert ret == 0
            assert rt.aclrtMemcpy(address, 16, self.host.ctypes.data, 16, 1) == 0
            self.buffers.append(address)
            self.tensors.append(nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], address))
        self.made: list = []  # (release, handle) of what the calls under test made

    def read(self, index: int) -> np.ndarray:
        out = np.zeros(4, dtype=np.float32)
        assert rt.aclrtMemcpy(out.ctypes.data, 16, self.buffers[index], 16, 2) == 0
        return out

    def close(self) -> None:
        for release, handle in reversed(self.made):
            release(handle)
        for tensor in self.tensors:
            nn.aclDestroyTensor(tensor)
        for address in self.buffers:
            rt.aclrtFree(address)
        rt.aclrtDestroyStream(self.stream)
        rt.aclrtResetDevice(0)


@pytest.fixture
def device():
    opened = Device()
    yield opened
    opened.close()


# ------------------------------------------------------------------------------------------------
# 1-2. The calls, the forms, the codes

NULL = "null"  # what a creator (a call whose C form returns a pointer) gives when it fails


@dataclass
class Case:
    """A public call made once by `call(device)`: its status, or "null"/0 for a creator."""
    name: str
    call: Callable
    code: str  # as the spec gives it

    def __str__(self) -> str:
        return "%s=%s" % (self.name, self.code)


def _made(device, release, outputs, ret):
    if ret == 0:
        device.made.append((release, outputs))
    return ret


def _malloc(device):
    address, ret = rt.aclrtMalloc(64, 0)
    return _made(device, rt.aclrtFree, address, ret)


def _stream(device):
    stream, ret = rt.aclrtCreateStream()
    return _made(device, rt.aclrtDestroyStream, stream, ret)


def _event(device):
    event, ret = rt.aclrtCreateEvent()
    return _made(device, rt.aclrtDestroyEvent, event, ret)


def _device_count(device):
    return rt.aclrtGetDeviceCount()[1]


def _memset(device):
    return rt.aclrtMemset(device.buffers[0], 16, 0, 16)


def _int_array(device):
    array = nn.aclCreateIntArray([2, 3])
    if array is None:
        return NULL
    device.made.append((nn.aclDestroyIntArray, array))
    return 0


def _tensor(device):
    tensor = nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, [4], device.buffers[0])
    if tensor is None:
        return NULL
    device.made.append((nn.aclDestroyTensor, tensor))
    return 0


def _first_phase(device):
    t = device.tensors
    _, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(t[0], t[1], t[2], 0, False, t[3])
    return _made(device, nn.aclDestroyAclOpExecutor, executor, ret)


CASES = [
    Case("aclrtMalloc", _malloc, "207001"),
    Case("aclrtCreateStream", _stream, "ACL_ERROR_RT_NO_STREAM_RESOURCE"),
    Case("aclrtCreateEvent", _event, "0x7BFFB"),  # 507899
    Case("aclrtGetDeviceCount", _device_count, "acl_error_rt_drv_internal_error"),
    Case("aclrtMemset", _memset, "107000"),
    Case("aclCreateIntArray", _int_array, "561103"),
    Case("aclCreateTensor", _tensor, "ACLNN_ERR_INNER_NULLPTR"),
    Case("aclnnKlDivBackwardGetWorkspaceSize", _first_phase, "161002"),
]


def code_value(text: str) -> int:
    return injection._code(text, "test")


def outcome(case: Case, code: int):
    """What the call returns when the injection makes it fail."""
    return NULL if case.call in (_int_array, _tensor) else code


def run_calls(case: Case, device, count: int) -> tuple:
    """(statuses, messages) of `count` calls."""
    statuses, messages = [], []
    for _ in range(count):
        statuses.append(case.call(device))
        messages.append(message())
    return statuses, messages


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("n", [1, 3])
def test_the_nth_call_of_a_named_api_fails_with_the_code_and_says_it_was_injected(case, n, device):
    code = code_value(case.code)
    spec = "%s#%d=%s" % (case.name, n, case.code)
    with emulator.inject_faults(spec) as plan:
        statuses, messages = run_calls(case, device, 4)
    assert statuses == [outcome(case, code) if i == n else 0 for i in range(1, 5)], messages
    failed = messages[n - 1]
    assert ("%s: injected fault: call #%d of %s fails with %d %s (inject_faults: %s)"
            % (case.name, n, case.name, code, injection.calls.code_name(code), spec)) in failed
    assert not any("injected" in text for i, text in enumerate(messages) if i != n - 1), messages
    assert plan.injected == [injection.Injection(spec, case.name, n, code)]
    assert plan.count(case.name) == 4


@pytest.mark.parametrize("case", CASES[:3] + CASES[5:6], ids=str)
def test_a_spec_from_configure_counts_from_when_it_is_applied(case):
    code = code_value(case.code)
    made_by_setup = {"aclrtMalloc": 4, "aclrtCreateStream": 1}.get(case.name, 0)
    spec = "%s#%d=%s" % (case.name, made_by_setup + 2, case.code)
    emulator.configure(faults=spec)
    device = Device()  # its own calls (aclrtMalloc, aclrtCreateStream) count too
    try:
        statuses, messages = run_calls(case, device, 3)
        assert statuses == [0, outcome(case, code), 0], messages
        assert "(NPUEMU_FAULTS: %s)" % spec in messages[1]
    finally:
        device.close()


FORMS = [  # spec ({X}: the call, {C} and {D}: codes) -> the calls of six that fail, with their code
    ("{X}#3={C}", {3: "C"}),
    ("{X}#3+={C}", {3: "C", 4: "C", 5: "C", 6: "C"}),
    ("{X}#2-4={C}", {2: "C", 3: "C", 4: "C"}),
    ("{X}={C}", {i: "C" for i in range(1, 7)}),
    ("  {X} # 3 - 4 =  {C} , ", {3: "C", 4: "C"}),
    ("{X}#5={C}, {X}#2={D}", {2: "D", 5: "C"}),
    ("{X}#2+={C}, {X}#4={D}", {i: "C" for i in range(2, 7)}),  # the first entry that covers a call gives its code
    ("*#4={C}", {4: "C"}),
    ("task:*#1={C},  {X}#6={D}", {6: "D"}),
]


@pytest.mark.parametrize("case", [CASES[3], CASES[5]], ids=str)
@pytest.mark.parametrize("form, failing", FORMS, ids=[form for form, _ in FORMS])
def test_each_spec_form_makes_exactly_its_calls_fail(case, form, failing, device):
    codes = {"C": "507000", "D": "ACL_ERROR_RT_FAILURE"} if case.name.startswith("aclrt") else \
        {"C": "561000", "D": "ACLNN_ERR_RUNTIME_ERROR"}
    spec = form.format(X=case.name, **codes)
    with emulator.inject_faults(spec) as plan:
        statuses, messages = run_calls(case, device, 6)
    expected = [outcome(case, code_value(codes[failing[i]])) if i in failing else 0 for i in range(1, 7)]
    assert statuses == expected, (spec, messages)
    assert [injected.ordinal for injected in plan.injected] == sorted(failing)
    for i in failing:
        assert "fails with %d " % code_value(codes[failing[i]]) in messages[i - 1]


def test_a_failing_call_does_not_run(device):
    with emulator.inject_faults("aclrtMemset=107000, aclrtFree=107000"):
        assert rt.aclrtMemset(device.buffers[0], 16, 0, 16) == 107000
        assert rt.aclrtFree(device.buffers[1]) == 107000
    assert device.read(0).tolist() == device.host.tolist()  # not set
    assert device.read(1).tolist() == device.host.tolist()  # still allocated


def test_a_runtime_code_becomes_the_last_error_and_the_error_manager_title():
    with emulator.inject_faults("aclrtGetDeviceCount#1=ACL_ERROR_RT_MEMORY_ALLOCATION"):
        assert rt.aclrtGetDeviceCount() == (0, 207001)
    assert rt.aclrtGetLastError() == 207001
    assert re.search(r"ACL_ERROR_RT_MEMORY_ALLOCATION\(207001\): aclrtGetDeviceCount: injected fault: ", message())


# ------------------------------------------------------------------------------------------------
# 2. Tasks


def _launch_kl_div(device) -> int:
    t = device.tensors
    size, executor, ret = nn.aclnnKlDivBackwardGetWorkspaceSize(t[0], t[1], t[2], 0, False, t[3])
    assert ret == 0
    return nn.aclnnKlDivBackward(None, size, executor, device.stream)  # @launch


@pytest.mark.parametrize("code", ["507015", "107020", "ACL_ERROR_RT_DRV_INTERNAL_ERROR"])
@pytest.mark.parametrize("n", [1, 2])
def test_an_injected_task_fails_its_synchronisation_naming_the_injection_and_the_launch_line(code, n, device):
    value = code_value(code)
    spec = "%s:aclnnKlDivBackward#%d=%s" % ("task" if n == 1 else "TASK", n, code)  # the word in any case
    results = []
    with emulator.inject_faults(spec) as plan:
        for _ in range(3):
            rt.aclrtMemcpy(device.buffers[3], 16, device.host.ctypes.data, 16, 1)  # the output, reset
            assert _launch_kl_div(device) == 0  # the launch itself succeeds
            ret = rt.aclrtSynchronizeStream(device.stream)
            results.append((ret, message(), device.read(3).tolist()))
    computed = [r[2] for i, r in enumerate(results) if i != n - 1]
    assert all(values == computed[0] for values in computed) and computed[0] != device.host.tolist()
    for i, (ret, text, values) in enumerate(results, 1):
        if i != n:
            assert ret == 0 and "injected" not in text, text
            continue
        assert ret == value, text
        assert values == device.host.tolist()  # it did not run: the output was not written
        assert "aclrtSynchronizeStream: the device raised an exception while running queued work: injected fault " \
               "in aclnnKlDivBackward on stream 0x" in text
        assert "launched at %s:%d in _launch_kl_div" % (HERE, line_of("launch")) in text
        assert "task #%d of aclnnKlDivBackward fails with %d %s (inject_faults: %s); it did not run" % (
            n, value, injection.calls.code_name(value), spec) in text
    assert plan.count("aclnnKlDivBackward", task=True) == 3
    assert plan.injected == [injection.Injection(spec, "aclnnKlDivBackward", n, value, task=True)]


def test_an_injected_async_copy_does_not_land_and_later_work_still_runs(device):
    zeros = np.zeros(4, dtype=np.float32)
    with emulator.inject_faults("task:aclrtMemcpyAsync#1=507015"):
        assert rt.aclrtMemcpyAsync(device.buffers[0], 16, zeros.ctypes.data, 16, 1, device.stream) == 0
        assert rt.aclrtMemcpyAsync(device.buffers[1], 16, zeros.ctypes.data, 16, 1, device.stream) == 0
        assert rt.aclrtSynchronizeStream(device.stream) == 507015
    text = message()
    assert "injected fault in aclrtMemcpyAsync(16 bytes)" in text and "task #1 of aclrtMemcpyAsync" in text
    assert device.read(0).tolist() == device.host.tolist()
    assert device.read(1).tolist() == [0, 0, 0, 0]
    assert rt.aclrtSynchronizeStream(device.stream) == 0  # reported once


def test_in_eager_mode_the_injected_task_is_reported_at_the_next_synchronisation():
    emulator.configure(execution="eager", faults="task:aclrtMemsetAsync#1=507015")
    device = Device()
    try:
        assert rt.aclrtMemsetAsync(device.buffers[0], 16, 0, 16, device.stream) == 0  # it ran (and failed) here
        assert rt.aclrtSynchronizeStream(device.stream) == 507015
        assert "(NPUEMU_FAULTS: task:aclrtMemsetAsync#1=507015)" in message()
        assert device.read(0).tolist() == device.host.tolist()
    finally:
        device.close()


# ------------------------------------------------------------------------------------------------
# 3. Counting


def count_calls(n: int) -> list:
    return [rt.aclrtGetDeviceCount()[1] for _ in range(n)]


def test_nested_blocks_add_their_entries_and_the_previous_ones_are_in_force_after():
    with emulator.inject_faults("aclrtGetDeviceCount#2+=507000") as outer:
        first = count_calls(1)
        with emulator.inject_faults("aclrtGetDeviceCount#1-2=507899, aclrtCreateEvent=107000") as inner:
            middle = count_calls(3)
            assert rt.aclrtCreateEvent() == (0, 107000)
        last = count_calls(2)
        assert inner.count("aclrtGetDeviceCount") == 3
    assert first == [0]
    assert middle == [507899, 507899, 507000]  # the innermost spec wins; the outer one counted them
    assert last == [507000, 507000]
    assert outer.count("aclrtGetDeviceCount") == 6
    assert [i.ordinal for i in outer.injected] == [4, 5, 6]
    assert [(i.name, i.ordinal) for i in inner.injected] == [("aclrtGetDeviceCount", 1), ("aclrtGetDeviceCount", 2),
                                                             ("aclrtCreateEvent", 1)]
    assert count_calls(3) == [0, 0, 0]  # nothing in force any more
    assert injection.OBSERVER not in hooks.CALLS


def test_blocks_left_in_another_order_than_entered_remove_their_own_entries():
    first = emulator.inject_faults("aclrtGetDeviceCount#1+=507000").start()
    second = emulator.inject_faults("aclrtGetDeviceCount#1+=507899").start()
    first.stop()
    assert count_calls(1) == [507899]
    second.stop()
    assert count_calls(1) == [0]


@pytest.mark.parametrize("form, failures", [("#37=507899", 1), ("#61+=507899", 40), ("#10-19=507899", 10)])
def test_calls_of_every_thread_count_once_each(form, failures):
    statuses: list = []
    lock = threading.Lock()

    def work():
        mine = count_calls(25)
        with lock:
            statuses.extend(mine)
    with emulator.inject_faults("aclrtGetDeviceCount" + form) as plan:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(statuses) == 100 and statuses.count(507899) == failures and statuses.count(0) == 100 - failures
    assert plan.count("aclrtGetDeviceCount") == 100
    assert len(plan.injected) == failures


def test_the_same_setting_again_keeps_its_counts_and_a_new_one_restarts_them():
    emulator.configure(faults="aclrtGetDeviceCount#3=507899")
    assert count_calls(2) == [0, 0]
    emulator.configure(faults="aclrtGetDeviceCount#3=507899", threads=1)  # the same spec: counting goes on
    assert count_calls(2) == [507899, 0]
    emulator.configure(faults="aclrtGetDeviceCount#2=507899 ")  # another spec: from 1 again
    assert count_calls(3) == [0, 507899, 0]
    emulator.configure(faults="")
    assert count_calls(3) == [0, 0, 0]


def test_a_plan_cannot_be_in_force_twice():
    plan = emulator.inject_faults("aclrtGetDeviceCount#1=507899")
    with plan:
        with pytest.raises(ValueError, match="already in force"):
            plan.start()
    with plan:  # again, counting from 1
        assert count_calls(1) == [507899]


# ------------------------------------------------------------------------------------------------
# 4. Malformed specs

MALFORMED = [  # spec, what the message says
    ("aclrtMalloc#3", "entry 1 'aclrtMalloc#3': expected NAME#N=CODE, NAME#N+=CODE, NAME#N-M=CODE, NAME=CODE, or "
                      "task:NAME#N=CODE, found no '=CODE' in 'aclrtMalloc#3'"),
    ("aclrtMalloc#x=207001", "found 'x' after '#' (expected a call number N, N+ or N-M)"),
    ("aclrtMalloc#0=207001", "expected a call number N >= 1 (calls count from 1), found 0"),
    ("aclrtMalloc#3-2=207001", "expected a range N-M with M >= N, found 3-2"),
    ("aclrtMaloc#1=207001", "expected the C name of a public call that returns a status or a pointer"),
    ("aclrtMaloc#1=207001", "found 'aclrtMaloc': did you mean aclrtMalloc?"),
    ("aclGetRecentErrMsg#1=207001", "found 'aclGetRecentErrMsg'"),
    ("aclrtMalloc#1=0", "expected CODE, a non-zero status in [1, 2147483647] (0 is success), found 0"),
    ("aclrtMalloc#1=ACL_ERROR_NOPE", "expected CODE, a non-zero status (e.g. 207001 or "
                                     "ACL_ERROR_RT_MEMORY_ALLOCATION), found 'ACL_ERROR_NOPE'"),
    ("aclrtFree#1=107000, task:aclrtMalloc#1=507015", "entry 2 'task:aclrtMalloc#1=507015': expected a task name ("),
    ("task:aclnnKlDivBackwardGetWorkspaceSize#1=1", "did you mean aclnnKlDivBackward?"),
    ("aclrtMalloc#1=207001 aclrtFree#1=1", "found '207001 aclrtFree#1=1' after '=' (one CODE per entry: entries "
                                           "are separated by commas)"),
    ("aclrtMalloc#1= ", "found no CODE after '=' in 'aclrtMalloc#1='"),
    ("task:aclrtMemcpyAsync#2+=507015,,aclrtMalloc#-1=1", "entry 3 'aclrtMalloc#-1=1': expected NAME#N=CODE"),
]


@pytest.mark.parametrize("spec, words", MALFORMED)
def test_a_malformed_spec_is_a_config_error_naming_the_entry_what_was_expected_and_found(spec, words):
    with pytest.raises(emulator.ConfigError) as raised:
        emulator.inject_faults(spec)
    assert str(raised.value).startswith("inject_faults: entry ")
    assert words in str(raised.value)
    with pytest.raises(emulator.ConfigError) as raised:
        emulator.configure(faults=spec)
    assert str(raised.value).startswith("NPUEMU_FAULTS: entry ")
    assert words in str(raised.value)
    # a rejected setting is not applied: the settings in force stay as they were
    assert emulator.settings().faults == ""
    assert rt.aclrtGetDeviceCount() == (8, 0)


def run_python(source: str, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done


PROGRAM = """
from emulator import runtime as rt
import aclnn_api as nn
print(rt.aclrtGetDeviceCount()[1])
print(rt.aclGetRecentErrMsg())
print(nn.aclCreateIntArray([1]) is None)
print(rt.aclrtGetDeviceCount()[1])
"""


def test_the_environment_spec_counts_the_first_call_of_the_process():
    done = run_python(PROGRAM, NPUEMU_FAULTS="aclrtGetDeviceCount#1=507899")
    status, text, null, second = done.stdout.splitlines()
    assert (status, null, second) == ("507899", "False", "0")
    assert text.endswith("aclrtGetDeviceCount: injected fault: call #1 of aclrtGetDeviceCount fails with 507899 "
                         "ACL_ERROR_RT_DRV_INTERNAL_ERROR (NPUEMU_FAULTS: aclrtGetDeviceCount#1=507899)")


def test_a_malformed_environment_spec_is_the_first_calls_invalid_parameter_status_with_the_message():
    done = run_python(PROGRAM, NPUEMU_FAULTS="aclrtGetDeviceCount#1")
    status, text, null, second = done.stdout.splitlines()
    assert (status, null, second) == ("100000", "True", "100000")
    assert text.endswith("ACL_ERROR_INVALID_PARAM(100000): aclrtGetDeviceCount: NPUEMU_FAULTS: entry 1 "
                         "'aclrtGetDeviceCount#1': expected NAME#N=CODE, NAME#N+=CODE, NAME#N-M=CODE, NAME=CODE, "
                         "or task:NAME#N=CODE, found no '=CODE' in 'aclrtGetDeviceCount#1'")


# ------------------------------------------------------------------------------------------------
# 5. Nothing attached without a spec


def test_nothing_is_attached_without_a_spec_and_only_what_a_spec_needs_with_one():
    def attached():
        return injection.OBSERVER in hooks.CALLS, injection.OBSERVER in hooks.TASKS
    assert attached() == (False, False)
    with emulator.inject_faults("aclrtMalloc#1=207001"):
        assert attached() == (True, False)
        with emulator.inject_faults("task:aclrtMemsetAsync#1=507015"):
            assert attached() == (True, True)
        assert attached() == (True, False)
    with emulator.inject_faults(" , "):
        assert attached() == (False, False)
    emulator.configure(faults="task:aclnnKlDivBackward=507015")
    assert attached() == (False, True)
    emulator.configure(faults="")
    assert attached() == (False, False)


# ------------------------------------------------------------------------------------------------
# 6. From C

C_PROGRAM = r"""#include <cstdio>
#include "acl/acl.h"
#include "aclnnop/aclnn_kl_div_backward.h"

static void show(const char *what, int ret) {
  const char *text = aclGetRecentErrMsg();
  std::printf("@%s %d %s\n", what, ret, text ? text : "(none)");
  std::fflush(stdout);
}

int main() {
  show("setdevice", aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  show("stream", aclrtCreateStream(&stream));
  void *buffers[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    show("malloc", aclrtMalloc(&buffers[i], 64, ACL_MEM_MALLOC_HUGE_FIRST));
  }
  show("malloc-null", aclrtMalloc(nullptr, 64, ACL_MEM_MALLOC_HUGE_FIRST));  // the C layer's own rejection
  float host[4] = {1, 2, 3, 4};
  show("copy", aclrtMemcpyAsync(buffers[0], 64, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE, stream));  // @copy
  show("sync", aclrtSynchronizeStream(stream));
  int64_t shape[1] = {4};
  aclTensor *tensor = aclCreateTensor(shape, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, shape, 1, buffers[0]);
  show(tensor == nullptr ? "tensor-null" : "tensor", 0);
  if (tensor != nullptr) aclDestroyTensor(tensor);
  for (int i = 0; i < 3; ++i) {
    if (buffers[i] != nullptr) aclrtFree(buffers[i]);
  }
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  return 0;
}
"""


@pytest.fixture(scope="module")
def c_program(tmp_path_factory):
    ctoolkit.require_compilers()
    return ctoolkit.compile_program(C_PROGRAM, tmp_path_factory.mktemp("faults_c"), "faults", flags=("-g",))


def run_c(executable: str, spec: str) -> list:
    done = ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(NPUEMU_FAULTS=spec))
    assert done.returncode == 0, done.stdout + done.stderr
    return [line[1:].split(" ", 2) for line in done.stdout.splitlines() if line.startswith("@")]


def test_from_c_the_nth_call_returns_the_code_and_the_message(c_program):
    lines = run_c(c_program, "aclrtMalloc#2=207001")
    assert [(what, ret) for what, ret, _ in lines if what == "malloc"] == [("malloc", "0"), ("malloc", "207001"),
                                                                           ("malloc", "0")]
    text = lines[3][2]
    assert re.match(r"\[PID:\d+\] \S+ ACL_ERROR_RT_MEMORY_ALLOCATION\(207001\): aclrtMalloc: injected fault: call "
                    r"#2 of aclrtMalloc fails with 207001 ACL_ERROR_RT_MEMORY_ALLOCATION \(NPUEMU_FAULTS: "
                    r"aclrtMalloc#2=207001\)$", text), text
    assert all(ret == "0" for what, ret, _ in lines if what not in ("malloc", "malloc-null"))


def test_from_c_a_call_the_c_layer_rejects_counts_and_an_injected_fault_comes_first_as_in_python(c_program):
    """aclrtMalloc(nullptr, ...) never reaches Python's aclrtMalloc, but it is the 4th call all the same;
    a fault injected into it wins over the null, as a fault injected into a bad Python call does."""
    lines = {what: (ret, text) for what, ret, text in run_c(c_program, "")}
    assert lines["malloc-null"][0] == "100000" and "devPtr" in lines["malloc-null"][1]
    lines = {what: (ret, text) for what, ret, text in run_c(c_program, "aclrtMalloc#4=207001")}
    assert lines["malloc-null"][0] == "207001", lines["malloc-null"]
    assert "injected fault: call #4 of aclrtMalloc" in lines["malloc-null"][1]


def test_from_c_a_creator_made_to_fail_returns_null(c_program):
    lines = run_c(c_program, "aclCreateTensor=ACLNN_ERR_INNER_NULLPTR")
    assert ("tensor-null", "0") in [(what, ret) for what, ret, _ in lines]
    text = dict((what, text) for what, _, text in lines)["tensor-null"]
    assert "aclCreateTensor: injected fault: call #1 of aclCreateTensor fails with 561103 ACLNN_ERR_INNER_NULLPTR" \
           in text


def test_from_c_an_injected_task_fails_the_synchronisation_naming_the_c_line(c_program):
    lines = dict((what, (ret, text)) for what, ret, text in run_c(c_program, " task:aclrtMemcpyAsync#1 = 507015 "))
    assert lines["copy"][0] == "0"
    ret, text = lines["sync"]
    line = next(n for n, t in enumerate(C_PROGRAM.splitlines(), 1) if t.endswith("// @copy"))
    assert ret == "507015", text
    assert "injected fault in aclrtMemcpyAsync(16 bytes)" in text
    assert "launched at %s.cpp:%d in main" % (c_program, line) in text
    assert "task #1 of aclrtMemcpyAsync fails with 507015 ACL_ERROR_RT_AICORE_EXCEPTION" in text


def test_from_c_a_malformed_spec_is_the_first_calls_invalid_parameter_status(c_program):
    lines = run_c(c_program, "aclrtMalloc#2=")
    what, ret, text = lines[0]
    assert (what, ret) == ("setdevice", "100000")
    assert "aclrtSetDevice: NPUEMU_FAULTS: entry 1 'aclrtMalloc#2=': expected NAME#N=CODE" in text
