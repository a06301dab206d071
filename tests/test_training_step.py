"""samples/training_step.py: forward then backward for each of the five pairs, on one stream with
events, each gradient agreeing with a finite-difference estimate made with the forward itself; run
as a user would, under the whole sanitizer, which reports nothing."""
from support import run_sample

PAIRS = ("LogSigmoid", "BinaryCrossEntropyWithLogits", "KlDiv", "CtcLoss", "ScaledMaskedSoftmax")


def assert_every_pair_agrees(stdout: str) -> None:
    """One line per pair, in order, each ending in ': ok' (the gradient agrees)."""
    lines = stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(PAIRS), stdout
    for line in lines:
        assert line.endswith(": ok"), line
        assert "forward " in line and "backward " in line, line


def test_training_step_sample_checks_every_gradient_against_finite_differences():
    done = run_sample("training_step")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    assert_every_pair_agrees(done.stdout)
