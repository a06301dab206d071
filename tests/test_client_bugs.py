"""The client-bug corpus (tests/client_bugs/README.md): each program there is a small client of npuemu,
Python or C/C++, with one bug (or none, for a control) and a header saying what the sanitizer must
report. Generated from the directory:

1. Every program runs under NPUEMU_SANITIZE=full with NPUEMU_SANITIZE_EXITCODE=86. The set of
   (tool, kind) it prints is exactly the declared one, no more and no fewer; every declared source
   line is named by a site of the report; it exits 86 if buggy, 0 if a control; and its stdout holds
   the declared lines: the wrong numbers the bug gives (stale zeros, the poison NaN) next to the report.
2. The controls and a few buggy programs, with NPUEMU_EXECUTION=eager: the same reports.
3. A few buggy programs with NPUEMU_SANITIZE=off: no report at all, exit 0.
4. The corpus itself: at least 20 buggy programs and 6 controls, every kind of finding declared by a
   Python program and by a C/C++ one, site lines that are code lines of their file, and the parser of
   the printed reports.

C and C++ programs are built once per session (one compiler run each, two at a time) with the
documented one-line recipe plus -g; without gcc/g++ they are skipped with the reason."""
from __future__ import annotations

import os
import sys

import pytest

CLIENT_BUGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client_bugs")
if CLIENT_BUGS not in sys.path:
    sys.path.insert(0, CLIENT_BUGS)

import corpus  # noqa: E402  (tests/client_bugs/corpus.py)

PROGRAMS = corpus.programs()
BUGGY = [program for program in PROGRAMS if not program.control]
CONTROLS = [program for program in PROGRAMS if program.control]
BY_NAME = {program.name: program for program in PROGRAMS}

# Buggy programs whose findings do not depend on when queued work really runs, run again in eager mode:
# one or more of every tool, Python and C/C++. (Not: a free under queued work, whose fault only happens
# when the work runs after the free, and upload_then_readback.c, see the tests below.)
EAGER_BUGGY = ("missing_sync_before_d2h.py", "memset_over_queued_input.cpp", "race_copy_in_without_event.cpp",
               "race_wait_before_record.py", "uninit_half_input.cpp", "host_array_changed_during_async_copy.py",
               "staging_buffer_reused.c", "stream_destroyed_with_queued_work.cpp", "output_sized_for_fp16.py",
               "tensor_destroyed_by_raii_scope.cpp", "kernel_on_freed_memory.cpp", "tensors_leaked_in_loop.py",
               "pitched_upload_row_changed.py", "race_staging_buffer_two_streams.py",
               "race_two_downloads_one_host_buffer.c", "upload_of_a_pending_download.py",
               "workspace_aliases_input.py")
# Buggy programs run with the sanitizer off (none of them leaks: leaks are reported at every level).
OFF_BUGGY = ("sync_wrong_stream.py", "race_event_reset_after_record.cpp", "uninit_input_never_copied.py",
             "pinned_buffer_freed_before_async_copy.cpp", "misaligned_packed_inputs.py", "upload_then_readback.c")


def _ids(programs):
    return [program.name for program in programs]


@pytest.fixture(scope="session")
def executables(tmp_path_factory):
    """{program path: executable or the build's RuntimeError} of the C and C++ programs, or the reason
    they cannot be built here (a string)."""
    missing = corpus.missing_compilers(PROGRAMS)
    if missing:
        return "%s not installed: the C and C++ programs cannot be built here" % " and ".join(missing)
    return corpus.build_all(PROGRAMS, str(tmp_path_factory.mktemp("client_bugs")))


def _run(program, executables, **settings) -> corpus.Run:
    executable = None
    if program.compiled:
        if isinstance(executables, str):
            pytest.skip(executables)
        executable = executables[program.path]
        if isinstance(executable, Exception):
            pytest.fail(str(executable))
    return corpus.run(program, executable, **settings)


def _check_reports(run: corpus.Run) -> None:
    """What every run under the sanitizer must satisfy: exactly the declared findings, at the declared
    lines, the exit code that says whether anything was reported, a summary that agrees."""
    program = run.program
    assert "internal error" not in run.stderr, run.describe()
    assert run.found == program.expected, (
        "expected %s, found %s (missing %s, undeclared %s)\n%s"
        % (program.expected_text(), sorted(run.found), sorted(run.missing()), sorted(run.undeclared()), run.describe()))
    assert not run.sites_missing(), "lines %s of %s are not named by any site of the report (named: %s)\n%s" % (
        run.sites_missing(), program.name, sorted(run.lines_named()), run.describe())
    assert run.returncode == (0 if program.control else corpus.EXITCODE), run.describe()
    expected_summary = tuple(sorted({kind for _, kind in program.expected})) or None
    assert run.summary == expected_summary, "the SUMMARY line disagrees with the findings\n" + run.describe()


@pytest.mark.parametrize("program", PROGRAMS, ids=_ids(PROGRAMS))
def test_each_program_reports_what_it_declares_and_computes_what_its_bug_gives(program, executables):
    run = _run(program, executables)
    _check_reports(run)
    assert not run.outputs_missing(), "stdout lacks %s\n%s" % (run.outputs_missing(), run.describe())


EAGER = CONTROLS + [BY_NAME[name] for name in EAGER_BUGGY]


@pytest.mark.parametrize("program", EAGER, ids=_ids(EAGER))
def test_eager_execution_reports_the_same(program, executables):
    _check_reports(_run(program, executables, execution="eager"))


def test_in_eager_mode_an_unsynchronised_read_back_is_a_missing_synchronisation_of_copied_bytes(executables):
    """initcheck judges the bytes as they are when read (docs/sanitizer.md): eagerly, the upload has run,
    so the read back of upload_then_readback.c finds them written; the missing synchronisation, judged on
    the program's order, is reported in both modes."""
    run = _run(BY_NAME["upload_then_readback.c"], executables, execution="eager")
    assert run.found == {("synccheck", "missing synchronisation")}, run.describe()
    assert run.returncode == corpus.EXITCODE, run.describe()


def test_in_eager_mode_a_temporary_array_freed_after_its_copy_ran_is_host_memory_in_flight_without_a_fault(
        executables):
    """Eagerly the upload of temporary_array_freed_under_async_copy.py ran before its array went, so it does
    not fault; the array freed before the program synchronised with the copy, judged on the program's
    order, is reported in both modes."""
    run = _run(BY_NAME["temporary_array_freed_under_async_copy.py"], executables, execution="eager")
    assert run.found == {("synccheck", "host memory in flight")}, run.describe()
    assert run.returncode == corpus.EXITCODE, run.describe()


OFF = CONTROLS[:2] + [BY_NAME[name] for name in OFF_BUGGY]


@pytest.mark.parametrize("program", OFF, ids=_ids(OFF))
def test_with_the_sanitizer_off_nothing_is_reported(program, executables):
    run = _run(program, executables, sanitize="off")
    assert run.findings == [] and "=========" not in run.stderr, run.describe()
    assert run.returncode == 0, run.describe()


# ------------------------------------------------------------------------------------------------
# The corpus itself

def test_the_corpus_has_enough_programs_and_covers_every_kind_in_python_and_in_c():
    assert len(BUGGY) >= 20 and len(CONTROLS) >= 6, (len(BUGGY), len(CONTROLS))
    for tool, kinds in corpus.KINDS.items():
        for kind in kinds:
            languages = {program.language for program in BUGGY if (tool, kind) in program.expected}
            assert "Python" in languages and languages & {"C", "C++"}, (
                "%s %s: declared by %s programs only" % (tool, kind, sorted(languages) or "no"))
    assert {program.language for program in CONTROLS} == {"Python", "C", "C++"}
    assert any(program.language == "C" and not program.control for program in PROGRAMS)


@pytest.mark.parametrize("program", BUGGY, ids=_ids(BUGGY))
def test_declared_sites_are_code_lines_of_the_program(program):
    with open(program.path, encoding="utf-8") as file:
        lines = file.read().splitlines()
    comment = "#" if program.language == "Python" else "//"
    for number in program.sites:
        assert 1 <= number <= len(lines), (program.name, number)
        text = lines[number - 1].strip()
        assert text and not text.startswith((comment, "/*", "*")), "%s:%d is not code: %r" % (program.name, number, text)


def test_a_header_must_declare_findings_or_none(tmp_path):
    path = tmp_path / "no_header.py"
    path.write_text("import acl\n")
    with pytest.raises(corpus.HeaderError, match="expect: none"):
        corpus.read_header(str(path))
    path.write_text("# expect: synccheck missing sync\n# sites: 1\n")
    with pytest.raises(corpus.HeaderError, match="unknown finding"):
        corpus.read_header(str(path))
    path.write_text("# expect: racecheck race\n")
    with pytest.raises(corpus.HeaderError, match="sites"):
        corpus.read_header(str(path))
    path.write_text("// x\n// expect: racecheck race\n// expect: leakcheck leak\n// sites: 4, 7\n// output: a b\n"
                    "// env: NPUEMU_EXECUTION=eager\nint main() {}\n// expect: memcheck padding overrun\n")
    os.rename(str(path), str(tmp_path / "p.cpp"))
    program = corpus.read_header(str(tmp_path / "p.cpp"))
    assert program.expected == {("racecheck", "race"), ("leakcheck", "leak")}  # the header ends at the code
    assert program.sites == (4, 7) and program.outputs == ("a b",) and program.language == "C++"
    assert program.env == (("NPUEMU_EXECUTION", "eager"),)


def test_the_printed_reports_are_parsed_with_their_sites():
    stderr = "\n".join([
        "result[0] is: 0.000000",
        "========= npuemu: synccheck: host memory in flight: the host changed memory [0x1, 0x2) that ...",
        "=========     aclrtMemcpyAsync(16 bytes), launched at /w/prog.py:37 in main <- /w/prog.py:59 in <module>",
        "=========     found changed when the copy ran, at at /w/prog.py:42 in main",
        "========= npuemu: memcheck: padding overrun: tensor self ... goes 16 byte(s) past ...",
        "=========     aclnnX, launched at /w/x.cpp:53 in Score(void*, std::vector<float, std::allocator<float> > "
        "const&) <- /w/x.cpp:65 in main",
        "=========     allocation #2 on device 0 [0x1, 0x2) of 16 bytes (64 with padding), made at /w/x.cpp:9 in main, "
        "freed at /w/x.cpp:10 in main",
        "=========     stream 0x5e0000c0 of device 0, made at /w/x.cpp:11 in main",
        "npuemu: 1 resource(s) never released at aclFinalize:",
        "npuemu: leak: device memory 0x7d (16 bytes) on device 0, made at /w/x.cpp:38 in Score(void*) <- "
        "/w/x.cpp:65 in main (released only by aclrtResetDevice(0))",
        "========= npuemu: SUMMARY: 3 report(s) (1 host memory in flight, 1 padding overrun, 1 leak)",
    ])
    findings, summary = corpus.parse(stderr)
    assert [(f.tool, f.kind) for f in findings] == [("synccheck", "host memory in flight"),
                                                    ("memcheck", "padding overrun"), ("leakcheck", "leak")]
    assert findings[0].lines_of("prog.py") == {37, 59, 42}
    assert findings[1].lines_of("x.cpp") == {53, 65}          # the allocation and stream lines are resources
    assert findings[2].lines_of("x.cpp") == {38, 65}
    assert summary == ("host memory in flight", "leak", "padding overrun")
