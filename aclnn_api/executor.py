"""aclOpExecutor: what the first phase planned, run by the second phase on a stream.

Single use: the second phase releases it, unless aclSetAclOpExecutorRepeatable was called, in which
case it lives until aclDestroyAclOpExecutor (spec/RUNTIME.md §2.3).
"""
from __future__ import annotations

from typing import Any, Optional

from emulator import leaks
from emulator.errors import AclError, api

from . import status


class aclOpExecutor:
    __slots__ = ("op", "launch", "workspace_size", "repeatable", "alive", "site")

    def __init__(self, op: str, launch, workspace_size: int, site: str):
        self.op = op
        self.launch = launch            # an operator.KernelLaunch, or None when there is nothing to run
        self.workspace_size = workspace_size
        self.repeatable = False
        self.alive = True
        self.site = site

    def describe(self) -> str:
        return "of %s (workspace %d bytes)" % (self.op, self.workspace_size)

    def release(self) -> None:
        self.alive = False
        leaks.untrack(self)

    def __repr__(self) -> str:
        return "<aclOpExecutor %s>" % self.describe()


def live_executor(executor: Any, null_code: int = status.ACLNN_ERR_PARAM_NULLPTR) -> aclOpExecutor:
    if executor is None:
        raise AclError(null_code, "executor: expected an aclOpExecutor from a first phase, found null")
    if not isinstance(executor, aclOpExecutor):
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "executor: expected an aclOpExecutor, found %s" % type(executor).__name__)
    if not executor.alive:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID,
                       "executor: expected a live executor, found one %s already used or destroyed (made at %s); "
                       "executors are single-use unless made repeatable" % (executor.describe(), executor.site))
    return executor


@api("aclSetAclOpExecutorRepeatable", internal_code=status.ACLNN_ERR_INNER)
def aclSetAclOpExecutorRepeatable(executor: Optional[aclOpExecutor]) -> None:
    live_executor(executor, null_code=status.ACLNN_ERR_INNER_NULLPTR).repeatable = True


@api("aclDestroyAclOpExecutor", internal_code=status.ACLNN_ERR_INNER)
def aclDestroyAclOpExecutor(executor: Optional[aclOpExecutor]) -> None:
    live_executor(executor, null_code=status.ACLNN_ERR_INNER_NULLPTR).release()
