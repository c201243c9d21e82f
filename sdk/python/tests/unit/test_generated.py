"""hutch/_sync is generated from hutch/_async: the committed files must be what the script
makes, and both clients must have the same methods."""

import inspect
import pathlib
import subprocess
import sys

import hutch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_sync_code_is_up_to_date():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def public(cls):
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


def test_same_shape():
    pairs = [(hutch.Client, hutch.AsyncClient), (hutch.Box, hutch.AsyncBox),
             (hutch.Files, hutch.AsyncFiles), (hutch.ExecSession, hutch.AsyncExecSession),
             (hutch.Boxes, hutch.AsyncBoxes), (hutch.Templates, hutch.AsyncTemplates),
             (hutch.Processes, hutch.AsyncProcesses), (hutch.Ports, hutch.AsyncPorts),
             (hutch.BoxPolicy, hutch.AsyncBoxPolicy), (hutch.Secrets, hutch.AsyncSecrets),
             (hutch.Keys, hutch.AsyncKeys)]
    for sync, async_ in pairs:
        assert public(sync) == public(async_), sync
        for name in public(sync):
            a = getattr(async_, name)
            if inspect.iscoroutinefunction(a):
                assert not inspect.iscoroutinefunction(getattr(sync, name))
                assert inspect.signature(a) == inspect.signature(getattr(sync, name)) or \
                    list(inspect.signature(a).parameters) == \
                    list(inspect.signature(getattr(sync, name)).parameters), name


def test_version_matches_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{hutch.__version__}"' in text


def test_the_installed_package_is_tested():
    # scripts/test.sh installs the package (not editable) and sets this: the tests must not
    # pick up the source tree instead.
    import os
    if os.environ.get("HUTCH_SDK_EXPECT_INSTALLED") != "1":
        import pytest
        pytest.skip("not run by scripts/test.sh")
    assert "site-packages" in hutch.__file__, hutch.__file__
