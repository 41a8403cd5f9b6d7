"""Checks the documents: every fenced code block is classified, the shell blocks run, the ptdp
flags and the repository paths they name exist (ctest Docs.*, docs/ARCHITECTURE.md,
"Documentation tests").

    scripts/doc_test.py [--check classes|flags|paths|run]... [-v] ROOT BUILD [DOC.md ...]
    scripts/doc_test.py --self-test ROOT BUILD

ROOT is the repository, BUILD the build folder whose programs stand in for build/ (build/ptdp in a
document runs BUILD/ptdp). Documents: every tracked *.md (README.md, docs/, the folders' READMEs)
but the fixtures, or the DOC.md given (relative to ROOT). Each problem is reported as DOC:LINE:
what; exit code 1 when there is one, 2 on bad arguments. -v lists every block and what ran.
--self-test runs the checker on scripts/doc_test_fixtures/bad.md and compares what it reports with
the faults planted there (expected.txt).

What each check does and the conventions of the documents: classes.py, flags.py, paths.py and
run.py beside this file, and documents.py (the doctest comments).
"""
import argparse
import os
import subprocess
import sys
import time

from ptdp_tools.doc_test.classes import check_classes
from ptdp_tools.doc_test.documents import FIXTURES, Doc, documents, tracked_files
from ptdp_tools.doc_test.flags import Flags, check_flags
from ptdp_tools.doc_test.paths import check_paths
from ptdp_tools.doc_test.run import run_doc


def self_test(root, build):
    """Runs the checker on the planted faults of scripts/doc_test_fixtures/bad.md: it must fail and
    report exactly the faults listed in expected.txt (LINE: words of the message)."""
    doc = f"{FIXTURES}/bad.md"
    with open(os.path.join(root, FIXTURES, "expected.txt"), encoding="utf-8") as f:
        expected = [line.split(": ", 1) for line in f if line.strip() and not line.startswith("#")]
    proc = subprocess.run([sys.executable, os.path.join(root, "scripts", "doc_test.py"), root, build, doc],
                          capture_output=True, text=True)
    reported = [line for line in proc.stdout.split("\n") if line.startswith(doc + ":")]
    problems = [] if proc.returncode == 1 else [f"exit code {proc.returncode}, not 1"]
    for line, words in expected:
        if not any(r.startswith(f"{doc}:{line}:") and words.strip() in r for r in reported):
            problems.append(f"not reported: {doc}:{line}: ...{words.strip()}...")
    for r in reported:
        if not any(r.startswith(f"{doc}:{line}:") and words.strip() in r for line, words in expected):
            problems.append(f"reported but not planted: {r}")
    print(proc.stdout)
    if problems:
        print("FAIL: the checker and the planted faults disagree:\n  " + "\n  ".join(problems))
        return 1
    print(f"PASS: the checker reports each of the {len(expected)} planted faults with its document and line")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("build")
    ap.add_argument("docs", nargs="*", help="documents to check, relative to ROOT (default: every tracked *.md)")
    ap.add_argument("--check", action="append", choices=["classes", "flags", "paths", "run"],
                    help="run only these checks (default: all)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every block and the rule that applied")
    ap.add_argument("--self-test", action="store_true", help="check the checker against its planted faults")
    a = ap.parse_args(argv)
    root, build = os.path.abspath(a.root), os.path.abspath(a.build)
    if not os.access(os.path.join(build, "ptdp"), os.X_OK):
        print(f"doc_test: {build}/ptdp: no such program (build it first)", file=sys.stderr)
        return 2
    if a.self_test:
        return self_test(root, build)
    files = tracked_files(root)
    names = a.docs or documents(root, files)
    checks = a.check or ["classes", "flags", "paths", "run"]
    t0 = time.time()
    docs = [Doc(root, name) for name in names]
    flags = Flags(root, build, files) if "flags" in checks else None
    errors = []
    for doc in docs:
        if "classes" in checks:
            errors += check_classes(doc)
        if "flags" in checks:
            errors += check_flags(doc, flags)
        if "paths" in checks:
            errors += check_paths(doc, files)
        if "run" in checks:
            errors += run_doc(doc, root, build, files, a.verbose)
    for e in errors:
        print(e)
    blocks = sum(len(d.blocks) for d in docs)
    verdict = "FAIL" if errors else "PASS"
    print(f"{verdict}: {', '.join(checks)}: {len(docs)} documents, {blocks} code blocks, "
          f"{len(errors)} problem(s), {time.time() - t0:.1f} s")
    return 1 if errors else 0

