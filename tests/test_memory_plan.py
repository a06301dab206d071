"""The memory plan (kernels_cpp/common/memory_plan.h): how the kernels move memory, never what they
compute. Every operator, on its declared samples and (element-wise ones) on sizes either side of
the thresholds, gives the same bytes whatever the plan forces: streaming or ordinary stores, tiny
and huge thresholds, every prefetch distance and hint, small and large blocks, 1 and 2 threads.
Also NPUEMU_MEMORY_PLAN's parsing, the plan's sanity bounds, and what `npuemu` prints of it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import aclnn_api as nn
import emulator
from aclnn_api import _kernels
from aclnn_api.declaration import TensorInput, SampleInput, all_declarations
from aclnn_api.kernel_info import describe_plan
from support import FLOAT_DTYPES, assert_close, last_error, npu, run_declared

pytestmark = [pytest.mark.filterwarnings("ignore:overflow encountered in cast"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in cast")]

CHOICES = ("streaming", "threshold", "prefetch", "hint", "block")

# Forced plans, each with settings; the first is the reference the others must match byte for byte.
# threshold 0 streams every dense output (the declared samples are small); 256K streams the large
# element-wise shapes below but not the small ones; 1G streams nothing.
PLANS = [
    (dict(streaming=False, threshold=1 << 30, prefetch=0, hint="nta", block=1 << 15), dict(threads=1)),
    (dict(streaming=True, threshold=0, prefetch=0, hint="nta", block=4096), dict(threads=1)),
    (dict(streaming=True, threshold=256 << 10, prefetch=1024, hint="t0", block=1 << 15), dict(threads=2)),
    (dict(streaming=True, threshold=0, prefetch=4096, hint="t2", block=64 * 100), dict(threads=2)),
    (dict(streaming=False, threshold=0, prefetch=256, hint="t1", block=1 << 18), dict(threads=2)),
    (dict(streaming=True, threshold=0, prefetch=512, hint="nta", block=8192), dict(threads=1, vector_isa="avx2")),
]

# Element-wise shapes: a flat run with a vector tail, rows starting off any alignment (offset 3
# elements), and one far past 256 KiB in every dtype.
ENGINE_SHAPES = [((16 * 4099 + 5,), 0), ((257, 1031), 3), ((3, 70001), 0)]

ENGINE_OPS = {d.name: d for d in all_declarations() if d.engine_inputs is not None}
FAMILY = "Ascend910B"


@pytest.fixture(autouse=True)
def restore_plan():
    """Each test leaves the plan as it found it (its choices then read as forced)."""
    saved = _kernels.memory_plan()
    yield
    _kernels.set_memory_plan(**{name: saved[name] for name in CHOICES})
    emulator.configure(threads=2, vector_isa="auto")


def engine_sample(declaration, shape, offset, rng):
    sample = declaration.engine_inputs(shape, rng)
    args = dict(sample.args)
    for name, arg in sample.tensors().items():
        if arg.shape == tuple(shape) and offset:
            args[name] = TensorInput(np.array(arg.values, dtype=np.float64), arg.dtype, None, offset, arg.format)
    return SampleInput(sample.label, args)


def outputs_under_every_plan(declaration, sample, dtype):
    """The output's bytes under each forced plan, and the reference (from the first run)."""
    results, runs = [], []
    for choices, settings in PLANS:
        emulator.configure(**settings)
        _kernels.set_memory_plan(**choices)
        with npu(FAMILY) as device:
            with np.errstate(over="ignore", invalid="ignore"):
                ret, actual, reference = run_declared(device, declaration, sample, dtype)
        assert ret == 0, (choices, settings, last_error())
        results.append(np.asarray(actual).tobytes())
        runs.append((actual, reference))
    return results, runs[0][0], runs[0][1]


def assert_identical(results, where):
    for (choices, settings), result in zip(PLANS[1:], results[1:]):
        assert result == results[0], (where, choices, settings)


@pytest.mark.parametrize("name", sorted(ENGINE_OPS))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,offset", ENGINE_SHAPES)
def test_element_wise_results_are_the_same_bytes_under_every_plan(name, dtype, shape, offset):
    declaration = ENGINE_OPS[name]
    sample = engine_sample(declaration, shape, offset, np.random.default_rng(11))
    results, actual, expected = outputs_under_every_plan(declaration, sample, dtype)
    assert_identical(results, (name, shape))
    assert_close(actual, expected, dtype)


def declared_cases():
    for declaration in all_declarations():
        for dtype in FLOAT_DTYPES:
            if declaration.runs(FAMILY, dtype):
                yield pytest.param(declaration, dtype, id="%s-%d" % (declaration.name, dtype))


@pytest.mark.parametrize("declaration,dtype", list(declared_cases()))
def test_every_declared_sample_gives_the_same_bytes_under_every_plan(declaration, dtype):
    """Softmax, CTC and the element-wise operators on all their declared samples (layouts, empty
    and broadcast operands included); threshold 0 makes even these small outputs stream."""
    for sample in declaration.sample_inputs(np.random.default_rng(3)):
        results, _, _ = outputs_under_every_plan(declaration, sample, dtype)
        assert_identical(results, sample.label)


def test_the_plan_is_within_its_sanity_bounds_and_says_where_each_choice_came_from():
    code = "import json; from aclnn_api import _kernels; print(json.dumps(_kernels.memory_plan()))"
    env = {k: v for k, v in os.environ.items() if k != "NPUEMU_MEMORY_PLAN"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert (256 << 10) <= plan["threshold"] <= (1 << 30)
    assert plan["prefetch"] % 64 == 0 and 0 <= plan["prefetch"] <= 4096
    assert plan["hint"] in ("nta", "t0", "t1", "t2")
    assert plan["block"] % 64 == 0 and 4096 <= plan["block"] <= (1 << 18)
    assert set(plan["source"]) == set(CHOICES)
    assert plan["source"]["threshold"] == "caches" and plan["source"]["block"] == "caches"
    caches = plan["caches"]
    assert caches["l2"] <= caches["llc_effective"] <= max(caches["llc_reported"], caches["l2"])
    assert caches["llc_effective"] <= 4 * (1 << 20) * len(os.sched_getaffinity(0)) or caches["llc_effective"] == caches["l2"]
    if plan["fallback"]:  # a discarded measurement leaves the defaults
        assert {plan["source"][c] for c in ("streaming", "prefetch", "hint")} == {"default"}
        assert (plan["streaming"], plan["prefetch"], plan["hint"]) == (True, 512, "nta")
    else:
        assert plan["source"]["streaming"] == plan["source"]["prefetch"] == "measured"
        assert plan["measure_ms"] > 0 and plan["timings_gbps"]
        assert all(0.2 <= rate <= 2000 for rate in plan["timings_gbps"].values())


@pytest.mark.parametrize("spec,expected", [
    ("", {}),
    ("streaming=off", {"streaming": False}),
    ("streaming=on,threshold=8M,prefetch=512,hint=t0,block=32768",
     {"streaming": True, "threshold": 8 << 20, "prefetch": 512, "hint": "t0", "block": 32768}),
    ("threshold=0,prefetch=0", {"threshold": 0, "prefetch": 0}),
    ("threshold=1G,block=256K,hint=nta", {"threshold": 1 << 30, "block": 1 << 18, "hint": "nta"}),
    ("threshold=300k,prefetch=4096,streaming=1", {"threshold": 300 << 10, "prefetch": 4096, "streaming": True}),
    ("Streaming=ON,HINT=T0,Block=64K", {"streaming": True, "hint": "t0", "block": 64 << 10}),  # without regard to case
])
def test_good_specs_are_parsed(spec, expected):
    assert _kernels.parse_memory_plan(spec) == expected


@pytest.mark.parametrize("spec,entry,expected", [
    ("streaming=maybe", "streaming=maybe", "streaming=on or streaming=off"),
    ("threshold=2G", "threshold=2G", "up to 1G"),
    ("threshold=8X", "threshold=8X", "a size in bytes"),
    ("threshold=-1", "threshold=-1", "a size in bytes"),
    ("threshold=99999999999G", "threshold=99999999999G", "up to 1G"),  # past int64 once scaled: was accepted,
    ("prefetch=17179869184G", "prefetch=17179869184G", "in [0, 4096]"),  # as a negative threshold, a 0 prefetch
    ("prefetch=100", "prefetch=100", "a multiple of 64 bytes in [0, 4096]"),
    ("prefetch=8192", "prefetch=8192", "a multiple of 64 bytes in [0, 4096]"),
    ("hint=t3", "hint=t3", "hint=nta, hint=t0, hint=t1 or hint=t2"),
    ("block=1024", "block=1024", "a multiple of 64 elements in [4096, 262144]"),
    ("block=4100", "block=4100", "a multiple of 64 elements in [4096, 262144]"),
    ("prefetch=512,colour=red", "colour=red", "a name among streaming, threshold, prefetch, hint, block"),
    ("prefetch", "prefetch", "name=value"),
    ("prefetch=512,,block=8192", "", "no empty entry"),
    ("prefetch=512,prefetch=0", "prefetch=0", "each name once"),
])
def test_bad_specs_are_refused_naming_the_entry(spec, entry, expected):
    with pytest.raises(ValueError) as raised:
        _kernels.parse_memory_plan(spec)
    assert "NPUEMU_MEMORY_PLAN: entry '%s': expected" % entry in str(raised.value)
    assert expected in str(raised.value)


def test_set_memory_plan_checks_values_as_the_variable_does():
    with pytest.raises(ValueError, match="entry 'prefetch=100'"):
        _kernels.set_memory_plan(prefetch=100)
    with pytest.raises(ValueError, match="entry 'hint=far'"):
        _kernels.set_memory_plan(hint="far")
    plan = _kernels.set_memory_plan(prefetch=256, hint="t1")
    assert (plan["prefetch"], plan["hint"]) == (256, "t1")
    assert plan["source"]["prefetch"] == plan["source"]["hint"] == "forced"


def run_python(code, spec):
    env = {**os.environ, "NPUEMU_MEMORY_PLAN": spec}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_the_variable_forces_choices_at_first_use():
    code = "from aclnn_api import _kernels; p = _kernels.memory_plan(); print(p['streaming'], p['prefetch'], p['hint'], p['source'])"
    done = run_python(code, "streaming=off,prefetch=256,hint=t0")
    assert done.returncode == 0, done.stderr
    streaming, prefetch, hint, sources = done.stdout.split(" ", 3)
    assert (streaming, prefetch, hint) == ("False", "256", "t0")
    assert "'streaming': 'environment'" in sources and "'prefetch': 'environment'" in sources
    assert "'hint': 'environment'" in sources
    everything = run_python(code, "streaming=on,threshold=1M,prefetch=0,hint=nta,block=8192")
    assert "'measured'" not in everything.stdout, everything.stdout  # nothing left to measure


@pytest.mark.parametrize("spec,alternatives", [
    ("prefetch=768", {"prefetch 768 nta", "prefetch 768 t0"}),
    ("prefetch=1024", {"prefetch 1024 nta", "prefetch 1024 t0"}),
    ("hint=t1", {"prefetch none", "prefetch 256 t1", "prefetch 512 t1", "prefetch 1024 t1", "prefetch 2048 t1"}),
])
def test_what_the_variable_leaves_open_is_measured_over_every_alternative(spec, alternatives):
    # A forced distance off the measured grid (768) once left the hint at its default unmeasured,
    # while the plan said "measured".
    code = "import json; from aclnn_api import _kernels; print(json.dumps(_kernels.memory_plan()))"
    done = run_python(code, spec)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    if plan["fallback"]:
        pytest.skip("the measurement was discarded: " + plan["fallback"])
    measured = {name.split(", ", 1)[1] for name in plan["timings_gbps"] if name.startswith("prefetch: ")}
    assert measured == alternatives
    forced, left = spec.split("=")[0], "hint" if spec.startswith("prefetch") else "prefetch"
    assert plan["source"][forced] == "environment" and plan["source"][left] == "measured"


def test_a_bad_variable_fails_every_use_naming_the_entry_and_npuemu_says_so():
    code = ("from aclnn_api import _kernels\n"
            "for _ in range(2):\n"
            "    try:\n"
            "        _kernels.memory_plan()\n"
            "    except ValueError as error:\n"
            "        print(error)\n")
    done = run_python(code, "prefetch=512,block=7")
    assert done.stdout.splitlines() == ["NPUEMU_MEMORY_PLAN: entry 'block=7': expected a multiple of 64 elements "
                                        "in [4096, 262144]"] * 2, done.stderr
    shown = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "NPUEMU_MEMORY_PLAN": "hint=t9"})
    assert shown.returncode == 2, shown  # as for any unusable NPUEMU_* value
    assert "npuemu: NPUEMU_MEMORY_PLAN: entry 'hint=t9': expected" in shown.stderr, shown.stderr


# A program whose first phase is the first call to need the memory plan: its status and executor, then
# its message.
FIRST_PHASE = ("import acl, aclnn_api as nn\n"
               "acl.init(); acl.rt.set_device(0)\n"
               "t = nn.aclCreateTensor([2], nn.ACL_FLOAT, [1], 0, nn.ACL_FORMAT_ND, [2], 0x1000)\n"
               "size, executor, ret = nn.aclnnLogSigmoidBackwardGetWorkspaceSize(t, t, t, t)\n"
               "print(ret, executor)\n"
               "print(acl.get_recent_err_msg())\n"
               "nn.aclDestroyTensor(t); acl.rt.reset_device(0); acl.finalize()\n")


def test_a_bad_variable_is_the_first_phases_invalid_parameter_naming_it_not_a_fault():
    """As every unusable NPUEMU_* value: the layer's invalid-parameter status (161002 for aclnn) and a
    message naming the variable and the entry, from the first call that needs it; never 507000."""
    done = run_python(FIRST_PHASE, "hint=t9")
    assert done.returncode == 0, done.stderr
    status, message = done.stdout.split("\n", 1)
    assert status == "161002 None"
    assert "NPUEMU_MEMORY_PLAN: entry 'hint=t9': expected" in message and "507000" not in done.stdout


def test_a_variable_that_is_not_utf8_is_refused_naming_the_variable_its_value_and_what_it_accepts():
    """Bytes that are not UTF-8 (b"hint=\\xff") made the kernels' message undecodable: 161002 with only
    "'utf-8' codec can't decode byte 0xff". Now, as for every NPUEMU_* value, the message names the
    variable, its value (as Python reads it: \\udcff) and what it accepts; `npuemu` exits 2 with it."""
    expected = ("NPUEMU_MEMORY_PLAN: expected name=value entries separated by commas, the names among streaming, "
                "threshold, prefetch, hint, block, the values in ASCII, found 'streaming=on,hint=\\udcff'")
    done = run_python(FIRST_PHASE, "streaming=on,hint=\udcff")  # written to the environment as the byte 0xff
    assert done.returncode == 0, done.stderr
    status, message = done.stdout.split("\n", 1)
    assert status == "161002 None" and message.strip().endswith(expected), done.stdout
    shown = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "NPUEMU_MEMORY_PLAN": "streaming=on,hint=\udcff"})
    assert shown.returncode == 2 and shown.stderr.strip() == "npuemu: " + expected, shown.stderr


def test_npuemu_prints_the_plan_and_how_it_was_obtained():
    env = {k: v for k, v in os.environ.items() if k != "NPUEMU_MEMORY_PLAN"}
    done = subprocess.run([sys.executable, "-m", "emulator"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if l.startswith("kernels"))
    assert "memory plan streaming=" in line and ",threshold=" in line and ",hint=" in line, line
    assert "measured in " in line or "measurement discarded" in line, line
    assert "from the caches: threshold, block" in line, line
    forced = run_python("from aclnn_api.kernel_info import describe; import emulator; print(describe(emulator.settings()))",
                        "streaming=off,prefetch=0")
    assert "streaming=off" in forced.stdout and "prefetch=0," in forced.stdout
    assert "forced by NPUEMU_MEMORY_PLAN: streaming, prefetch" in forced.stdout, forced.stdout


def test_describe_plan_reads_the_plan_it_is_given():
    plan = {"streaming": False, "threshold": 3 << 20, "prefetch": 192, "hint": "t1", "block": 6400,
            "source": {"streaming": "forced", "threshold": "caches", "prefetch": "measured", "hint": "measured",
                       "block": "environment"},
            "measure_ms": 2.46, "caches": {"l1d": 1, "l2": 1 << 20, "llc_reported": 32 << 20, "llc_effective": 8 << 20},
            "timings_gbps": {}, "fallback": ""}
    text = describe_plan(plan)
    assert text.startswith("memory plan streaming=off,threshold=3M,prefetch=192,hint=t1,block=6400 (")
    assert "measured in 2.5 ms: prefetch, hint" in text and "forced by set_memory_plan: streaming" in text
    assert "forced by NPUEMU_MEMORY_PLAN: block" in text and "LLC 32M reported, 8M counted" in text


def test_the_planner_keeps_the_furthest_of_the_alternatives_it_cannot_tell_apart():
    pick = _kernels.pick_memory_alternative
    grid = [(512, "nta"), (0, "nta"), (256, "nta"), (2048, "nta"), (2048, "t0")]
    # AMD EPYC (Zen 5): none, 256 and 2048 bytes ahead timed alike; 2048 t0 is kept, whichever was fastest.
    assert pick(grid, [37.0, 45.5, 44.0, 44.2, 44.0]) == 4
    assert pick(grid, [37.0, 44.0, 46.0, 45.0, 44.5]) == 4
    # A clear winner stays the winner.
    assert pick(grid, [37.0, 52.0, 44.0, 44.2, 44.0]) == 1
    # Nothing beats the default by 5%: the default stays, however far the others reach.
    assert pick(grid, [44.0, 45.0, 44.0, 45.5, 45.5]) == 0
    # The store stage: two alternatives of the same reach, the faster kept.
    assert pick([(2048, "t0"), (2048, "t0")], [28.0, 42.0]) == 1
    with pytest.raises(ValueError, match="one rate per alternative"):
        pick(grid, [1.0])
