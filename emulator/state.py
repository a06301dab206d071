"""The process-wide state of the emulated runtime: configuration, devices, aclInit state, the lock.
(Handles of every object are in emulator.resource.HANDLES.)"""
from __future__ import annotations

import os
import threading
from typing import Optional

from . import config as config_module
from . import leaks, report, sanitizer, tools  # tools now: importing it under a call may find no file descriptor
from .device import Device
from .memory import AddressSpace


class Process:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._config: Optional[config_module.Config] = None
        self.space: Optional[AddressSpace] = None
        self.devices: list[Device] = []
        self.init_count = 0
        self.finalized = False
        self.init_config: Optional[str] = None
        self.default_device: Optional[int] = None  # aclInit JSON {"defaultDevice": {"default_device": "0"}}

    @property
    def config(self) -> config_module.Config:
        """The settings, read from the NPUEMU_* environment on first use rather than at import: a bad
        value then comes back as the status and message of the first call that needs the settings
        (and as the CLI's one-line error), not as a failing import."""
        if self._config is None:
            self.config = config_module.from_environment()
        return self._config

    @config.setter
    def config(self, value: config_module.Config) -> None:
        self._config = value
        leaks.enabled = value.leak_check
        report.set_exit_code(value.sanitize_exitcode)
        sanitizer.TRACKER.configure(value)
        tools.apply(value)

    def address_space(self) -> AddressSpace:
        """Reserved on first use, so that configure() can still change the device count and size."""
        if self.space is None:
            profile, count, memory = self.config.profile, self.config.device_count, self.config.device_memory
            try:
                self.space = AddressSpace(count, memory, profile.padding_size)
            except MemoryError:  # the host refused the reservation (ulimit -v, overcommit settings)
                raise config_module.ConfigError(
                    "NPUEMU_DEVICE_MEMORY: expected a size this host can reserve address space for on each of "
                    "NPUEMU_DEVICE_COUNT=%d devices, found %s (the host refused %s in all)"
                    % (count, config_module.shown_size(memory), config_module.shown_size(count * memory))) from None
            self.devices = [Device(i, heap) for i, heap in enumerate(self.space.heaps)]
        return self.space

    def device(self, device_id: int) -> Device:
        self.address_space()
        return self.devices[device_id]

    def configure(self, **changes) -> None:
        """Change settings while no device is open; ConfigError otherwise, or for a bad value."""
        with self.lock:
            self._expect_no_open_device("configure")
            self.use(config_module.with_changes(self.config, **changes))

    def use(self, new: Optional[config_module.Config]) -> None:
        """Put a whole validated Config in force, while no device is open (ConfigError otherwise).
        None: no settings, as at start-up: the environment is read again when they are next needed
        (the pytest plugin restores this after a test whose marker overrode an unusable environment)."""
        with self.lock:
            self._expect_no_open_device("configure")
            old = self._config
            if self.space is not None and (new is None or old is None or (new.device_count, new.device_memory, new.soc)
                                           != (old.device_count, old.device_memory, old.soc)):
                self.space.close()
                self.space, self.devices = None, []
            if new is None:
                # the built-in defaults undo what the settings in force applied (injected faults, a
                # trace in progress, the leak check off); then nothing is in force
                self.config = config_module.from_environment({})
                self._config = None
            else:
                self.config = new

    def _expect_no_open_device(self, call: str) -> None:
        if any(device.is_open for device in self.devices):
            raise config_module.ConfigError(
                "%s: expected no open device, found device(s) %s still set; reset them first"
                % (call, [d.id for d in self.devices if d.is_open]))


PROCESS = Process()


def _forked() -> None:
    """In a child made by fork: a thread of the parent may have held the runtime lock at the fork (a
    synchronisation in progress); that thread is not in the child, so the lock is made free again. It is
    reset in place, not replaced: the streams' waits and the callbacks hold the same object."""
    PROCESS.lock._at_fork_reinit()  # what the threading module does for its own locks (Python 3.9+)


os.register_at_fork(after_in_child=_forked)
