#!/usr/bin/env python3
"""Writes the seed corpus of the dockerfile fuzz target (fuzz/corpus/dockerfile/seed-*): real-shaped
Dockerfiles (python, node, devcontainer, Windows-style escape, heredocs, every instruction), words
to expand, .dockerignore files with paths, COPY sources, glob patterns. The first byte picks the
parser (see dockerfile_fuzz.cc).

    fuzz/corpus/make_dockerfile_corpus.py     (re)writes every seed; other files (regression-*) stay

Deterministic.
"""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent
DOCKERFILE, EXPANSION, DOCKERIGNORE, COPY, GLOB = range(5)


def write(name, mode, data):
    d = ROOT / "dockerfile"
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / f"seed-{name}").write_bytes(bytes([mode]) + data)


PYTHON = """# syntax=docker/dockerfile:1.7
ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 \\
    PYTHONUNBUFFERED=1
WORKDIR /app
RUN apt-get update \\
 && apt-get install -y --no-install-recommends build-essential \\
    # a comment inside the continuation
 && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY --chown=app:app . .
EXPOSE 8000
USER app
CMD ["gunicorn", "-b", "0.0.0.0:8000", "app:app"]
"""

NODE = """FROM node:20-alpine AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci

FROM node:20-alpine AS build
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY . .
RUN npm run build

FROM --platform=$BUILDPLATFORM nginx:1.27-alpine
COPY --from=build /app/dist /usr/share/nginx/html
COPY --from=0 /app/package.json /tmp/
COPY --from=busybox:1.36 /bin/busybox /bin/
EXPOSE 80/tcp 443 53/udp 9000-9002
HEALTHCHECK --interval=30s --timeout=3s --retries=3 \\
  CMD wget -qO- http://localhost/ || exit 1
STOPSIGNAL SIGQUIT
"""

DEVCONTAINER = """FROM mcr.microsoft.com/devcontainers/base:bookworm
ARG USERNAME=vscode
ARG USER_UID=1000 USER_GID=$USER_UID
LABEL org.opencontainers.image.source="https://github.com/x/y" \\
      description='A dev box'
MAINTAINER Jane "JD" Doe <jane@example.com>
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN <<EOF
set -eux
apt-get update
EOF
RUN <<-'SCRIPT' bash
\techo "$HOME"
\tSCRIPT
COPY <<EOF /etc/motd
Welcome ${USERNAME:-dev} ${HOME#/} ${PATH//:/ }
EOF
COPY --chmod=755 <<"EOF" /usr/local/bin/hello
#!/bin/sh
echo $1
EOF
RUN <<EOF
#!/usr/bin/env python3
print('hi')
EOF
RUN cat <<A > /a && cat <<B > /b
first
A
second
B
ENV LEGACY value with  spaces
ENTRYPOINT /usr/local/bin/start.sh --flag
VOLUME ["/data", "/cache"]
VOLUME /logs /tmp/x
USER ${USERNAME}
WORKDIR /home/$USERNAME
ADD --chmod=755 tools.tar.gz /opt/tools/
ADD --unpack=false --link payload.tar /srv/
HEALTHCHECK NONE
"""

WINDOWS = """# escape=`

FROM mcr.microsoft.com/windows/servercore
COPY testfile.txt c:\\
RUN dir c:\\ `
    && echo done
ENV P="a`"b" Q=C:\\Users
"""

ERRORS = """FROM alpine AS one
RUN --mount=type=cache,target=/root/.cache pip install x
COPY --from=two /x /y
ONBUILD RUN make
ADD https://example.com/x.tgz /opt/
FROM alpine AS two
RUNN echo
"""


def main():
    for d in (ROOT / "dockerfile").glob("seed-*"):
        d.unlink()
    write("python", DOCKERFILE, PYTHON)
    write("node", DOCKERFILE, NODE)
    write("devcontainer", DOCKERFILE, DEVCONTAINER)
    write("windows", DOCKERFILE, WINDOWS)
    write("errors", DOCKERFILE, ERRORS)
    write("json-forms", DOCKERFILE,
          'FROM a\nRUN ["echo", "a b", "\\u00e9"]\nRUN [ "x", \'y\' ]\nCMD []\n'
          'ENTRYPOINT ["/e"]\nCOPY ["a b.txt", "/d/"]\nCMD [["nested"]]\n')

    # Expansion: escape choice, the length of X's value, the value, the word.
    for name, escape, value, word in [
        ("defaults", 0, b"x y", b"${X:-d} ${NOPE:-${HOME}/y} ${EMPTY:+alt} ${V?} '$X' \"$X\""),
        ("patterns", 0, b"foobarbaz", b"${X#f*b}${X##f*b}${X%b*}${X%%b*}${X/ba/fo}${X//ba/fo}"),
        ("errors", 0, b"", b"${X:?must be set} ${ ${:} ${X^} \"unclosed"),
        ("backtick", 1, b"v", b"C:\\dir`$X \"a`\"b\" $X"),
        ("heredoc-markers", 0, b"", b"RUN cat <<\"EOF\" <<-'X' 2<<Y \\<<no"),
    ]:
        write(f"expand-{name}", EXPANSION, bytes([escape, len(value)]) + value + word)

    write("ignore", DOCKERIGNORE,
          b"# comment\nnode_modules\n**/*.log\n!important.log\nbuild/**\ndocs\n!docs/README.md\n"
          b"/dist/\n[a-c].txt\n\\*literal\n\n\x00\n"
          b"node_modules/a/b\nx.log\na/b/important.log\nbuild\nbuild/x\ndocs/README.md\nb.txt\n"
          b"*literal\n./dist/../dist/x")
    write("ignore-bad", DOCKERIGNORE, b"ok\n!\n[a-\n")

    write("copy-dir", COPY, bytes([0]) + b"app/\nDockerfile\n/srv/app/")
    write("copy-wildcards", COPY, bytes([1]) + b"*.tar\napp/*.py\narr[[]0].txt\n/opt/")
    write("copy-links", COPY, bytes([8]) + b"link\nself/app/main.py\napp/lib/up\nloop\n/x")
    write("copy-escape", COPY, bytes([3]) + b"../secret\nhttps://x/y\n/x")

    write("glob-classes", GLOB, b"a[^b-d]\\*?*.go\nazx*y.go\na\xff*.go\nabc")
    write("glob-doublestar", GLOB, b"**/foo/**/*.md\nfoo/x.md\na/foo/b/c.md\nfoo.md")


if __name__ == "__main__":
    main()
