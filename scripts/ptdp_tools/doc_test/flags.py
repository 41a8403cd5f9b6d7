"""Flags (--check flags): a --flag after `ptdp SUB` (in a block or a code span; also a span that
starts `SUB --`, and the arguments of scripts/launch/ptdp.sbatch) must be in BUILD/ptdp SUB --help,
as must a span that is only flags in a section whose `## ` heading names `ptdp SUB`; a flag after
a project script that has --help (argparse scripts, shell scripts that handle --help) must be in
that (and in its subcommand's); any other span of flags must name flags of ptdp, of such a script
or of EXTERNAL_FLAGS. Flags of other programs inside blocks (cmake, ctest, mpirun, sbatch ...) are
not checked.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

from ptdp_tools.doc_test.documents import logical_lines, split_comment, split_env

# Flags of other programs that the documents name in a code span of their own, by program.
EXTERNAL_FLAGS = {
    "mpirun": "--oversubscribe --allow-run-as-root --map-by --rank-by",
    "sbatch": "--ntasks-per-node --distribution",
    "srun (pyxis)": "--container-image --container-mounts --container-workdir --container-remap-root --mpi",
    "apt-get": "--no-install-recommends",
    "Megatron-LM (docs/SIMULATOR.md)": "--gradient-accumulation-fusion --tp-comm-overlap "
    "--overlap-param-gather --accumulate-allreduce-grads-in-fp32 --normalization --swiglu "
    "--position-embedding-type --disable-bias-linear --untie-embeddings-and-output-weights "
    "--hierarchical-context-parallel-sizes",
    "Megatron-DeepSpeed (docs/SIMULATOR.md)": "--partition-activations --checkpoint-activations "
    "--pp-partition-method",
}
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")

# A thin entry point (scripts/*.py, plots/*.py): the module of scripts/ptdp_tools whose main it calls.
ENTRY_POINT = re.compile(r"^\s*from (ptdp_tools(?:\.\w+)+) import main\b", re.M)
# A Python command with --help: its code parses the arguments with argparse (or ptdp_tools.cli.Parser).
ARGPARSE = re.compile(r"\bargparse\b|\bParser\(")


def command_source(root, path):
    """The source of what the project script PATH runs: the module a thin entry point calls, else
    the script itself."""
    with open(path, encoding="utf-8", errors="replace") as f:
        source = f.read()
    m = ENTRY_POINT.search(source)
    if m:
        with open(os.path.join(root, "scripts", *m.group(1).split(".")) + ".py", encoding="utf-8") as f:
            source = f.read()
    return source


def help_text(cmd):
    """What CMD (a --help call) prints, or None when it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr if out.returncode == 0 else None


def help_flags(cmd):
    text = help_text(cmd)
    return set(FLAG.findall(text)) if text is not None else None


class Flags:
    """What each program takes: ptdp's subcommands from --help, the scripts from theirs."""

    def __init__(self, root, build, files):
        self.root, self.ptdp = root, os.path.join(build, "ptdp")
        top = subprocess.run([self.ptdp, "--help"], capture_output=True, text=True, timeout=60).stdout
        section = top.split("Subcommands:", 1)[1] if "Subcommands:" in top else ""
        self.subs = re.findall(r"^  (\w+)\s", section, re.M)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            helps = pool.map(lambda s: help_flags([self.ptdp, s, "--help"]), self.subs)
        self.of_sub = dict(zip(self.subs, helps))
        self.of_sub[""] = set(FLAG.findall(top))
        self.scripts = {f for f in files if re.match(r"(scripts|plots)/[^/]+\.(py|sh)$|scripts/launch/", f)}
        self.cache = {}
        self.known = set().union(*(v or set() for v in self.of_sub.values()),
                                 *(set(v.split()) for v in EXTERNAL_FLAGS.values()))

    def script_flags(self, script, first_arg=None):
        """Flags of a project script from its --help, and from FIRST_ARG's when it is one of its
        subcommands (every subcommand's when FIRST_ARG is None); None when it has no --help."""
        key = (script, first_arg)
        if key not in self.cache:
            path = os.path.join(self.root, script)
            source = command_source(self.root, path)
            if script.endswith(".py") and ARGPARSE.search(source):
                cmd = [sys.executable, path]
            elif re.search(r"--help\)", source):
                cmd = ["bash", path]
            else:
                cmd = None
            usage = help_text(cmd + ["--help"]) if cmd else None
            flags = set(FLAG.findall(usage)) if usage is not None else None
            subs = re.search(r"\{([\w,-]+)\}", usage or "")
            for sub in subs.group(1).split(",") if subs and flags is not None else []:
                if first_arg is None or sub == first_arg:
                    flags |= help_flags(cmd + [sub, "--help"]) or set()
            self.cache[key] = flags
        return self.cache[key]

    def all_known(self):
        known = set(self.known)
        for script in self.scripts:
            known |= self.script_flags(script) or set()
        return known


PTDP_SUB = re.compile(r"(?:^|(?<=[\s/]))ptdp(?:\.sbatch)?\s+(\w+)")


def ptdp_segments(text, subs):
    """(sub, arguments) after each `ptdp SUB` (or ptdp.sbatch SUB) in TEXT, up to the next one or
    a ; | & separator; and the text outside them."""
    matches = [m for m in PTDP_SUB.finditer(text) if m.group(1) in subs]
    segments, rest = [], text[:matches[0].start()] if matches else text
    for k, m in enumerate(matches):
        end = matches[k + 1].start() if k + 1 < len(matches) else len(text)
        args = re.split(r"[;|&]", text[m.end():end], 1)
        segments.append((m.group(1), args[0]))
        rest += " " + (args[1] if len(args) > 1 else "")
    return segments, rest


def script_call(code, scripts):
    """(script, arguments up to a lone --) when CODE runs a project script, else None."""
    _, cmd = split_env(code)
    m = re.match(r"^(?:\S*python[\d.]*\s+|bash\s+|sh\s+)?(\./)?(\S+)(.*)$", cmd)
    if not m or m.group(2) not in scripts:
        return None
    return m.group(2), re.split(r"\s--(?:\s|$)", m.group(3), 1)[0]


def check_flags(doc, flags):
    errors = []

    def need(where, found, allowed, owner):
        for flag in found:
            if flag not in allowed and flag not in doc.not_flags:
                errors.append(f"{where}: {flag} is not a flag of {owner}")

    def check_ptdp(where, text):
        segments, rest = ptdp_segments(text, flags.subs)
        for sub, args in segments:
            need(where, FLAG.findall(args), flags.of_sub[sub] or set(), f"ptdp {sub} (ptdp {sub} --help)")
        return rest

    for b in doc.blocks:
        for k, line in logical_lines(b.lines, synopsis=b.kind != "sh"):
            code = split_comment(line)[0] if b.kind == "sh" else line
            code = code[2:] if b.kind == "console" and code.startswith("$ ") else code
            rest = check_ptdp(b.where(k + 1), code)
            call = script_call(rest, flags.scripts)
            if call:
                args = call[1].split()
                allowed = flags.script_flags(call[0], args[0] if args else "")
                if allowed is not None:
                    need(b.where(k + 1), FLAG.findall(call[1]), allowed, f"{call[0]} (its --help)")
    known = None
    for line, span in doc.spans():
        where = f"{doc.name}:{line}"
        words = span.split()
        if words and words[0] in flags.subs and len(words) > 1 and words[1].startswith("--"):
            span = "ptdp " + span
        rest = check_ptdp(where, span)
        call = script_call(rest, flags.scripts)
        if call:
            allowed = flags.script_flags(call[0], (call[1].split() or [""])[0])
            if allowed is not None:
                need(where, FLAG.findall(call[1]), allowed, f"{call[0]} (its --help)")
            continue
        if not rest.strip().startswith("-"):
            continue  # another program's flags
        sub = re.search(r"`ptdp (\w+)`", doc.section_heading(line))
        if sub and sub.group(1) in flags.subs:
            owner = f"ptdp {sub.group(1)} (this section's)"
            need(where, FLAG.findall(rest), flags.of_sub[sub.group(1)] or set(), owner)
        else:
            known = known or flags.all_known()
            need(where, FLAG.findall(rest), known, "ptdp, a project script or EXTERNAL_FLAGS in scripts/doc_test.py")
    return errors
