#!/usr/bin/env bash
# Builds the dashboard into web/dashboard/dist/ (served by hutchd at /ui/, see docs/dashboard.md).
# Runs `npm ci` only when node_modules is missing or older than package-lock.json, then type
# checks (tsc) and bundles (esbuild). Needs Node 20 or newer and npm; the registry is whatever
# npm is configured to use on this host.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$dir"

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "web/dashboard: Node $(node --version) is too old; the build needs Node 20 or newer" >&2
  exit 1
fi

# npm ci writes node_modules/.package-lock.json: newer than the lockfile means it is current.
stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || [ package.json -nt "$stamp" ]; then
  echo "web/dashboard: npm ci" >&2
  nice -n 10 npm ci --no-audit --no-fund
fi
nice -n 10 npm run --silent build
