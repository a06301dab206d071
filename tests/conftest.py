"""Shared fixtures: every test starts with no device open and must release what it made."""
import dataclasses

import pytest

import acl
import emulator
from emulator import leaks
from emulator.state import PROCESS


@pytest.fixture(autouse=True)
def clean_runtime():
    """Fail a test that leaves resources behind. Afterwards close every device, finalize, restore
    the settings and forget the test's messages, so that the next test starts from scratch."""
    saved = dataclasses.asdict(emulator.settings())
    yield
    left = leaks.outstanding()
    for device in PROCESS.devices:
        while device.is_open:
            acl.rt.reset_device(device.id)
    acl.finalize()
    acl.get_recent_err_msg()
    leaks.forget()
    emulator.configure(**saved)
    assert not left, "the test leaked:\n" + "\n".join(left)
