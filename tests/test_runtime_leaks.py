"""Leak reports (docs/runtime.md, "Sites and leaks"): aclFinalize and interpreter exit name every resource the
program never released (device and host memory, contexts, streams, events, tensors, arrays, scalars,
executors) with the user's source line that made it; a clean program reports nothing."""
import os
import re
import shlex
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import acl
import aclnn_api as nn
import emulator
from support import run_program

LEAKY_BODY = """\
import acl, aclnn_api as nn
acl.init()
acl.rt.set_device(0)
memory, _ = acl.rt.malloc(100, 0)
host, _ = acl.rt.malloc_host(100)
stream, _ = acl.rt.create_stream()
event, _ = acl.rt.create_event()
context, _ = acl.rt.create_context(1)
tensor = nn.aclCreateTensor([5], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, memory)
array = nn.aclCreateIntArray([1, 2])
scalar = nn.aclCreateScalar(1.5, nn.ACL_FLOAT)
size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(tensor, tensor, tensor, tensor)
"""
# kind of resource -> the call on the line that must be named
EXPECTED = {"device memory": "acl.rt.malloc(", "host memory": "acl.rt.malloc_host(", "stream": "create_stream(",
            "event": "create_event(", "context": "create_context(", "aclTensor": "aclCreateTensor(",
            "aclIntArray": "aclCreateIntArray(", "aclScalar": "aclCreateScalar(",
            "aclOpExecutor": "GetWorkspaceSize("}


def assert_each_leak_named_with_its_line(stderr: str, path: str, source: str, when: str) -> None:
    lines = source.splitlines()
    leaks = [line for line in stderr.splitlines() if line.startswith("npuemu: leak: ")]
    assert "never released at %s" % when in stderr, stderr
    for kind, call in EXPECTED.items():
        found = [line for line in leaks if line.startswith("npuemu: leak: %s " % kind)]
        assert len(found) == 1, "%s: %s" % (kind, stderr)
        site = re.search(r"made at (.+?):(\d+) in ", found[0])
        assert site and site.group(1) == path, found[0]
        assert call in lines[int(site.group(2)) - 1], "%s is reported at the wrong line: %s" % (kind, found[0])
    assert len(leaks) == len(EXPECTED), stderr


def test_finalize_reports_every_unreleased_resource_with_its_line_once(tmp_path):
    program = LEAKY_BODY + "print(acl.finalize(), acl.finalize())\n"
    done, path = run_program(program, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", str(acl.ACL_ERROR_REPEAT_FINALIZE)]
    assert_each_leak_named_with_its_line(done.stderr, path, program, "aclFinalize")
    assert "at exit" not in done.stderr, "what aclFinalize reported is not reported again at exit"


def test_interpreter_exit_reports_what_a_program_never_released(tmp_path):
    done, path = run_program(LEAKY_BODY, tmp_path)
    assert done.returncode == 0, done.stderr
    assert_each_leak_named_with_its_line(done.stderr, path, LEAKY_BODY, "exit")


CLEAN_PROGRAM = """\
import numpy as np, acl, aclnn_api as nn
acl.init()
acl.rt.set_device(0)
context, _ = acl.rt.create_context(0)
stream, _ = acl.rt.create_stream()
start, _ = acl.rt.create_event()
host, _ = acl.rt.malloc_host(16)
data = np.arange(4, dtype=np.float32)
memory, _ = acl.rt.malloc(16, 0)
acl.rt.memcpy(memory, 16, acl.util.numpy_to_ptr(data), 16, 1)
tensor = nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, memory)
array, scalar = nn.aclCreateIntArray([1]), nn.aclCreateScalar(2, nn.ACL_INT64)
size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(tensor, tensor, tensor, tensor)
nn.aclSetAclOpExecutorRepeatable(executor)
nn.aclnnLogSigmoidBackward(None, size, executor, stream)
acl.rt.record_event(start, stream)
acl.rt.synchronize_stream(stream)
acl.rt.memcpy(host, 16, memory, 16, 2)
print(acl.util.ptr_to_numpy(host, (4,), 11).astype(float).round(4).tolist())
nn.aclDestroyAclOpExecutor(executor)
nn.aclDestroyIntArray(array); nn.aclDestroyScalar(scalar); nn.aclDestroyTensor(tensor)
acl.rt.free(memory); acl.rt.free_host(host)
acl.rt.destroy_event(start); acl.rt.destroy_stream(stream); acl.rt.destroy_context(context)
acl.rt.reset_device(0)
acl.finalize()
"""


def test_a_clean_program_reports_nothing(tmp_path):
    done, _ = run_program(CLEAN_PROGRAM, tmp_path)
    assert done.returncode == 0, done.stderr
    expected = (np.arange(4) / (1 + np.exp(np.arange(4)))).round(4).tolist()
    assert done.stdout.strip() == str(expected)
    assert done.stderr == "", done.stderr


def test_leak_check_can_be_switched_off(capsys):
    emulator.configure(leak_check=False)
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    acl.rt.malloc(64, 0)
    nn.aclCreateIntArray([1])
    assert acl.finalize() == 0
    assert capsys.readouterr().err == ""


class _Watched(dict):
    """The handle table's live resources, counting how many of them a walk over them looks at."""
    looked_at = 0

    def items(self):
        self.looked_at += len(self)
        return super().items()

    def values(self):
        self.looked_at += len(self)
        return super().values()

    def __iter__(self):
        self.looked_at += len(self)
        return super().__iter__()


def test_finalize_looks_only_at_leaks_not_reported_yet_and_a_reported_one_may_still_be_released(
        capsys, monkeypatch):
    """An init/finalize cycle per test, each leaking a tensor: each aclFinalize reports its own cycle's
    leak, without a look at the leaks earlier ones reported (each aclFinalize walked all of them: 11 ms
    after 20000 cycles), and a leaked tensor destroyed later is released as any other."""
    from emulator.resource import HANDLES
    live = _Watched(HANDLES._live)
    monkeypatch.setattr(HANDLES, "_live", live)
    leaked = []
    for cycle in range(5):
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        memory, _ = acl.rt.malloc(64, 0)
        leaked.append(nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, memory))
        assert acl.rt.free(memory) == 0 and acl.rt.reset_device(0) == 0
        assert acl.finalize() == 0
        err = capsys.readouterr().err
        assert "npuemu: 1 resource(s) never released at aclFinalize" in err, (cycle, err)
        assert "aclTensor %s" % leaked[-1].describe() in err, (cycle, err)
    assert live.looked_at == 0
    assert acl.init() == 0
    assert [nn.aclDestroyTensor(tensor) for tensor in leaked] == [0] * 5
    assert all(tensor.handle not in live for tensor in leaked)
    assert acl.finalize() == 0
    assert capsys.readouterr().err == ""


def test_a_stream_released_only_by_destroy_context_is_reported(capsys):
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    context, _ = acl.rt.create_context(0)
    acl.rt.create_stream()                                     # in the created context, never destroyed
    assert acl.rt.destroy_context(context) == 0
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
    err = capsys.readouterr().err
    assert re.search(r"leak: stream 0x[0-9a-f]+ of device 0, made at [^<]+test_runtime_leaks.py:\d+ in .*\(released "
                     r"only by aclrtDestroyContext", err), err   # "stream stream 0x..." before


def test_streams_events_and_contexts_destroyed_out_of_order_leave_the_rest_reported_in_creation_order(capsys):
    """Context.streams/events and Device.contexts became insertion-ordered dicts (a destroy was a
    list.remove, O(live): destroying 30 000 events newest first took 3 s): what is left is still
    released, and reported, in the order it was made."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    default, _ = acl.rt.get_context()
    made = {"stream": [acl.rt.create_stream()[0] for _ in range(5)],
            "event": [acl.rt.create_event()[0] for _ in range(5)],
            "context": [acl.rt.create_context(0)[0] for _ in range(4)]}
    assert acl.rt.set_context(default) == 0
    for kind, destroy in (("stream", acl.rt.destroy_stream), ("event", acl.rt.destroy_event),
                          ("context", acl.rt.destroy_context)):
        for handle in (made[kind][-1], made[kind][1]):     # the newest, then one in the middle
            assert destroy(handle) == 0
        made[kind] = made[kind][:1] + made[kind][2:-1]
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0                               # the contexts left hold the device open till here
    err = capsys.readouterr().err
    for kind in ("stream", "event", "context"):
        reported = [int(handle, 16) for handle in re.findall(r"leak: %s (0x[0-9a-f]+) " % kind, err)]
        assert reported == made[kind], err


def test_a_leak_shows_the_short_call_stack_of_a_helper(capsys):
    def make_stream():
        return acl.rt.create_stream()[0]
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    make_stream()
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
    err = capsys.readouterr().err
    assert re.search(r"made at [^<]+test_runtime_leaks.py:\d+ in make_stream <- [^<]+test_runtime_leaks.py:\d+ in "
                     r"test_a_leak_shows_the_short_call_stack_of_a_helper", err), err


def test_a_leak_record_names_where_it_was_made_and_the_resource(capsys):
    """emulator.reports() had the leak's line as its message only: no site, no resource."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    made_at = sys._getframe().f_lineno - 1
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
    capsys.readouterr()
    (record,) = [found for found in emulator.reports() if found.kind == "leak"]
    ((role, site),) = record.sites
    assert role == "made" and str(site).startswith("%s:%d in %s" % (
        __file__, made_at, "test_a_leak_record_names_where_it_was_made_and_the_resource")), site
    assert [str(resource) for resource in record.resources] == ["stream 0x%x of device 0" % stream], record
    assert record.message.startswith("stream 0x%x of device 0, made at %s " % (stream, site)), record.message


def test_memory_released_only_by_reset_device_is_reported(capsys):
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    acl.rt.malloc(64, 0)
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
    err = capsys.readouterr().err
    assert re.search(r"leak: device memory .* made at [^<]+test_runtime_leaks.py:\d+ in .*\(released only by "
                     r"aclrtResetDevice\(0\)", err), err


def test_a_leak_in_a_loop_prints_the_first_lines_and_counts_the_rest(tmp_path):
    program = ("import acl, aclnn_api as nn\nacl.init()\n"
               "arrays = [nn.aclCreateIntArray([i]) for i in range(250)]\nacl.finalize()\n")
    done, path = run_program(program, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "npuemu: 250 resource(s) never released at aclFinalize:" in done.stderr
    assert len([line for line in done.stderr.splitlines() if line.startswith("npuemu: leak: ")]) == 100
    assert "npuemu: ... and 150 more" in done.stderr


def test_a_leak_report_shares_its_lines_among_the_kinds_and_counts_the_rest_by_kind(capsys):
    """The report printed the first 100 leaks, all of one kind when a loop leaked many (the stream leaked
    beside them went unseen), and "... and N more" said nothing of what the rest were."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    streams = [acl.rt.create_stream()[0] for _ in range(3)]
    memory = [acl.rt.malloc(64, 0)[0] for _ in range(60)]
    arrays = [nn.aclCreateIntArray([i]) for i in range(150)]
    assert acl.rt.reset_device(0) == 0
    assert acl.finalize() == 0
    err = capsys.readouterr().err
    shown = [line.split()[2] for line in err.splitlines() if line.startswith("npuemu: leak: ")]
    assert "npuemu: 213 resource(s) never released at aclFinalize:" in err, err
    assert (shown.count("stream"), shown.count("device"), shown.count("aclIntArray")) == (3, 48, 49), err
    assert "npuemu: ... and 113 more: 101 aclIntArray, 12 device memory\n" in err, err
    assert "stream 0x%x " % streams[0] in err and "0x%x (64 bytes)" % memory[0] in err, "the first of each kind"
    assert len(arrays) == 150


@pytest.mark.parametrize("leak_check", [True, False])
def test_a_leak_is_described_only_when_the_report_prints_it(capsys, leak_check):
    """A reset formatted the line of every resource it released for the program (a site's text walks its
    code's line table: 100 000 leaked allocations made aclrtResetDevice take 3.4 s), even with the leak
    check off. Now the line is made when the report is: never with the check off."""
    emulator.configure(leak_check=leak_check)
    described = []

    def description():
        described.append(1)
        return "0x1234 of device 0"
    emulator.leaks.orphaned("stream", description, "prog.py:1 in main", "aclrtResetDevice(0)")
    assert described == [], "described when released"
    assert acl.init() == 0
    assert acl.finalize() == 0
    assert described == ([1] if leak_check else [])
    assert ("leak: stream 0x1234 of device 0, made at prog.py:1 in main (released only by aclrtResetDevice(0))"
            in capsys.readouterr().err) == leak_check


def test_the_leaks_a_report_does_not_print_are_counted_not_described(capsys):
    """250 leaks: the report prints 100 of them and counts the others. It described and published every
    one (aclFinalize took 26 s for 400 000 leaks); now only the 100 printed are described, and one record
    counts the others, so emulator.reports() and the summary still count all 250."""
    described = []

    def description():
        described.append(1)
        return "0x1234 of device 0"
    for _ in range(250):
        emulator.leaks.orphaned("stream", description, "prog.py:1 in main", "aclrtResetDevice(0)")
    assert acl.init() == 0
    assert acl.finalize() == 0
    err = capsys.readouterr().err
    assert len(described) == 100
    assert err.count("npuemu: leak: stream 0x1234 of device 0, made at prog.py:1 in main") == 100, err
    assert "npuemu: 250 resource(s) never released at aclFinalize:" in err and "... and 150 more: 150 stream\n" in err
    leaks = [found for found in emulator.reports() if found.kind == "leak"]
    assert sum(found.count for found in leaks) == 250 and len(leaks) == 2, leaks
    assert leaks[1].message == "150 more stream never released at aclFinalize (counted, not listed)"
    assert "(250 leak)" in emulator.report.summary()


def test_a_leak_report_stderr_cannot_take_costs_the_text_never_the_call(tmp_path):
    """stderr closed or full: aclFinalize still returns 0 (not 507000), as the sanitizer's reports."""
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent("""
        import os
        import acl
        acl.init()
        acl.rt.set_device(0)
        acl.rt.malloc(64, 0)
        ret = acl.finalize()
        os.write(1, ("%r %r\\n" % (ret, acl.get_recent_err_msg())).encode())
    """))
    for stderr in ("closed", "/dev/full"):
        redirect = "2>&-" if stderr == "closed" else "2>/dev/full"
        done = subprocess.run("%s %s %s" % (shlex.quote(sys.executable), shlex.quote(str(program)), redirect),
                              shell=True, capture_output=True, text=True, timeout=120)
        assert done.stdout == "0 None\n", (stderr, done.stdout, done.returncode)


def test_a_forked_child_that_never_used_npuemu_does_nothing_at_exit(tmp_path):
    """It reported the parent's allocation as its own leak, and exited with NPUEMU_SANITIZE_EXITCODE."""
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent("""
        import os
        import sys
        import acl
        acl.init()
        acl.rt.set_device(0)
        address, _ = acl.rt.malloc(64, 0)
        child = os.fork()
        if child == 0:
            sum(range(1000))  # host work only
            sys.exit(0)
        _, status = os.waitpid(child, 0)
        print("child", os.waitstatus_to_exitcode(status), flush=True)
        acl.rt.free(address)
        acl.rt.reset_device(0)
        acl.finalize()
    """))
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NPUEMU_SANITIZE_EXITCODE": "9"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "child 0\n", "")
