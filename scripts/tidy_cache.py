#!/usr/bin/env python3
"""Which translation units clang-tidy must look at again.

clang-tidy's findings on a translation unit depend on nothing but its inputs:
the tool's version, .clang-tidy, the unit's compile command, and the bytes of
every file it includes. System headers are those of the Debian 12 packages
scripts/setup installs; the project's own files are hashed. A unit whose key
(a SHA-256 over all of that) is in the record was found clean with exactly
these inputs, and is not checked again; scripts/lint records the keys of the
units it found clean.

  tidy_cache.py select UNIT...   prints the units whose key is not recorded, and keeps
                                 their keys beside the record (<record>.pending)
  tidy_cache.py record UNIT...   records these units, found clean, with the keys select
                                 kept (what was checked, even if a file changed since)

Options (before the subcommand): --compile-commands FILE (the commands
clang-tidy reads), --build-dir DIR (a built tree: its ninja log of header
dependencies), --record FILE, --tidy PROGRAM. A unit with no dependency
record in the build (not built) is always selected.
"""
import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys

SOURCE = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))


def file_digest(path, cache={}):
    if path not in cache:
        with open(path, "rb") as f:
            cache[path] = hashlib.sha256(f.read()).hexdigest()
    return cache[path]


def object_of(command):
    words = shlex.split(command)
    for i, word in enumerate(words):
        if word == "-o" and i + 1 < len(words):
            return words[i + 1]
    return None


def ninja_deps(build_dir):
    """object (as ninja names it) -> its dependencies (paths as ninja gives them)."""
    out = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True, text=True, check=True).stdout
    deps, current = {}, None
    for line in out.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            current = line.split(":", 1)[0]
            deps[current] = [] if "(VALID)" in line else None
        elif current is not None and deps[current] is not None:
            deps[current].append(line.strip())
    return deps


def keys(args, units):
    """unit -> its key, or None when it cannot be known (not built)."""
    tool = subprocess.run([args.tidy, "--version"], capture_output=True, text=True).stdout
    with open(os.path.join(SOURCE, ".clang-tidy"), "rb") as f:
        config = f.read()
    commands = {os.path.realpath(c["file"]): c for c in json.load(open(args.compile_commands))}
    deps = ninja_deps(args.build_dir)
    result = {}
    for unit in units:
        entry = commands.get(os.path.realpath(unit))
        obj = object_of(entry["command"]) if entry else None
        files = deps.get(obj) if obj else None
        if files is None:
            result[unit] = None
            continue
        h = hashlib.sha256()
        h.update(tool.encode())
        h.update(config)
        h.update(entry["command"].replace(SOURCE, "@SRC@").encode())
        own = set()
        for path in files:
            real = os.path.realpath(os.path.join(args.build_dir, path))
            if real.startswith(SOURCE + os.sep):
                own.add(real)
        for real in sorted(own):
            h.update(os.path.relpath(real, SOURCE).encode() + b"\0" + file_digest(real).encode() + b"\n")
        result[unit] = h.hexdigest()
    return result


def read_record(path):
    recorded = {}
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 2:
                recorded[parts[1]] = parts[0]
    return recorded


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile-commands", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--tidy", default="clang-tidy-14")
    parser.add_argument("--all", action="store_true", help="select: every unit, whatever is recorded")
    parser.add_argument("action", choices=["select", "record"])
    parser.add_argument("units", nargs="*")
    args = parser.parse_args()
    unit_keys = keys(args, args.units) if args.action == "select" else {}
    recorded = read_record(args.record)
    relative = {unit: os.path.relpath(os.path.realpath(unit), SOURCE) for unit in args.units}
    pending_file = args.record + ".pending"
    if args.action == "select":
        with open(pending_file, "w") as pending:
            for unit in args.units:
                if args.all or unit_keys[unit] is None or recorded.get(relative[unit]) != unit_keys[unit]:
                    print(unit)
                    if unit_keys[unit] is not None:
                        pending.write(f"{unit_keys[unit]} {relative[unit]}\n")
        return 0
    pending = read_record(pending_file) if os.path.exists(pending_file) else {}
    for unit in args.units:
        key = pending.get(relative[unit])
        if key is not None:
            recorded[relative[unit]] = key
    # Only units that still exist stay recorded.
    recorded = {path: key for path, key in recorded.items() if os.path.exists(os.path.join(SOURCE, path))}
    with open(args.record + ".tmp", "w") as f:
        f.write("# scripts/tidy_cache.py: translation units clang-tidy found clean, by the SHA-256 of their inputs\n")
        for path in sorted(recorded):
            f.write(f"{recorded[path]} {path}\n")
    os.replace(args.record + ".tmp", args.record)
    if os.path.exists(pending_file):
        os.remove(pending_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
