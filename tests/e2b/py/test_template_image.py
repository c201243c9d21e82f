"""E2B's template builder from images, through the Python SDK: Template().from_dockerfile(...)
whose FROM is an image in a real registry on loopback (Debian's docker-registry with TLS,
tests/e2b/run.sh starts it), from_image(ref, username=, password=) of a registry with basic
auth that the host is not logged in to (E2B's fromImageRegistry), the build logs endpoint
(cursor, direction, level, limit), and the apt_install and pip_install helpers, whose RUN steps
reach Debian's mirrors and PyPI through the build's default egress policy (npm_install is tested
from JS).

Env (run.sh): E2B_TEST_REGISTRY (anyone may pull), E2B_TEST_REGISTRY_AUTH with
E2B_TEST_REGISTRY_USER/PASSWORD; the helpers need hutch's `python` template
(HUTCH_TEST_PYTHON_IMAGE, as scripts/test.sh sets it)."""

import os
import tempfile
import uuid
from datetime import datetime

import pytest
from e2b import BuildException, Sandbox, Template

from support import RUN_ID, track

REGISTRY = os.environ.get("E2B_TEST_REGISTRY", "")
AUTH = os.environ.get("E2B_TEST_REGISTRY_AUTH", "")
USER = os.environ.get("E2B_TEST_REGISTRY_USER", "")
PASSWORD = os.environ.get("E2B_TEST_REGISTRY_PASSWORD", "")
SFX = uuid.uuid4().hex[:10]
SIZE = {"cpu_count": 1, "memory_mb": 512}

needs_registry = pytest.mark.skipif(not REGISTRY, reason="no registry on loopback (tests/e2b/run.sh starts one)")


def create(name):
    sbx = Sandbox.create(name, timeout=300)
    track(sbx.sandbox_id)
    return sbx


def build(template, name):
    logs = []
    info = Template.build(template, name, on_build_logs=logs.append, **SIZE)
    return info, "\n".join(getattr(e, "message", str(e)) for e in logs)


@pytest.fixture(scope="module")
def dockerfile_build():
    with tempfile.TemporaryDirectory(prefix="e2b-template-image-") as context:
        with open(os.path.join(context, "hello.txt"), "w") as f:
            f.write(f"hello from {RUN_ID}\n")
        dockerfile = "\n".join([
            f"FROM {REGISTRY}/test/debian:latest",
            "ARG GREETING=hello-arg",
            "ENV DF_ENV=from-the-dockerfile",
            "WORKDIR /app",
            "COPY hello.txt ./",
            'RUN echo "$GREETING" > /app/arg.txt && id -un > /app/ran-as',
            "USER user",
        ])
        name = f"df-py-{SFX}"
        info, text = build(Template(file_context_path=context).from_dockerfile(dockerfile), name)
        return name, info, text


@needs_registry
def test_from_dockerfile_of_a_registry_image(dockerfile_build):
    name, _, text = dockerfile_build
    assert f"FROM {REGISTRY}/test/debian:latest" in text
    sbx = create(name)
    r = sbx.commands.run('cat /app/hello.txt /app/arg.txt /app/ran-as; echo "$DF_ENV|$LANG"; id -un')
    assert r.stdout == f"hello from {RUN_ID}\nhello-arg\nroot\nfrom-the-dockerfile|C.UTF-8\nuser\n"
    assert "Debian GNU/Linux" in sbx.files.read("/etc/os-release")
    # The Dockerfile's WORKDIR is where commands start (E2B's defaultWorkdir).
    assert sbx.commands.run("pwd").stdout == "/app\n"
    # The provisioned user may sudo without a password, as in E2B's images: the sudo group and a
    # sudoers.d entry that a sudo installed later reads (this minbase image has no sudo).
    r = sbx.commands.run("id -nG user; cat /etc/sudoers.d/e2b-user; stat -c %a /etc/sudoers.d/e2b-user", user="root")
    groups, line, mode = r.stdout.splitlines()
    assert "sudo" in groups.split(), groups
    assert line == "user ALL=(ALL:ALL) NOPASSWD: ALL"
    assert mode == "440"


@needs_registry
def test_build_logs_endpoint(dockerfile_build):
    from e2b.api.client.api.templates import get_templates_template_id_builds_build_id_logs as logs_api
    from e2b.api.client.models.log_level import LogLevel
    from e2b.api.client.models.logs_direction import LogsDirection
    from e2b.api.client_sync import get_api_client
    from e2b.connection_config import ConnectionConfig

    _, info, _ = dockerfile_build
    client = get_api_client(ConnectionConfig())

    def logs(**query):
        res = logs_api.sync_detailed(info.template_id, info.build_id, client=client, **query)
        assert res.status_code == 200, res.content
        return res.parsed.logs

    every = logs()
    assert len(every) >= 3
    assert any("RUN echo" in e.message for e in every), [e.message for e in every]
    cursor = int(every[1].timestamp.timestamp() * 1000)
    forward = logs(cursor=cursor, limit=2)
    assert len(forward) == 2
    assert forward[0].timestamp.timestamp() * 1000 >= cursor - 1
    backward = logs(direction=LogsDirection.BACKWARD, limit=3)
    assert backward[0].message == every[-1].message
    assert backward[0].timestamp >= backward[2].timestamp
    assert logs(level=LogLevel.ERROR) == []
    assert isinstance(every[0].timestamp, datetime)


@needs_registry
def test_from_image_with_registry_credentials():
    ref = f"{AUTH}/private/debian:latest"
    with pytest.raises(BuildException) as refused:
        build(Template().from_image(ref), f"priv-py-none-{SFX}")
    assert any(w in str(refused.value).lower() for w in ("refused", "credentials", "login", "denied")), str(refused.value)
    with pytest.raises(BuildException) as wrong:
        build(Template().from_image(ref, username=USER, password="not-the-password"), f"priv-py-bad-{SFX}")
    assert "not-the-password" not in str(wrong.value)
    name = f"priv-py-{SFX}"
    _, text = build(Template().from_image(ref, username=USER, password=PASSWORD).run_cmd("echo pulled > /tmp/pulled"), name)
    assert PASSWORD not in text
    sbx = create(name)
    r = sbx.commands.run('cat /tmp/pulled; echo "$LANG"; id -un')
    assert r.stdout == "pulled\nC.UTF-8\nuser\n"
    # Cloud registries' credential types are refused, saying what to use instead.
    with pytest.raises(Exception) as aws:
        build(Template().from_aws_registry(ref, access_key_id="AKIAEXAMPLE", secret_access_key="secret-example",
                                           region="us-east-1"), f"aws-py-{SFX}")
    assert "not supported" in str(aws.value)
    assert "secret-example" not in str(aws.value)


@pytest.mark.skipif(not os.environ.get("HUTCH_TEST_PYTHON_IMAGE"), reason="no python template (HUTCH_TEST_PYTHON_IMAGE)")
def test_apt_install_and_pip_install():
    name = f"pip-py-{SFX}"
    build(Template().from_template("python")
          .apt_install(["jq"], no_install_recommends=True)
          .set_envs({"PIP_BREAK_SYSTEM_PACKAGES": "1"})
          .pip_install(["six==1.16.0"]), name)
    r = create(name).commands.run("""echo '{"a":7}' | jq .a; python3 -c 'import six; print(six.__version__)'""")
    assert r.stdout == "7\n1.16.0\n"


# npm_install: tests/e2b/js/template_image.test.mjs (one SDK each, to keep CI's time).
