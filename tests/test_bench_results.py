"""bench/RESULTS.md keeps one section per CPU: a run replaces its own CPU's section and keeps the others."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))

from report import CPU_MARK, merge, sections  # noqa: E402


def section(cpu: str, body: str) -> str:
    return "%s\n## %s\n\n%s\n" % (CPU_MARK % cpu, cpu, body)


def test_a_run_replaces_its_cpus_section_first_and_keeps_the_others():
    amd, intel_old, intel_new = section("AMD EPYC", "amd"), section("Intel Xeon", "old"), section("Intel Xeon", "new")
    text = merge(merge("", "AMD EPYC", amd), "Intel Xeon", intel_old)
    assert list(sections(text)) == ["Intel Xeon", "AMD EPYC"]
    text = merge(text, "Intel Xeon", intel_new)
    found = sections(text)
    assert found == {"Intel Xeon": intel_new, "AMD EPYC": amd}
    assert text.startswith("# npuemu benchmarks") and text.count("# npuemu benchmarks") == 1


def test_a_file_of_the_old_single_cpu_form_is_replaced():
    assert sections("# npuemu benchmarks\n\n## Headline\n") == {}
    assert list(sections(merge("# npuemu benchmarks\n\n## Headline\n", "X", section("X", "x")))) == ["X"]


def test_the_committed_results_have_a_section_per_cpu_with_its_commit():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "RESULTS.md")
    with open(path) as f:
        found = sections(f.read())
    assert found, "bench/RESULTS.md has no CPU section"
    for cpu, text in found.items():
        assert "(commit " in text and "| CPU | %s |" % cpu in text


# ---------------------------------------------------------------------------------------------
# The roofline of the large cases: pure functions on synthetic Results (no timing).

import aclnn_api as nn  # noqa: E402
import emulator  # noqa: E402
from aclnn_api import _kernels  # noqa: E402
from report import Result, render, roofline_headline, roofline_table  # noqa: E402
from roofline import Ceiling, in_cache_units, kernel_participants, l2_bytes, not_measured, seconds_per_element  # noqa: E402
from cases import BY_NAME, Size  # noqa: E402
from run import InCacheProbe, cpu_fields, threads_per_core  # noqa: E402

LARGE = Size("large", "4096x4096", {"shape": (4096, 4096)})
ELEMENTS = 4096 * 4096
BYTES = 12 * ELEMENTS     # 3 float32 arrays


def large_result(npuemu_gbps: float, triad_gbps: float, ceiling_gbps, threads: int = 1, op: str = "LogSigmoidBackward",
                 dtype: int = nn.ACL_FLOAT) -> Result:
    """A large row whose npuemu, triad and in-cache rates are the given GB/s at 12 bytes per element."""
    if ceiling_gbps is None:
        ceiling = not_measured("no in-cache form", 12.0)
    else:
        ceiling = Ceiling(("16x4096", "8x4096"), 12.0 / (ceiling_gbps * 1e9), 12.0, 100)
    return Result(op, LARGE, dtype, threads, BYTES / (npuemu_gbps * 1e9), None, BYTES / (triad_gbps * 1e9), BYTES,
                  BYTES, 10, "ok", False, ceiling=ceiling)


def test_the_lower_roof_bounds_a_row_and_names_the_bound():
    memory_bound = large_result(npuemu_gbps=9.0, triad_gbps=12.0, ceiling_gbps=40.0)
    assert memory_bound.bound == "memory"
    assert abs(memory_bound.attainable_gbps - 12.0) < 1e-9 and abs(memory_bound.percent_of_attainable - 75.0) < 1e-9
    assert not memory_bound.meets_target
    compute_bound = large_result(npuemu_gbps=7.0, triad_gbps=12.0, ceiling_gbps=7.5)
    assert compute_bound.bound == "compute"
    assert abs(compute_bound.attainable_gbps - 7.5) < 1e-9 and compute_bound.meets_target
    assert abs(compute_bound.ceiling.elements_per_s - 7.5e9 / 12) < 1
    unknown = large_result(npuemu_gbps=6.0, triad_gbps=12.0, ceiling_gbps=None)
    assert unknown.bound == "unknown" and abs(unknown.percent_of_attainable - 50.0) < 1e-9


def test_the_headline_lists_each_large_case_with_a_mark_and_its_percent():
    rows = [large_result(11.0, 12.0, 40.0, threads=1), large_result(9.0, 20.0, 60.0, threads=2),
            large_result(7.0, 12.0, 7.5, dtype=nn.ACL_FLOAT16), large_result(6.0, 12.0, None, op="CtcLossBackward")]
    rows[1].stalled.append("npuemu")
    lines = roofline_headline(rows)
    assert lines == [
        "- LogSigmoidBackward 4096x4096 float32: 1 thr ✓ 92% (memory), 2 thr ✗ 45% (memory) ⚠",
        "- LogSigmoidBackward 4096x4096 float16: 1 thr ✓ 93% (compute)",
        "- CtcLossBackward 4096x4096 float32: 1 thr ✗ 50% of triad, no compute ceiling"]


def test_the_roofline_table_shows_the_ceiling_and_why_one_is_missing():
    table = roofline_table([large_result(7.0, 12.0, 7.5), large_result(6.0, 12.0, None)])
    measured = table[2].split(" | ")
    assert measured[6:13] == ["16x4096 vs 8x4096", "100", "0.625 elem", "7.50", "compute", "7.50", "93%"]
    assert "| — | — | — ¹ | unknown" in table[3] and table[-1].startswith("¹ no compute ceiling") and "no in-cache form" in table[-1]


def test_render_puts_the_roofline_in_the_headline_area_and_under_each_operator():
    info = {"CPU": "Test CPU", "date": "today", "commit": "abc"}
    small = Result("KlDivBackward", Size("4x4", "4x4", {"shape": (4, 4)}), nn.ACL_FLOAT, 1, 1e-5, None, 1e-6, 192, 192,
                   10, "ok", False)
    text = render(info, [], [], None, [small, large_result(11.5, 12.0, 30.0, op="KlDivBackward")], [], [], (1,),
                  {"KlDivBackward": "mul"})
    headline_area = text.split("### KlDivBackward")[0]
    assert "### Roofline" in headline_area and "- KlDivBackward 4096x4096 float32: 1 thr ✓ 96% (memory)" in headline_area
    assert "Roofline of the large cases:" in text.split("### KlDivBackward")[1]
    assert list(sections(merge("", "Test CPU", text))) == ["Test CPU"]
    without = render(info, [], [], None, [small], [], [], (1,), {"KlDivBackward": "mul"})
    assert "Roofline" not in without


def test_the_in_cache_sizes_fit_half_an_l2_per_thread_in_powers_of_two():
    l2 = 2 << 20
    assert in_cache_units(48 << 10, 1, l2) == (16, 8)          # 768 KiB then 384 KiB
    assert in_cache_units(48 << 10, 2, l2) == (32, 16)         # each thread its own L2's share
    assert in_cache_units(96 << 10, 1, l2) == (8, 4)
    assert in_cache_units(600 << 10, 1, l2) is None            # two rows would not fit
    for unit in (1000, 24 << 10, 97 << 10, 250 << 10):
        larger, smaller = in_cache_units(unit, 2, l2)
        assert larger == 2 * smaller and larger * unit <= 2 * l2 // 2 and (larger // 2) & (larger // 2 - 1) == 0


def test_an_in_cache_call_uses_as_many_threads_as_the_kernels_give_it():
    grain = _kernels.ELEMENTWISE_GRAIN
    assert kernel_participants(grain // 2, 1) == 1      # one thread computes any size
    assert kernel_participants(grain, 2) == 1            # one grain: one thread
    assert kernel_participants(grain + 1, 2) == 2        # a started second grain: two
    assert kernel_participants(100 * grain, 2) == 2


def test_a_cut_that_half_an_l2_leaves_on_one_thread_may_take_more_of_it():
    # BCE-with-logits FLOAT with weight and posWeight, 2 threads: on a 1 MiB L2 (AMD EPYC, Zen 5) half of
    # it gives 8 and 4 rows of 4096, and 4 rows are a single grain; three quarters of it give 16 and 8,
    # to the forward and to the backward (five FLOAT streams).
    bce = BY_NAME["BinaryCrossEntropyWithLogits"]
    for op in (bce, BY_NAME["BinaryCrossEntropyWithLogitsBackward"]):
        sizes, why_not = InCacheProbe.plan(op, LARGE, nn.ACL_FLOAT, 2, l2=1 << 20)
        assert not why_not and [s.params["shape"] for s in sizes] == [(16, 4096), (8, 4096)], op.name
    sizes, why_not = InCacheProbe.plan(bce, LARGE, nn.ACL_FLOAT, 2, l2=2 << 20)    # a 2 MiB L2: half of it
    assert not why_not and [s.params["shape"] for s in sizes] == [(16, 4096), (8, 4096)]


def test_a_cut_holds_eight_units_per_thread_where_three_quarters_of_an_l2_allow():
    ctc = BY_NAME["CtcLoss"]
    large = next(s for s in ctc.sizes if s.large)
    for l2 in (1 << 20, 2 << 20):    # the AMD EPYC's L2 (half of it: 4 and 2 items) and the Intel Xeon's
        sizes, why_not = InCacheProbe.plan(ctc, large, nn.ACL_FLOAT, 1, l2=l2)
        assert not why_not and [s.shape for s in sizes] == ["T100 N8 C64 S50", "T100 N4 C64 S50"], l2
    bce = BY_NAME["BinaryCrossEntropyWithLogits"]
    sizes, _ = InCacheProbe.plan(bce, LARGE, nn.ACL_FLOAT, 1, l2=1 << 20)
    assert [s.params["shape"] for s in sizes] == [(8, 4096), (4, 4096)]
    # Where three quarters do not hold eight (ScaledMaskedSoftmaxBackward FLOAT, 2x8x1024x1024), half an L2.
    sms = BY_NAME["ScaledMaskedSoftmaxBackward"]
    big = next(s for s in sms.sizes if s.shape == "2x8x1024x1024")
    sizes, _ = InCacheProbe.plan(sms, big, nn.ACL_FLOAT, 1, l2=1 << 20)
    assert [s.shape for s in sizes] == ["1x8x4x1024", "1x8x2x1024"]


def test_the_per_element_cost_is_the_difference_of_the_two_calls():
    assert abs(seconds_per_element(125e-6, 75e-6, 65536, 32768) - 50e-6 / 32768) < 1e-18
    assert seconds_per_element(70e-6, 75e-6, 65536, 32768) is None   # noise: the larger was not slower
    assert seconds_per_element(70e-6, 60e-6, 4096, 4096) is None


def test_l2_comes_from_the_level_2_cache_not_the_last_level(tmp_path):
    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "64K"), (2, "Unified", "2048K"),
                                                 (3, "Unified", "491520K")]):
        directory = tmp_path / ("index%d" % index)
        directory.mkdir()
        for name, value in (("level", str(level)), ("type", kind), ("size", size)):
            (directory / name).write_text(value + "\n")
    assert l2_bytes(str(tmp_path)) == 2 << 20
    assert l2_bytes(str(tmp_path / "missing")) is None


def test_the_in_cache_shapes_keep_the_inner_layout():
    elementwise = BY_NAME["BinaryCrossEntropyWithLogitsBackward"]
    assert elementwise.in_cache(LARGE, 8).params["shape"] == (8, 4096)
    softmax = BY_NAME["ScaledMaskedSoftmaxBackward"]
    large = next(s for s in softmax.sizes if s.shape == "8x16x512x512")
    assert softmax.in_cache(large, 4).params["shape"] == (1, 16, 4, 512)
    ctc = BY_NAME["CtcLossBackward"]
    assert ctc.in_cache is None and ctc.in_cache_why_not


def test_the_ctc_forward_ceiling_counts_lattice_cells_on_a_cut_with_the_large_cases_values():
    # CtcLoss's work is L·(2S+1) alpha cells per batch item, whatever C: its ceiling is a cut of a
    # quarter of T and S at full length, on 64 of the large case's 5000 classes, and counts cells.
    forward = BY_NAME["CtcLoss"]
    large = next(s for s in forward.sizes if s.large)
    case = forward.build(large, nn.ACL_FLOAT)
    lengths = zip(case.attrs["inputLengths"], case.attrs["targetLengths"])
    assert forward.work(case) == sum(L * (2 * S + 1) for L, S in lengths) < case.output[1][0] * case.output[1][1] * case.output[1][2]
    assert forward.work_unit == "cell" and BY_NAME["LogSigmoid"].work_unit == "elem"
    cut = forward.in_cache(large, 4)
    assert cut.shape == "T100 N4 C64 S50"
    small = forward.build(cut, nn.ACL_FLOAT)
    assert small.inputs["logProbs"].shape == (100, 4, 64)
    assert small.attrs["inputLengths"] == [100] * 4 and small.attrs["targetLengths"] == [50] * 4
    assert forward.work(small) == 4 * 100 * 101
    targets = next(small.inputs["targets"].blocks())
    assert ((targets >= 1) & (targets < 64)).all() and (targets[:, 1:] != targets[:, :-1]).all()
    # The values a cell reads are distributed as the large case's (log-softmaxes over 5000 classes,
    # median about -11.5), not as those of a case of 64 classes (about -7.4).
    large_rows = case.inputs["logProbs"].make_block(0, 0, 64)
    cut_rows = small.inputs["logProbs"].make_block(0, 0, 64)
    assert abs(np.median(cut_rows) - np.median(large_rows)) < 0.5 and np.median(cut_rows) < -np.log(5000)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("row_bytes,block_bytes", [(3 << 10, 128 << 10), (5 << 10, 128 << 10), (9 << 10, 1 << 20),
                                                   (1536, 128 << 10), (8192 * 9, 1 << 20), (100, 128 << 10)])
def test_a_power_of_two_of_softmax_rows_shares_evenly_between_the_threads(threads, row_bytes, block_bytes):
    # The in-cache calls of the roofline are powers of two of rows; with blocks of 42 rows, 128 rows
    # went 42/42/42/2 and the difference of two calls measured one thread's share.
    cols = row_bytes // 3
    for rows in (2 ** k for k in range(0, 15)):
        block = _kernels.softmax_block_rows(rows, cols, threads, row_bytes, block_bytes)
        assert block & (block - 1) == 0
        assert block == 1 or block * row_bytes <= block_bytes
        blocks = -(-rows // block)
        if rows >= 4 * threads and rows * cols >= threads * (1 << 13):
            assert blocks % threads == 0, (rows, block)


def equal_speed_shares(blocks: int, threads: int) -> tuple[list, int]:
    """(blocks each thread runs, runs taken) when threads of one speed take runs of blocks as
    share_block_runs hands them out (a block takes one unit of time; ties go to the lower thread)."""
    free = [(0, t) for t in range(threads)]
    taken, runs, shares = 0, 0, [0] * threads
    while taken < blocks:
        free.sort()
        now, thread = free.pop(0)
        count = _kernels.block_run_length(blocks - taken, threads)
        assert 1 <= count <= blocks - taken
        taken, runs, shares[thread] = taken + count, runs + 1, shares[thread] + count
        free.append((now + count, thread))
    return shares, runs


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_runs_of_blocks_shrink_so_that_threads_of_one_speed_end_together(threads):
    # The softmax kernels prefetch across the blocks of a run, so fewer runs than blocks; the runs
    # shrink to single blocks at the end, so that the roofline's in-cache calls (powers of two of
    # blocks) still share evenly between the threads.
    assert _kernels.block_run_length(7, 1) == 7
    for blocks in [1, 2, 3, 5, 8, 64, 100, 128, 1000, 4096]:
        shares, runs = equal_speed_shares(blocks, threads)
        assert sum(shares) == blocks and max(shares) - min(shares) <= 1, (blocks, shares)
        if blocks % threads == 0:
            assert max(shares) == min(shares), (blocks, shares)
        if threads > 1 and blocks >= 128:
            assert runs <= blocks // 4, (blocks, runs)


@pytest.mark.parametrize("call,args,named", [
    ("block_run_length", (0, 2), "left: expected >= 1, found 0"),
    ("block_run_length", (5, 0), "threads: expected >= 1, found 0"),
    ("softmax_block_rows", (0, 1024, 2, 3072, 1 << 17), "rows: expected >= 1, found 0"),
    ("softmax_block_rows", (16, 1024, 2, 0, 1 << 17), "row_bytes: expected >= 1, found 0"),
    ("softmax_block_rows", (16, 1024, -1, 3072, 1 << 17), "threads: expected >= 1, found -1"),
])
def test_the_block_helpers_reject_counts_below_one_naming_them(call, args, named):
    # row_bytes 0 used to divide by zero and kill the process.
    with pytest.raises(ValueError, match=named):
        getattr(_kernels, call)(*args)


def test_the_machine_table_names_the_cpu_generation():
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"
            "stepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 99\n")
    fields = cpu_fields(text)
    assert fields["model name"] == "AMD EPYC" and (fields["cpu family"], fields["model"], fields["stepping"]) == ("26", "2", "1")


@pytest.mark.parametrize("siblings,cores,shown", [("2", "2", "1"), ("2", "1", "2"), (None, "1", "not reported"),
                                                   ("2", "0", "not reported")])
def test_the_machine_table_says_whether_the_two_threads_share_a_core(siblings, cores, shown):
    text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n" + (
        "siblings\t: %s\n" % siblings if siblings else "") + "cpu cores\t: %s\n" % cores
    assert threads_per_core(cpu_fields(text)) == shown


# ---------------------------------------------------------------------------------------------
# The instruction-set section: each large case on every vector instruction set down to AVX2.

import vector_isa  # noqa: E402
from run import CaseRunner, isa_costs  # noqa: E402
from timing import QUICK  # noqa: E402


def test_the_sets_timed_run_from_the_widest_down_to_avx2_and_none_without_a_wider_one():
    assert vector_isa.timed_isas("avx512_bf16") == ("avx512_bf16", "avx512", "avx2")
    assert vector_isa.timed_isas("avx512") == ("avx512", "avx2")
    assert vector_isa.timed_isas("avx2") == () and vector_isa.timed_isas("baseline") == ()


def test_the_table_marks_a_ratio_to_the_next_wider_set_beyond_the_width_and_different_bits():
    rows = [("LogSigmoid", "4096x4096", "bfloat16", {"avx512_bf16": 2e-3, "avx512": 2.4e-3, "avx2": 5.2e-3}, True),
            ("ScaledMaskedSoftmax", "2x8x1024x1024", "float16", {"avx512_bf16": 2e-3, "avx512": 2e-3, "avx2": 8e-3},
             False)]
    table = vector_isa.table_lines(rows, ("avx512_bf16", "avx512", "avx2"))
    assert table[0] == ("| operator | size | dtype | avx512_bf16 ms | avx512 ms | avx2 ms | avx512 / avx512_bf16 | "
                        "avx2 / avx512 | same bits |")
    assert table[1] == "|---|---|---|---:|---:|---:|---:|---:|---|"
    assert table[2] == "| LogSigmoid | 4096x4096 | bfloat16 | 2.000 | 2.400 | 5.200 | 1.20 | 2.17 | yes |"
    assert table[3] == "| ScaledMaskedSoftmax | 2x8x1024x1024 | float16 | 2.000 | 2.000 | 8.000 | 1.00 | 4.00 ‼ | **NO** |"


@pytest.mark.parametrize("op", ["LogSigmoid", "ScaledMaskedSoftmaxBackward"])
def test_a_case_is_timed_on_each_set_with_its_bits_compared_and_the_settings_restored(op):
    operator = BY_NAME[op]
    size = next(s for s in operator.sizes if s.label == "4x4")
    isas = ("avx2", "baseline")  # every x86-64 machine has both
    emulator.configure(vector_isa="auto")
    _kernels.set_vector_isa("auto")  # as the settings in force have it (a test before may have left another)
    before = _kernels.vector_isa()
    name, shape, dtype, medians, same = isa_costs(CaseRunner(operator, size, nn.ACL_FLOAT16, None, QUICK), isas)
    assert (name, shape, dtype, set(medians), same) == (op, size.shape, "float16", set(isas), True)
    assert all(seconds > 0 for seconds in medians.values())
    assert _kernels.vector_isa() == before
