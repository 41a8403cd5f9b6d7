"""Paths (--check paths): a word with a `/` in a code span or block whose first component is a
top-level entry of the repository (or of the document's own folder, then relative to it) must
be a file that git tracks (or would: untracked, not ignored) or a folder of one. Read as
patterns: `{a,b}` expands, `x.h/.cpp` is x.h and x.cpp, and `*`, `<...>`, `...`, `…` and the
words of PLACEHOLDERS are wildcards that must match something. Not checked: paths under build*/
(build outputs), the values a document gives to output flags (OUTPUT_FLAGS, `>`, and the
.bin/.idx of --output-prefix), and its declared outputs.
"""
import fnmatch
import os
import re

PLACEHOLDERS = {"NAME", "X", "DIR", "FILE", "OUTDIR", "PROFILE", "SPEC", "YYYYMMDD", "SHA", "N"}
OUTPUT_FLAGS = r"--csv|--out|--output|-o|--output-prefix|--write-golden|--save|--save-init|--loss-log|--benchmark_out"
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
