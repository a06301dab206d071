"""npuemu's pytest plugin (emulator/pytest_plugin.py, docs/pytest.md): pytest runs small client test files
in a subprocess (pytester) and the outcomes are checked: a clean test passes, a test with a leak, a
report or an unsynchronised fault fails with it in the failure text, the next test starts fresh, the
marker and the command-line options choose the settings, expected reports pass."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from emulator.entry_points import entry_points

pytest_plugins = ["pytester"]

PLUGIN = "emulator.pytest_plugin"


def plugin_args() -> list:
    """`-p emulator.pytest_plugin` unless pytest loads it by itself (its pytest11 entry point is
    installed): the same module registered twice is an error."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return ["-p", PLUGIN]
    entries = entry_points("pytest11")
    return [] if any(entry.value.split(":")[0] == PLUGIN for entry in entries) else ["-p", PLUGIN]


@pytest.fixture
def client(pytester, monkeypatch):
    """Runs pytest on a client test file (HEADER + the source given; a fresh process each time, without the
    caller's NPUEMU_* settings)."""
    for name in list(os.environ):
        if name.startswith("NPUEMU_"):
            monkeypatch.delenv(name)

    def run(source: str, *args: str, name: str = "test_client"):
        path = pytester.makepyfile(**{name: HEADER + textwrap.dedent(source)})
        return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-rA", *args, str(path),
                                             timeout=120)
    return run


HEADER = """
import numpy as np
import pytest

import acl
import aclnn_api as nn
import emulator
from emulator import leaks
from emulator.state import PROCESS


def open_devices():
    return [device.id for device in PROCESS.devices if device.is_open]


def launch_on_freed_memory(stream):
    '''aclnnLogSigmoidBackward queued on `stream`, then its output freed: the kernel faults when it runs.'''
    host = np.ones(4, np.float32)
    buffers = [acl.rt.malloc(16, 0)[0] for _ in range(3)]
    for buffer in buffers:
        assert acl.rt.memcpy(buffer, 16, host.ctypes.data, 16, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    tensors = [nn.aclCreateTensor([4], nn.ACL_FLOAT, None, 0, nn.ACL_FORMAT_ND, None, b) for b in buffers]
    size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[1], tensors[2])
    assert ret == 0
    assert nn.aclnnLogSigmoidBackward(None, size, executor, stream) == 0
    for buffer in buffers:
        assert acl.rt.free(buffer) == 0
    return tensors


def destroy(tensors):
    for tensor in tensors:
        assert nn.aclDestroyTensor(tensor) == 0
"""


def failure_of(result, test: str) -> str:
    """The failure section of `test` in pytest's output, without the output pytest captured."""
    text = result.stdout.str()
    match = re.search(r"_{3,} %s _{3,}\n(.*?)(?=\n_{3,} \S[^\n]* _{3,}\n|\n={3,} [^\n]* ={3,}\n)" % re.escape(test),
                      text, re.S)
    assert match, "no failure section for %s in:\n%s" % (test, text)
    return re.split(r"\n-{3,} Captured ", match.group(1))[0]


def test_clean_tests_pass_leaks_fail_and_the_next_test_starts_fresh(client):
    result = client("""
        def test_clean(npu):
            assert acl.rt.get_device() == (0, 0) and acl.rt.get_context()[0] == npu.context
            address, ret = acl.rt.malloc(64, 0)
            assert ret == 0 and acl.rt.free(address) == 0
            assert acl.rt.synchronize_stream(npu.stream) == 0

        def test_leaks(npu):
            address, ret = acl.rt.malloc(100, 0)
            assert ret == 0

        def test_raises_and_leaves_everything_open(npu):
            assert acl.rt.set_device(1) == 0 and acl.rt.set_device(0) == 0
            assert acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE
            acl.rt.malloc(32, 0)
            raise RuntimeError("boom")

        def test_next_one_starts_fresh(npu):
            assert PROCESS.init_count == 1 and open_devices() == [0]
            assert acl.rt.get_device() == (0, 0)
            assert acl.get_recent_err_msg() is None
            assert npu.leaks() == [] or all("stream" in line for line in npu.leaks())
            assert emulator.reports() == []

        def test_plain_after_the_fixture():
            assert acl.init() == 0, acl.get_recent_err_msg()   # no 100002: the fixture finalized
            assert acl.rt.set_device(0) == 0                    # left set, the runtime initialised

        def test_fixture_after_a_plain_test_that_left_everything_open(npu):
            assert PROCESS.init_count == 1 and open_devices() == [0]
    """)
    result.assert_outcomes(passed=4, failed=2)
    leak = failure_of(result, "test_leaks")
    assert "npuemu: 1 finding(s) in this test (1 leak)" in leak
    assert re.search(r"npuemu: leakcheck: leak: device memory 0x[0-9a-f]+ \(100 bytes\) on device 0, made at "
                     r"\S*test_client.py:\d+ in test_leaks$", leak, re.M), leak
    raised = failure_of(result, "test_raises_and_leaves_everything_open")
    assert "RuntimeError: boom" in raised
    assert re.search(r"leak: device memory 0x[0-9a-f]+ \(32 bytes\) on device 0, made at \S*test_client.py:\d+ in "
                     r"test_raises_and_leaves_everything_open", raised), raised
    assert "FAILED test_client.py::test_leaks - npuemu: 1 finding(s) in this test (1 leak)" in result.stdout.str()


def test_a_fault_of_queued_work_fails_the_test_with_the_report(client):
    result = client("""
        @pytest.mark.npuemu(sanitize="off")
        def test_never_synchronised(npu):
            destroy(launch_on_freed_memory(npu.stream))

        def test_never_synchronised_sanitized(npu):
            destroy(launch_on_freed_memory(npu.stream))

        @pytest.mark.npuemu(sanitize="off")
        def test_synchronised_and_checked(npu):
            tensors = launch_on_freed_memory(npu.stream)
            assert acl.rt.synchronize_stream(npu.stream) == acl.ACL_ERROR_RT_AICORE_EXCEPTION
            assert "aclnnLogSigmoidBackward" in acl.get_recent_err_msg()
            destroy(tensors)
    """)
    result.assert_outcomes(passed=1, failed=2)
    plain = failure_of(result, "test_never_synchronised")
    assert "npuemu: device fault: queued work of device 0 failed and the test never synchronised it" in plain
    assert "returned 507015" in plain and "AI Core exception in aclnnLogSigmoidBackward" in plain
    sanitized = failure_of(result, "test_never_synchronised_sanitized")
    assert "AI Core exception" in sanitized and "aclnnLogSigmoidBackward" in sanitized


def test_reports_fail_the_test_unless_expected(client, monkeypatch):
    result = client("""
        def test_publishes(npu):
            emulator.report.publish("race", "racecheck", "a race made up by the test")

        def test_channel_is_empty_again(npu):
            assert emulator.reports() == []

        @pytest.mark.npuemu(expect_reports=("race",))
        def test_expects_a_race(npu):
            emulator.report.publish("race", "racecheck", "an expected race")

        @pytest.mark.npuemu(expect_reports="race")
        def test_expects_a_race_that_does_not_come(npu):
            pass

        @pytest.mark.npuemu(expect_reports=("race",))
        def test_expects_a_race_and_gets_a_leak_instead(npu):
            acl.rt.malloc(64, 0)

        @pytest.mark.npuemu(expect_reports=("race",))
        def test_expects_a_race_and_gets_another_report(npu):
            emulator.report.publish("race", "racecheck", "the expected race")
            emulator.report.publish("uninitialised read", "initcheck", "an unexpected read")

        def test_takes_the_reports(npu):
            emulator.report.publish("race", "racecheck", "a race checked by the test")
            emulator.report.publish("race", "racecheck", "a race checked by the test")
            taken = npu.take_reports("race")
            assert [(r.kind, r.message, r.count) for r in taken] == [("race", "a race checked by the test", 2)]
            assert npu.reports() == []

        @pytest.mark.npuemu(expect_reports=("leak",))
        def test_expects_a_leak(npu):
            acl.rt.malloc(64, 0)
            assert len(npu.leaks()) == 2  # the fixture's stream and this

        def test_plain_test_is_not_checked():
            assert acl.init() == 0 and acl.rt.set_device(0) == 0
            acl.rt.malloc(64, 0)  # a leak, but the plugin does not watch this test
            emulator.report.publish("race", "racecheck", "outside the fixture")
    """)
    result.assert_outcomes(passed=5, failed=4)
    assert "npuemu: racecheck: race: a race made up by the test" in failure_of(result, "test_publishes")
    # an expectation not met is said as such, not counted as a finding of a kind "missing race"
    missing = failure_of(result, "test_expects_a_race_that_does_not_come")
    assert missing.splitlines()[0] == "npuemu: expected a report of kind 'race' (expect_reports), found none"
    assert "finding(s)" not in missing and "missing race" not in missing, missing
    leaked = failure_of(result, "test_expects_a_race_and_gets_a_leak_instead").splitlines()
    assert leaked[0] == ("npuemu: 1 finding(s) in this test (1 leak); expected a report of kind 'race' "
                         "(expect_reports), found none"), leaked
    assert leaked[1].startswith("========= npuemu: leakcheck: leak: device memory"), leaked
    other = failure_of(result, "test_expects_a_race_and_gets_another_report")
    assert "initcheck: uninitialised read: an unexpected read" in other and "the expected race" not in other

    # the reports a passing test expected are not counted again at exit (NPUEMU_SANITIZE_EXITCODE)
    monkeypatch.setenv("NPUEMU_SANITIZE_EXITCODE", "9")
    result = client("""
        @pytest.mark.npuemu(expect_reports=("race", "leak"))
        def test_expected(npu):
            emulator.report.publish("race", "racecheck", "an expected race")
            acl.rt.malloc(64, 0)
    """, name="test_exit")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.stderr.str()


def test_the_marker_chooses_the_settings_and_they_are_restored(client):
    result = client("""
        @pytest.mark.npuemu(soc="Ascend310P", devices=2, execution="eager", sanitize="memcheck")
        def test_marker(npu):
            assert acl.rt.get_soc_name() == "Ascend310P3" == npu.soc_name
            assert acl.rt.get_device_count() == (2, 0) and npu.device_count == 2
            assert (emulator.settings().execution, emulator.settings().sanitize) == ("eager", "memcheck")
            second = npu.set_device(1)
            assert second.device_id == 1 and acl.rt.get_device() == (1, 0)
            assert acl.rt.get_context()[0] == second.context and second.context != npu.context
            address, ret = acl.rt.malloc(64, 0)
            assert ret == 0 and acl.rt.free(address) == 0
            assert npu.set_device(0).stream == npu.stream and acl.rt.get_device() == (0, 0)

        @pytest.mark.npuemu(devices=1)
        def test_one_device(npu):
            assert acl.rt.set_device(1) != 0
            acl.get_recent_err_msg()

        @pytest.mark.npuemu(soc="Ascend910")
        def test_marker_without_the_fixture():
            assert acl.rt.get_soc_name() == "Ascend910A"
            assert acl.rt.get_device() == (0, 0)

        @pytest.mark.npuemu(soc="Ascend910_93", execution="eager")
        class TestClass:
            def test_class_marker(self, npu):
                assert npu.soc_name == "Ascend910_9391" and npu.settings.execution == "eager"

            @pytest.mark.npuemu(soc="Ascend950")
            def test_closest_marker_wins(self, npu):
                assert npu.soc_name == "Ascend950PR" and npu.settings.execution == "eager"

        @pytest.mark.npuemu(soc="NoSuchChip")
        def test_bad_marker_value(npu):
            pass

        def test_plain_after():
            settings = emulator.settings()
            assert (settings.soc, settings.device_count, settings.execution, settings.sanitize) == (
                "Ascend910B", 8, "async", "full")
    """)
    result.assert_outcomes(passed=6, errors=1)
    assert re.search(r"ERROR at setup of test_bad_marker_value.*npuemu fixture: soc: .*NoSuchChip", result.stdout.str(),
                     re.S)


def test_command_line_and_ini_options(client, pytester):
    pytester.makeini("[pytest]\nnpuemu_soc = Ascend310P\nnpuemu_execution = eager\n")
    source = """
        def test_options(npu):
            settings = npu.settings
            assert (npu.soc_name, settings.device_count, settings.execution, settings.sanitize) == (
                "Ascend910_9391", 3, "eager", "off")

        @pytest.mark.npuemu(soc="Ascend950", devices=2)
        def test_marker_wins(npu):
            assert (npu.soc_name, npu.device_count, npu.settings.sanitize) == ("Ascend950PR", 2, "off")
    """
    result = client(source, "--npuemu-soc", "Ascend910_93", "--npuemu-devices", "3", "--npuemu-sanitize", "OFF")
    result.assert_outcomes(passed=2)
    result = client(source, "--npuemu-sanitize", "bogus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "npuemu: NPUEMU_SANITIZE: expected one of off, memcheck, full, found 'bogus'" in result.stderr.str()


def test_the_fixture_starts_from_the_environment_not_from_settings_a_plain_test_left(client):
    result = client("""
        def test_plain_configures():
            emulator.configure(soc="Ascend310P", sanitize="off")

        def test_fixture_after(npu):
            assert (npu.soc_name, npu.settings.sanitize) == ("Ascend910B3", "full")

        def test_plain_after_gets_its_settings_back():
            assert (emulator.settings().soc, emulator.settings().sanitize) == ("Ascend310P", "off")
    """)
    result.assert_outcomes(passed=3)


def test_a_chip_chosen_by_marker_or_option_keeps_the_environment_s_device_memory(client, monkeypatch):
    monkeypatch.setenv("NPUEMU_DEVICE_MEMORY", "1G")
    source = """
        def test_option(npu):
            assert (npu.soc_name, npu.settings.device_memory) == ("Ascend950PR", 1 << 30)

        @pytest.mark.npuemu(soc="Ascend310P")
        def test_marker(npu):
            assert (npu.soc_name, npu.settings.device_memory) == ("Ascend310P3", 1 << 30)

        @pytest.mark.npuemu(soc="Ascend310P", device_memory="2G")
        def test_marker_memory_wins(npu):
            assert npu.settings.device_memory == 2 << 30

        def test_configure_in_a_plain_test_takes_the_chip_s_capacity():  # configure()'s own rule
            emulator.configure(soc="Ascend310P")
            assert emulator.settings().device_memory == emulator.settings().profile.memory_bytes
    """
    client(source, "--npuemu-soc", "Ascend950").assert_outcomes(passed=4)
    monkeypatch.delenv("NPUEMU_DEVICE_MEMORY")
    result = client("""
        @pytest.mark.npuemu(soc="Ascend310P")
        def test_marker_without_the_variable(npu):
            assert npu.settings.device_memory == npu.settings.profile.memory_bytes != 1 << 30
    """, "--npuemu-soc", "Ascend950")
    result.assert_outcomes(passed=1)


def test_the_option_and_the_marker_win_over_a_bad_environment_value(client, monkeypatch):
    monkeypatch.setenv("NPUEMU_SOC", "bogus")
    source = """
        @pytest.mark.npuemu(soc="Ascend310P")
        def test_marker(npu):
            assert npu.soc_name == "Ascend310P3"

        def test_option(npu):
            assert npu.soc_name == "Ascend910B3"

        def test_plain_after_reads_the_environment_again():
            with pytest.raises(emulator.ConfigError, match="NPUEMU_SOC: unknown SoC 'bogus'"):
                emulator.settings()
            assert acl.init() == 0 and acl.rt.set_device(0) == 100000
            assert "NPUEMU_SOC: unknown SoC 'bogus'" in acl.get_recent_err_msg()
            assert acl.finalize() == 0
    """
    client(source, "--npuemu-soc", "Ascend910B").assert_outcomes(passed=3)
    result = client(source)  # the test left to the environment gets its error
    result.assert_outcomes(passed=2, errors=1)
    assert re.search(r"ERROR at setup of test_option.*npuemu fixture: NPUEMU_SOC: unknown SoC 'bogus'",
                     result.stdout.str(), re.S)


def test_the_fixture_s_streams_are_never_the_test_s_leaks_and_sites_skip_pytest(client):
    result = client("""
        import re

        def test_resets_the_device(npu):
            assert acl.rt.reset_device(0) == 0

        def test_calls_finalize(npu):
            npu.set_device(1)
            assert acl.rt.reset_device(1) == 0 and acl.rt.reset_device(0) == 0 and acl.finalize() == 0

        def test_resets_and_leaks(npu):
            acl.rt.malloc(48, 0)
            assert acl.rt.reset_device(0) == 0

        def test_no_frame_of_pytest_in_sites(npu):
            assert npu.leaks()  # the fixture's stream
            assert not [line for line in npu.leaks() if re.search(r"[/\\\\]_?pytest[/\\\\]|pluggy", line)], npu.leaks()
    """)
    result.assert_outcomes(passed=3, failed=1)
    leaked = failure_of(result, "test_resets_and_leaks")
    assert "npuemu: 1 finding(s) in this test (1 leak)" in leaked and "(48 bytes)" in leaked, leaked
    assert "leak: stream" not in leaked, leaked


def test_a_fault_memcheck_did_not_report_is_a_device_fault_even_beside_one_it_did(client):
    result = client("""
        @pytest.mark.npuemu(sanitize="memcheck", expect_reports="leak")
        def test_injected_and_memcheck_faults(npu):
            other, _ = acl.rt.create_stream()
            address, _ = acl.rt.malloc(64, 0)
            with emulator.inject_faults("task:aclrtMemsetAsync#1=507899"):
                assert acl.rt.memset_async(address, 64, 0, 64, other) == 0
            destroy(launch_on_freed_memory(npu.stream))

        @pytest.mark.npuemu(sanitize="memcheck")
        def test_memcheck_fault_alone(npu):
            destroy(launch_on_freed_memory(npu.stream))
    """)
    result.assert_outcomes(failed=2)
    both = failure_of(result, "test_injected_and_memcheck_faults")
    assert "npuemu: 2 finding(s) in this test (1 device fault, 1 invalid device access)" in both, both
    fault = [line for line in both.splitlines() if "npuemu: device fault:" in line]
    assert len(fault) == 1 and "returned 507899" in fault[0] and "injected fault in aclrtMemsetAsync" in fault[0]
    assert "aclnnLogSigmoidBackward" not in fault[0]  # memcheck's report is that fault's finding
    alone = failure_of(result, "test_memcheck_fault_alone")
    assert "npuemu: 1 finding(s) in this test (1 invalid device access)" in alone, alone


def test_leak_check_off_silences_leaks_whether_or_not_the_test_finalizes(client, monkeypatch):
    source = """
        def leak_and_finalize(npu):
            acl.rt.malloc(64, 0)
            assert acl.rt.destroy_stream(npu.stream) == 0
            assert acl.rt.reset_device(0) == 0 and acl.finalize() == 0

        @pytest.mark.npuemu(leak_check=False)
        def test_marker_off(npu):
            acl.rt.malloc(64, 0)

        @pytest.mark.npuemu(leak_check=False)
        def test_marker_off_finalizes(npu):
            leak_and_finalize(npu)

        def test_leaks(npu):
            acl.rt.malloc(64, 0)

        def test_leaks_and_finalizes(npu):
            leak_and_finalize(npu)
    """
    result = client(source)
    result.assert_outcomes(passed=2, failed=2)
    assert "(1 leak)" in failure_of(result, "test_leaks") and "(1 leak)" in failure_of(result, "test_leaks_and_finalizes")
    monkeypatch.setenv("NPUEMU_LEAK_CHECK", "0")
    client(source).assert_outcomes(passed=4)


def test_an_xfail_test_failing_only_by_its_findings_is_xfailed_strict_or_not(client):
    result = client("""
        @pytest.mark.xfail(reason="a known leak", strict=True)
        def test_strict(npu):
            acl.rt.malloc(100, 0)

        @pytest.mark.xfail(reason="a known leak")
        def test_not_strict(npu):
            acl.rt.malloc(100, 0)

        @pytest.mark.xfail(reason="no leak after all", strict=True)
        def test_strict_without_findings(npu):
            pass
    """)
    result.assert_outcomes(xfailed=2, failed=1)
    assert "XFAIL test_client.py::test_strict - a known leak" in result.stdout.str()
    assert "[XPASS(strict)] no leak after all" in failure_of(result, "test_strict_without_findings")


def test_findings_of_a_test_whose_setup_skipped_or_failed_are_no_teardown_error(client):
    result = client("""
        @pytest.fixture
        def a2_buffer(npu):
            acl.rt.malloc(64, 0)
            if not npu.soc_name.startswith("Ascend910B"):
                pytest.skip("needs an A2 chip")
            yield

        @pytest.fixture
        def broken(npu):
            acl.rt.malloc(32, 0)
            raise RuntimeError("the fixture broke")

        @pytest.mark.npuemu(soc="Ascend310P")
        def test_skipped_by_a_fixture(a2_buffer):
            pass

        def test_setup_raises(broken):
            pass
    """)
    result.assert_outcomes(skipped=1, errors=1)
    assert "ERROR at teardown" not in result.stdout.str()
    broken = failure_of(result, "ERROR at setup of test_setup_raises")
    assert "RuntimeError: the fixture broke" in broken and "(32 bytes)" in broken, broken


def test_a_marker_the_fixture_cannot_read_is_a_one_line_setup_error(client):
    result = client("""
        @pytest.mark.npuemu("Ascend310P")
        def test_positional(npu):
            pass

        @pytest.mark.npuemu(expect_reports=5)
        def test_expect_reports_a_number(npu):
            pass

        @pytest.mark.npuemu(soc="NoSuchChip")
        def test_bad_value(npu):
            pass
    """)
    result.assert_outcomes(errors=3)
    assert "Traceback" not in result.stdout.str() and "UsageError" not in result.stdout.str()
    sections = {test: failure_of(result, "ERROR at setup of " + test).strip().splitlines()
                for test in ("test_positional", "test_expect_reports_a_number", "test_bad_value")}
    assert sections["test_positional"] == [
        "npuemu fixture: @pytest.mark.npuemu: expected keywords only (soc=..., devices=..., execution=..., "
        "sanitize=..., expect_reports=..., or another setting), found positional argument(s) 'Ascend310P'"]
    assert sections["test_expect_reports_a_number"] == [
        "npuemu fixture: expect_reports: expected a kind of report or a tuple of them (e.g. ('race', 'leak')), found 5"]
    assert len(sections["test_bad_value"]) == 1 and "soc: unknown SoC 'NoSuchChip'" in sections["test_bad_value"][0]


def test_a_fault_spec_applies_to_the_test_s_calls_only_and_ends_with_the_test(client):
    result = client("""
        @pytest.mark.npuemu(faults="*#1+=507899")
        def test_every_call_of_the_test_fails(npu):
            address, ret = acl.rt.malloc(64, 0)      # the test's 1st call: the fixture's are not counted
            assert (address, ret) == (0, 507899)
            assert acl.rt.synchronize_device() == 507899
            acl.get_recent_err_msg()

        @pytest.mark.npuemu(faults="aclrtSynchronizeDevice=507899")
        def test_a_failing_synchronisation_is_no_device_fault_of_the_fixture(npu):
            assert acl.rt.synchronize_device() == 507899
            acl.get_recent_err_msg()

        def test_a_started_spec_the_test_never_stopped(npu):
            emulator.inject_faults("*=507899").start()
            raise RuntimeError("failed before its stop()")

        def test_the_next_test_with_the_fixture_starts_from_scratch(npu):
            address, ret = acl.rt.malloc(64, 0)
            assert ret == 0 and acl.rt.free(address) == 0

        def test_the_next_plain_test_too():
            assert acl.init() == 0, acl.get_recent_err_msg()
            assert acl.finalize() == 0
    """)
    result.assert_outcomes(passed=4, failed=1)
    assert "RuntimeError: failed before its stop()" in failure_of(result, "test_a_started_spec_the_test_never_stopped")
    assert "Traceback" not in result.stdout.str() and "expected no open device" not in result.stdout.str()


def test_an_unknown_kind_of_report_is_named_with_the_known_ones(client):
    """A typo failed later as "missing rase", or took nothing, silently."""
    result = client("""
        @pytest.mark.npuemu(expect_reports=("rase",))
        def test_expects_a_typo(npu):
            pass

        def test_takes_a_typo(npu):
            npu.take_reports("missing synchronization")

        def test_asks_for_a_typo(npu):
            npu.reports("leaks")
    """)
    result.assert_outcomes(errors=1, failed=2)
    [line] = failure_of(result, "ERROR at setup of test_expects_a_typo").strip().splitlines()
    assert line.startswith("npuemu fixture: expect_reports: expected a kind of report (invalid device access, "), line
    assert ", leak, device fault), found 'rase': did you mean race?" in line, line
    assert ("ValueError: npu.take_reports: expected a kind of report (" in failure_of(result, "test_takes_a_typo")
            and "found 'missing synchronization': did you mean missing synchronisation?"
            in failure_of(result, "test_takes_a_typo"))
    assert "found 'leaks': did you mean leak?" in failure_of(result, "test_asks_for_a_typo")


def test_each_test_counts_its_own_calls_for_npuemu_faults(client, monkeypatch):
    """The same NPUEMU_FAULTS spec stayed in force from test to test, counting on: only the first test's
    2nd aclrtMalloc failed."""
    monkeypatch.setenv("NPUEMU_FAULTS", "aclrtMalloc#2=207001")
    result = client("""
        def second_malloc_fails():
            first, ret = acl.rt.malloc(64, 0)
            assert ret == 0 and acl.rt.malloc(64, 0)[1] == 207001
            assert acl.rt.free(first) == 0

        def test_first(npu):
            second_malloc_fails()

        def test_second(npu):
            second_malloc_fails()
    """)
    result.assert_outcomes(passed=2)


def test_a_program_the_test_starts_runs_with_the_marker_s_and_the_options_settings(client):
    """`--npuemu-soc Ascend310P` (or the marker) set the test's own runtime only: a program the test started
    (a C++ sample, a script, as the project's own tests do) ran on the environment's chip. Now the
    settings are in the test's environment (NPUEMU_SOC, ...) while it runs, and are taken out after."""
    result = client("""
        import os, subprocess, sys
        CHILD = ("import os, acl; acl.init(); acl.rt.set_device(0); "
                 "print(acl.get_soc_name(), acl.rt.get_device_count()[0], os.environ.get('NPUEMU_SANITIZE')); "
                 "acl.rt.reset_device(0); acl.finalize()")

        def child():
            return subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True).stdout.split()

        def test_option(npu):
            assert child() == [npu.soc_name, "8", "None"] == ["Ascend310P3", "8", "None"]

        @pytest.mark.npuemu(soc="Ascend950", devices=2, sanitize="OFF")
        def test_marker(npu):
            assert child() == ["Ascend950PR", "2", "off"]

        def test_plain_after():
            assert os.environ.get("NPUEMU_SOC") is None and os.environ.get("NPUEMU_DEVICE_COUNT") is None
    """, "--npuemu-soc", "Ascend310P")
    result.assert_outcomes(passed=3)


ROUND_TRIP = """
from _pytest.reports import TestReport

def pytest_runtest_logreport(report):
    '''Each failure as pytest-xdist's controller gets it from a worker: serialised, then read back.'''
    if report.failed:
        back = TestReport._from_json(report._to_json())
        with open("round_trip.txt", "a") as out:
            out.write("%s | %s | %s\\n" % (report.nodeid.split("::")[-1], back.longrepr.reprcrash.message,
                                          "1 finding(s) in this test (1 leak)" in str(back.longrepr)))
"""


def test_a_failure_with_findings_keeps_the_test_s_crash_message_when_serialised(client, pytester):
    """Under pytest-xdist a report travels as data: the failure of a test with findings was a class of
    npuemu's own, which arrived as one string, and the short summary of a test that also failed by
    itself showed that string's first line (`npu = <emulator.pytest_plug...`) instead of its assertion."""
    pytester.makeconftest(ROUND_TRIP)
    result = client("""
        def test_own_failure(npu):
            acl.rt.malloc(100, 0)
            assert 1 == 2

        def test_findings_only(npu):
            acl.rt.malloc(100, 0)
    """)
    result.assert_outcomes(failed=2)
    assert (pytester.path / "round_trip.txt").read_text().splitlines() == [
        "test_own_failure | assert 1 == 2 | True",
        "test_findings_only | npuemu: 1 finding(s) in this test (1 leak) | True"]
    assert "FAILED test_client.py::test_own_failure - assert 1 == 2" in result.stdout.str()
    own = failure_of(result, "test_own_failure")
    assert re.search(r"assert 1 == 2\n.*\n-+ npuemu -+\nnpuemu: 1 finding\(s\) in this test \(1 leak\)\n", own, re.S), own


WORKER_HOLDING_A_LEAK = """
import json, types
import acl
from emulator import pytest_plugin
acl.init()
acl.rt.set_device(0)
acl.rt.malloc(100, 0)   # a test without the fixture leaks it
config = types.SimpleNamespace(workerinput={}, workeroutput={})
pytest_plugin.pytest_sessionfinish(types.SimpleNamespace(config=config))
print(json.dumps(config.workeroutput))
"""

CONTROLLER = """
import types
from emulator import pytest_plugin

def pytest_collection_finish(session):
    '''pytest-xdist's controller: two workers went down, what each held at its end in its workeroutput.'''
    for name, code in (("gw0", None), ("gw1", 9)):
        held = {"summary": "========= npuemu: SUMMARY: 1 report(s) (1 leak)", "exitcode": code}
        node = types.SimpleNamespace(config=session.config, gateway=types.SimpleNamespace(id=name),
                                     workeroutput={"npuemu": held})
        pytest_plugin.pytest_testnodedown(node, None)
"""


def test_a_pytest_xdist_worker_s_reports_at_its_end_reach_the_controller_s_exit_status(client, pytester, tmp_path):
    """With NPUEMU_SANITIZE_EXITCODE=9 (or `npuemu run --error-exitcode 9`), `pytest -n 2` exited 0 while
    a worker reported a leak of a test without the fixture at its exit and exited 9: pytest-xdist ignores
    a worker's exit status. Now the worker's session end makes the report its exit would (once: not
    again at exit) and puts what it holds in its workeroutput; the controller names the worker and
    ends with the status."""
    program = tmp_path / "worker.py"
    program.write_text(WORKER_HOLDING_A_LEAK)
    environment = {name: value for name, value in os.environ.items() if not name.startswith("NPUEMU_")}
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120,
                          env={**environment, "NPUEMU_SANITIZE_EXITCODE": "9"})
    assert done.returncode == 9, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"npuemu": {"summary": "========= npuemu: SUMMARY: 1 report(s) (1 leak)",
                                                  "exitcode": 9}}
    assert done.stderr.count("(100 bytes) on device 0") == 1 and done.stderr.count("SUMMARY") == 1, done.stderr
    pytester.makeconftest(CONTROLLER)
    result = client("def test_passes():\n    pass\n")
    assert result.ret == 9
    result.stdout.fnmatch_lines(["npuemu: worker gw0 ended holding reports: ========= npuemu: SUMMARY: 1 report(s) "
                                 "(1 leak)",
                                 "npuemu: worker gw1 ended holding reports: ========= npuemu: SUMMARY: 1 report(s) "
                                 "(1 leak) (NPUEMU_SANITIZE_EXITCODE: exit status 9)"])


def test_pytest_xdist_runs_end_with_the_status_of_a_worker_s_reports(client, monkeypatch):
    """The same, end to end, with pytest-xdist (skipped when it is not installed: npuemu does not need it)."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("NPUEMU_SANITIZE_EXITCODE", "9")
    result = client("""
        def test_leaks_without_the_fixture():
            acl.init()
            acl.rt.set_device(0)
            acl.rt.malloc(100, 0)

        def test_fails_and_leaks(npu):
            acl.rt.malloc(100, 0)
            assert 1 == 2
    """, "-n", "2")
    assert result.ret == 9
    result.stdout.re_match_lines([r"npuemu: worker gw\d ended holding reports: ========= npuemu: SUMMARY: 1 report\(s\) "
                                  r"\(1 leak\) \(NPUEMU_SANITIZE_EXITCODE: exit status 9\)"])
    assert "FAILED test_client.py::test_fails_and_leaks - assert 1 == 2" in result.stdout.str()


def test_a_variable_the_test_changed_with_monkeypatch_is_as_before_after_it(client):
    """`def test(monkeypatch, npu)` changing an exported variable: monkeypatch's teardown, after the fixture's,
    put back the value it found, the marker's, and the next tests (their environment, their children, the
    settings of a later fixture) ran on that chip. Now the variables are restored once every function-scoped
    fixture of the test is torn down."""
    result = client("""
        import os, subprocess, sys

        @pytest.mark.npuemu(soc="Ascend310P", sanitize="off")
        def test_changes_them(monkeypatch, npu):
            monkeypatch.setenv("NPUEMU_SOC", "Ascend910B")   # e.g. for a child that must run on another chip
            monkeypatch.delenv("NPUEMU_SANITIZE")

        def test_plain_after():
            assert {k: v for k, v in os.environ.items() if k.startswith("NPUEMU_")} == {}
            child = subprocess.run([sys.executable, "-c", "import emulator; print(emulator.settings().soc)"],
                                   capture_output=True, text=True)
            assert child.stdout.strip() == "Ascend910B", child.stderr

        def test_fixture_after(npu):
            assert (npu.settings.soc, npu.settings.sanitize) == ("Ascend910B", "full")
    """)
    result.assert_outcomes(passed=3)


def test_a_marker_value_no_environment_variable_can_hold_is_a_setup_error(client):
    """`trace="x\\0y.json"` raised os.environ's ValueError from the fixture, with the marker's settings left in
    force for the next tests. Now it is a setup error naming the setting, what was expected and what was
    found, and nothing is exported or changed."""
    result = client("""
        import os

        @pytest.mark.npuemu(soc="Ascend310P", trace="x\\0y.json")
        def test_nul(npu):
            pass

        def test_plain_after():
            assert {k: v for k, v in os.environ.items() if k.startswith("NPUEMU_")} == {}
            assert (emulator.settings().soc, emulator.settings().trace) == ("Ascend910B", "")
    """)
    result.assert_outcomes(passed=1, errors=1)
    assert re.search(r"ERROR at setup of test_nul.*npuemu fixture: trace: expected a value an environment variable "
                     r"can hold \(no NUL byte\), found 'x\\x00y\.json'", result.stdout.str(), re.S), result.stdout.str()
    assert "Traceback" not in result.stdout.str() and "ValueError" not in result.stdout.str()
