"""commands.* and pty.* through the E2B Python SDK (sync API), in one shared sandbox."""

import threading
import time

import httpcore
import httpx
import pytest

from e2b import CommandExitException, PtySize, SandboxException, TimeoutException

from support import process_lines, wait_for


def test_run_stdout_stderr_exit_code(sbx):
    r = sbx.commands.run('echo out; echo err >&2; printf "no newline"')
    assert r.exit_code == 0
    assert r.stdout == "out\nno newline"
    assert r.stderr == "err\n"


def test_non_zero_exit_raises_command_exit(sbx):
    with pytest.raises(CommandExitException) as exc:
        sbx.commands.run("echo partial; echo bad >&2; exit 3")
    assert exc.value.exit_code == 3
    assert exc.value.stdout == "partial\n"
    assert exc.value.stderr == "bad\n"
    with pytest.raises(CommandExitException) as missing:
        sbx.commands.run("no-such-command-hutch")
    assert missing.value.exit_code == 127
    assert "not found" in missing.value.stderr


def test_streaming_callbacks_get_chunks_before_the_end(sbx):
    out, err = [], []
    t0 = time.monotonic()
    r = sbx.commands.run("for i in 1 2 3; do echo $i; echo e$i >&2; sleep 0.3; done",
                         on_stdout=lambda d: out.append((d, time.monotonic() - t0)),
                         on_stderr=lambda d: err.append((d, time.monotonic() - t0)))
    end = time.monotonic() - t0
    assert r.stdout == "1\n2\n3\n"
    assert r.stderr == "e1\ne2\ne3\n"
    assert "".join(d for d, _ in out) == "1\n2\n3\n"
    assert "".join(d for d, _ in err) == "e1\ne2\ne3\n"
    assert len(out) >= 2, f"stdout came in {len(out)} chunk(s): {out}"
    assert out[0][1] < end - 0.4, f"first chunk at {out[0][1]:.2f} s, end at {end:.2f} s"
    assert err[0][1] < end - 0.4


def test_envs_and_cwd(sbx):
    r = sbx.commands.run('echo "$FOO-$BAR"; pwd', envs={"FOO": "foo", "BAR": "b a r"}, cwd="/tmp")
    assert r.stdout == "foo-b a r\n/tmp\n"


def test_default_user_and_root(sbx):
    assert sbx.commands.run("whoami; pwd; echo $HOME").stdout == "user\n/home/user\n/home/user\n"
    assert sbx.commands.run("whoami; id -u", user="root").stdout == "root\n0\n"
    assert sbx.commands.run("whoami", user="user").stdout == "user\n"


# The SDK's own end of a command's timeout: e2b < 2.35 (httpx) bounds the stream with a read
# timeout of the same length, which can fire before the server's deadline_exceeded arrives and
# then escapes as httpx's/httpcore's timeout rather than TimeoutException (an SDK race that
# E2B's own envd meets too). Either is "a timeout error"; the server's own enforcement of
# Connect-Timeout-Ms is tested without an SDK in js/commands.test.mjs.
_TIMEOUTS = (TimeoutException, httpx.TimeoutException, httpcore.TimeoutException)


def test_timeout_ends_a_long_command_quickly_and_kills_it(sbx):
    t0 = time.monotonic()
    with pytest.raises(_TIMEOUTS):
        sbx.commands.run("sleep 32", timeout=2)
    took = time.monotonic() - t0
    assert took < 15, f"the timeout took {took:.1f} s"
    wait_for("sleep 32 to be killed", lambda: "sleep 32" not in process_lines(sbx),
             timeout=10, interval=0.5)


def test_background_list_and_kill(sbx):
    h = sbx.commands.run("sleep 46; echo never", background=True)
    assert isinstance(h.pid, int) and h.pid > 0
    procs = sbx.commands.list()
    mine = [p for p in procs if p.pid == h.pid]
    assert mine, f"commands.list() lacks pid {h.pid}: {procs}"
    assert "sleep 46; echo never" in " ".join([mine[0].cmd, *mine[0].args])
    assert sbx.commands.kill(h.pid) is True
    result = {}

    def wait():
        try:
            result["ok"] = h.wait()
        except Exception as e:  # noqa: BLE001 - the killed command's end, whatever class
            result["err"] = e

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    t.join(15)
    assert not t.is_alive(), "the killed command's handle did not end within 15 s"
    assert "err" in result, f"a killed command ended well: {result.get('ok')}"
    assert not [p for p in sbx.commands.list() if p.pid == h.pid]
    assert sbx.commands.kill(h.pid) is False
    assert sbx.commands.kill(987654) is False


def test_send_stdin(sbx):
    h = sbx.commands.run("head -n1; echo done", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "hello stdin\n")
    r = h.wait()
    assert r.stdout == "hello stdin\ndone\n"
    assert r.exit_code == 0


def test_connect_reattaches_to_a_running_command(sbx):
    h = sbx.commands.run("for i in 1 2 3 4 5; do echo tick$i; sleep 0.5; done; exit 5",
                         background=True)
    seen = ""
    for stdout, _, _ in h:
        seen += stdout or ""
        if "tick1" in seen:
            break
    h.disconnect()
    later = []
    again = sbx.commands.connect(h.pid)
    assert again.pid == h.pid
    with pytest.raises(CommandExitException) as exc:
        again.wait(on_stdout=later.append)
    assert exc.value.exit_code == 5
    assert "tick5\n" in "".join(later)
    assert exc.value.stdout.endswith("tick5\n")


def test_connect_to_an_unknown_pid_is_an_error(sbx):
    with pytest.raises(SandboxException):
        sbx.commands.connect(987654).wait()


def test_pty_create_send_resize_kill(sbx):
    term = sbx.pty.create(PtySize(rows=24, cols=80), timeout=120)
    assert term.pid > 0
    data = bytearray()
    done = threading.Event()

    def read():
        try:
            for _, _, pty in term:
                if pty:
                    data.extend(pty)
        except Exception:  # noqa: BLE001 - killed: the stream ends with an error
            pass
        done.set()

    threading.Thread(target=read, daemon=True).start()
    text = lambda: data.decode("utf-8", "replace")  # noqa: E731
    sbx.pty.send_stdin(term.pid, b"echo hi-$((40+2))\n")
    wait_for('"hi-42" on the terminal', lambda: "hi-42" in text())
    sbx.pty.send_stdin(term.pid, b"stty size\n")
    wait_for('"24 80" from stty size', lambda: "24 80" in text(), timeout=10)
    sbx.pty.resize(term.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(term.pid, b"stty size\n")
    wait_for('"30 100" from stty size', lambda: "30 100" in text(), timeout=10)
    assert sbx.pty.kill(term.pid) is True
    assert done.wait(15), "the killed terminal's stream did not end within 15 s"
    assert sbx.pty.kill(term.pid) is False
