"""Templates from Dockerfiles, image archives and a registry, against the real hutchd.

Each build or import that boots a VM costs 15-30 s under TCG, so there are few: one Dockerfile
build (a COPY of the context and a RUN) and a box of it, one archive import (the busybox image
of tests/registry, made an OCI archive as tests/registry/archives.py makes them) and a box of
it, and one pull from a registry on loopback (Debian's docker-registry, tests/registry). Bad
input is checked where it costs no VM.
"""

from __future__ import annotations

import asyncio
import pathlib
import shlex
import subprocess

import pytest

import hutch

from conftest import REPO, unique

REGISTRY = REPO / "tests" / "registry"


def _remove_template(admin: hutch.Client, name: str) -> None:
    try:
        admin.templates.remove(name)
    except hutch.NotFoundError:
        pass


@pytest.fixture(scope="module")
def busybox_layout(tmp_path_factory) -> pathlib.Path:
    """The busybox test image as an OCI layout (built by images.sh, cached in the image cache)."""
    out = tmp_path_factory.mktemp("images")
    done = subprocess.run(["bash", str(REGISTRY / "images.sh"), str(out), "busybox"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"tests/registry/images.sh failed:\n{done.stdout}{done.stderr}")
    for line in done.stdout.splitlines():
        name, _, path = line.partition(" ")
        if name == "busybox":
            return pathlib.Path(path)
    pytest.fail(f"images.sh printed no busybox layout: {done.stdout!r}")


@pytest.fixture(scope="module")
def registry(busybox_layout, tmp_path_factory):
    """A plain-HTTP registry on 127.0.0.1 (hutchd pulls from loopback without a CA) holding
    test/busybox:latest; yields its host:port."""
    directory = tmp_path_factory.mktemp("registry")
    script = str(REGISTRY / "registry.sh")
    started = subprocess.run(["bash", script, "start", str(directory), "--plain-http",
                              "--no-auth"], capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        pytest.fail(f"registry.sh start failed:\n{started.stdout}{started.stderr}")
    env = dict(line.split("=", 1) for line in started.stdout.splitlines() if "=" in line)
    host = shlex.split(env["REGISTRY"])[0]
    try:
        pushed = subprocess.run(["bash", script, "push", str(directory),
                                 f"{busybox_layout}:latest", "test/busybox:latest"],
                                capture_output=True, text=True, timeout=300)
        if pushed.returncode != 0:
            pytest.fail(f"registry.sh push failed:\n{pushed.stdout}{pushed.stderr}")
        yield host
    finally:
        subprocess.run(["bash", script, "stop", str(directory)], capture_output=True,
                       timeout=120)


def test_dockerfile_build_copies_runs_and_boots(admin, boxes, tmp_path):
    context = tmp_path / "context"
    (context / "app").mkdir(parents=True)
    (context / "app" / "hello.txt").write_text("hello from the sdk\n")
    (context / "app" / "ignored.txt").write_text("left out by .dockerignore\n")
    (context / ".dockerignore").write_text("app/ignored.txt\n")
    (context / "Dockerfile").write_text(
        "FROM base\n"
        "ARG GREETING=unset\n"
        "COPY app /opt/sdk/\n"
        "RUN test ! -e /opt/sdk/ignored.txt && echo \"$GREETING\" > /opt/sdk/greeting\n"
        "ENV SDK_BUILD=yes\n")
    name = unique("build")
    progress: list[str] = []
    try:
        template = admin.templates.build(name, progress.append, context=context,
                                         build_args={"GREETING": "built-by-run"},
                                         memory="512M", cpus=1)
        assert template.name == name and template.source == "build", template
        assert template.build is not None and template.build.base_template == "base"
        assert template.build.steps >= 2, template.build
        assert any("RUN" in line for line in progress), progress
        listed = admin.templates.get(name)
        assert listed.source == "build" and listed.build.key == template.build.key

        box = boxes(template=name)
        assert box.exec("cat /opt/sdk/hello.txt").stdout == "hello from the sdk\n"
        assert box.exec("cat /opt/sdk/greeting").stdout == "built-by-run\n"
        assert box.exec("test -e /opt/sdk/ignored.txt").exit_code == 1
        assert box.exec("echo $SDK_BUILD").stdout == "yes\n"
        box.remove(force=True)
    finally:
        _remove_template(admin, name)


def test_dockerfile_syntax_error_names_its_line(daemon, admin):
    # The async client, so that both go through a real build request.
    async def main() -> None:
        async with hutch.AsyncClient(host=daemon.https_url, api_key=daemon.admin_key,
                                     fingerprint=daemon.fingerprint) as client:
            await client.templates.build(
                unique("bad"), dockerfile_content="FROM base\nRUN true\nFROBNICATE now\n")

    with pytest.raises(hutch.InvalidArgumentError, match="Dockerfile line 3") as caught:
        asyncio.run(main())
    assert "FROBNICATE" in str(caught.value)
    with pytest.raises(hutch.InvalidArgumentError, match="line 1"):
        admin.templates.build(unique("bad"), dockerfile_content="RUN echo no FROM\n")


def test_build_of_a_missing_context_is_refused_before_sending(admin, tmp_path):
    with pytest.raises(hutch.InvalidArgumentError, match=str(tmp_path / "nope")):
        admin.templates.build(unique("bad"), context=tmp_path / "nope")
    with pytest.raises(hutch.InvalidArgumentError, match="no such Dockerfile"):
        admin.templates.build(unique("bad"), context=tmp_path)


def test_only_admins_build_and_import(client, tmp_path):
    with pytest.raises(hutch.PermissionDeniedError):
        client.templates.build(unique("mine"), dockerfile_content="FROM base\n")
    with pytest.raises(hutch.PermissionDeniedError):
        client.templates.create(unique("mine"), from_archive=b"not even a tar")


def test_archive_import_boots_with_the_image_config(daemon, admin, boxes, busybox_layout,
                                                     tmp_path):
    archive = tmp_path / "busybox.tar"
    subprocess.run(["python3", str(REGISTRY / "archives.py"), "oci-tar", str(busybox_layout),
                    str(archive)], check=True, timeout=120)
    name = unique("archive")
    progress: list[str] = []

    async def main() -> hutch.Template:
        async with hutch.AsyncClient(host=daemon.https_url, api_key=daemon.admin_key,
                                     fingerprint=daemon.fingerprint) as client:
            async def on_progress(line: str) -> None:  # a coroutine callback is awaited
                progress.append(line)
            return await client.templates.create(name, from_archive=archive,
                                                 on_progress=on_progress)

    try:
        template = asyncio.run(main())
        assert template.source == "image" and template.image is not None, template
        assert template.image.archive == "oci-archive"
        assert template.image.digest.startswith("sha256:") and template.image.layers == 1
        assert template.defaults is not None and template.defaults.user == "app"
        assert template.defaults.workdir == "/home/app"
        assert progress, "no progress lines"
        # The same name again is refused (before the body is read).
        with open(archive, "rb") as f:
            with pytest.raises(hutch.AlreadyExistsError):
                admin.templates.create(name, from_archive=f)

        box = boxes(template=name)
        who = box.exec(["sh", "-c", "id -u; pwd; busybox | head -n 1"])
        assert who.exit_code == 0, who
        uid, cwd, banner = who.stdout.splitlines()
        assert (uid, cwd) == ("1000", "/home/app") and banner.startswith("BusyBox"), who.stdout
        box.remove(force=True)
    finally:
        _remove_template(admin, name)


def test_altered_archive_is_refused_and_leaves_nothing(admin, busybox_layout, tmp_path):
    archive = tmp_path / "altered.tar"
    subprocess.run(["python3", str(REGISTRY / "archives.py"), "oci-tar", str(busybox_layout),
                    str(archive), "altered-blob"], check=True, timeout=120)
    name = unique("altered")
    # A file object, streamed as it is read.
    with open(archive, "rb") as f, pytest.raises(hutch.InvalidArgumentError,
                                                 match="does not hold what its digest says"):
        admin.templates.create(name, from_archive=f)
    assert name not in [t.name for t in admin.templates.list()]


def test_image_from_a_loopback_registry(admin, registry):
    name = unique("pulled")
    ref = f"{registry}/test/busybox:latest"
    progress: list[str] = []
    try:
        template = admin.templates.create(name, from_image=ref, on_progress=progress.append)
        assert template.source == "image" and template.image.ref == ref, template
        assert template.image.archive == "" and template.image.platform == "linux/amd64"
        assert template.defaults.exposed_ports == ["8080/tcp"]
        assert progress, "no progress lines"
    finally:
        _remove_template(admin, name)
    # A tag the registry does not have: the stream's error line, typed.
    with pytest.raises(hutch.NotFoundError, match="test/missing"):
        admin.templates.create(unique("pulled"), from_image=f"{registry}/test/missing:1")
