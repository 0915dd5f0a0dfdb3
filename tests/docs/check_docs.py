#!/usr/bin/env python3
"""Keeps the documentation honest.

1. Every seed section id (`D16`, `E7`, `I1`, ranges such as `D11-D14`, whole
   sections such as "seed L") and every project Decision ("Decisions 5",
   "Decision 9") cited in a comment of runtime/, sdk/, plugins/, tests/,
   scripts/ or cmake/ (or in a test's name, or a README there), or in
   README.md, HACKING.md and docs/, has a row in docs/seed-map.md, so the
   reference resolves from a clone of the repository.
2. Every relative link in README.md, HACKING.md and docs/**/*.md names a file
   or folder that exists, and a `#anchor` names a heading of the file it points
   to (GitHub's slug rules).

Usage: check_docs.py [--root DIR]   (default: the repository this file is in)
Prints one line per problem, `file:line: what`, and exits 1 when there is any.
"""

import argparse
import os
import re
import sys

SCANNED_DIRS = ("runtime", "sdk", "plugins", "tests", "scripts", "cmake")
C_FAMILY = (".c", ".h", ".cc", ".cpp", ".hpp")
HASH_COMMENTED = (".cmake", ".in", ".py", ".sh", ".yaml", ".yml", ".service", ".sysusers", ".txt")
DOCUMENTS = ("README.md", "HACKING.md")  # and docs/**/*.md but the seed map itself
SEED_MAP = os.path.join("docs", "seed-map.md")

# Letters of the seed's numbered sections (J and L have no numbered items).
ID = r"[A-IK]\d{1,2}"
ID_OR_RANGE = re.compile(r"(?<![\w.-])(" + ID + r")(?:[-\u2013](" + ID + r"|\d{1,2}))?(?![\w])")
DECISION = re.compile(r"\bDecisions?\s+(\d{1,2})\b")
SECTION = re.compile(r"\bseeds?\s+([A-L])(?:\s*[-\u2013]\s*([A-L]))?(?![\w])")

# Words shaped like a seed id that are something else.
NOT_IDS = {"C89", "C99", "C11", "C17", "C23"}
# (file, id) pairs where the id-shaped word is not a citation, and why.
NOT_CITATIONS = {
    ("runtime/cli/terminal_text.hpp", "C0"): "the C0 control characters",
    ("runtime/cli/terminal_text.hpp", "C1"): "the C1 control characters",
}


# --- comments ----------------------------------------------------------------


def is_digit_separator(text, i):
    """Whether the ' at `i` separates digits (1'000'000) rather than opening a character literal."""
    start = i
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "'."):
        start -= 1
    return start < i and text[start].isdigit() and i + 1 < len(text) and text[i + 1].isalnum()


def c_comments(text):
    """(line, text) of every // and /* */ comment of C or C++ source, skipping
    string and character literals (raw strings included)."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            body = text[i + 2:end]
            for k, piece in enumerate(body.split("\n")):
                out.append((line + k, piece))
            line += body.count("\n")
            i = end + 2
        elif ch == "R" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            end = text.find(")" + delimiter + '"', open_paren)
            end = n if end < 0 else end + len(delimiter) + 2
            line += text.count("\n", i, end)
            i = end
        elif ch == "'" and is_digit_separator(text, i):
            i += 1
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


TEST_TITLE = re.compile(r'\b(?:TEST_CASE|SECTION|SCENARIO)\s*\(\s*"((?:[^"\\]|\\.)*)"')


def test_titles(text):
    """(line, title) of every Catch2 test case and section: names are documentation too."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in TEST_TITLE.finditer(text)]


def hash_comments(text):
    """(line, text) after the first # outside quotes on each line."""
    out = []
    for number, raw in enumerate(text.split("\n"), 1):
        quote = None
        for k, ch in enumerate(raw):
            if quote:
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                out.append((number, raw[k + 1:]))
                break
    return out


def commented_text(path, text):
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if ext in C_FAMILY:
        return c_comments(text) + test_titles(text)
    if ext == ".md":
        return list(enumerate(text.split("\n"), 1))
    if ext in HASH_COMMENTED or name == "CMakeLists.txt" or text.startswith("#!"):
        return hash_comments(text)
    return []


# --- citations -----------------------------------------------------------------


def expand(first, last):
    """Ids from `first` to `last` of one section (D11-D14, D2-4)."""
    letter, start = first[0], int(first[1:])
    if last is None:
        return [first]
    if last.isdigit():
        last = letter + last
    if last[0] != letter or int(last[1:]) < start:
        return [first, last]
    return [letter + str(k) for k in range(start, int(last[1:]) + 1)]


def citations(piece):
    found = []
    for m in DECISION.finditer(piece):
        found.append("Decisions " + m.group(1))
    for m in SECTION.finditer(piece):
        first, last = m.group(1), m.group(2) or m.group(1)
        found.extend(chr(c) for c in range(ord(first), ord(last) + 1))
    for m in ID_OR_RANGE.finditer(piece):
        if m.group(1) in NOT_IDS:
            continue
        found.extend(expand(m.group(1), m.group(2)))
    return found


def scanned_files(root):
    for path in markdown_files(root):
        if os.path.relpath(path, root) != SEED_MAP:
            yield path
    for top in SCANNED_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                yield os.path.join(folder, name)


def cited(root):
    """{id: [(relative path, line), ...]} of every citation."""
    result = {}
    for path in scanned_files(root):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue  # binary files
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        for line, piece in commented_text(rel, text):
            for ident in citations(piece):
                if (rel, ident) in NOT_CITATIONS:
                    continue
                result.setdefault(ident, []).append((rel, line))
    return result


MAP_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|")


def mapped(root):
    """Ids with a row in docs/seed-map.md: a table row whose first cell is `id`."""
    ids = set()
    with open(os.path.join(root, SEED_MAP), encoding="utf-8") as f:
        for raw in f:
            m = MAP_ROW.match(raw)
            if m:
                ident = m.group(1).strip()
                ids.add("Decisions " + ident.split()[-1] if ident.startswith("Decision") else ident)
    return ids


def check_seed_map(root, problems):
    if not os.path.isfile(os.path.join(root, SEED_MAP)):
        problems.append(SEED_MAP + ":1: missing")
        return
    known = mapped(root)
    for ident, places in sorted(cited(root).items()):
        if ident in known:
            continue
        for rel, line in places:
            what = ident if ident[0].isdigit() or " " in ident or len(ident) > 1 else "section " + ident
            problems.append("%s:%d: cites %s, which has no row in %s" % (rel, line, what, SEED_MAP))


# --- links -------------------------------------------------------------------------


def markdown_files(root):
    for name in DOCUMENTS:
        if os.path.isfile(os.path.join(root, name)):
            yield os.path.join(root, name)
    for folder, dirs, files in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for number, raw in enumerate(text.split("\n"), 1):
        m = FENCE.match(raw)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence is None:
            yield number, raw


def unclosed_fence(text):
    """The line of a code fence that is never closed (the rest of the file would
    render as code), or None."""
    fence, opened = None, None
    for number, raw in enumerate(text.split("\n"), 1):
        m = FENCE.match(raw)
        if m and fence is None:
            fence, opened = m.group(1), number
        elif m and m.group(1) == fence:
            fence, opened = None, None
    return opened


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path, cache):
    if path not in cache:
        seen = {}
        result = set()
        with open(path, encoding="utf-8") as f:
            for _, raw in prose_lines(f.read()):
                m = HEADING.match(raw)
                if not m:
                    continue
                base = slug(m.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                result.add(base if count == 0 else "%s-%d" % (base, count))
        cache[path] = result
    return cache[path]


def check_links(root, problems):
    cache = {}
    for path in markdown_files(root):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        opened = unclosed_fence(text)
        if opened is not None:
            problems.append("%s:%d: a code fence that is never closed" % (rel, opened))
        for number, raw in prose_lines(text):
            line = CODE_SPAN.sub("", raw)
            targets = [m.group(1) for m in INLINE_LINK.finditer(line)]
            m = REFERENCE_LINK.match(line)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue  # https:, mailto: ...
                file_part, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(resolved):
                    problems.append("%s:%d: link to %s: no such file" % (rel, number, target))
                    continue
                if not anchor:
                    continue
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append("%s:%d: link to %s: an anchor into a file that is not Markdown" % (rel, number, target))
                elif anchor not in anchors(resolved, cache):
                    problems.append("%s:%d: link to %s: no heading with that anchor" % (rel, number, target))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    parser.add_argument("--list", action="store_true", help="print every citation found and where, then exit")
    args = parser.parse_args()
    if args.list:
        for ident, places in sorted(cited(args.root).items()):
            print(ident + ": " + ", ".join(sorted({rel for rel, _ in places})))
        return 0
    problems = []
    check_seed_map(args.root, problems)
    check_links(args.root, problems)
    for problem in problems:
        print(problem)
    if problems:
        print("check_docs: %d problem(s)" % len(problems), file=sys.stderr)
        return 1
    print("check_docs: every seed citation is mapped and every link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
