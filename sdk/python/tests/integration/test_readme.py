"""Every ```python block of README.md runs against the real daemon, so the README cannot rot.

Each block runs on its own (a fresh namespace) with HUTCH_HOST, HUTCH_API_KEY (the admin key:
the README shows keys and templates too) and HUTCH_FINGERPRINT set to the test daemon, and must
leave no box behind.
"""

from __future__ import annotations

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def blocks():
    text = README.read_text()
    for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        line = text[:m.start()].count("\n") + 2
        uses_files = ".files." in m.group(1) or "processes.log" in m.group(1)
        marks = [pytest.mark.files_api] if uses_files else []
        yield pytest.param(m.group(1), line, id=f"README.md:{line}", marks=marks)


def test_readme_has_examples():
    assert len(list(blocks())) >= 8


@pytest.mark.parametrize("code,line", list(blocks()))
def test_readme_block(code, line, daemon, admin, monkeypatch, capsys):
    monkeypatch.setenv("HUTCH_HOST", daemon.https_url)
    monkeypatch.setenv("HUTCH_API_KEY", daemon.admin_key)
    monkeypatch.setenv("HUTCH_FINGERPRINT", daemon.fingerprint)
    before = {b.id for b in admin.boxes.list()}
    try:
        exec(compile(code, f"{README}:{line}", "exec"), {"__name__": "__readme__"})
    finally:
        left = [b for b in admin.boxes.list() if b.id not in before]
        for b in left:
            b.remove(force=True)
    assert not left, f"README.md:{line} left boxes behind: {[b.name for b in left]}"
