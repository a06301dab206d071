"""Shared fixtures: every test starts with no device open and must release what it made."""
import dataclasses
import os

import pytest

import emulator
from emulator import leaks, report
from emulator.pytest_plugin import close_everything
from support import TESTS_THE_CHECKOUT

# Findings a test meets without saying so: a fault of queued work is also the status the test checks,
# and leaks are checked below on their own.
UNDECLARED_KINDS = {"invalid device access", "leak"}


@pytest.fixture(autouse=True, scope="session")
def subprocesses_import_the_package_under_test(tmp_path_factory):
    """A `python -c` or `python -m` child puts its working directory first on its path: run from the
    checkout, it would import the checkout's sources, which hold no built kernels when the package
    under test was installed elsewhere. Such a session runs from an empty directory instead."""
    if TESTS_THE_CHECKOUT:
        yield
        return
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))
    yield
    os.chdir(before)


def pytest_configure(config):
    config.addinivalue_line("markers", "sanitizer_reports(*kinds): the test does on purpose what the sanitizer "
                            "reports as these kinds (emulator.report); any other finding fails it")


@pytest.fixture(autouse=True)
def clean_runtime(request):
    """Fail a test that leaves resources behind, or that made the sanitizer report what it did not
    declare (marker sanitizer_reports). Afterwards close every device, finalize, restore the settings
    and forget the test's messages and findings, so that the next test starts from scratch."""
    saved = dataclasses.asdict(emulator.settings())
    report.clear()
    yield
    left = leaks.outstanding()
    close_everything(forget_leaks=True)
    emulator.configure(**saved)
    found = _undeclared_findings(request)
    report.clear()
    assert not left, "the test leaked:\n" + "\n".join(left)
    assert not found, "the sanitizer reported:\n" + "\n".join(str(finding) for finding in found)


def _undeclared_findings(request) -> list:
    marker = request.node.get_closest_marker("sanitizer_reports")
    declared = UNDECLARED_KINDS | set(marker.args if marker else ())
    return [finding for finding in emulator.reports() if finding.kind not in declared]
