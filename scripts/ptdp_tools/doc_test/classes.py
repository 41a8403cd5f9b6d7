"""The classes check (--check classes): every fenced block has a known class and markers.

Classes: every fence has an info string, a class and then markers.
  sh              shell commands, run as written
  sh gpu          ... that need a GPU,
  sh cluster      ... a cluster or a batch scheduler,
  sh long         ... or that take longer than this check may (builds, installs, long runs):
                  their commands run in the reduced forms of REDUCED (run.py); one that no rule
                  there matches runs as written
  console         a session or a program's output: not run (a line starting `$ ` is a command:
                  its flags are checked)
  text            listings, trees, synopses, formulas: not run
  toml            a TOML document: parsed (tomllib)
  toml fragment   TOML with `...` for what is left out: `= ...` read as `= 0`, lines of `...`
                  dropped, then parsed
"""
import re
import tomllib

CLASSES = {"sh": {"gpu", "cluster", "long"}, "console": set(), "text": set(), "toml": {"fragment"}}


def check_classes(doc):
    errors = list(doc.errors)
    for b in doc.blocks:
        if b.kind not in CLASSES:
            errors.append(f"{b.where()}: unclassified code block (info string '{' '.join([b.kind] + b.markers)}'); "
                          f"give it one of: {', '.join(CLASSES)} "
                          "(scripts/ptdp_tools/doc_test/classes.py says what each means)")
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
