"""Template creation from images, archives and Dockerfiles, against a fake hutchd, for both
clients: what is sent (query, body, headers) and how the NDJSON stream is read."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

import hutch

IMAGE_TEMPLATE = {
    "name": "py", "source": "image", "source_box": "", "image_key": "k", "kernel_version": "6.1",
    "created": "2026-01-01T00:00:00Z", "disk_bytes": 1 << 20,
    "image": {"ref": "127.0.0.1:5000/test/busybox:latest", "digest": "sha256:aa",
              "config_digest": "sha256:bb", "platform": "linux/amd64", "layers": 1,
              "bytes": 4096},
    "defaults": {"env": ["PATH=/bin"], "workdir": "/home/app", "user": "app",
                 "entrypoint": ["/bin/sh", "-c"], "cmd": ["echo hello"],
                 "exposed_ports": ["8080/tcp"], "labels": {"a": "b"}, "stop_signal": ""},
}
BUILD_TEMPLATE = {
    "name": "app", "source": "build", "source_box": "", "image_key": "k", "kernel_version": "6.1",
    "created": "2026-01-01T00:00:00Z", "disk_bytes": 1 << 20,
    "build": {"key": "sha256:cc", "base_template": "base", "base_image": "", "steps": 3,
              "cached_steps": 1},
    "start": {"cmd": "python3 -m http.server", "ready": "true"},
}


def ndjson(*objects) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


def members(body: bytes) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tar:
        for m in tar:
            f = tar.extractfile(m) if m.isfile() else None
            out[m.name + ("/" if m.isdir() else "")] = f.read() if f else None
    return out


def test_template_model_has_source_build_start_image_defaults():
    t = hutch.Template(**{k: v for k, v in IMAGE_TEMPLATE.items()})
    assert t.image.digest == "sha256:aa" and t.image.bytes == 4096 and t.image.archive == ""
    assert t.defaults.user == "app" and t.defaults.exposed_ports == ["8080/tcp"]
    assert t.build is None and t.start is None
    b = hutch.Template(**BUILD_TEMPLATE)
    assert b.build.cached_steps == 1 and b.start.cmd == "python3 -m http.server"
    assert isinstance(b.build, hutch.TemplateBuild) and isinstance(b.start, hutch.TemplateStart)


def test_create_from_image_streams_progress(client, fake):
    fake.on("POST", "/v1/templates",
            body=ndjson({"progress": "Copying blob sha256:aa"}, {"progress": "done"},
                        {"template": IMAGE_TEMPLATE}) + "\n",
            headers={"Content-Type": "application/x-ndjson"})
    seen = []
    t = client.templates.create("py", from_image="127.0.0.1:5000/test/busybox:latest",
                                on_progress=seen.append)
    assert seen == ["Copying blob sha256:aa", "done"]
    assert t.source == "image" and t.image.ref.endswith("busybox:latest")
    assert fake.last_json() == {"name": "py", "from_image": "127.0.0.1:5000/test/busybox:latest"}
    assert fake.last.headers["accept"] == "application/x-ndjson"


def test_create_from_image_or_archive_with_systemd(client, fake, tmp_path):
    fake.on("POST", "/v1/templates", body=ndjson({"template": IMAGE_TEMPLATE}),
            headers={"Content-Type": "application/x-ndjson"})
    client.templates.create("sd", from_image="reg:5000/test/systemd", systemd=True)
    assert fake.last_json() == {"name": "sd", "from_image": "reg:5000/test/systemd",
                                "systemd": True}
    archive = tmp_path / "image.tar"
    archive.write_bytes(b"A" * 10)
    fake.on("POST", "/v1/templates/sd/archive", body=ndjson({"template": IMAGE_TEMPLATE}),
            headers={"Content-Type": "application/x-ndjson"})
    client.templates.create("sd", from_archive=archive, systemd=True)
    assert fake.last.url.params["systemd"] == "true" and "image" not in fake.last.url.params
    sent = len(fake.requests)
    with pytest.raises(hutch.InvalidArgumentError, match="for a template from an image"):
        client.templates.create("sd", from_box="dev", systemd=True)
    with pytest.raises(hutch.InvalidArgumentError, match="True or False"):
        client.templates.create("sd", from_image="x", systemd="yes")
    assert len(fake.requests) == sent


def test_create_from_image_error_line_is_typed(client, fake):
    fake.on("POST", "/v1/templates",
            body=ndjson({"progress": "x"}, {"error": {"code": "not_found",
                                                      "message": "No image test/nope"}}),
            headers={"Content-Type": "application/x-ndjson"})
    with pytest.raises(hutch.NotFoundError, match="No image test/nope"):
        client.templates.create("py", from_image="127.0.0.1:5000/test/nope:1")


def test_create_stream_without_result_is_an_error(client, fake):
    fake.on("POST", "/v1/templates", body=ndjson({"progress": "x"}),
            headers={"Content-Type": "application/x-ndjson"})
    with pytest.raises(hutch.UnavailableError, match="without a result"):
        client.templates.create("py", from_image="busybox")


def test_create_needs_exactly_one_source(client, fake, tmp_path):
    with pytest.raises(hutch.InvalidArgumentError, match="one of"):
        client.templates.create("x")
    with pytest.raises(hutch.InvalidArgumentError, match="not from_box and from_image"):
        client.templates.create("x", from_box="dev", from_image="busybox")
    with pytest.raises(hutch.InvalidArgumentError, match="goes with from_archive"):
        client.templates.create("x", from_image="busybox", image="@0")
    with pytest.raises(hutch.InvalidArgumentError, match="image reference"):
        client.templates.create("x", from_image=" ")
    with pytest.raises(hutch.InvalidArgumentError, match="Cannot read the image archive"):
        client.templates.create("x", from_archive=tmp_path / "missing.tar")
    with pytest.raises(hutch.InvalidArgumentError, match="without index.json"):
        client.templates.create("x", from_archive=tmp_path)
    with pytest.raises(hutch.InvalidArgumentError, match="not int"):
        client.templates.create("x", from_archive=42)
    assert fake.requests == []


def test_create_from_archive_path_announces_its_length(client, fake, tmp_path):
    archive = tmp_path / "image.tar"
    archive.write_bytes(b"A" * 300_000)
    fake.on("POST", "/v1/templates/py/archive", body=ndjson({"template": IMAGE_TEMPLATE}),
            headers={"Content-Type": "application/x-ndjson"})
    t = client.templates.create("py", from_archive=str(archive), image="app:1")
    assert t.name == "py"
    assert fake.last.headers["content-length"] == "300000"
    assert fake.last.headers["content-type"] == "application/x-tar"
    assert fake.last.url.params["image"] == "app:1"
    assert fake.bodies[-1] == b"A" * 300_000


def test_create_from_archive_file_object_and_layout_directory(client, fake, tmp_path):
    fake.on("POST", "/v1/templates/py/archive", 201, IMAGE_TEMPLATE)
    t = client.templates.create("py", from_archive=io.BytesIO(b"B" * 70_000))
    assert t.image.digest == "sha256:aa"
    assert fake.bodies[-1] == b"B" * 70_000 and "image" not in fake.last.url.params
    layout = tmp_path / "layout"
    (layout / "blobs" / "sha256").mkdir(parents=True)
    (layout / "index.json").write_text("{}")
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (layout / "blobs" / "sha256" / "ab").write_bytes(b"blob")
    client.templates.create("py", from_archive=layout)
    got = members(fake.bodies[-1])
    assert got["index.json"] == b"{}" and got["blobs/sha256/ab"] == b"blob"


def test_create_from_archive_refused_before_the_stream(client, fake, tmp_path):
    archive = tmp_path / "a.tar"
    archive.write_bytes(b"x")
    fake.on("POST", "/v1/templates/taken/archive", 409,
            {"error": {"code": "already_exists", "message": "Template taken exists"}})
    with pytest.raises(hutch.AlreadyExistsError, match="taken exists"):
        client.templates.create("taken", from_archive=archive)


def test_build_sends_context_and_query(client, fake, tmp_path):
    ctx = tmp_path / "ctx"
    (ctx / "src").mkdir(parents=True)
    (ctx / "Dockerfile").write_text("FROM base\nCOPY src /app\n")
    (ctx / "src" / "main.py").write_text("print(1)\n")
    (ctx / ".dockerignore").write_text("secret\n")
    (ctx / "secret").write_text("left out by hutchd, not here\n")
    (ctx / "link").symlink_to("src/main.py")
    fake.on("POST", "/v1/builds",
            body=ndjson({"progress": "Step 1/2 : FROM base"}, {"progress": "Step 2/2 : COPY"},
                        {"template": BUILD_TEMPLATE}),
            headers={"Content-Type": "application/x-ndjson"})
    seen = []
    t = client.templates.build("app", seen.append, context=ctx, build_args={"V": "2"},
                               target="final", no_cache=True, start_cmd="python3 -m http.server",
                               ready_cmd="true", network_policy={"allow": [{"domain": "*"}]},
                               secrets=["NPM_TOKEN", "PIP_TOKEN"], cpus=1, memory="512M",
                               disk="4G", step_timeout=600)
    assert t.source == "build" and t.build.steps == 3
    assert seen == ["Step 1/2 : FROM base", "Step 2/2 : COPY"]
    params = dict(fake.last.url.params)
    assert params == {"name": "app", "dockerfile": "Dockerfile", "build_args": '{"V": "2"}',
                      "target": "final", "no_cache": "true",
                      "start_cmd": "python3 -m http.server", "ready_cmd": "true",
                      "network_policy": '{"allow": [{"domain": "*"}]}',
                      "secrets": "NPM_TOKEN,PIP_TOKEN", "cpus": "1",
                      "memory_mib": "512", "disk_mib": "4096", "step_timeout_s": "600"}
    assert fake.last.headers["content-type"] == "application/x-tar"
    got = members(fake.bodies[-1])
    assert got["Dockerfile"] == b"FROM base\nCOPY src /app\n"
    assert got["src/main.py"] == b"print(1)\n" and "src/" in got
    assert "secret" in got and ".dockerignore" in got  # hutchd applies .dockerignore
    with tarfile.open(fileobj=io.BytesIO(fake.bodies[-1])) as tar:
        assert tar.getmember("link").issym() and tar.getmember("link").linkname == "src/main.py"


def test_build_dockerfile_inside_outside_and_as_text(client, fake, tmp_path):
    fake.on("POST", "/v1/builds", 201, BUILD_TEMPLATE)
    ctx = tmp_path / "ctx"
    (ctx / "docker").mkdir(parents=True)
    (ctx / "docker" / "app.Dockerfile").write_text("FROM base\n")
    client.templates.build("app", context=ctx, dockerfile=ctx / "docker" / "app.Dockerfile")
    assert fake.last.url.params["dockerfile"] == "docker/app.Dockerfile"
    assert "docker/app.Dockerfile" in members(fake.bodies[-1])

    outside = tmp_path / "Dockerfile.other"
    outside.write_text("FROM base\nRUN true\n")
    client.templates.build("app", context=ctx, dockerfile=str(outside))
    assert fake.last.url.params["dockerfile"] == ".hutch-dockerfile"
    got = members(fake.bodies[-1])
    assert got[".hutch-dockerfile"] == b"FROM base\nRUN true\n" and "docker/" in got

    client.templates.build("app", dockerfile_content="FROM base\nRUN echo hi\n")
    assert fake.last.url.params["dockerfile"] == ".hutch-dockerfile"
    assert members(fake.bodies[-1]) == {".hutch-dockerfile": b"FROM base\nRUN echo hi\n"}


def test_build_bad_input_is_refused_here(client, fake, tmp_path):
    with pytest.raises(hutch.InvalidArgumentError, match="does not exist"):
        client.templates.build("app", context=tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(hutch.InvalidArgumentError, match="is not a directory"):
        client.templates.build("app", context=tmp_path / "file")
    with pytest.raises(hutch.InvalidArgumentError, match="no such Dockerfile"):
        client.templates.build("app", context=tmp_path)
    with pytest.raises(hutch.InvalidArgumentError, match="no such Dockerfile"):
        client.templates.build("app", context=tmp_path, dockerfile=tmp_path / "missing")
    with pytest.raises(hutch.InvalidArgumentError, match="not both"):
        client.templates.build("app", dockerfile="x", dockerfile_content="FROM base")
    with pytest.raises(hutch.InvalidArgumentError, match="apply to Dockerfile builds"):
        client.templates.build("app", target="final")
    with pytest.raises(hutch.InvalidArgumentError, match="build_args"):
        client.templates.build("app", dockerfile_content="FROM base", build_args={"A": 1})
    with pytest.raises(hutch.InvalidArgumentError, match="cpus"):
        client.templates.build("app", dockerfile_content="FROM base", cpus=0)
    for bad in ("NPM_TOKEN", ["A,B"], [""]):
        with pytest.raises(hutch.InvalidArgumentError, match="secrets"):
            client.templates.build("app", dockerfile_content="FROM base", secrets=bad)
    assert fake.requests == []


def test_build_refusal_names_the_line(client, fake):
    fake.on("POST", "/v1/builds", 400, {"error": {"code": "invalid_argument", "message":
                                                  "Dockerfile line 2: unknown instruction"}})
    with pytest.raises(hutch.InvalidArgumentError, match="line 2"):
        client.templates.build("app", dockerfile_content="FROM base\nFROBNICATE\n")


def test_build_context_unreadable_is_an_invalid_argument(tmp_path, monkeypatch):
    import hutch._tar

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM base\n")
    plan = hutch._tar.build_context(ctx, None, None)
    assert b"FROM base" in b"".join(plan.stream())

    def unreadable(path, name):
        raise PermissionError(13, "Permission denied", path)
        yield b""  # a generator, as _entry is

    monkeypatch.setattr(hutch._tar, "_entry", unreadable)
    with pytest.raises(hutch.InvalidArgumentError, match="Cannot read the build context .*"
                                                         "Permission denied"):
        b"".join(plan.stream())
