"""npuemu's pytest plugin (docs/pytest.md), installed as the `pytest11` entry point `npuemu`.

A test that asks for the `npu` fixture (or carries the `npuemu` marker) runs on a fresh runtime:
settings applied (marker > command line > ini file > environment), aclInit, aclrtSetDevice(0), a
stream. Afterwards, whatever the test did (failed, raised, left devices set or the runtime
initialised), the fixture synchronises, collects what the test left behind (the sanitizer's reports
made during the test, unreleased resources, faults of queued work nobody synchronised), then resets
every open device, calls aclFinalize, clears the thread's messages, forgets the leaks, stops the
fault specs the test left started and restores the settings: the next test starts from scratch. Fault
specs apply to the test's calls only: the fixture's own calls are neither counted nor failed. The test itself fails (a failure, not a teardown
error) with each finding in its failure text, unless the test said it expects them
(`@pytest.mark.npuemu(expect_reports=("leak",))` or `npu.take_reports(...)`).

Tests that use neither the fixture nor the marker are not touched: no import of the runtime, no
autouse fixture, the default test protocol.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

import pytest

MARKER = "npuemu"
FIXTURE = "npu"
# option suffix -> setting (emulator.config.Config field); marker keywords use the option's name
OPTIONS = {"soc": "soc", "devices": "device_count", "execution": "execution", "sanitize": "sanitize"}
HELP = {
    "soc": "the emulated chip (NPUEMU_SOC), e.g. Ascend910B, Ascend310P",
    "devices": "number of devices (NPUEMU_DEVICE_COUNT)",
    "execution": "async or eager (NPUEMU_EXECUTION)",
    "sanitize": "off, memcheck or full (NPUEMU_SANITIZE)",
}
# Kinds of the findings the fixture makes itself (the others are the kinds of emulator.reports()).
LEAK = "leak"                   # a resource the test never released (emulator.leaks.outstanding())
DEVICE_FAULT = "device fault"   # queued work that failed and that the test never synchronised
UNMET = None                    # not a finding: a kind of expect_reports that the test did not report

_FINDINGS = pytest.StashKey[list]()
_OWNED = pytest.StashKey[bool]()


# --------------------------------------------------------------------------------------------------
# options, marker


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("npuemu", "npuemu (tests that use the `npu` fixture or the `npuemu` marker)")
    for name, text in HELP.items():
        group.addoption("--npuemu-" + name, dest="npuemu_" + name, default=None, metavar=name.upper(),
                        type=int if name == "devices" else str, help=text + "; a marker's value wins")
        parser.addini("npuemu_" + name, text + " (--npuemu-%s wins)" % name, default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "npuemu(soc=None, devices=None, execution=None, sanitize=None, expect_reports=(), **settings): run the "
        "test on a fresh npuemu runtime (the `npu` fixture) with these settings; expect_reports: kinds of "
        "findings the test must make (docs/pytest.md)")
    changes = _option_settings(config)
    if changes:  # checked once, before any test: a typo fails the session at once
        from .config import ConfigError, from_sources
        try:
            from_sources(changes)  # the options replace their variables: a bad NPUEMU_SOC under --npuemu-soc is fine
        except ConfigError as error:
            raise pytest.UsageError("npuemu: %s" % error) from None


def _option_settings(config: pytest.Config) -> dict:
    """The settings of the command line, else of the ini file."""
    changes = {}
    for name, field in OPTIONS.items():
        value = config.getoption("npuemu_" + name)
        if value is None or value == "":
            value = config.getini("npuemu_" + name) or None
        if value is None:
            continue
        if field == "device_count":
            try:
                value = int(value)
            except ValueError:
                raise pytest.UsageError("npuemu: npuemu_devices: expected a device count, found %r" % value) from None
        elif field in ("execution", "sanitize"):
            value = str(value).strip().lower()
        changes[field] = value
    return changes


def _marker_settings(item: pytest.Item) -> tuple[dict, tuple]:
    """(settings, expected kinds) of the item's `npuemu` markers, the closest one winning; ConfigError
    for a marker the fixture cannot read (the fixture makes it the test's setup error)."""
    from .config import ConfigError
    merged: dict = {}
    for mark in reversed(list(item.iter_markers(MARKER))):  # iter_markers: closest first
        if mark.args:
            raise ConfigError("@pytest.mark.npuemu: expected keywords only (soc=..., devices=..., execution=..., "
                              "sanitize=..., expect_reports=..., or another setting), found positional "
                              "argument(s) %s" % ", ".join(repr(arg) for arg in mark.args))
        merged.update(mark.kwargs)
    expected = merged.pop("expect_reports", ()) or ()
    if isinstance(expected, str):
        expected = (expected,)
    if not isinstance(expected, (tuple, list, set, frozenset)) or not all(isinstance(kind, str) for kind in expected):
        raise ConfigError("expect_reports: expected a kind of report or a tuple of them (e.g. ('race', 'leak')), "
                          "found %r" % (expected,))
    for kind in expected:
        _check_kind("expect_reports", kind, ConfigError)
    if "devices" in merged:
        merged["device_count"] = merged.pop("devices")
    for field in ("execution", "sanitize"):
        if isinstance(merged.get(field), str):
            merged[field] = merged[field].strip().lower()
    return merged, tuple(expected)


def known_kinds() -> tuple:
    """Every kind of finding a test can expect or take: the sanitizer's, and the fixture's own."""
    from .report import KINDS
    return tuple(KINDS) + (DEVICE_FAULT,)


def _check_kind(where: str, kind: str, error: type) -> None:
    """`error` naming the known kinds (and the closest one) for a kind no finding has: a typo would
    otherwise fail later as "missing rase", or take nothing, silently."""
    known = known_kinds()
    if kind not in known:
        from .injection import suggestion
        raise error("%s: expected a kind of report (%s), found %r%s"
                    % (where, ", ".join(known), kind, suggestion(kind, known, otherwise="")))


def _uses_plugin(item: pytest.Item) -> bool:
    return FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(items: list) -> None:
    """A test with the marker gets the fixture even when it does not ask for it by name."""
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is not None and FIXTURE not in names and item.get_closest_marker(MARKER) is not None:
            names.insert(0, FIXTURE)  # set up first, torn down last
        if names is not None and FIXTURE in names:
            names.insert(0, ENVIRONMENT_FIXTURE)  # before it: restores the environment at the very end


# --------------------------------------------------------------------------------------------------
# the fixture


@dataclasses.dataclass
class NpuDevice:
    """One device the fixture set: its id, its default context, a stream made on it."""
    device_id: int
    context: int
    stream: int


class Npu:
    """What the `npu` fixture gives a test: device 0 set, its context current, a stream on it.

    device_id, context, stream   of device 0 (`acl.rt.*` handles)
    settings                     the emulator.config.Config in force (marker > command line > ini >
                                 environment)
    soc_name, device_count       of those settings
    set_device(i)                sets device i (the first time: aclrtSetDevice and a stream), makes
                                 its context current, returns its NpuDevice; the fixture releases it
    reports(*kinds)              the reports made during the test so far, not taken (of these kinds)
    take_reports(*kinds)         the same, and they no longer fail the test (the test checked them)
    leaks()                      what is unreleased now (emulator.leaks.outstanding())
    """

    def __init__(self, start: dict) -> None:
        self._start = start          # id(report) -> (report, count) when the test started
        self._taken: dict = {}       # id(report) -> report
        self._devices: dict = {}     # device id -> NpuDevice
        self._own: list = []         # leak lines of the fixture's streams: never the test's findings
        self.device_id = 0
        self.context = 0
        self.stream = 0

    # the test's view

    @property
    def settings(self):
        from . import settings
        return settings()

    @property
    def soc_name(self) -> str:
        return self.settings.soc_name

    @property
    def device_count(self) -> int:
        return self.settings.device_count

    @property
    def devices(self) -> dict:
        """The devices the fixture set so far: {device id: NpuDevice}."""
        return dict(self._devices)

    def set_device(self, device_id: int) -> NpuDevice:
        with _own_calls():
            return self._set_device(device_id)

    def _set_device(self, device_id: int) -> NpuDevice:
        from . import leaks
        from . import runtime as rt
        from .resource import HANDLES
        device = self._devices.get(device_id)
        if device is not None:
            _check("aclrtSetCurrentContext", rt.aclrtSetCurrentContext(device.context))
            return device
        _check("aclrtSetDevice(%d)" % device_id, rt.aclrtSetDevice(device_id))
        context, ret = rt.aclrtGetCurrentContext()
        _check("aclrtGetCurrentContext", ret)
        stream, ret = rt.aclrtCreateStream()
        _check("aclrtCreateStream", ret)
        made = HANDLES.get(stream)
        if made is not None:  # a test that resets the device or calls aclFinalize orphans it: not its leak
            self._own.append(leaks._line(made.kind, made.describe, made.site))
        device = self._devices[device_id] = NpuDevice(device_id, context, stream)
        return device

    def reports(self, *kinds: str) -> list:
        """The reports made during the test so far and not taken (of these kinds); ValueError for a kind
        no report has."""
        for kind in kinds:
            _check_kind("npu.reports", kind, ValueError)
        return self._untaken(kinds)

    def _untaken(self, kinds: tuple) -> list:
        return [r for r in self._new_reports() if id(r) not in self._taken and (not kinds or r.kind in kinds)]

    def take_reports(self, *kinds: str) -> list:
        """reports(*kinds), which then no longer fail the test (it checked them)."""
        for kind in kinds:
            _check_kind("npu.take_reports", kind, ValueError)
        found = self._untaken(kinds)
        self._taken.update((id(r), r) for r in found)
        return found

    def leaks(self) -> list:
        from . import leaks
        return leaks.outstanding()

    # the fixture's side

    def _new_reports(self) -> list:
        from . import report
        return [r for r in report.reports() if (id(r) not in self._start or self._start[id(r)][1] < r.count)
                and not (r.kind == LEAK and self._is_own(r.message))]  # aclFinalize of the test reported it

    def _is_own(self, line: str) -> bool:
        """Whether a leak line is about one of the fixture's streams: unreleased, or released only by a
        reset the test made (`... (released only by aclrtResetDevice(0))`)."""
        return any(line == own or line.startswith(own + " (released only by ") for own in self._own)

    def _open(self) -> None:
        from . import runtime as rt
        with _own_calls():
            _check("aclInit", rt.aclInit())
        device = self.set_device(0)
        self.device_id, self.context, self.stream = device.device_id, device.context, device.stream

    def _drop_faults_memcheck_reported(self, device) -> None:
        """Run the device's queued work, then take off its streams the faults that memcheck reported
        during the test: that report is their finding already. The other faults (an injected one, a
        task timeout, an access memcheck was off for) stay, for the synchronisation to return, even
        when memcheck reported another fault in the same synchronisation."""
        from .errors import AclError
        from .state import PROCESS
        with PROCESS.lock:
            try:
                device.synchronize()
            except AclError:  # the synchronisation that follows returns it, as a device fault
                return
            # sanitizer.Tracker.fault reports a fault as "<kind>: <message>"; a report taken by the test
            # (npu.take_reports) counts, and so does a repeat of an older report (a count that grew)
            reported = {r.message for r in self._new_reports() if r.tool == "memcheck"}
            for stream in device.streams():
                stream.faults = [fault for fault in stream.faults if "%s: %s" % (fault.kind, fault.message) not in reported]

    def _finish(self, expected: tuple) -> list:
        """Synchronise every open device, release the fixture's streams, and return the findings
        (kind, text) that fail the test, and the expected kinds not found (UNMET, text)."""
        with _own_calls():
            return self._findings(expected)

    def _findings(self, expected: tuple) -> list:
        from . import runtime as rt
        from .state import PROCESS
        findings = []
        for device_id in [device.id for device in PROCESS.devices if device.is_open]:
            mine = self._devices.get(device_id)
            if (mine is None or rt.aclrtSetCurrentContext(mine.context) != 0) and rt.aclrtSetDevice(device_id) != 0:
                rt.aclGetRecentErrMsg()
                continue
            self._drop_faults_memcheck_reported(PROCESS.devices[device_id])
            ret = rt.aclrtSynchronizeDevice()
            if ret != 0:
                findings.append((DEVICE_FAULT, "%snpuemu: %s: queued work of device %d failed and the test never "
                                 "synchronised it (aclrtSynchronizeDevice after the test returned %d): %s"
                                 % (_prefix(), DEVICE_FAULT, device_id, ret, rt.aclGetRecentErrMsg())))
        for mine in self._devices.values():
            if rt.aclrtDestroyStream(mine.stream) != 0:
                rt.aclGetRecentErrMsg()  # the test destroyed it, or reset its device
        for found in self._new_reports():
            if id(found) not in self._taken:
                text = str(found)
                repeats = found.count - self._start.get(id(found), (None, 0))[1]
                if repeats > 1:
                    text += "\n%s    (found %d times%s)" % (
                        _prefix(), repeats, ", the later ones with other numbers (offsets, sizes)" if found.differed else "")
                findings.append((found.kind, text))
        if PROCESS.config.leak_check:  # off (NPUEMU_LEAK_CHECK=0, leak_check=False): as aclFinalize, silent
            findings += [(LEAK, "%snpuemu: leakcheck: leak: %s" % (_prefix(), line)) for line in self.leaks()
                         if not self._is_own(line)]
        kinds = {kind for kind, _ in findings} | {taken.kind for taken in self._taken.values()}
        findings = [(kind, text) for kind, text in findings if kind not in expected]
        findings += [(UNMET, "expected a report of kind %r (expect_reports), found none" % kind)
                     for kind in expected if kind not in kinds]
        return findings


def _prefix() -> str:
    from .report import PREFIX as prefix
    return prefix


def _check(what: str, ret: int) -> None:
    if ret != 0:
        from . import runtime as rt
        pytest.fail("npuemu fixture: %s returned %d: %s" % (what, ret, rt.aclGetRecentErrMsg()), pytrace=False)


def _own_calls():
    """A block whose public calls are the fixture's, not the test's: no fault spec counts them or makes
    them fail (a marker's `faults=*#5+=...` must not fail the fixture's aclInit, nor its teardown)."""
    from .injection import not_counted
    return not_counted()


def close_everything(forget_leaks: bool) -> None:
    """Every open device reset (all its references), aclFinalize, this thread's messages and last
    error cleared: the runtime as a fresh process has it. `forget_leaks`: drop what is unreleased
    before aclFinalize would report it (the fixture has collected it already)."""
    with _own_calls():
        _close_everything(forget_leaks)


def _close_everything(forget_leaks: bool) -> None:
    from . import runtime as rt
    from . import leaks
    from .state import PROCESS
    for device in list(PROCESS.devices):
        while device.is_open:
            before = device.ref_count
            if rt.aclrtResetDevice(device.id) != 0 and device.is_open and device.ref_count == before:
                rt.aclrtResetDeviceForce(device.id)
                break
    if forget_leaks:
        leaks.forget()
    if PROCESS.init_count > 0:
        rt.aclFinalize()
    rt.aclGetRecentErrMsg()
    rt.aclrtGetLastError()
    if forget_leaks:
        leaks.forget()


def _skip_pytest_frames() -> None:
    """Sites (where a leak was made, a kernel launched) end at the test's frames, not in pytest's."""
    import _pytest.python
    import pluggy
    from . import sites
    sites.register_package_dir(_pytest.python.__file__)
    sites.register_package_dir(pytest.__file__)  # `python -m pytest` starts in pytest/__main__.py
    sites.register_package_dir(pluggy.__file__)


def _restore_settings(saved) -> None:
    """The settings in force before the test again; when none were (the environment not read yet),
    the environment's, or none at all if it is unusable: the next use then reads it again and fails
    as it would have without the test."""
    from .config import ConfigError, from_environment
    from .state import PROCESS
    if saved is None:
        try:
            saved = from_environment()
        except ConfigError:
            pass
    PROCESS.use(saved)


def _exported(changes: dict, wanted) -> dict:
    """{variable: value or None (unset)} of the settings the marker and the options chose (NPUEMU_SOC, ...),
    for _export; ConfigError, naming the setting, for a value no environment variable can hold (a NUL
    byte): checked before anything is set."""
    from .config import ConfigError, variable
    values = {}
    for setting in changes:
        value = getattr(wanted, setting)
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif value is not None:
            value = str(value)
            if "\0" in value:
                raise ConfigError("%s: expected a value an environment variable can hold (no NUL byte), found %r"
                                  % (setting, value))
        values[variable(setting)] = value
    return values


def _export(values: dict) -> dict:
    """Put the settings the marker and the options chose in this process's environment ({variable: value
    or None}, from _exported), so that a program the test starts (a C++ sample, a script) runs with them
    too, as under `npuemu run`'s options; the variables as they were before, for _set_environment."""
    before = {name: os.environ.get(name) for name in values}
    _set_environment(values)
    return before


def _set_environment(values: dict) -> None:
    """Each variable of {variable: value or None} set to its value, or unset."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_EXPORTED = pytest.StashKey[dict]()  # the item's variables as they were before the fixture exported its settings
ENVIRONMENT_FIXTURE = "_npuemu_environment"


@pytest.fixture
def _npuemu_environment(request: pytest.FixtureRequest):
    """Set up before every other function-scoped fixture of a test that uses `npu` (see
    pytest_collection_modifyitems), so torn down after them all: the variables the `npu` fixture exported
    are as they were before it once more, whatever a teardown after the fixture's did (monkeypatch
    puts back the value it found at its setenv: the exported one)."""
    yield
    _set_environment(request.node.stash.get(_EXPORTED, {}))


@pytest.fixture
def npu(request: pytest.FixtureRequest):
    """A fresh npuemu runtime for one test: device 0 set and current, a stream on it (an `Npu`).
    Everything is released afterwards; leaks, the sanitizer's reports and unsynchronised faults of
    the test fail it (docs/pytest.md)."""
    from . import injection, report
    from .config import ConfigError, from_sources
    from .state import PROCESS

    item = request.node
    _skip_pytest_frames()
    if PROCESS.init_count > 0 or any(device.is_open for device in PROCESS.devices):
        close_everything(forget_leaks=False)  # left by a test without the fixture: its leaks are reported now
    try:
        changes = _option_settings(item.config)
        marked, expected = _marker_settings(item)
        changes.update(marked)
        # made from the environment, not from the settings in force: a test without the fixture may
        # have called emulator.configure(), and its settings must not reach this test
        wanted, bad = from_sources(changes), None
        exported = _exported(changes, wanted)
    except ConfigError as error:  # a bad marker, or NPUEMU_* environment
        wanted, bad = None, "npuemu fixture: %s" % error
    if bad is not None:  # failed outside the except block: pytest would show the ConfigError first
        pytest.fail(bad, pytrace=False)
    saved = PROCESS._config  # None: not read yet (or unusable), and the environment may be bad
    PROCESS.use(wanted)
    environment = item.stash[_EXPORTED] = _export(exported)
    injection.restart_setting()  # the marker's or NPUEMU_FAULTS' spec counts this test's calls from 1
    blocks = injection.blocks()  # inject_faults specs in force now are not the test's: they stay
    start = {id(r): (r, r.count) for r in report.reports()}
    session = Npu(start)
    findings: list = []
    try:
        session._open()
        yield session
        findings = session._finish(expected)
    finally:
        injection.stop_blocks_since(blocks)  # started by the test and never stopped (it failed first)
        close_everything(forget_leaks=True)
        if not start:
            report.clear()  # the test's reports are delivered with its result, not again at exit
        _set_environment(environment)
        _restore_settings(saved)
    if findings:
        if item.stash.get(_OWNED, False):
            item.stash[_FINDINGS] = findings  # the protocol below makes them the test's failure
        else:  # the fixture was requested dynamically (request.getfixturevalue): a teardown error
            pytest.fail(_failure_text(findings), pytrace=False)


# --------------------------------------------------------------------------------------------------
# the findings as the test's own failure


def _failure_text(findings: list) -> str:
    """The first line counts the findings by kind and says which expected kinds were not found (an
    expectation not met is no finding of its own); then each finding's text."""
    found = [(kind, text) for kind, text in findings if kind is not UNMET]
    kinds: dict = {}
    for kind, _ in found:
        kinds[kind] = kinds.get(kind, 0) + 1
    parts = []
    if found:
        parts.append("%d finding(s) in this test (%s)" % (len(found), ", ".join("%d %s" % (n, kind) for kind, n in kinds.items())))
    parts += [text for kind, text in findings if kind is UNMET]
    return "\n".join(["npuemu: " + "; ".join(parts)] + [text for _, text in found])


def _with_findings(original: Any, text: str):
    """The failure of a test with findings: the test's own failure if it has one (its traceback and crash
    message, which the short summary and junitxml's message show), then the findings under a line
    `npuemu`. Made of pytest's own classes, which survive the report's serialisation: pytest-xdist sends
    a worker's reports to the controller as data, and a class of npuemu's own arrived as one string."""
    from _pytest._code.code import ExceptionRepr, ReprExceptionInfo, ReprFileLocation, ReprTracebackNative
    if isinstance(original, ExceptionRepr):
        original.addsection("npuemu", text)
        return original
    lines = ([str(original), "-" * 20 + " npuemu"] if original is not None else []) + text.splitlines()
    return ReprExceptionInfo(reprtraceback=ReprTracebackNative([line + "\n" for line in lines]),
                             reprcrash=ReprFileLocation("", 0, text.splitlines()[0]))


STRICT_XPASS = "[XPASS(strict)] "  # how pytest's skipping plugin words a strict xfail test that passed


def _apply_findings(reports: list, findings: list) -> None:
    """Make the findings the failure of the test's call phase; of its setup phase when the setup did not
    pass (a fixture skipped the test, or raised): never a teardown error of their own."""
    phases = {report.when: report for report in reports}
    target = phases.get("call") or phases.get("setup") or reports[-1]
    if target.passed and hasattr(target, "wasxfail"):  # an xfail test that failed by its findings: xfailed
        target.outcome = "skipped"
        return
    if target.failed and isinstance(target.longrepr, str) and target.longrepr.startswith(STRICT_XPASS):
        # a strict xfail test that failed only by its findings: xfailed too, as pytest makes it
        target.outcome, target.wasxfail, target.longrepr = "skipped", target.longrepr[len(STRICT_XPASS):], None
        return
    if target.skipped:  # skipped (in the test or in a fixture), or xfailed by itself: findings dropped
        return
    target.longrepr = _with_findings(None if target.passed else target.longrepr, _failure_text(findings))
    target.outcome = "failed"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]):
    """For tests that use the fixture only: the phases run before their reports are logged, so that
    what the fixture finds at teardown becomes the failure of the test itself."""
    if not _uses_plugin(item):
        return None
    from _pytest.runner import runtestprotocol
    item.stash[_OWNED] = True
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    findings = item.stash.get(_FINDINGS, None)
    if findings:
        _apply_findings(reports, findings)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


# --------------------------------------------------------------------------------------------------
# pytest-xdist: what a worker's end reports reaches the controller's exit status

WORKER_OUTPUT = "npuemu"  # the key in a worker's `workeroutput`
_HELD_BY_WORKERS = pytest.StashKey[list]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: the report its exit would make now (leaks of tests without the fixture),
    and what it holds sent to the controller, which ignores the worker's exit status. In the controller:
    the session ends with NPUEMU_SANITIZE_EXITCODE if a worker held reports, as one process would."""
    config = session.config
    if hasattr(config, "workerinput"):
        held = _held_at_end()
        if held is not None:
            config.workeroutput[WORKER_OUTPUT] = held
        return
    codes = [code for _, _, code in config.stash.get(_HELD_BY_WORKERS, []) if code is not None]
    if codes:
        session.exitstatus = codes[0]


def _held_at_end() -> Optional[dict]:
    """{summary, exitcode} of the reports this process holds at its end, or None when it holds none."""
    from . import report, runtime
    runtime.report_leaks_at_exit()  # forgotten once reported: the exit does not report them again
    line = report.summary()
    return None if line is None else {"summary": line, "exitcode": report.exit_code()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller, a worker gone: what it held at its end, kept for the summary and the exit
    status."""
    held = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if held:
        name = getattr(getattr(node, "gateway", None), "id", "?")
        node.config.stash.setdefault(_HELD_BY_WORKERS, []).append((name, held.get("summary", ""), held.get("exitcode")))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The controller: a line per worker that ended holding reports (their lines are in its output above)."""
    for name, summary, code in terminalreporter.config.stash.get(_HELD_BY_WORKERS, []):
        terminalreporter.write_line("npuemu: worker %s ended holding reports: %s%s" % (
            name, summary, "" if code is None else " (NPUEMU_SANITIZE_EXITCODE: exit status %d)" % code))
