"""Measure the sanitizer on the client-bug corpus: build the C and C++ programs, run every program
under NPUEMU_SANITIZE=full and print, for each, what it declares and what was found; then how many
buggy programs were detected (every declared finding, at every declared source line) and the false
alarms (any finding in a control, any undeclared finding in a buggy program).

    .venv/bin/python tests/client_bugs/measure.py                  # the whole corpus
    .venv/bin/python tests/client_bugs/measure.py --execution eager
    .venv/bin/python tests/client_bugs/measure.py race uninit      # programs whose name contains a word

Exit status: 0 if every buggy program was detected and there was no false alarm, 1 otherwise.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpus  # noqa: E402


def _kinds(pairs) -> str:
    return " + ".join(kind for _, kind in sorted(pairs)) or "none"


def _verdict(run) -> str:
    if run is None:
        return "not run"
    if run.program.control:
        return "clean" if not run.found else "FALSE ALARM"
    if run.detected():
        return "yes" if not run.undeclared() else "yes, +undeclared"
    if not run.missing():
        return "NO (lines %s not named)" % ", ".join(map(str, run.sites_missing()))
    return "NO"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("words", nargs="*", help="only programs whose file name contains one of these")
    parser.add_argument("--execution", choices=("async", "eager"), default=None,
                        help="NPUEMU_EXECUTION for every run (default: the runtime's, async)")
    parser.add_argument("--jobs", type=int, default=2, help="programs built and run at a time (default 2)")
    parser.add_argument("--verbose", action="store_true", help="print the stderr of every run that is not as declared")
    args = parser.parse_args(argv)

    programs = [program for program in corpus.programs()
                if not args.words or any(word in program.name for word in args.words)]
    skipped = {}
    missing = corpus.missing_compilers(programs)
    if missing:
        reason = "%s not installed" % " and ".join(missing)
        skipped = {program.path: reason for program in programs if program.compiled}
    with tempfile.TemporaryDirectory(prefix="client_bugs_") as directory:
        built = {} if missing else corpus.build_all(programs, directory, args.jobs)
        for path, executable in built.items():
            if isinstance(executable, Exception):
                skipped[path] = str(executable).splitlines()[0]

        def measure(program):
            if program.path in skipped:
                return None
            return corpus.run(program, built.get(program.path), execution=args.execution)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            runs = list(pool.map(measure, programs))

    rows = [("program", "language", "expected", "found", "detected")]
    for program, run in zip(programs, runs):
        found = _kinds(run.found) if run is not None else skipped[program.path]
        rows.append((program.name, program.language, _kinds(program.expected), found, _verdict(run)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for number, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if number == 0:
            print("  ".join("-" * width for width in widths))

    done = [run for run in runs if run is not None]
    buggy = [run for run in done if not run.program.control]
    controls = [run for run in done if run.program.control]
    detected = [run for run in buggy if run.detected()]
    in_controls = sum(len(run.found) for run in controls)
    undeclared = sum(len(run.undeclared()) for run in buggy)
    wrong_exit = [run.program.name for run in done
                  if run.returncode != (0 if run.program.control else corpus.EXITCODE)]
    print()
    mode = args.execution or "async"
    print("detected: %d/%d buggy programs (every declared finding at every declared line; NPUEMU_SANITIZE=full, "
          "%s execution)" % (len(detected), len(buggy), mode))
    print("false alarms: %d (%d finding kind(s) in %d control(s), %d undeclared finding kind(s) in buggy programs)"
          % (in_controls + undeclared, in_controls, len(controls), undeclared))
    if wrong_exit:
        print("unexpected exit status (not %d for a buggy program, 0 for a control): %s"
              % (corpus.EXITCODE, ", ".join(wrong_exit)))
    if skipped:
        print("not run: %d program(s) (%s)" % (len(skipped), "; ".join(sorted(set(skipped.values())))))
    if args.verbose:
        for run in done:
            if run.found != run.program.expected or run.sites_missing():
                print("\n" + run.describe())
    ok = len(detected) == len(buggy) and not in_controls and not undeclared and not wrong_exit
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
