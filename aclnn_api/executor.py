"""aclOpExecutor: what the first phase planned, run by the second phase on a stream.

Single use: the second phase releases it, unless aclSetAclOpExecutorRepeatable was called, in which
case it lives until aclDestroyAclOpExecutor, or until a second phase given workspaceSize > 0 with a null
workspace, which deletes any executor as the library does (docs/runtime.md, "aclnn framework").

The executor knows the operator's tensor parameters in the order of its C prototype, as inputs
(every tensor parameter before the outputs) and outputs, so that aclSetInputTensorAddr and its
relatives can name one by index. Each slot holds the aclTensor (or aclTensorList, or None for a null
optional tensor) the first phase was given; a launch reads its tensors' addresses when it is queued,
so a new address set between launches is the one the next launch uses.
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Union

from emulator import cargs
from emulator.cargs import ACLNN
from emulator.errors import AclError, api
from emulator.resource import Resource, article, live
from emulator.sites import Site

from . import status
from .tensor import aclTensor
from .tensor_list import aclTensorList

Slot = tuple  # (parameter name, aclTensor | aclTensorList | None)
# Why a second phase released an executor, as a later use's message says it.
USED_UP = "already used by its second phase: executors are single-use unless made repeatable"
NULL_WORKSPACE = ("deleted by a second phase given workspaceSize > 0 with a null workspace, as the library "
                  "deletes it, repeatable or not")
INPUTS, OUTPUTS, ALL = "input", "output", "tensor"


class aclOpExecutor(Resource):
    kind = "aclOpExecutor"
    layer = ACLNN

    __slots__ = ("op", "launch", "workspace_size", "repeatable", "ended", "parameters", "arguments", "lock")

    def __init__(self, op: str, launch, workspace_size: int, parameters=None, arguments: tuple = ((), {}),
                 site: Optional[Site] = None):
        self.op = op
        self.launch = launch            # an operator.KernelLaunch, or None when there is nothing to run
        self.workspace_size = workspace_size
        self.repeatable = False
        self.ended: Optional[str] = None  # why a second phase released it (USED_UP, NULL_WORKSPACE)
        self.parameters = parameters    # the operator's operator.Parameters (None: no tensor parameters)
        self.arguments = arguments      # (args, kwargs) of the first phase, aclnn objects by object
        # Held from the liveness check of a second phase to the release that ends a single use: two
        # threads launching one executor cannot both pass the check.
        self.lock = threading.Lock()
        Resource.__init__(self, site)  # not super(): on every first phase

    def describe(self) -> str:
        ended = ", " + self.ended if self.ended else ""
        return "of %s (workspace %d bytes%s)" % (self.op, self.workspace_size, ended)

    def consume(self, site: Optional[Site] = None, why: str = USED_UP) -> None:
        """A second phase (called at `site`) ends its life, for the reason `why`, which a later use's
        message says."""
        self.ended = why
        self.release(site)

    def release(self, site: Optional[Site] = None) -> None:
        """Released, it is remembered by its name and sites only (the handle table keeps thousands of
        released objects to name stale handles): its plan and arguments go now."""
        Resource.release(self, site)
        self.launch, self.arguments, self.parameters = None, ((), {}), None

    def slots(self, role: str) -> tuple:
        """The (name, tensor | tensor list | None) slots of `role` in the order of the C prototype."""
        inputs, outputs = self.parameters.slots(*self.arguments) if self.parameters is not None else ((), ())
        return inputs if role == INPUTS else outputs if role == OUTPUTS else inputs + outputs

    def tensors(self) -> list:
        """(parameter name, aclTensor) of every tensor the first phase was given, lists' members included
        (also those the kernel never reads: the card's executor holds their descriptors all the same)."""
        if self.parameters is None:
            return []
        args, kwargs = self.arguments
        found = []
        for position, name, _ in self.parameters.tensors:
            value = args[position] if position < len(args) else kwargs.get(name)
            if type(value) is aclTensor:
                found.append((name, value))
            elif type(value) is aclTensorList:
                found.extend(("%s[%d]" % (name, i), tensor) for i, tensor in enumerate(value.values)
                             if type(tensor) is aclTensor)
        return found

    def has_unfit_tensors(self, alignment: int) -> bool:
        """Whether a tensor it was planned with is destroyed or its data address not a multiple of
        `alignment`: the check of every launch, which names nothing (tensors() does, when it is true)."""
        args, kwargs = self.arguments
        for value in (args if not kwargs else (*args, *kwargs.values())):
            if type(value) is aclTensor:
                if not value.alive or value.data % alignment:
                    return True
            elif type(value) is aclTensorList and any(
                    type(t) is aclTensor and (not t.alive or t.data % alignment) for t in value.values):
                return True
        return False

    def slot(self, role: str, index: Any, holds: type, parameter: str = "index") -> Slot:
        """The `index`-th slot of `role`, which must hold a `holds` (a tensor, or a list); `parameter`: the
        name of the index in the call's C prototype, which the messages name."""
        slots = self.slots(role)
        index = cargs.size(parameter, index, ACLNN)
        if index >= len(slots):
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected %s %s index below %d (%s of %s: %s), "
                           "found %d" % (parameter, article(role), role, len(slots), "the %s parameters" % role,
                                         self.op, ", ".join(name for name, _ in slots) or "none", index))
        name, value = slots[index]
        if not isinstance(value, holds):
            found = "null" if value is None else "%s %s" % (article(value.kind), value.kind)
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected the index of %s %s %s of %s, found %d: "
                           "%s, which is %s" % (parameter, article(holds.kind), holds.kind, role, self.op, index, name,
                                                found))
        return name, value

    def set_tensor_addr(self, role: str, index: Any, tensor: Any, addr: Any) -> None:
        name, planned = self.slot(role, index, aclTensor)
        given = live(aclTensor, "tensor", tensor)
        _same("tensor", given, planned, "%s %s (%s %d)" % (self.op, name, role, index))
        given.move_to(cargs.optional_pointer("addr", addr, ACLNN))

    def set_dynamic_tensor_addr(self, role: str, ir_index: Any, relative_index: Any, tensors: Any, addr: Any) -> None:
        name, planned = self.slot(role, ir_index, aclTensorList, "irIndex")
        given = live(aclTensorList, "tensors", tensors)
        _same("tensors", given, planned, "%s %s (%s %d)" % (self.op, name, role, ir_index))
        relative = cargs.size("relativeIndex", relative_index, ACLNN)
        if relative >= len(given):
            raise AclError(status.ACLNN_ERR_PARAM_INVALID, "relativeIndex: expected an index below the %d tensor(s) "
                           "of %s, found %d" % (len(given), name, relative))
        given.values[relative].move_to(cargs.optional_pointer("addr", addr, ACLNN))


def _same(argument: str, given: Union[aclTensor, aclTensorList], planned: Union[aclTensor, aclTensorList],
          where: str) -> None:
    """**Choice**: the tensor (list) passed must be the one the first phase was given for that slot;
    the kernel was planned for its dtype and shape."""
    if given is not planned:
        raise AclError(status.ACLNN_ERR_PARAM_INVALID, "%s: expected the %s the first phase was given as %s, "
                       "%s (made at %s), found another one, %s (made at %s)"
                       % (argument, planned.kind, where, planned.describe(), planned.site, given.describe(), given.site))


def live_executor(executor: Any, null_code: int = status.ACLNN_ERR_PARAM_NULLPTR) -> aclOpExecutor:
    return live(aclOpExecutor, "executor", executor, null_code)


@api("aclSetAclOpExecutorRepeatable", internal_code=status.ACLNN_ERR_INNER)
def aclSetAclOpExecutorRepeatable(executor: Optional[aclOpExecutor]) -> int:
    """Returns the status: the executor survives its second phases until aclDestroyAclOpExecutor (0);
    561103 for null, 161002 for one already used or destroyed."""
    plan = live_executor(executor, null_code=status.ACLNN_ERR_INNER_NULLPTR)
    with plan.lock:
        live_executor(plan).repeatable = True


@api("aclDestroyAclOpExecutor", internal_code=status.ACLNN_ERR_INNER)
def aclDestroyAclOpExecutor(executor: Optional[aclOpExecutor]) -> int:
    """Returns the status: 0; 561103 for null, 161002 for one already used or destroyed."""
    plan = live_executor(executor, null_code=status.ACLNN_ERR_INNER_NULLPTR)
    with plan.lock:
        live_executor(plan).release()


def _tensor_setter(name: str, role: str):
    @api(name, internal_code=status.ACLNN_ERR_INNER)
    def set_addr(executor: aclOpExecutor, index: int, tensor: aclTensor, addr: Optional[int]) -> int:
        live_executor(executor).set_tensor_addr(role, index, tensor, addr)
    set_addr.__name__ = set_addr.__qualname__ = name
    set_addr.__doc__ = ("Returns the status: the %s tensor number `index` of the executor's operator (in the "
                        "order of its C prototype%s) is at `addr` from the next launch on, as its aclTensor is "
                        "(0); 161001 for a null executor or tensor; 161002 for an index out of range, a tensor "
                        "other than the one the first phase was given there, or a stale handle."
                        % (role if role != ALL else "", ", inputs then outputs" if role == ALL else ""))
    return set_addr


def _list_setter(name: str, role: str):
    @api(name, internal_code=status.ACLNN_ERR_INNER)
    def set_addr(executor: aclOpExecutor, irIndex: int, relativeIndex: int, tensors: aclTensorList,
                 addr: Optional[int]) -> int:
        live_executor(executor).set_dynamic_tensor_addr(role, irIndex, relativeIndex, tensors, addr)
    set_addr.__name__ = set_addr.__qualname__ = name
    set_addr.__doc__ = ("Returns the status: tensor `relativeIndex` of the aclTensorList that is %s parameter "
                        "`irIndex` of the executor's operator is at `addr` from the next launch on (0); 161001 "
                        "for a null executor or list; 161002 for an index out of range or a parameter that is "
                        "no tensor list." % (role if role != ALL else "tensor"))
    return set_addr


aclSetInputTensorAddr = _tensor_setter("aclSetInputTensorAddr", INPUTS)
aclSetOutputTensorAddr = _tensor_setter("aclSetOutputTensorAddr", OUTPUTS)
aclSetTensorAddr = _tensor_setter("aclSetTensorAddr", ALL)
aclSetDynamicInputTensorAddr = _list_setter("aclSetDynamicInputTensorAddr", INPUTS)
aclSetDynamicOutputTensorAddr = _list_setter("aclSetDynamicOutputTensorAddr", OUTPUTS)
aclSetDynamicTensorAddr = _list_setter("aclSetDynamicTensorAddr", ALL)
# The library exports the same functions under capitalised names too.
AclSetInputTensorAddr = aclSetInputTensorAddr
AclSetOutputTensorAddr = aclSetOutputTensorAddr
AclSetTensorAddr = aclSetTensorAddr
AclSetDynamicInputTensorAddr = aclSetDynamicInputTensorAddr
AclSetDynamicOutputTensorAddr = aclSetDynamicOutputTensorAddr
AclSetDynamicTensorAddr = aclSetDynamicTensorAddr
