#!/usr/bin/env python3
"""clang-tidy over translation units, with a cache of the units it found clean.

    scripts/tidy.py --build BUILD_DIR --cache CACHE_DIR [--jobs N] UNIT.cc...

A unit's key is the SHA-256 of everything clang-tidy's verdict depends on: the clang-tidy
version, the .clang-tidy file, the extra arguments, the compile command, and the unit as the
preprocessor expands it (every header's text, line markers included, so a moved line or a
changed header is a new key). A unit found clean records its key under CACHE_DIR/tidy; the next
run skips it while the key is the same. A unit with findings records nothing and prints them.
Exit status: 0 clean, 1 findings, 2 a unit could not be checked.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

EXTRA_ARGS = [
    # Boost 1.74 only enables co_await for GCC; clang 14 has C++20 coroutines too.
    "-DBOOST_ASIO_HAS_CO_AWAIT=1",
    "-DBOOST_ASIO_HAS_STD_COROUTINE=1",
    "-include",
    "utility",
]
NOISE = re.compile(r"^\d+ warnings? (and \d+ errors? )?generated|^Suppressed|^Use -header-filter")


def compile_commands(build: pathlib.Path) -> dict:
    entries = json.loads((build / "compile_commands.json").read_text())
    commands = {}
    for entry in entries:
        args = entry.get("arguments") or shlex.split(entry["command"])
        # A compiler launcher (ccache) changes nothing clang-tidy sees.
        while args and os.path.basename(args[0]) == "ccache":
            args = args[1:]
        path = pathlib.Path(entry["directory"], entry["file"]).resolve()
        commands[path] = (entry["directory"], args)
    return commands


def preprocess_args(args: list) -> list:
    """The compile command as clang's preprocessor: no output file, no warning flags."""
    out = ["clang-14", "-E"]
    skip = False
    for arg in args[1:]:
        if skip:
            skip = False
            continue
        if arg == "-o":
            skip = True
            continue
        if arg == "-c" or arg.startswith("-W") or arg.startswith("-g"):
            continue
        out.append(arg)
    return out + EXTRA_ARGS


def unit_key(unit: pathlib.Path, directory: str, args: list, salt: bytes, root: str) -> str:
    expanded = subprocess.run(preprocess_args(args), cwd=directory, capture_output=True)
    if expanded.returncode != 0:
        raise RuntimeError(f"cannot preprocess {unit}: {expanded.stderr.decode(errors='replace')}")
    # The same sources checked out elsewhere (CI clones into another directory) are the same key.
    digest = hashlib.sha256(salt)
    # Debug information changes nothing clang-tidy sees.
    flags = [a for a in args if not a.startswith("-g")]
    digest.update(" ".join(flags).replace(root, "@ROOT@").encode())
    digest.update(expanded.stdout.replace(root.encode(), b"@ROOT@"))
    return digest.hexdigest()


def check(unit, commands, build, cache, salt, root):
    directory, args = commands[unit]
    key = unit_key(unit, directory, args, salt, root)
    stamp = cache / key
    if stamp.exists():
        return unit, True, "", True
    run = subprocess.run(
        ["clang-tidy", "-p", str(build), "--quiet", "--warnings-as-errors=*"]
        + [f"--extra-arg={a}" for a in EXTRA_ARGS]
        + [str(unit)],
        capture_output=True,
        text=True,
    )
    text = "\n".join(
        line for line in (run.stdout + run.stderr).splitlines() if not NOISE.match(line)
    )
    if run.returncode == 0:
        stamp.touch()
    return unit, run.returncode == 0, text, False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, type=pathlib.Path)
    parser.add_argument("--cache", required=True, type=pathlib.Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("units", nargs="+", type=pathlib.Path)
    opts = parser.parse_args()

    root = pathlib.Path(__file__).resolve().parents[1]
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, check=True).stdout
    salt = version + (root / ".clang-tidy").read_bytes() + " ".join(EXTRA_ARGS).encode()
    cache = opts.cache / "tidy"
    cache.mkdir(parents=True, exist_ok=True)
    commands = compile_commands(opts.build)
    units = [u.resolve() for u in opts.units]
    missing = [str(u) for u in units if u not in commands]
    if missing:
        print("tidy: not in compile_commands.json (build first): " + " ".join(missing),
              file=sys.stderr)
        return 2

    findings = cached = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        jobs = [pool.submit(check, u, commands, opts.build, cache, salt, str(root)) for u in units]
        for job in concurrent.futures.as_completed(jobs):
            try:
                unit, clean, text, hit = job.result()
            except RuntimeError as error:
                print(f"tidy: {error}", file=sys.stderr)
                return 2
            cached += hit
            if not clean:
                findings += 1
                print(text)
    print(f"tidy: {len(units)} units, {cached} unchanged since a clean run, "
          f"{findings} with findings", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
