"""ctest Scripts.ThePackageHasNoImportCycleAndThinEntryPoints: the package's import graph (every import
of every module, those inside functions too) has no cycle, imports nothing from below in the map of
__init__.py, and reaches only the package, the standard library and the third-party libraries named
here; each module imports alone in a fresh interpreter; every command in scripts/ and plots/ is a
thin entry point that calls one module's main, and runs it.

    python3 -m unittest ptdp_tools.package_test     (in scripts/)
"""

import ast
import os
import re
import subprocess
import sys
import unittest

from ptdp_tools.doc_test.flags import ARGPARSE

PACKAGE = "ptdp_tools"
SCRIPTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(SCRIPTS)
# Third-party libraries the package may import, inside the functions that use them.
THIRD_PARTY = {"numpy", "scipy", "matplotlib", "plotly", "torch", "transformers", "safetensors", "tokenizers", "megatron"}
# Modules that import a third-party library when they are imported (the caller catches ImportError).
IMPORTED_AT_LOAD = {"ptdp_tools.plots.changes": {"numpy", "scipy"}}


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def modules() -> dict:
    """Module name -> source file, for every module of the package (tests included)."""
    out = {}
    for folder, _, files in os.walk(os.path.join(SCRIPTS, PACKAGE)):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, f), SCRIPTS)[:-3].split(os.sep)
                out[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = os.path.join(folder, f)
    return out


def imports(path: str, name: str, known: dict) -> list:
    """(imported module, line, at module level) of every import in PATH, relative ones resolved; `from
    P import x` names P.x when that is a module of the package."""
    tree = ast.parse(read(path), path)
    top = {id(n) for n in tree.body}
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from ..y import z
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub if sub in known else base, node.lineno, id(node) in top))
    return out


def cycle(graph: dict):
    """A cycle of GRAPH (module -> modules it imports) as a list [a, b, ..., a], or None."""
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n, path + [n])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def entry_points() -> list:
    """The commands: every *.py of scripts/ and plots/ but the tests."""
    out = []
    for folder in ("scripts", "plots"):
        for f in sorted(os.listdir(os.path.join(ROOT, folder))):
            if f.endswith(".py") and not f.endswith("_test.py"):
                out.append(f"{folder}/{f}")
    return out


ENTRY = re.compile(r'''#!/usr/bin/env python3
"""[^"]+"""
import os
import sys

sys\.path\.insert\(0, (?P<path>.+)\)
from (?P<module>ptdp_tools(?:\.\w+)+) import main  # noqa: E402

if __name__ == "__main__":
    sys\.exit\(main\(\)\)
$''')


class ImportGraph(unittest.TestCase):
    def setUp(self):
        self.known = modules()
        self.graph = {}
        self.imports = {}
        for name, path in self.known.items():
            self.imports[name] = imports(path, name, self.known)
            self.graph[name] = {m for m, _, _ in self.imports[name] if m.split(".")[0] == PACKAGE}

    def test_the_import_graph_has_no_cycle(self):
        found = cycle(self.graph)
        self.assertIsNone(found, "an import cycle: " + " -> ".join(found or []))

    def test_a_module_imports_only_those_above_it_in_the_packages_map(self):
        """The map in __init__.py lists the modules (and folders) bottom up: each may import those
        listed above it and the modules of its own folder, never one listed below it."""
        order = re.findall(r"^  (\w+)/?\s{2,}", read(self.known[PACKAGE]), re.M)
        self.assertEqual(sorted(order), sorted({n.split(".")[1] for n in self.known if n != PACKAGE and
                                                not n.endswith("_test")}), "the map lists every module")
        for name, imported in self.graph.items():
            if name == PACKAGE or name.endswith("_test"):
                continue
            for module in imported:
                mine, theirs = order.index(name.split(".")[1]), order.index(module.split(".")[1])
                self.assertLessEqual(theirs, mine, f"{self.known[name]} imports {module}, listed below it in "
                                                   "scripts/ptdp_tools/__init__.py")

    def test_the_cycle_check_finds_a_planted_cycle(self):
        planted = dict(self.graph, **{"ptdp_tools.atomic": {"ptdp_tools.data"}})
        self.assertEqual(cycle(planted), ["ptdp_tools.atomic", "ptdp_tools.data", "ptdp_tools.atomic"])

    def test_modules_import_only_the_package_the_standard_library_and_known_libraries(self):
        for name, found in self.imports.items():
            for module, line, at_load in found:
                first = module.split(".")[0]
                where = f"{self.known[name]}:{line}: import {module}"
                if first == PACKAGE:
                    self.assertIn(module, self.known, f"{where}: no such module of the package")
                elif first in THIRD_PARTY:
                    self.assertTrue(not at_load or first in IMPORTED_AT_LOAD.get(name, ()),
                                    f"{where}: a third-party library imported at load time (import it where it is "
                                    "used, so that the module imports without it)")
                else:
                    self.assertTrue(first in sys.stdlib_module_names,
                                    f"{where}: neither the package, the standard library nor a known library "
                                    "(a sibling script imported by its file name?)")

    def test_package_files_hold_no_imports(self):
        for name, found in self.imports.items():
            if self.known[name].endswith("__init__.py"):
                self.assertEqual(found, [], f"{self.known[name]} imports: importing a module of the package "
                                            "must not import others")

    def test_every_module_imports_alone_in_a_fresh_interpreter(self):
        for name in sorted(self.known):
            r = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=SCRIPTS, capture_output=True, text=True)
            missing = re.search(r"ModuleNotFoundError: No module named '(\w+)", r.stderr)
            if r.returncode and missing and missing.group(1) in IMPORTED_AT_LOAD.get(name, ()):
                continue  # the library it needs is not installed for this interpreter
            self.assertEqual(r.returncode, 0, f"import {name}:\n{r.stderr}")


class EntryPoints(unittest.TestCase):
    def test_every_command_only_calls_a_modules_main(self):
        known = modules()
        for entry in entry_points():
            text = read(os.path.join(ROOT, entry))
            m = ENTRY.match(text)
            self.assertIsNotNone(m, f"{entry} is not a thin entry point (shebang, docstring, the package's "
                                    "folder on sys.path, `from ptdp_tools.MODULE import main`, sys.exit(main()))")
            self.assertIn(m.group("module"), known, f"{entry}: no module {m.group('module')}")
            tree = ast.parse(read(known[m.group("module")]))
            self.assertIn("main", {n.name for n in tree.body if isinstance(n, ast.FunctionDef)},
                          f"{entry}: {m.group('module')} has no main")
            self.assertIn(m.group("module").replace(".", "/") + ".py", text, f"{entry}: its docstring names "
                                                                             "another module")

    def test_every_command_runs_its_main(self):
        """argparse commands print their usage for --help (exit 0); the others print it when called
        without arguments (exit 1)."""
        known = modules()
        for entry in entry_points():
            module = ENTRY.match(read(os.path.join(ROOT, entry))).group("module")
            uses_argparse = ARGPARSE.search(read(known[module]))
            r = subprocess.run([sys.executable, os.path.join(ROOT, entry)] + (["--help"] if uses_argparse else []),
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
            name = os.path.basename(entry)
            if uses_argparse:
                self.assertEqual((r.returncode, r.stdout.split(" ")[:2]), (0, ["usage:", name]), f"{entry}: {r.stderr}")
            else:
                self.assertEqual(r.returncode, 1, f"{entry}: {r.stderr}")
                self.assertIn(name, r.stderr, f"{entry}: no usage")


if __name__ == "__main__":
    unittest.main()
