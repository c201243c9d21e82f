"""E2B's semantics where hutch has the feature (issue 38, item 3), through the E2B Python SDK
(sync API): getMetrics' fields (mem_cache) and window, connect and set_timeout, Sandbox.list's
order and pages, and envd's files (modes, symlinks, a relative cwd, remove, uploads)."""

import inspect
import json
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

from e2b import Sandbox, SandboxQuery

from support import RUN_ID, create_sandbox, wait_for


def test_metrics_have_every_field_and_a_window(sbx):
    metrics = wait_for("a metric", sbx.get_metrics)
    m = metrics[0]
    # mem_cache: the SDK's model requires it (KeyError without it).
    for name in ("cpu_count", "cpu_used_pct", "mem_used", "mem_total", "mem_cache", "disk_used",
                 "disk_total", "timestamp"):
        assert getattr(m, name) is not None, name
    start = datetime.now(timezone.utc)
    assert sbx.get_metrics(start=start - timedelta(hours=1),
                           end=start - timedelta(minutes=30)) == []
    around = sbx.get_metrics(start=start - timedelta(minutes=1), end=datetime.now(timezone.utc))
    assert len(around) == 1
    assert around[0].timestamp.timestamp() <= time.time() + 10


def test_connect_never_shortens_and_set_timeout_zero_ends():
    sbx = create_sandbox(timeout=300)
    if "timeout" in inspect.signature(Sandbox.connect).parameters:
        before = Sandbox.get_info(sbx.sandbox_id).end_at
        Sandbox.connect(sbx.sandbox_id, timeout=10)
        assert Sandbox.get_info(sbx.sandbox_id).end_at == before
    sbx.set_timeout(0)
    wait_for("the sandbox to end", lambda: not sbx.is_running(), timeout=30)


def test_list_is_newest_first_in_pages():
    tag = f"{RUN_ID}-order"
    older = create_sandbox(metadata={"order": tag})
    newer = create_sandbox(metadata={"order": tag})
    paginator = Sandbox.list(query=SandboxQuery(metadata={"order": tag}), limit=1)
    first = paginator.next_items()
    assert [s.sandbox_id for s in first] == [newer.sandbox_id]
    assert paginator.has_next
    second = paginator.next_items()
    assert [s.sandbox_id for s in second] == [older.sandbox_id]
    assert not paginator.has_next
    older.kill()
    newer.kill()


def test_entries_modes_and_symlink_targets_as_envd(sbx):
    sbx.files.make_dir("sem-dir")
    sbx.files.write("sem-file.txt", "x")
    sbx.commands.run("ln -sf sem-file.txt sem-link")
    assert sbx.files.get_info("sem-dir").mode == 0o755
    assert next(e for e in sbx.files.list("/home/user") if e.name == "sem-dir").mode == 0o755
    assert sbx.files.get_info("sem-link").symlink_target == "/home/user/sem-file.txt"


def test_relative_cwd_and_removing_a_missing_path(sbx):
    sbx.files.make_dir("sem-cwd/inner")
    assert sbx.commands.run("pwd", cwd="sem-cwd/inner").stdout == "/home/user/sem-cwd/inner\n"
    sbx.files.remove("/home/user/sem-never-was")
    assert not sbx.files.exists("/home/user/sem-never-was")


def test_several_files_as_the_user_into_a_new_directory_under_root(sbx):
    from e2b.sandbox.filesystem.filesystem import WriteEntry
    files = [WriteEntry(path="/sem-py/0/multi0.txt", data="zero"),
             WriteEntry(path="/home/user/sem-multi1.txt", data="one")]
    write_files = getattr(sbx.files, "write_files", None) or sbx.files.write
    infos = write_files(files)
    # WriteEntry is a dataclass in some SDK versions, a TypedDict in others.
    def path_of(entry):
        return entry["path"] if isinstance(entry, dict) else entry.path
    assert [path_of(i) for i in infos] == [path_of(f) for f in files]
    assert sbx.files.read("/sem-py/0/multi0.txt") == "zero"
    owners = sbx.commands.run('stat -c "%U %a" /sem-py /sem-py/0 /sem-py/0/multi0.txt')
    assert owners.stdout == "user 755\nuser 755\nuser 644\n"


def test_gzip_upload_is_stored_inflated(sbx):
    if "gzip" not in inspect.signature(sbx.files.write).parameters:
        pytest.skip("this SDK has no gzip uploads")
    content = "Streamed gzipped upload. " * 10000
    sbx.files.write("sem-gzip.txt", content, gzip=True)
    assert sbx.files.read("sem-gzip.txt") == content


def test_expired_signed_url_says_so(sbx):
    params = inspect.signature(sbx.download_url).parameters if hasattr(sbx, "download_url") else {}
    if "use_signature_expiration" not in params:
        pytest.skip("this SDK signs no expiring URLs")
    sbx.files.write("sem-signed.txt", "hello world")
    url = sbx.download_url("sem-signed.txt", use_signature_expiration=-10000)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url)
    assert err.value.code == 401
    assert json.loads(err.value.read()) == {"code": 401, "message": "signature is already expired"}
    fresh = sbx.download_url("sem-signed.txt", use_signature_expiration=10000)
    with urllib.request.urlopen(fresh) as res:
        assert res.read() == b"hello world"
