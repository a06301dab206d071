"""Who is at fault when a kernel fails: the data (KernelDataError, which a launch reports as the
AI core's exception) or npuemu's own caller, which broke the kernel's contract (TypeError for a
tuple of the wrong form, RuntimeError otherwise: an internal error, never an AI-core fault)."""
import numpy as np
import pytest

from aclnn_api import _kernels, ctc_loss_backward, operator
from emulator.dtypes import ACL_BOOL, ACL_DOUBLE, ACL_FLOAT, ACL_INT32, ACL_INT64
from emulator import runtime
from emulator.memory import DeviceFault


def view(array: np.ndarray, dtype: int = ACL_FLOAT) -> tuple:
    return (array.ctypes.data, dtype, array.shape, tuple(s // array.itemsize for s in array.strides))


def ctc_call(labels: np.ndarray, input_lengths=(4, 4), target_lengths=(2, 1), blank=0, width=5, sizes=None):
    """_kernels.ctc_loss_backward on T=4, N=2, C=5 with padded targets `labels`."""
    rng = np.random.default_rng(1)
    log_probs = np.log(rng.dirichlet(np.ones(5), size=(4, 2))).astype(np.float32)
    alpha = rng.normal(size=(2, 4, width)).astype(np.float32)
    ones, out = np.ones(2, np.float32), np.full((4, 2, 5), 7.0, np.float32)
    layout = list(ctc_loss_backward.workspace_layout(2, width, ACL_FLOAT))  # the first phase's, for 2 slots
    workspace = [np.zeros(size, np.uint8) for size in layout]
    _kernels.ctc_loss_backward(view(ones), view(log_probs), view(labels, ACL_INT64), view(ones), view(alpha),
                               view(out), list(input_lengths), list(target_lengths), blank, False, 2, width,
                               *(w.ctypes.data for w in workspace), layout if sizes is None else sizes)
    return out


def test_a_label_out_of_range_is_the_datas_fault():
    with pytest.raises(_kernels.KernelDataError, match=r"targets: expected labels in \[0, C = 5\), found 9"):
        ctc_call(np.array([[1, 9], [2, 0]], np.int64))
    with pytest.raises(_kernels.KernelDataError, match=r"inputLengths\[1\]: expected a length in \[0, 4\], found 5"):
        ctc_call(np.array([[1, 2], [2, 0]], np.int64), input_lengths=(4, 5))
    assert issubclass(_kernels.KernelDataError, Exception)
    assert not issubclass(_kernels.KernelDataError, (ValueError, IndexError, RuntimeError, TypeError))


def test_good_labels_compute():
    assert (ctc_call(np.array([[1, 2], [2, 0]], np.int64)) != 7.0).all()


TUPLES = {  # what npuemu's Python could pass by mistake, instead of (pointer, dtype, shape, strides)
    "three items": lambda a: (a.ctypes.data, ACL_FLOAT, a.shape),
    "a list": lambda a: list(view(a)),
    "a float pointer": lambda a: (float(a.ctypes.data), ACL_FLOAT, a.shape, (4, 1)),
    "a negative pointer": lambda a: (-1, ACL_FLOAT, a.shape, (4, 1)),
    "a string dtype": lambda a: (a.ctypes.data, "float", a.shape, (4, 1)),
    "fewer strides than dims": lambda a: (a.ctypes.data, ACL_FLOAT, a.shape, (1,)),
    "a negative dim": lambda a: (a.ctypes.data, ACL_FLOAT, (-4, 4), (4, 1)),
    "a shape of floats": lambda a: (a.ctypes.data, ACL_FLOAT, (4.0, 4.0), (4, 1)),
    "more dims than any tensor has": lambda a: (a.ctypes.data, ACL_FLOAT, (1,) * 17, (0,) * 17),
}


@pytest.mark.parametrize("form", TUPLES)
def test_a_tensor_tuple_of_the_wrong_form_is_a_type_error(form):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(TypeError):
        _kernels.log_sigmoid_backward(TUPLES[form](a), view(a), view(a))


def test_a_tensor_tuple_takes_numpy_integers_and_lists():
    a, out = np.full((4, 4), 0.5, np.float32), np.zeros((4, 4), np.float32)
    loose = (np.uint64(a.ctypes.data), np.int32(ACL_FLOAT), [np.int64(4), 4], [4, np.int16(1)])
    _kernels.log_sigmoid_backward(loose, view(a), view(out))
    np.testing.assert_allclose(out, 0.5 / (1 + np.exp(0.5)), rtol=1e-6)


CONTRACTS = {  # each a call that the first phases never make: npuemu's own bug
    "an INT32 operand": lambda a, m: _kernels.log_sigmoid_backward(view(a), view(a.view(np.int32), ACL_INT32),
                                                                   view(a)),
    "operands of other shapes": lambda a, m: _kernels.log_sigmoid_backward(view(a), view(a[:2]), view(a)),
    "BCE with a weight of another rank": lambda a, m: _kernels.binary_cross_entropy_with_logits_backward(
        view(a), view(a), view(a), view(a), view(a[0]), None, 1.0),
    "KlDiv out that is no reduction": lambda a, m: _kernels.kl_div_backward(view(a[:3]), view(a), view(a), 1.0,
                                                                              False),
    "softmax of rank 2": lambda a, m: _kernels.scaled_masked_softmax_backward(view(a), view(a), view(m, ACL_BOOL),
                                                                              view(a), 1.0),
    "softmax in DOUBLE": lambda a, m: _kernels.scaled_masked_softmax_backward(
        *(view(a.view(np.float64).reshape(1, 1, 2, 4), ACL_DOUBLE),) * 2, view(m[:2].reshape(1, 1, 2, 4), ACL_BOOL),
        view(a.view(np.float64).reshape(1, 1, 2, 4), ACL_DOUBLE), 1.0),
    "CTC with a blank out of range": lambda a, m: ctc_call(np.array([[1, 2], [2, 0]], np.int64), blank=5),
    "CTC with another workspace layout": lambda a, m: ctc_call(np.array([[1, 2], [2, 0]], np.int64),
                                                               sizes=[8, 8, 8, 8, 8]),
}


@pytest.mark.parametrize("contract", CONTRACTS)
def test_a_broken_contract_is_a_runtime_error_not_the_datas_fault(contract):
    a, mask = np.zeros((4, 4), np.float32), np.zeros((4, 4), np.bool_)
    with pytest.raises(RuntimeError) as error:
        CONTRACTS[contract](a, mask)
    assert "aclnn" in str(error.value) and not isinstance(error.value, _kernels.KernelDataError)


def raising(error: BaseException):
    def kernel():
        raise error
    return kernel


def test_execute_reports_only_the_datas_fault_as_a_device_fault():
    launch = operator.KernelLaunch(raising(_kernels.KernelDataError("targets: expected labels in [0, 5)")), ())
    with pytest.raises(DeviceFault, match=r"aclnnCtcLossBackward: targets: expected labels in \[0, 5\)"):
        operator._execute("aclnnCtcLossBackward", launch, 0, None)
    for error in (RuntimeError("broken contract"), TypeError("incompatible function arguments"), ValueError("x"),
                  IndexError("y"), TimeoutError("task timeout"), KeyboardInterrupt()):
        launch = operator.KernelLaunch(raising(error), ())
        with pytest.raises(type(error)):  # to the stream as it is: internal, timeout, interrupt
            operator._execute("aclnnCtcLossBackward", launch, 0, None)


def test_execute_hands_the_task_timeout_to_the_kernels():
    before = runtime.settings().task_timeout
    try:
        runtime.configure(task_timeout=12.5)
        operator._execute("aclnnTest", operator.KernelLaunch(lambda: None, ()), 0, None)
        assert _kernels.task_timeout() == 12.5
    finally:
        runtime.configure(task_timeout=before)
        operator._execute("aclnnTest", operator.KernelLaunch(lambda: None, ()), 0, None)
    assert _kernels.task_timeout() == before
