#!/usr/bin/env python3
"""Writes hutch/_sync/ from hutch/_async/ (the async client is the source; the sync one is
generated, as httpcore does it). ``_backend.py`` is hand-written on both sides and skipped.

    python3 scripts/unasync.py          # regenerate
    python3 scripts/unasync.py --check  # exit 1 if hutch/_sync is not what the source gives
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hutch"
SOURCE, TARGET = ROOT / "_async", ROOT / "_sync"
SKIP = {"_backend.py"}

# Order matters: longer and more specific first.
RULES: list[tuple[str, str]] = [
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\baclosing\b", "closing"),
    (r"\bAsyncGenerator\[([^\]]+), None\]", r"Generator[\1, None, None]"),
    (r"\bAsyncGenerator\b", "Generator"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncIterable\b", "Iterable"),
    (r"\baiter_bytes\b", "iter_bytes"),
    (r"\baiter_lines\b", "iter_lines"),
    (r"\baread\b", "read"),
    (r"\baclose\b", "close"),
    (r"\bAsync([A-Z][A-Za-z]*)\b", r"\1"),  # AsyncClient -> Client, httpx.AsyncClient too
    (r"\bhutch\._async\b", "hutch._sync"),
]

HEADER = ("# Generated from hutch/_async/{name} by scripts/unasync.py: edit that file, then run "
          "the script.\n")


def convert(text: str) -> str:
    for pattern, replacement in RULES:
        text = re.sub(pattern, replacement, text)
    return text


def expected() -> dict[pathlib.Path, str]:
    out = {}
    for path in sorted(SOURCE.glob("*.py")):
        if path.name in SKIP:
            continue
        out[TARGET / path.name] = HEADER.format(name=path.name) + convert(path.read_text())
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in expected().items():
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    known = set(expected()) | {TARGET / name for name in SKIP}
    extra = [p for p in TARGET.glob("*.py") if p not in known]
    if check and (stale or extra):
        for path in stale:
            print(f"{path.relative_to(ROOT.parent)} is not what scripts/unasync.py makes",
                  file=sys.stderr)
        for path in extra:
            print(f"{path.relative_to(ROOT.parent)} has no source in hutch/_async",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
