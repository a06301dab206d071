"""aclnnLogSigmoidBackward: the cases its declaration does not generate (values across chips,
dtypes and layouts, dtypes, determinism, empty inputs and every check are in test_operators.py):
extreme inputs, the never-read buffer, the documentation's sample."""
import numpy as np
import pytest

import aclnn_api as nn
from aclnn_api.log_sigmoid_backward import reference
from support import assert_sample_prints, npu

OP = (nn.aclnnLogSigmoidBackwardGetWorkspaceSize, nn.aclnnLogSigmoidBackward)


def test_extreme_inputs_do_not_overflow():
    x = np.array([-1e30, -100.0, -20.0, 0.0, 20.0, 100.0, 1e30, np.inf, -np.inf], dtype=np.float32)
    with npu() as device:
        go, xs = device.tensor(np.ones_like(x), nn.ACL_FLOAT), device.tensor(x, nn.ACL_FLOAT)
        gi = device.empty(x.shape, nn.ACL_FLOAT)
        assert device.run(*OP, go.tensor, xs.tensor, go.tensor, gi.tensor) == 0
        expected = reference({"gradOutput": 1.0, "self": x.astype(np.float64)})
        np.testing.assert_allclose(device.read(gi), expected, rtol=1e-6, atol=1e-30)


@pytest.mark.sanitizer_reports("memory freed while in use", "pending work destroyed")
def test_buffer_is_never_validated_beyond_null():
    """The library's unit tests pass a buffer of any shape and dtype (and the generated tests check
    that a negative dim is rejected in every other tensor): only null is refused."""
    with npu() as device:
        go, x, gi = (device.empty((2, 2), nn.ACL_FLOAT).tensor for _ in range(3))
        buffer = device.empty((5, 1, 3), nn.ACL_INT64).tensor
        assert device.run(*OP, go, x, buffer, gi) == 0


def test_sample_prints_the_documented_values_and_leaks_nothing():
    assert_sample_prints("log_sigmoid_backward", ["result[0] is: 0.268941", "result[1] is: 0.119203",
                                                 "result[2] is: 0.047426", "result[3] is: 0.017986"])
