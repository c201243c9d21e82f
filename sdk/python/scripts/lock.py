#!/usr/bin/env python3
"""Rewrites the hashes in requirements.txt and requirements-test.txt for the versions they pin.

    python3 scripts/lock.py

Downloads (with pip, through the host's pip configuration) each pinned file PyPI serves:
universal wheels, the manylinux wheels of CPython 3.10-3.14 on x86_64 and aarch64 of the
packages with compiled ones (websockets, tomli), and those two's sources. Edit a version by hand first.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent.parent
FILES = [HERE / "requirements.txt", HERE / "requirements-test.txt"]
PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64"]
SOURCES = {"websockets", "tomli"}
#: Packages with compiled wheels: their hashes differ per Python and platform.
BINARY = {"websockets", "tomli"}
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^ ;\\]+)(.*?)\\?$")


def pip_download(args: list[str], dest: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", dest,
                    *args], check=False, capture_output=True)


def hashes(name: str, version: str) -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        spec = f"{name}=={version}"
        if name in BINARY:
            for py in PYTHONS:
                for plat in PLATFORMS:
                    pip_download(["--only-binary=:all:", "--python-version", py, "--platform",
                                  plat, spec], d)
        # The universal wheel (what pip takes where no compiled one fits).
        pip_download(["--only-binary=:all:", "--platform", "any", "--python-version", "3.10",
                      spec], d)
        if name in SOURCES:
            pip_download(["--no-binary=:all:", spec], d)
        found = sorted(hashlib.sha256(p.read_bytes()).hexdigest()
                       for p in pathlib.Path(d).iterdir())
    if not found:
        raise SystemExit(f"pip found no file of {spec}")
    return found


def main() -> int:
    for path in FILES:
        out: list[str] = []
        for line in path.read_text().splitlines():
            if line.startswith("    --hash="):
                continue
            m = PIN.match(line)
            if not m:
                out.append(line)
                continue
            name, version, marker = m.group(1), m.group(2), m.group(3).rstrip()
            out.append(f"{name}=={version}{marker} \\")
            found = hashes(name, version)
            out += [f"    --hash=sha256:{h}" + (" \\" if i < len(found) - 1 else "")
                    for i, h in enumerate(found)]
        path.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
