#!/usr/bin/env python3
"""clang-tidy over the translation units that need it, remembering the clean ones.

clang-tidy's findings on a translation unit depend on nothing but its inputs:
the tool's version (less the line naming the machine's CPU), .clang-tidy, the
unit's compile command, and the bytes of every file it includes. System
headers are those of the Debian 12 packages
scripts/setup installs; the project's own files are hashed. A unit whose key
(a SHA-256 over all of that, taken before the unit is checked) is in the
record was found clean with exactly these inputs, and is not checked again.

  tidy_cache.py [options] UNIT...

runs clang-tidy on each unit whose key is not recorded (every unit with
--all), as many at once as there are CPUs, prints each unit's findings,
records every unit found clean as soon as it is (so a run that finds
something elsewhere, or is stopped, keeps what it learnt), and exits 1 when
any unit has findings. A unit the build has no dependency record of (not
built) is always checked, and never recorded.

Options: --compile-commands FILE (the commands clang-tidy reads, whose folder
is its -p), --build-dir DIR (a built tree: its ninja log of header
dependencies), --record FILE, --tidy PROGRAM, --all.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys
import threading

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
    # The version, without the line naming the machine's CPU ("Host CPU:
    # znver2", or "(unknown)" for one LLVM 14 does not know), which differs
    # from machine to machine and changes nothing clang-tidy finds.
    tool = "".join(
        line
        for line in subprocess.run([args.tidy, "--version"], capture_output=True, text=True).stdout.splitlines(True)
        if not line.strip().startswith("Host CPU:"))
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
            if len(parts) == 2 and not line.startswith("#"):
                recorded[parts[1]] = parts[0]
    return recorded


def write_record(path, recorded):
    # Only units that still exist stay recorded.
    kept = {unit: key for unit, key in recorded.items() if os.path.exists(os.path.join(SOURCE, unit))}
    with open(path + ".tmp", "w") as f:
        f.write("# scripts/tidy_cache.py: translation units clang-tidy found clean, by the SHA-256 of their inputs\n")
        for unit in sorted(kept):
            f.write(f"{kept[unit]} {unit}\n")
    os.replace(path + ".tmp", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile-commands", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--record", required=True)
    parser.add_argument("--tidy", default="clang-tidy-14")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("units", nargs="*")
    args = parser.parse_args()

    unit_keys = keys(args, args.units)
    recorded = read_record(args.record)
    relative = {unit: os.path.relpath(os.path.realpath(unit), SOURCE) for unit in args.units}
    stale = [u for u in args.units if args.all or unit_keys[u] is None or recorded.get(relative[u]) != unit_keys[u]]
    if not stale:
        print(f"==> lint: clang-tidy: all {len(args.units)} units are as they were found clean ({args.record})")
        return 0
    print(f"==> lint: clang-tidy: {len(stale)} of {len(args.units)} units to check", flush=True)

    lock = threading.Lock()
    done = [0]
    failed = []

    def check(unit):
        run = subprocess.run([args.tidy, "-p", os.path.dirname(args.compile_commands), "--quiet", unit],
                             capture_output=True, text=True)
        output = run.stdout + run.stderr
        clean = run.returncode == 0 and "warning:" not in output and "error:" not in output
        with lock:
            done[0] += 1
            if clean:
                if unit_keys[unit] is not None:
                    recorded[relative[unit]] = unit_keys[unit]
                    write_record(args.record, recorded)
                print(f"[{done[0]}/{len(stale)}] {relative[unit]}: clean", flush=True)
            else:
                failed.append(relative[unit])
                print(f"[{done[0]}/{len(stale)}] {relative[unit]}: findings\n{output}", file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(check, stale))
    if failed:
        print("scripts/lint: clang-tidy found problems in " + ", ".join(sorted(failed)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
