"""The SDK's models (hutch/_models.py) against docs/openapi.yaml: a field in the spec and not in
a model, or the reverse, fails here (scripts/check_client_models.py --client python; its
ALLOWED list has the deliberate differences). HUTCH_OPENAPI_SPEC checks another spec.

The check reads the YAML with PyYAML, which the build needs too (python3-yaml) but this venv
does not pin: it runs with the first interpreter that has it, HUTCH_SPEC_PYTHON or python3.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import hutch
from hutch._models import from_json

REPO = pathlib.Path(__file__).resolve().parents[4]
CHECK = REPO / "scripts" / "check_client_models.py"


def yaml_python() -> str:
    candidates = [os.environ.get("HUTCH_SPEC_PYTHON"), shutil.which("python3"),
                  "/usr/bin/python3", sys.executable]
    for python in candidates:
        if python and subprocess.run([python, "-c", "import yaml"],
                                     capture_output=True).returncode == 0:
            return python
    pytest.fail("No python3 with PyYAML to read docs/openapi.yaml: install python3-yaml (as the "
                "build needs) or set HUTCH_SPEC_PYTHON")


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([yaml_python(), str(CHECK), "--client", "python", *args],
                          capture_output=True, text=True)


def test_models_match_the_spec():
    done = run_check()
    assert done.returncode == 0, done.stderr


def test_a_field_only_in_the_spec_fails(tmp_path):
    # The spec as JSON (which is YAML too), with a property the SDK cannot know.
    python = yaml_python()
    spec_path = os.environ.get("HUTCH_OPENAPI_SPEC") or str(REPO / "docs" / "openapi.yaml")
    text = subprocess.run(
        [python, "-c", "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), "
                       "sys.stdout)", spec_path],
        capture_output=True, text=True, check=True).stdout
    spec = json.loads(text)
    spec["components"]["schemas"]["Box"]["properties"]["gpu_count"] = {"type": "integer"}
    del spec["components"]["schemas"]["Secret"]["properties"]["header"]
    scratch = tmp_path / "openapi.yaml"
    scratch.write_text(json.dumps(spec))
    done = run_check("--spec", str(scratch))
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("components.schemas.Box: 'gpu_count' is in the spec but not in the client's model "
            "(as 'gpu_count') [python: BoxInfo in sdk/python/hutch/_models.py]") in done.stderr
    assert ("components.schemas.Secret: 'header' is in the client's model but not in the spec "
            "[python: Secret in sdk/python/hutch/_models.py]") in done.stderr


def test_box_limits_lifetime_and_shares_are_read():
    # The fields of the spec's Box the SDK did not have before this check.
    box = from_json(hutch.BoxInfo, {
        "id": "3f2a9c01d4e5", "name": "dev", "max_exec_ms": 60000, "idle_pause_ms": 0,
        "expires_at": 1764403600, "on_timeout": "suspend",
        "shares": [{"host_dir": "/srv/data", "box_dir": "/data", "read_only": True}]})
    assert (box.max_exec_ms, box.idle_pause_ms, box.expires_at, box.on_timeout) == \
        (60000, 0, 1764403600, "suspend")
    assert box.shares == [hutch.BoxShare(host_dir="/srv/data", box_dir="/data", read_only=True)]
    assert box.shares[0].raw == {"host_dir": "/srv/data", "box_dir": "/data", "read_only": True}
    # An older hutchd sends none of them.
    old = from_json(hutch.BoxInfo, {"id": "a", "name": "b"})
    assert (old.max_exec_ms, old.idle_pause_ms, old.expires_at, old.on_timeout, old.shares) == \
        (0, -1, 0, "", [])
