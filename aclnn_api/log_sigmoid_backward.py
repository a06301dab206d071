"""aclnnLogSigmoidBackward (spec/OPS.md §4).

gradInput = gradOutput / (1 + e^self), computed in fp32 (fp16/bf16 rounded to nearest-even on
output). `buffer` is only required to be non-null: the library never reads it. No rank limit, no
format check; empty gradOutput or self succeeds with workspace 0 and nothing to run.
"""
from __future__ import annotations


from . import _kernels, checks
from emulator.dtypes import ACL_BF16, ACL_FLOAT, ACL_FLOAT16
from .operator import KernelLaunch, chip_dtypes, first_phase, second_phase, view
from .tensor import aclTensor


def supported_dtypes() -> tuple:
    """FLOAT16 and FLOAT; A2, A3 and 950 add BFLOAT16."""
    return chip_dtypes((ACL_FLOAT16, ACL_FLOAT), (ACL_BF16,))


@first_phase("aclnnLogSigmoidBackward")
def aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput: aclTensor, self: aclTensor, buffer: aclTensor,
                                            gradInput: aclTensor):
    checks.not_null(gradOutput=gradOutput, self=self, buffer=buffer, gradInput=gradInput)
    allowed, chip = supported_dtypes()
    checks.dtype_in("gradOutput", gradOutput, allowed, chip)
    checks.dtype_in("self", self, allowed, chip)
    checks.same_dtype("gradInput", gradInput, "gradOutput", gradOutput)
    checks.same_dtype("gradInput", gradInput, "self", self)
    checks.same_shape("gradOutput", gradOutput, "gradInput", gradInput)
    checks.same_shape("self", self, "gradInput", gradInput)
    if gradOutput.is_empty or self.is_empty:
        return None
    return KernelLaunch(_kernels.log_sigmoid_backward,
                        (view("gradOutput", gradOutput), view("self", self), view("gradInput", gradInput)))


aclnnLogSigmoidBackward = second_phase("aclnnLogSigmoidBackward")
