"""Events, the audit log and metrics (docs/observability.md) against a real hutchd with real
boxes: what was done shows up, in order, to whom it belongs; the audit chain verifies and a
tampered log does not; /metrics parses with Prometheus' own Python parser and counts what the
test did."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import create_box, remove_box, unique


def run(client: httpx.Client, box: str, argv: list[str], **fields) -> dict:
    r = client.post(f"/v1/boxes/{box}/exec", json={"argv": argv, **fields}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def events(client: httpx.Client, **params) -> list[dict]:
    r = client.get("/v1/events", params=params)
    assert r.status_code == 200, r.text
    return r.json()["events"]


@pytest.fixture
def raw(daemon) -> httpx.Client:
    """A client that does not read answers in full (the spec validator would, forever, on a
    stream): for the streaming forms of GET /v1/events."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.socket), base_url="http://hutchd",
                      timeout=httpx.Timeout(60, read=60)) as c:
        yield c


def wait_for(what: str, check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def scrape(client: httpx.Client) -> dict[tuple[str, tuple], float]:
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, metric, **labels) -> float:
    return samples.get((metric, tuple(sorted(labels.items()))), 0.0)


def test_a_box_and_its_commands_are_events_in_order(unix, box):
    before = events(unix, box=box["id"])
    assert any(e["type"] == "box.created" for e in before), before
    created = next(e for e in before if e["type"] == "box.created")
    assert created["box"] == {"id": box["id"], "name": box["name"]}
    assert created["data"]["template"] == "base" and created["data"]["duration_ms"] >= 0
    last = before[-1]["id"]
    out = run(unix, box["name"], ["sh", "-c", "echo hi; exit 3"], env={"TOKEN": "s3cret"})
    assert out["exit_code"] == 3
    new = wait_for("exec.ended", lambda: [e for e in events(unix, box=box["id"], after=last)
                                         if e["type"] == "exec.ended"] and
                   events(unix, box=box["id"], after=last))
    types = [e["type"] for e in new]
    assert types.index("exec.started") < types.index("exec.ended"), types
    started = next(e for e in new if e["type"] == "exec.started")
    ended = next(e for e in new if e["type"] == "exec.ended")
    assert started["data"]["argv"] == ["sh", "-c", "echo hi; exit 3"]
    assert "TOKEN" in started["data"]["env"] and "s3cret" not in json.dumps(new)
    assert ended["data"]["exec_id"] == started["data"]["exec_id"]
    assert ended["data"]["exit_code"] == 3 and ended["data"]["bytes_out"] == 3
    assert [e["id"] for e in new] == sorted(e["id"] for e in new)
    # Filters: by type (exact and prefix) and time.
    assert {e["type"] for e in events(unix, box=box["id"], type="exec.")} <= {
        "exec.started", "exec.ended", "exec.failed", "exec.timeout"}
    assert events(unix, since=int(time.time()) + 3600) == []


def test_bad_event_queries_are_400_and_other_boxes_404(unix):
    for params in ({"after": "x"}, {"limit": 0}, {"limit": 100001}, {"since": "-1"}):
        r = unix.get("/v1/events", params=params)
        assert r.status_code == 400, (params, r.text)
        assert r.json()["error"]["code"] == "invalid_argument"
    r = unix.get("/v1/events", params={"box": "no-such-box"})
    assert r.status_code == 404


def test_a_follow_stream_delivers_what_happens(unix, raw, box):
    last = events(unix)[-1]["id"]
    got: list[dict] = []

    def follow():
        with raw.stream("GET", "/v1/events", params={"follow": 1, "after": last,
                                                     "box": box["id"]}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"] == "application/x-ndjson"
            for line in r.iter_lines():
                if not line.strip():
                    continue  # a keep-alive
                got.append(json.loads(line))
                if got[-1]["type"] == "exec.ended":
                    return

    t = threading.Thread(target=follow)
    t.start()
    time.sleep(0.5)
    run(unix, box["name"], ["true"])
    t.join(60)
    assert not t.is_alive(), "the stream did not deliver exec.ended"
    assert [e["type"] for e in got][-2:] == ["exec.started", "exec.ended"]
    assert all(e["id"] > last for e in got)


def test_server_sent_events_resume_after_last_event_id(unix, raw, box):
    run(unix, box["name"], ["true"])
    page = events(unix, box=box["id"])
    resume_from = page[-3]["id"]
    with raw.stream("GET", "/v1/events", params={"box": box["id"]},
                    headers={"Accept": "text/event-stream", "Last-Event-ID": str(resume_from)}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        ids = []
        for line in r.iter_lines():
            if line.startswith("id: "):
                ids.append(int(line[4:]))
            if len(ids) == 2:
                break
    assert ids == [e["id"] for e in page[-2:]]


def test_a_key_sees_only_its_own_boxes_events(unix, tcp_user, daemon):
    mine = create_box(tcp_user, unique("ev-user"))
    try:
        seen = events(tcp_user)
        assert seen and all(e["owner"] == seen[0]["owner"] for e in seen)
        assert any(e["box"] and e["box"]["id"] == mine["id"] for e in seen)
        admin_boxes = {e["box"]["id"] for e in events(unix) if e["box"] and not e["owner"]}
        assert admin_boxes and not admin_boxes & {e["box"]["id"] for e in seen if e["box"]}
        # Another owner's box is not there, by name or by id.
        other = next(iter(admin_boxes))
        assert tcp_user.get("/v1/events", params={"box": other}).json()["events"] == []
    finally:
        remove_box(tcp_user, mine["name"])
    removed = events(tcp_user, box=mine["id"])
    assert removed[-1]["type"] == "box.removed"


def test_exec_timeout_kills_the_command_with_an_event(unix, box):
    out = run(unix, box["name"], ["sleep", "30"], timeout_ms=500)
    assert out["timed_out"] is True and out["signal"] == 9 and out["exit_code"] is None
    timeouts = wait_for("exec.timeout", lambda: [
        e for e in events(unix, box=box["id"], type="exec.timeout")])
    assert timeouts[-1]["data"]["limit_ms"] == 500


def test_the_audit_log_records_execs_and_files_with_their_actor(tcp_user, daemon):
    b = create_box(tcp_user, unique("audit"))
    try:
        run(tcp_user, b["name"], ["id", "-u"], env={"API_TOKEN": "do-not-log-me"}, cwd="/tmp")
        r = tcp_user.put(f"/v1/boxes/{b['name']}/files", params={"path": "/tmp/a.txt"},
                         content=b"hello")
        assert r.status_code in (200, 201), r.text
        r = tcp_user.get("/v1/audit", params={"box": b["id"]})
        assert r.status_code == 200, r.text
        records = r.json()["records"]
        text = json.dumps(records)
        assert "do-not-log-me" not in text
        end = next(x for x in records if x["type"] == "exec.end")
        assert end["data"]["argv"] == ["id", "-u"] and end["data"]["cwd"] == "/tmp"
        assert end["data"]["env"] == ["API_TOKEN"] or "API_TOKEN" in end["data"]["env"]
        assert end["data"]["exit_code"] == 0 and end["data"]["bytes_out"] > 0
        assert end["actor"]["key_id"] and end["owner_id"] == end["actor"]["key_id"]
        write = next(x for x in records if x["type"] == "file.write")
        assert write["data"]["path"] == "/tmp/a.txt" and write["data"]["ok"] is True
        seqs = [x["seq"] for x in records]
        assert seqs == sorted(seqs)
    finally:
        remove_box(tcp_user, b["name"])
    # The trail stays after the box is gone.
    r = tcp_user.get("/v1/audit", params={"box": b["id"]})
    assert any(x["type"] == "exec.end" for x in r.json()["records"])


def test_audit_verify_is_admin_only_and_finds_an_edit(unix, tcp_user, daemon):
    assert tcp_user.get("/v1/audit/verify").status_code == 403
    r = unix.get("/v1/audit/verify")
    assert r.status_code == 200, r.text
    verdict = r.json()
    assert verdict["intact"] is True and verdict["records"] > 0, verdict
    log = Path(verdict["path"])
    original = log.read_bytes()
    lines = original.split(b"\n")
    target = next(i for i, line in enumerate(lines) if b'"exit_code":0' in line)
    lines[target] = lines[target].replace(b'"exit_code":0', b'"exit_code":1')
    try:
        log.write_bytes(b"\n".join(lines))
        broken = unix.get("/v1/audit/verify").json()
        assert broken["intact"] is False
        assert broken["broken"]["line"] == target + 1
        assert "changed" in broken["broken"]["reason"]
    finally:
        # Put it back (appends made meanwhile would be lost: nothing runs in this test).
        log.write_bytes(original)
    assert unix.get("/v1/audit/verify").json()["intact"] is True


def test_metrics_parse_and_count_what_was_done(unix, tcp_user, box):
    assert tcp_user.get("/metrics").status_code == 403
    before = scrape(unix)
    for _ in range(3):
        run(unix, box["name"], ["true"])
    run(unix, box["name"], ["false"])
    after = wait_for("the execs to be counted", lambda: (
        s := scrape(unix),
        value(s, "hutch_execs_total", result="ok") - value(before, "hutch_execs_total",
                                                           result="ok") >= 3 and s)[-1])
    assert value(after, "hutch_execs_total", result="ok") - \
        value(before, "hutch_execs_total", result="ok") == 3
    assert value(after, "hutch_execs_total", result="failed") - \
        value(before, "hutch_execs_total", result="failed") == 1
    assert value(after, "hutch_exec_duration_seconds_count") - \
        value(before, "hutch_exec_duration_seconds_count") == 4
    assert value(after, "hutch_boxes", state="running", template="base") >= 1
    assert value(after, "hutch_box_operations_total", operation="create", result="ok") >= 1
    labels = {"box": box["id"], "name": box["name"]}
    assert value(after, "hutch_box_memory_bytes", **labels) > 0
    assert value(after, "hutch_box_cpu_seconds_total", **labels) > 0
    assert value(after, "hutch_box_disk_bytes", **labels) > 0
    assert value(after, "process_open_fds") > 3
    assert value(after, "process_resident_memory_bytes") > 1 << 20
    # The event loop's lag, sampled every 100 ms since hutchd started: every sample is in a bucket.
    lag = value(after, "hutch_event_loop_lag_seconds_count")
    assert lag > 0
    assert value(after, "hutch_event_loop_lag_seconds_bucket", le="+Inf") == lag
    assert value(after, "hutch_event_loop_lag_seconds_bucket", le="5.0") <= lag


def test_a_quota_refusal_is_an_event_and_a_metric(unix, daemon):
    name = unique("tiny")
    r = unix.post("/v1/keys", json={"name": name, "max_boxes": 0, "max_memory_mib": 128})
    assert r.status_code == 201, r.text
    key = r.json()
    try:
        before = scrape(unix)
        with httpx.Client(base_url=daemon.http_url,
                          headers={"Authorization": f"Bearer {key['key']}"}) as c:
            r = c.post("/v1/boxes", json={"name": unique("too-big"), "memory_mib": 512})
            assert r.status_code == 429, r.text
            assert r.json()["error"]["code"] == "resource_exhausted"
        refused = [e for e in events(unix, type="quota.refused") if e["owner"] == key["id"]]
        assert refused and refused[-1]["data"]["limit"] == "max_memory_mib"
        assert value(scrape(unix), "hutch_quota_refusals_total", limit="max_memory_mib") - \
            value(before, "hutch_quota_refusals_total", limit="max_memory_mib") == 1
    finally:
        unix.delete(f"/v1/keys/{name}")
    removed = [e for e in events(unix, type="key.") if e["data"].get("key_id") == key["id"]]
    assert [e["type"] for e in removed] == ["key.created", "key.removed"]


def test_secret_changes_are_events_and_audit_records_without_the_value(unix, tcp_user):
    name = "OBS_" + unique("S").upper().replace("-", "_")
    value_ = "never-in-the-trail-" + unique("v")
    head = unix.get("/v1/audit/verify").json()["head"]["seq"]
    # A key's own secret: set, set again, removed.
    for v in (value_, value_ + "-again"):
        r = tcp_user.put(f"/v1/secrets/{name}", json={"value": v, "domains": ["api.example.com"]})
        assert r.status_code == 200, r.text
    assert tcp_user.delete(f"/v1/secrets/{name}").status_code == 200
    # The host administrator's of the same name is another owner's.
    r = unix.put(f"/v1/secrets/{name}", json={"value": value_, "domains": ["api.example.com"]})
    assert r.status_code == 200, r.text
    assert unix.delete(f"/v1/secrets/{name}").status_code == 200

    mine = [e for e in events(tcp_user, type="secret.")
            if e["data"]["name"] == name]
    assert [e["type"] for e in mine] == ["secret.created", "secret.replaced", "secret.removed"]
    owner = mine[0]["owner"]
    assert owner and all(e["owner"] == owner and e["box"] is None for e in mine)
    assert all(e["data"]["actor"]["key_id"] == owner for e in mine), mine
    every = [e for e in events(unix, type="secret.") if e["data"]["name"] == name]
    hosts = [e for e in every if e["owner"] == ""]
    assert [e["type"] for e in hosts] == ["secret.created", "secret.removed"]
    assert all(e["data"] == {"name": name, "actor": "host"} for e in hosts)

    records = tcp_user.get("/v1/audit", params={"after": head}).json()["records"]
    trail = [x for x in records if x["type"].startswith("secret.")]
    assert [x["type"] for x in trail] == ["secret.create", "secret.replace", "secret.remove"]
    assert all(x["actor"]["key_id"] == owner and x["owner_id"] == owner and
               x["data"] == {"name": name} for x in trail), trail
    host_trail = [x for x in unix.get("/v1/audit", params={"after": head}).json()["records"]
                  if x["type"].startswith("secret.") and x["owner_id"] == ""]
    assert [x["type"] for x in host_trail] == ["secret.create", "secret.remove"]

    # Nowhere the value: not in the events, the records, nor the log's file.
    verdict = unix.get("/v1/audit/verify").json()
    assert verdict["intact"] is True
    for text in (json.dumps(every), json.dumps(records), Path(verdict["path"]).read_text()):
        assert value_ not in text
