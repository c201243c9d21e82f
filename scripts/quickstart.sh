#!/usr/bin/env bash
# Builds everything (guest image included), starts hutchd, runs a box and prints the output of a
# command run inside it. Run as root from the repository root: sudo scripts/quickstart.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"

"$HUTCH_ROOT/scripts/install-deps.sh"
hutch_build
image=$(hutch_image base)

state=${HUTCH_STATE_DIR:-/var/lib/hutch}
socket=${HUTCH_SOCKET:-/run/hutch/hutchd.sock}
export HUTCH_SOCKET=$socket
mkdir -p "$state/templates"
ln -sfn "$image" "$state/templates/base"

hutch="$HUTCH_BUILD_DIR/src/cli/hutch"
if ! "$hutch" ls >/dev/null 2>&1; then
  log "Starting hutchd (log: $state/hutchd.log)"
  nohup "$HUTCH_BUILD_DIR/src/daemon/hutchd" --socket "$socket" --state-dir "$state" \
    >>"$state/hutchd.log" 2>&1 &
  for _ in $(seq 100); do "$hutch" ls >/dev/null 2>&1 && break; sleep 0.1; done
fi
"$hutch" doctor || true

name=hello-$(date +%s)
log "hutch run --name $name -- uname -a"
"$hutch" run --name "$name" -- uname -a
log "hutch exec $name -- sh -c 'cat /etc/debian_version; id'"
"$hutch" exec "$name" -- sh -c 'cat /etc/debian_version; id'
cat >&2 <<MSG

The box '$name' is still running. Try:
  export HUTCH_SOCKET=$socket PATH=$HUTCH_BUILD_DIR/src/cli:\$PATH
  hutch ls
  hutch exec -i $name -- sh
  hutch rm -f $name
MSG
