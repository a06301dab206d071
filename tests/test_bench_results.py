"""bench/RESULTS.md keeps one section per CPU: a run replaces its own CPU's section and keeps the others."""
import os
import sys

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
