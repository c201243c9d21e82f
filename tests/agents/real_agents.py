#!/usr/bin/env python3
"""The real agents' CLIs in boxes (issue 17.3), by hand: not part of CI, whose boxes reach no
registry. Needs root, a built hutch, the built node template, and a host whose npm registry
answers (the box's npm reaches it through hutch-egress, as `hutch run --agent` does for users).

For each preset named (default: every built-in), on one hutchd:
  1. `hutch run --agent NAME -d`: installs the agent's npm package into a builder box, runs its
     version command, freezes the agent's template, and makes the box;
  2. in that box: the version command again (from the template now), and the preset's key, which
     must be a placeholder (`hutch-secret-...`), never the value set on the host;
  3. `hutch policy log`: what the box was refused while installing.
Prints one line per step and a JSON summary; exits 1 if any agent failed.

    sudo tests/agents/real_agents.py [--build build] [--tcg-cpu-model max] [claude codex ...]

No model provider is reachable from here, so the keys are made up: the test of the key swapped
in on the wire is tests/e2e/registry_test.cc, with a stand-in provider.
"""
import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))
from hutchd_daemon import HutchDaemon  # noqa: E402

# Each built-in preset's key and the command that prints it inside the box.
KEYS = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY",
        "opencode": "ANTHROPIC_API_KEY"}


def newest_image(name):
    images = sorted(pathlib.Path("/var/cache/hutch/images").glob(f"{name}-*/rootfs.img"),
                    key=lambda p: p.stat().st_mtime)
    if not images:
        sys.exit(f"No {name} image: build it (scripts/build-image.sh --recipe images/{name})")
    return images[-1].parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("agents", nargs="*", default=sorted(KEYS))
    ap.add_argument("--build", default=os.environ.get("HUTCH_BUILD_DIR", str(REPO / "build")))
    ap.add_argument("--tcg-cpu-model", default="",
                    help="hutchd's --tcg-cpu-model (Claude Code's binary needs AVX2: max)")
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args()
    unknown = [a for a in args.agents if a not in KEYS]
    if unknown:
        sys.exit(f"Unknown agents {unknown}: use some of {sorted(KEYS)}")

    extra = ["--pool-size", "0"]
    if args.tcg_cpu_model:
        extra += ["--tcg-cpu-model", args.tcg_cpu_model]
    d = HutchDaemon(tempfile.mkdtemp(prefix="hutch-agents-"), build=args.build,
                    image=newest_image("base"), extra_args=extra)
    templates = d.dir / "state" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "node").symlink_to(newest_image("node"))
    d.start()
    hutch = [str(pathlib.Path(args.build, "src", "cli", "hutch")), "--socket", d.socket]
    env = dict(os.environ, HUTCH_AGENTS_DIR=str(d.dir / "no-user-presets"))

    def run(*argv, stdin=None, timeout=1800):
        return subprocess.run([*hutch, *argv], input=stdin, capture_output=True, text=True,
                              env=env, timeout=timeout)

    summary = {"tcg_cpu_model": args.tcg_cpu_model, "agents": {}}
    failed = False
    try:
        for key in sorted({KEYS[a] for a in args.agents}):
            secret = f"not-a-real-{key.lower()}"
            # The domain, header and format come from the preset's own error message.
            missing = run("run", "--agent", next(a for a in args.agents if KEYS[a] == key), "-d")
            line = next((ln for ln in missing.stderr.splitlines() if "secret set" in ln), "")
            if not line:
                sys.exit(f"expected the command to set {key}, got: {missing.stderr}")
            argv = shlex.split(line.split("hutch secret set", 1)[1])
            r = run("secret", "set", *argv, stdin=secret + "\n")
            if r.returncode != 0:
                sys.exit(f"hutch secret set {key}: {r.stderr}")
        for agent in args.agents:
            result = {}
            t = time.monotonic()
            made = run("run", "--agent", agent, "-d", "--name", agent)
            result["install_s"] = round(time.monotonic() - t, 1)
            result["install_exit"] = made.returncode
            result["install_output_tail"] = (made.stdout + made.stderr)[-1500:]
            print(f"{agent}: run --agent -d exited {made.returncode} after "
                  f"{result['install_s']} s", flush=True)
            if made.returncode != 0:
                print(result["install_output_tail"], flush=True)
                failed = True
                summary["agents"][agent] = result
                continue
            version = run("exec", agent, "--", agent, "--version")
            result["version"] = version.stdout.strip() or version.stderr.strip()
            result["version_exit"] = version.returncode
            print(f"{agent}: {agent} --version in its box: exit {version.returncode}: "
                  f"{result['version']}", flush=True)
            shown = run("exec", agent, "--", "printenv", KEYS[agent]).stdout.strip()
            result["key_in_box"] = shown
            placeholder = shown.startswith("hutch-secret-") and "not-a-real" not in shown
            print(f"{agent}: {KEYS[agent]} in the box: {shown} "
                  f"({'a placeholder' if placeholder else 'NOT a placeholder'})", flush=True)
            refused = run("policy", "log", agent).stdout.strip().splitlines()[1:]  # a header
            result["refused"] = refused[-10:]
            print(f"{agent}: refused by its wall: {len(refused)} lines", flush=True)
            failed = failed or version.returncode != 0 or not placeholder
            summary["agents"][agent] = result
            run("rm", "-f", agent)
        templates_now = json.loads(run("--json", "template", "ls").stdout or "[]")
        summary["templates"] = [t.get("name") for t in templates_now]
    finally:
        d.stop()
    print(json.dumps(summary, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
