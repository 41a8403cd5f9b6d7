"""Reading the documents: the Markdown files checked, their fenced blocks, code spans and prose, and
the doctest comments in them.

Comments in a document:
  <!-- doctest: run COMMANDS -->   ending on the line before a sh fence: COMMANDS (one line or
      several, in double quotes or not) run instead of the block, for a block that needs what no
      CI machine has (a user's file, a GPU). COMMANDS must run the project's own programs; the
      helpers of PREAMBLE (doctest_no_gpu ...) are there too.
  <!-- doctest: not-flags --foo ... -->   these are named as flags that do not exist (a refused
      input, say): the flags check skips them in this document.
  <!-- doctest: outputs PATH ... -->   files that the commands a document describes write (not
      tracked): the paths check skips them in this document.
"""
import os
import re
import subprocess

FIXTURES = "scripts/doc_test_fixtures"
# Fenced code blocks as CommonMark reads them (spec 0.30, 4.5): an opening fence is three or more
# backticks (whose info string has no backtick) or tildes; the block ends at a line of the same
# character, at least as many, indented at most three spaces more than the opening fence (relative
# to its container: the documents' fences are at column 0 or inside list items), and followed by
# nothing but blanks. A fence line with text after its backticks closes nothing: it is a line of the
# block, and so is everything up to the next real closing fence (reported: the text was meant as
# prose, and the rest of the document rendered as code).
FENCE = re.compile(r"^(\s*)(`{3,}(?=[^`]*$)|~{3,})(.*)$")
SPAN = re.compile(r"`([^`]+)`")


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
            indent, fence = len(m.group(1)), m.group(2)
            j, closing = i + 1, re.compile(rf"^ {{0,{indent + 3}}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
            while j < len(lines) and not closing.match(lines[j]):
                j += 1
            for k in range(i + 1, j):  # a would-be closing fence with text after it
                if re.match(rf"^ {{0,{indent + 3}}}{re.escape(fence[0])}{{{len(fence)},}}", lines[k]):
                    end = f"line {j + 1}" if j < len(lines) else "the end of the document"
                    self.errors.append(f"{name}:{k + 1}: '{lines[k].strip()[:40]}' does not close the code block "
                                       f"opened on line {i + 1} (CommonMark: a closing fence has nothing after its "
                                       f"{fence[0] * 3}); the block runs on to {end}: put the text on its own line")
                    break  # the first is the cause; later fence lines are the block's content
            if j == len(lines):
                self.errors.append(f"{name}:{i + 1}: the code block is not closed")
            body = [line[indent:] if line[:indent].isspace() else line.lstrip() for line in lines[i + 1:j]]
            self.blocks.append(Block(name, i + 1, m.group(3).split(), body, override_before(lines, i)))
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
