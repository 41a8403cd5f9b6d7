#!/usr/bin/env python3
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

Classes: every fence has an info string, a class and then markers.
  sh              shell commands, run as written
  sh gpu          ... that need a GPU,
  sh cluster      ... a cluster or a batch scheduler,
  sh long         ... or that take longer than this check may (builds, installs, long runs):
                  their commands run in the reduced forms of REDUCED (below); one that no rule
                  there matches runs as written
  console         a session or a program's output: not run (a line starting `$ ` is a command:
                  its flags are checked)
  text            listings, trees, synopses, formulas: not run
  toml            a TOML document: parsed (tomllib)
  toml fragment   TOML with `...` for what is left out: `= ...` read as `= 0`, lines of `...`
                  dropped, then parsed
Comments in a document:
  <!-- doctest: run COMMANDS -->   ending on the line before a sh fence: COMMANDS (one line or
      several, in double quotes or not) run instead of the block, for a block that needs what no
      CI machine has (a user's file, a GPU). COMMANDS must run the project's own programs; the
      helpers of PREAMBLE (doctest_no_gpu ...) are there too.
  <!-- doctest: not-flags --foo ... -->   these are named as flags that do not exist (a refused
      input, say): the flags check skips them in this document.
  <!-- doctest: outputs PATH ... -->   files that the commands a document describes write (not
      tracked): the paths check skips them in this document.

Running (--check run): each document gets a fresh temporary folder, and its sh blocks run there
in order (later blocks see earlier outputs), each as one `bash -e -o pipefail -x` script (every
command echoed) under a timeout of BLOCK_TIMEOUT seconds. The folder holds symbolic links to the
repository's top-level entries, except hardware/ and results/, whose tracked files are copied
(documented commands write there), and build, build-vgpu, build-cuda and build-gpu: links to
BUILD, which is also first on PATH (so `ptdp` is BUILD/ptdp). Environment: OMP_WAIT_POLICY=PASSIVE
(as scripts/reproduce.sh: spinning OpenMP waits crawl on a busy 2-core machine), Open MPI allowed
to run as root and to oversubscribe, and in gpu and cluster blocks no GPU visible (VGPU_DEVICES=0,
CUDA_VISIBLE_DEVICES empty).

Flags (--check flags): a --flag after `ptdp SUB` (in a block or a code span; also a span that
starts `SUB --`, and the arguments of scripts/launch/ptdp.sbatch) must be in BUILD/ptdp SUB --help,
as must a span that is only flags in a section whose `## ` heading names `ptdp SUB`; a flag after
a project script that has --help (argparse scripts, shell scripts that handle --help) must be in
that (and in its subcommand's); any other span of flags must name flags of ptdp, of such a script
or of EXTERNAL_FLAGS. Flags of other programs inside blocks (cmake, ctest, mpirun, sbatch ...) are
not checked.

Paths (--check paths): a word with a `/` in a code span or block whose first component is a
top-level entry of the repository (or of the document's own folder, then relative to it) must
be a file that git tracks (or would: untracked, not ignored) or a folder of one. Read as
patterns: `{a,b}` expands, `x.h/.cpp` is x.h and x.cpp, and `*`, `<...>`, `...`, `…` and the
words of PLACEHOLDERS are wildcards that must match something. Not checked: paths under build*/
(build outputs), the values a document gives to output flags (OUTPUT_FLAGS, `>`, and the
.bin/.idx of --output-prefix), and its declared outputs.
"""
import argparse
import concurrent.futures
import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib

CLASSES = {"sh": {"gpu", "cluster", "long"}, "console": set(), "text": set(), "toml": {"fragment"}}
BLOCK_TIMEOUT = 60
FIXTURES = "scripts/doc_test_fixtures"
PLACEHOLDERS = {"NAME", "X", "DIR", "FILE", "OUTDIR", "PROFILE", "SPEC", "YYYYMMDD", "SHA", "N"}
OUTPUT_FLAGS = r"--csv|--out|--output|-o|--output-prefix|--write-golden|--save|--save-init|--loss-log|--benchmark_out"
# Flags of other programs that the documents name in a code span of their own, by program.
EXTERNAL_FLAGS = {
    "mpirun": "--oversubscribe --allow-run-as-root --map-by --rank-by",
    "sbatch": "--ntasks-per-node --distribution",
    "srun (pyxis)": "--container-image --container-mounts --container-workdir --mpi",
    "apt-get": "--no-install-recommends",
    "Megatron-LM (docs/SIMULATOR.md)": "--gradient-accumulation-fusion --tp-comm-overlap "
    "--overlap-param-gather --accumulate-allreduce-grads-in-fp32 --normalization --swiglu "
    "--position-embedding-type --disable-bias-linear --untie-embeddings-and-output-weights",
    "Megatron-DeepSpeed (docs/SIMULATOR.md)": "--partition-activations --checkpoint-activations "
    "--pp-partition-method",
}
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
FENCE = re.compile(r"^(\s*)```(.*)$")
SPAN = re.compile(r"`([^`]+)`")


# ---- reading documents ----

class Block:
    def __init__(self, doc, line, info, lines, override):
        self.doc, self.line, self.lines, self.override = doc, line, lines, override
        self.kind = info[0] if info else ""
        self.markers = info[1:]

    def where(self, offset=0):
        return f"{self.doc}:{self.line + offset}"


class Doc:
    """A markdown file: its fenced blocks, and its prose (blocks blanked, line numbers kept)."""

    def __init__(self, root, name):
        self.name = name
        with open(os.path.join(root, name), encoding="utf-8") as f:
            lines = f.read().split("\n")
        self.blocks, prose, self.errors, i = [], [], [], 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                prose.append(lines[i])
                i += 1
                continue
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            if j == len(lines):
                self.errors.append(f"{name}:{i + 1}: the code block is not closed")
            indent = len(m.group(1))
            body = [line[indent:] if line[:indent].isspace() else line.lstrip() for line in lines[i + 1:j]]
            self.blocks.append(Block(name, i + 1, m.group(2).split(), body, override_before(lines, i)))
            prose.extend([""] * (min(j, len(lines) - 1) - i + 1))
            i = j + 1
        self.prose = "\n".join(prose)
        text = "\n".join(lines)
        declared = lambda what: " ".join(re.findall(rf"<!--\s*doctest:\s*{what}\s(.*?)-->", text, re.S)).split()
        self.not_flags, self.outputs = set(declared("not-flags")), set(declared("outputs"))

    def spans(self):
        """(line, text) of every inline code span."""
        for m in SPAN.finditer(self.prose):
            yield self.prose.count("\n", 0, m.start()) + 1, m.group(1)

    def section_heading(self, line):
        """The last `## ` heading before LINE."""
        return next((t for t in reversed(self.prose.split("\n")[:line]) if t.startswith("## ")), "")


def override_before(lines, i):
    """COMMANDS of a <!-- doctest: run COMMANDS --> comment ending on line i-1, else None."""
    if i == 0 or not lines[i - 1].rstrip().endswith("-->"):
        return None
    start = i - 1
    while start > 0 and "<!--" not in lines[start]:
        start -= 1
    m = re.match(r"\s*<!--\s*doctest:\s*run\s(.*)-->\s*$", "\n".join(lines[start:i]), re.S)
    if not m:
        return None
    commands = m.group(1).strip()
    if len(commands) > 1 and commands[0] == commands[-1] == '"' and '"' not in commands[1:-1]:
        commands = commands[1:-1]
    return commands


def logical_lines(lines, synopsis=False):
    """(index of first line, text) per command: backslash continuations joined; with synopsis,
    also indented lines that start with [ or - (a usage synopsis wrapped by hand)."""
    out = []
    for k, line in enumerate(lines):
        if out and (out[-1][1].endswith("\\") or
                    synopsis and line[:1].isspace() and line.strip()[:1] in ("[", "-")):
            out[-1] = (out[-1][0], out[-1][1].rstrip("\\").rstrip() + " " + line.strip())
        else:
            out.append((k, line.rstrip()))
    return out


def split_comment(line):
    """(code, comment): the comment starts at the first # that begins a word outside quotes."""
    quote = None
    for k, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip(), line[k:]
    return line, ""


ENV_PREFIX = re.compile(r"""^((?:[A-Za-z_]\w*=(?:"[^"]*"|'[^']*'|\S*)\s+)*)(.*)$""", re.S)


def split_env(code):
    """(VAR=value prefix, the command)."""
    m = ENV_PREFIX.match(code.strip())
    return m.group(1), m.group(2)


def tracked_files(root):
    """Tracked files and untracked ones that are not ignored (about to be committed)."""
    out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if os.path.exists(os.path.join(root, f))]


def documents(root, files):
    docs = [f for f in files if f.endswith(".md") and not f.startswith(FIXTURES + "/")]
    return sorted(docs, key=lambda f: (f != "README.md", not f.startswith("docs/"), f))


# ---- check: every block is classified ----

def check_classes(doc):
    errors = list(doc.errors)
    for b in doc.blocks:
        if b.kind not in CLASSES:
            errors.append(f"{b.where()}: unclassified code block (info string '{' '.join([b.kind] + b.markers)}'); "
                          f"give it one of: {', '.join(CLASSES)} (scripts/doc_test.py says what each means)")
            continue
        for marker in b.markers:
            if marker not in CLASSES[b.kind]:
                errors.append(f"{b.where()}: unknown marker '{marker}' for a {b.kind} block "
                              f"(allowed: {', '.join(sorted(CLASSES[b.kind])) or 'none'})")
        if b.override is not None and b.kind != "sh":
            errors.append(f"{b.where()}: a doctest run comment before a {b.kind} block (only sh blocks run)")
        if b.kind == "toml":
            text = "\n".join(b.lines)
            if "fragment" in b.markers:
                text = re.sub(r"=\s*\.\.\.", "= 0", text)
                text = "\n".join(line for line in text.split("\n") if line.strip() != "...")
            try:
                tomllib.loads(text)
            except tomllib.TOMLDecodeError as e:
                errors.append(f"{b.where()}: the toml block does not parse: {e}"
                              + ("" if "fragment" in b.markers else " (mark it `toml fragment` if it elides with ...)"))
    return errors


# ---- check: flags ----

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
            with open(path, encoding="utf-8", errors="replace") as f:
                source = f.read()
            if script.endswith(".py") and "argparse" in source:
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


# ---- check: paths ----

TOKEN = re.compile(r"[^\s()'\"=;:|`\[\]]+")


def expand(word):
    """{a,b} alternatives and the x.h/.cpp shorthand."""
    m = re.search(r"\{([^{}]*)\}", word)
    if m:
        return [w for alt in m.group(1).split(",") for w in expand(word[:m.start()] + alt + word[m.end():])]
    m = re.match(r"^(.*?)(\.\w+)/(\.\w+)$", word)
    if m:
        return [m.group(1) + m.group(2), m.group(1) + m.group(3)]
    return [word]


def as_pattern(word):
    """The path with its placeholders as *, or None when it has none."""
    parts = []
    for part in word.split("/"):
        new = re.sub(r"<[^>]*>|\.\.\.|…", "*", part)
        new = "-".join("*" if p in PLACEHOLDERS else p for p in re.split(r"-", new))
        new = re.sub(r"\b(" + "|".join(PLACEHOLDERS) + r")(?=\.)", "*", new)
        parts.append(new)
    pattern = "/".join(parts)
    return pattern if "*" in pattern else None


def check_paths(doc, files):
    exists = set(files)
    for f in files:
        while f:
            f = os.path.dirname(f)
            exists.add(f)
    top = {f.split("/")[0] for f in files}
    here = os.path.dirname(doc.name)
    outputs = set(doc.outputs)
    texts = [(b.line + k + 1, line) for b in doc.blocks for k, line in enumerate(b.lines)] + list(doc.spans())
    for _, text in texts:
        for flag, value in re.findall(rf"(?<![\w-])({OUTPUT_FLAGS}|>)[ =]?\s*([^\s;|&]+)", text):
            outputs.add(value.removeprefix("./"))
            if flag == "--output-prefix":
                outputs.update({value + ".bin", value + ".idx"})
    errors = []
    for line, text in texts:
        for word in TOKEN.findall(text):
            word = word.rstrip(".,").removeprefix("./")
            first = word.split("/")[0]
            if "/" not in word or "://" in word or not first or first.startswith("build"):
                continue
            if first in top:
                base = ""
            elif here and here + "/" + first in exists:
                base = here + "/"
            else:
                continue
            missing = []
            for path in expand(word):
                pattern = as_pattern(base + path.rstrip("/"))
                if path in outputs or base + path.rstrip("/") in exists or \
                        pattern and any(fnmatch.fnmatchcase(f, pattern) for f in exists):
                    continue
                missing.append(path)
            if missing:
                errors.append(f"{doc.name}:{line}: {word}: no such file or folder in the repository"
                              + (f" ({', '.join(missing)})" if missing != [word] else ""))
    return errors


# ---- check: the shell blocks run ----

PREAMBLE = r"""
# Helpers of the reduced forms (REDUCED), each in a subshell so that its `set +x` stays there.
doctest_no_gpu() (  # CMD...: exit 0, or exit 2 with a line saying there is no GPU (or no CUDA)
  { set +x; } 2>/dev/null
  rc=0
  "$@" 2>"$DOCTEST_TMP/err" || rc=$?
  cat "$DOCTEST_TMP/err" >&2
  ((rc == 0)) || { ((rc == 2)) && grep -qE 'no GPU|no CUDA' "$DOCTEST_TMP/err"; } ||
    { echo "doc_test: exit $rc, not a refusal for want of a GPU: $*" >&2; exit 1; }
)
doctest_nonempty() (  # CMD...: must succeed and print something
  { set +x; } 2>/dev/null
  out=$("$@") || exit
  [[ -n "$out" ]] || { echo "doc_test: $* printed nothing" >&2; exit 1; }
  echo "$out" | head -n 5
)
doctest_program() (  # NAME...: each a program BUILD made, or one that a CMakeLists.txt defines and
  { set +x; } 2>/dev/null  # this build's configuration leaves out (no CUDA, the virtual GPU)
  for name; do
    [[ -n $(find -L build -maxdepth 3 -name "$name" -type f -perm -u+x -print -quit) ]] && continue
    grep -qw -- "$name" $(git -C "$DOCTEST_ROOT" ls-files '*CMakeLists.txt' | sed "s|^|$DOCTEST_ROOT/|") ||
      { echo "doc_test: $name is neither a program of the build nor defined in a CMakeLists.txt" >&2; exit 1; }
    echo "doc_test: $name is defined but not built in this build ($(readlink -f build))"
  done
)
doctest_benchmark() (  # PROGRAM ARGS...: its benchmarks (ARGS filter them) if built, else doctest_program
  { set +x; } 2>/dev/null
  [[ -x $1 ]] || { doctest_program "$(basename "$1")"; exit; }
  doctest_nonempty "$@" --benchmark_list_tests=true
)
doctest_sbatch() (  # SCRIPT OPTION...: the script parses; each sbatch option is one of its #SBATCH lines
  { set +x; } 2>/dev/null
  script=$1; shift
  bash -n "$script"
  for opt; do
    grep -q "^#SBATCH ${opt%%=*}\b" "$script" || { echo "doc_test: $script has no #SBATCH ${opt%%=*}" >&2; exit 1; }
  done
)
doctest_cmake_options() (  # VAR...: each a cache variable of the build
  { set +x; } 2>/dev/null
  cache=$(cmake -N -LA build)
  for v; do grep -q "^$v:" <<<"$cache" || { echo "doc_test: build has no cache variable $v" >&2; exit 1; }; done
)
"""

PY = r"(?:\S*python[\d.]*\s+)?"


def fewer_iters(cmd):
    """ptdp train with --iters at 2, or one more than a longer --warmup or --lr-warmup-iters."""
    if "--help" in cmd:
        return cmd
    warm = [int(n) for n in re.findall(r"--(?:lr-warmup-iters|warmup)[ =](\d+)", cmd)]
    n = max([2] + [w + 1 for w in warm])
    m = re.search(r"--iters[ =](\d+)", cmd)
    if not m:
        return cmd + f" --iters {n}"
    return cmd if int(m.group(1)) <= n else cmd[:m.start()] + f"--iters {n}" + cmd[m.end():]


def reduce_ptdp(cmd, no_gpu):
    """The reduced forms below, REDUCED."""
    sub = re.match(r"^\S*ptdp\s+(\w+)", cmd).group(1)
    if sub == "reproduce" and "--mode run" in cmd and "--dry-run" not in cmd:
        cmd += " --dry-run"
    elif sub == "train":
        cmd = fewer_iters(cmd)
    return f"doctest_no_gpu {cmd}" if no_gpu else cmd


def reduce_mpirun(cmd, no_gpu):
    m = re.search(r"\S*ptdp\s", cmd)
    return cmd[:m.start()] + reduce_ptdp(cmd[m.start():], no_gpu)


def reduce_sbatch(cmd, no_gpu):
    words = cmd.split()
    k = next(i for i, w in enumerate(words) if i > 0 and not w.startswith("-"))
    check = f"doctest_sbatch {words[k]} {' '.join(words[1:k])}"
    return check + (f" && {reduce_ptdp('build/ptdp ' + ' '.join(words[k + 1:]), no_gpu)}" if words[k + 1:] else "")


def reduce_mpirun_sh(cmd, no_gpu):
    m = re.search(r"--hostfile[ =](\S+)", cmd)
    make = f"{{ [[ -e {m.group(1)} ]] || echo localhost >{m.group(1)}; }} && " if m else ""
    script, rest = cmd.split(None, 1)
    return f"{make}{script} --dry-run {rest}"


def reduce_cmake(cmd, no_gpu):
    if "--build" in cmd:
        return "doctest_program " + re.search(r"--target\s+(.*)$", cmd).group(1)
    return "doctest_cmake_options " + " ".join(re.findall(r"-D(\w+)=", cmd))


# The commands of gpu, cluster and long blocks: (name, pattern, what runs instead). The first
# pattern that matches the command (after its VAR=value prefix, which is kept) applies; a command
# that matches none runs as written.
#   ptdp            train runs 2 iterations (its --iters, or one more than a longer --warmup or
#                   --lr-warmup-iters); reproduce --mode run gets --dry-run (the configurations are
#                   expanded and checked, nothing runs); in gpu and cluster blocks any ptdp command
#                   may instead refuse with exit 2 for want of a GPU (stderr says "no GPU"/"no CUDA")
#   mpirun          mpirun ... ptdp ...: the local Open MPI, the ptdp command reduced as above
#   sbatch          sbatch OPTIONS ptdp.sbatch ARGS: bash -n of the script, each option one of its
#                   #SBATCH lines, and then ptdp ARGS (what the script runs under srun) reduced
#   benchmark       build*/bench_*: --benchmark_list_tests=true without --benchmark_out; must list
#                   one. A benchmark this build's configuration leaves out (the CUDA suites in a
#                   build without CUDA or with the virtual GPU) must be defined in a CMakeLists.txt
#   gtest           build*/.../ptdp_tests: --gtest_list_tests; must list one
#   python --help   scripts/*.py, plots/*.py under any interpreter: python3 SCRIPT ARGS --help
#                   (argparse checks the values before --help and stops there)
#   mpirun.sh       scripts/launch/mpirun.sh --dry-run ARGS: prints the mpirun command (a
#                   --hostfile that does not exist is created holding `localhost`)
#   gpu_session.sh  ARGS --help: it parses ARGS in order, then prints its usage (its dry run is
#                   ctest GpuSession.*, minutes long)
#   bash -n         any other scripts/*.sh (they build, install, or run for minutes)
#   cmake           cmake -S . -B DIR -DVAR=...: each VAR a cache variable of BUILD;
#                   cmake --build DIR --target T...: each T a program BUILD made (or, left out
#                   by BUILD's configuration, one that a CMakeLists.txt defines)
REDUCED = [
    ("ptdp", r"^\S*ptdp\s+\w+", reduce_ptdp),
    ("mpirun", r"^mpirun\s.*ptdp\s", reduce_mpirun),
    ("sbatch", r"^sbatch\s+(-\S+\s+)*\S*ptdp\.sbatch\b", reduce_sbatch),
    ("benchmark", r"^(\S*/)?bench_\w+", lambda c, g: "doctest_benchmark " + re.sub(r"\s--benchmark_out\S*", "", c)),
    ("gtest", r"^\S*ptdp_tests\s", lambda c, g: f"doctest_nonempty {c} --gtest_list_tests"),
    ("python --help", rf"^{PY}(scripts|plots)/\S+\.py", lambda c, g: re.sub(rf"^{PY}", "python3 ", c) + " --help"),
    ("mpirun.sh", r"^(bash\s+)?scripts/launch/mpirun\.sh\s", reduce_mpirun_sh),
    ("gpu_session.sh", r"^(bash\s+)?scripts/gpu_session\.sh\s", lambda c, g: c + " --help"),
    ("bash -n", r"^(bash\s+)?scripts/\S+\.sh\b", lambda c, g: "bash -n " + re.search(r"scripts/\S+\.sh", c).group(0)),
    ("cmake", r"^cmake\s", reduce_cmake),
]


def reduce_block(b):
    """(script, [(rule, command as run)]): what runs for block B."""
    if b.override is not None:
        return b.override, [("override", line) for line in b.override.split("\n")]
    if not b.markers:
        return "\n".join(b.lines), []
    no_gpu = "gpu" in b.markers or "cluster" in b.markers
    script, rules = [], []
    for _, line in logical_lines(b.lines):
        env, cmd = split_env(split_comment(line)[0])
        rule = next((r for r in REDUCED if cmd and re.match(r[1], cmd)), None)
        script.append(env + rule[2](cmd, no_gpu) if rule else line)
        if cmd:
            rules.append((rule[0] if rule else "as written", script[-1]))
    return "\n".join(script), rules


def make_workdir(work, root, build, files):
    for top in sorted({f.split("/")[0] for f in files}):
        if top in ("hardware", "results"):
            for f in files:
                if f.startswith(top + "/"):
                    os.makedirs(os.path.join(work, os.path.dirname(f)), exist_ok=True)
                    shutil.copy2(os.path.join(root, f), os.path.join(work, f))
        else:
            os.symlink(os.path.join(root, top), os.path.join(work, top))
    for name in ("build", "build-vgpu", "build-cuda", "build-gpu"):
        if not os.path.lexists(os.path.join(work, name)):
            os.symlink(os.path.abspath(build), os.path.join(work, name))
    os.makedirs(os.path.join(work, ".doctest"))


def run_block(b, script, work, env):
    """(exit code, output, seconds) of SCRIPT run for block B in WORK."""
    if set(b.markers) & {"gpu", "cluster"}:
        env = dict(env, VGPU_DEVICES="0", CUDA_VISIBLE_DEVICES="")
    t0 = time.time()
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-x", "-c", PREAMBLE + script], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output = proc.communicate(timeout=BLOCK_TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output = proc.communicate()[0] + f"\n(killed after {BLOCK_TIMEOUT} s)"
    return proc.returncode, output, time.time() - t0


def run_doc(doc, root, build, files, verbose):
    errors = []
    with tempfile.TemporaryDirectory(prefix="doc_test.") as work:
        make_workdir(work, root, build, files)
        env = dict(os.environ, PATH=os.path.join(work, "build") + os.pathsep + os.environ.get("PATH", ""),
                   OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", DOCTEST_TMP=os.path.join(work, ".doctest"),
                   DOCTEST_ROOT=root)
        for b in doc.blocks:
            info = " ".join([b.kind] + b.markers)
            if b.kind != "sh":
                if verbose:
                    print(f"{b.where()}: {info}: {'parsed' if b.kind == 'toml' else 'not run'}")
                continue
            script, rules = reduce_block(b)
            rc, output, seconds = run_block(b, script, work, env)
            if verbose:
                how = "as written" if not rules else "in its reduced form" if b.override is None else "overridden"
                print(f"{b.where()}: {info}: run {how} ({seconds:.1f} s{', FAILED' if rc else ''})")
                for rule, command in rules:
                    print(f"    {rule + ':':16} {command[:140]}")
            if rc:
                traced = [line[2:] for line in output.split("\n") if line.startswith("+ ")]
                tail = "\n    ".join(output.rstrip().split("\n")[-8:])
                last = (traced or ["?"])[-1][:150]
                errors.append(f"{b.where()}: the block failed (exit {rc}) at `{last}`:\n    {tail}")
    return errors


# ---- main ----

def self_test(root, build):
    """Runs the checker on the planted faults of scripts/doc_test_fixtures/bad.md: it must fail and
    report exactly the faults listed in expected.txt (LINE: words of the message)."""
    doc = f"{FIXTURES}/bad.md"
    with open(os.path.join(root, FIXTURES, "expected.txt"), encoding="utf-8") as f:
        expected = [line.split(": ", 1) for line in f if line.strip() and not line.startswith("#")]
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), root, build, doc], capture_output=True, text=True)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("build")
    ap.add_argument("docs", nargs="*", help="documents to check, relative to ROOT (default: every tracked *.md)")
    ap.add_argument("--check", action="append", choices=["classes", "flags", "paths", "run"],
                    help="run only these checks (default: all)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every block and the rule that applied")
    ap.add_argument("--self-test", action="store_true", help="check the checker against its planted faults")
    a = ap.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
