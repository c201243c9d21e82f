"""E2B's template builder through the Python SDK: Template().from_template("base") with copy,
run_cmd, set_envs, set_workdir, set_user and set_start_cmd, Template.build (its logs),
build_in_background + get_build_status, Template.exists and tags, then Sandbox.create of the
result; a failing step is BuildException at the user's line; another key's name is refused."""

import os
import tempfile
import time
import traceback
import uuid

import pytest
from e2b import BuildException, Sandbox, Template, wait_for_file

from support import KEY_B, RUN_ID, process_lines, track, wait_for

SFX = uuid.uuid4().hex[:10]
NAME = f"tpl-py-{SFX}"
SIZE = {"cpu_count": 1, "memory_mb": 512}


@pytest.fixture(scope="module")
def context():
    with tempfile.TemporaryDirectory(prefix="e2b-template-") as d:
        with open(os.path.join(d, "hello.txt"), "w") as f:
            f.write(f"hello from {RUN_ID}\n")
        os.makedirs(os.path.join(d, "app", "lib"))
        with open(os.path.join(d, "app", "main.sh"), "w") as f:
            f.write("#!/bin/sh\necho main\n")
        os.chmod(os.path.join(d, "app", "main.sh"), 0o755)
        with open(os.path.join(d, "app", "lib", "util.txt"), "w") as f:
            f.write("util\n")
        yield d


def recipe(context, marker):
    return (
        Template(file_context_path=context)
        .from_template("base")
        .copy("hello.txt", "/opt/hello/")
        .copy("app", "/srv/app", user="user")
        .run_cmd(f"echo {marker} > /opt/marker && id -un > /opt/ran-as")
        .set_envs({"TPL_GREETING": "hi there", "TPL_RUN": RUN_ID})
        .set_workdir("/srv/app")
        .run_cmd('pwd > /tmp/pwd-at-build && echo "$TPL_GREETING" > /tmp/env-at-build', user="root")
        .set_user("user")
        .run_cmd("id -un > /tmp/user-at-build")
        .set_start_cmd('sh -c "touch /tmp/started; exec sleep 100000"', wait_for_file("/tmp/started"))
    )


def create(name):
    sbx = Sandbox.create(name, timeout=300)
    track(sbx.sandbox_id)
    return sbx


def messages(logs):
    return "\n".join(getattr(e, "message", str(e)) for e in logs)


@pytest.fixture(scope="module")
def built(context):
    logs = []
    info = Template.build(recipe(context, "first"), NAME, on_build_logs=logs.append, **SIZE)
    return info, logs


def test_template_build_with_logs_and_exists(built):
    info, logs = built
    assert info.template_id
    assert info.build_id
    text = messages(logs)
    assert "RUN echo first" in text
    assert "built" in text
    assert Template.exists(NAME)


def test_template_sandbox_has_files_env_workdir_user_and_start_cmd(built):
    sbx = create(NAME)
    assert sbx.files.read("/opt/hello/hello.txt") == f"hello from {RUN_ID}\n"
    assert sbx.files.read("/srv/app/lib/util.txt") == "util\n"
    owner = sbx.commands.run('stat -c "%U %a" /srv/app/main.sh /srv/app/lib/util.txt')
    assert owner.stdout == "user 755\nuser 644\n"
    marks = sbx.commands.run(
        "cat /opt/marker /opt/ran-as /tmp/pwd-at-build /tmp/env-at-build /tmp/user-at-build")
    assert marks.stdout == "first\nroot\n/srv/app\nhi there\nuser\n"
    env = sbx.commands.run('echo "$TPL_GREETING|$TPL_RUN"')
    assert env.stdout == f"hi there|{RUN_ID}\n"
    procs = process_lines(sbx)
    assert any("sleep 100000" in line for line in procs), procs
    assert sbx.files.exists("/tmp/started")


def test_template_tag_build_and_create_by_tag(built, context):
    logs = []
    Template.build(recipe(context, "second"), f"{NAME}:v2", on_build_logs=logs.append, **SIZE)
    assert "CACHED COPY hello.txt" in messages(logs)
    assert create(f"{NAME}:v2").commands.run("cat /opt/marker").stdout == "second\n"
    assert create(NAME).commands.run("cat /opt/marker").stdout == "first\n"
    if hasattr(Template, "get_tags"):
        tags = Template.get_tags(built[0].template_id)
        assert sorted(t.tag for t in tags) == ["default", "v2"]
    if hasattr(Template, "assign_tags"):
        assert Template.assign_tags(f"{NAME}:v2", ["stable"]).tags == ["stable"]
        assert create(f"{NAME}:stable").commands.run("cat /opt/marker").stdout == "second\n"
        Template.remove_tags(NAME, ["stable"])
        with pytest.raises(Exception):
            create(f"{NAME}:stable")


def test_template_build_in_background_and_status():
    name = f"{NAME}-bg"
    info = Template.build_in_background(
        Template().from_template("base").run_cmd("echo background > /opt/bg"), name, **SIZE)
    seen = []
    offset = [0]

    def done():
        s = Template.get_build_status(info, logs_offset=offset[0])
        offset[0] += len(s.log_entries)
        seen.extend(e.message for e in s.log_entries)
        return s if s.status.value in ("ready", "error") else None

    status = wait_for("the background build", done, timeout=300, interval=0.5)
    assert status.status.value == "ready", status.reason
    assert any("RUN echo background" in m for m in seen), seen
    assert create(name).commands.run("cat /opt/bg").stdout == "background\n"


def test_template_failing_run_cmd_is_build_exception_at_its_step():
    t = Template().from_template("base").run_cmd("echo fine")
    t.run_cmd("echo about to fail; exit 7")  # the failing step
    with pytest.raises(BuildException) as caught:
        Template.build(t, f"{NAME}-fail", **SIZE)
    assert "exit code 7" in str(caught.value)
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert any(f.line and "the failing step" in f.line for f in frames), frames
    with pytest.raises(Exception):
        create(f"{NAME}-fail")


def test_template_another_keys_name(built):
    if not KEY_B:
        pytest.skip("no second key (E2B_TEST_KEY_B)")
    assert Template.exists(NAME, api_key=KEY_B)
    with pytest.raises(Exception):
        Template.build(Template().from_template("base"), NAME, api_key=KEY_B, **SIZE)
    with pytest.raises(Exception):
        Sandbox.create(NAME, api_key=KEY_B)
    assert not Template.exists(f"tpl-none-{SFX}")
    assert Template.exists("base")
    time.sleep(0)
