"""samples/training_step.py: forward then backward for each of the five pairs, on one stream with
events, each gradient agreeing with a finite-difference estimate made with the forward itself; run
as a user would, under the whole sanitizer, which reports nothing, on every chip: a pair the chip
has no kernel for is skipped with its first phase's status and message, and leaks nothing."""
import pytest

from support import ALL_SOCS, run_sample

# The five chips, and Ascend950's other name (CtcLoss's logAlpha width goes by the chip's family).
CHIPS = ALL_SOCS + ("Ascend910_95",)
PAIRS = ("LogSigmoid", "BinaryCrossEntropyWithLogits", "KlDiv", "CtcLoss", "ScaledMaskedSoftmax")
# The pairs a chip has no kernel for (docs/ops: aclnnScaledMaskedSoftmax runs on A2, A3 and 950 only),
# with the first phase that refuses them.
SKIPPED = {"Ascend910": {"ScaledMaskedSoftmax": "aclnnScaledMaskedSoftmaxGetWorkspaceSize"},
           "Ascend310P": {"ScaledMaskedSoftmax": "aclnnScaledMaskedSoftmaxGetWorkspaceSize"}}


def assert_every_pair_agrees(stdout: str, soc: str = "Ascend910B") -> None:
    """One line per pair, in order, each ending in ': ok' (the gradient agrees), but those `soc`
    has no kernel for: skipped, naming the first phase that refused, its 561003 and the chip."""
    lines = stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(PAIRS), stdout
    skipped = SKIPPED.get(soc, {})
    for pair, line in zip(PAIRS, lines):
        if pair in skipped:
            assert " skipped: %s returned 561003: " % skipped[pair] in line, line
            assert soc in line, line  # the message names the chip
        else:
            assert line.endswith(": ok"), line
            assert "forward " in line and "backward " in line, line


@pytest.mark.parametrize("soc", CHIPS)
def test_training_step_sample_checks_every_gradient_against_finite_differences(soc):
    done = run_sample("training_step", {"NPUEMU_SOC": soc})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    assert_every_pair_agrees(done.stdout, soc)
