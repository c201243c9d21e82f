#!/usr/bin/env bash
# The Python SDK's tests in a venv of their own:
#
#   sdk/python/scripts/test.sh [--integration] [PYTEST ARGS...]
#
# Makes (or reuses) a venv in $HUTCH_SDK_VENV (default ~/.cache/hutch/python-sdk-venv),
# installs requirements-test.txt (exact versions, hashes checked) and the package, then runs
# the unit tests and the integration tests. The integration tests need a real hutchd: root, the
# built binaries (HUTCH_BUILD_DIR, default build/) and a guest image (HUTCH_TEST_IMAGE); they
# are skipped, saying why, where those are missing, unless --integration (or
# HUTCH_SDK_REQUIRE_DAEMON=1) makes that a failure.
#
# Needs python3 (3.10 or newer) with the venv module: on Debian, apt-get install python3-venv.
# Packages come through the host's pip configuration.
set -euo pipefail

SDK=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
VENV=${HUTCH_SDK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hutch/python-sdk-venv}

if [[ ${1:-} == --integration ]]; then
  export HUTCH_SDK_REQUIRE_DAEMON=1
  shift
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "test.sh: $PYTHON is missing or older than 3.10" >&2
  exit 1
fi

# A venv is reused while the interpreter and the pinned requirements stay the same.
stamp=$("$PYTHON" -c 'import sys; print(sys.version)' | cat - "$SDK/requirements.txt" \
          "$SDK/requirements-test.txt" | sha256sum | cut -c1-16)
if [[ ! -x $VENV/bin/python || $(cat "$VENV/.hutch-stamp" 2>/dev/null) != "$stamp" ]]; then
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  if ! "$PYTHON" -m venv "$VENV"; then
    echo "test.sh: '$PYTHON -m venv' failed; on Debian install python3-venv" \
         "(apt-get install python3-venv)" >&2
    rm -rf "$VENV"
    exit 1
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes \
    -r "$SDK/requirements-test.txt"
  echo "$stamp" > "$VENV/.hutch-stamp"
fi

# The package as a user gets it (not editable), built with the pinned flit_core in the venv.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  --no-build-isolation --force-reinstall "$SDK"

# The pytest script, not "python -m pytest" (which would put the working directory, the source
# tree, first on sys.path): the tests import the installed package, and a unit test checks that.
cd "$SDK"
export HUTCH_SDK_EXPECT_INSTALLED=1
exec "$VENV/bin/pytest" -ra "$@"
