#!/usr/bin/env bash
# Installs every package hutch needs to build, test, benchmark and build guest images, with apt.
# Idempotent: running it again installs nothing new. Debian 12 (bookworm).
set -euo pipefail

packages=(
  # toolchain and lint
  build-essential cmake ninja-build pkg-config git clang-format clang-tidy clang-14 ccache
  # the fuzz targets (scripts/fuzz.sh): libFuzzer and the sanitizers' runtimes, the symbolizer
  libclang-rt-14-dev llvm-14
  # libraries (headers)
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libspdlog-dev libfmt-dev
  libsqlite3-dev libexpected-dev libssl-dev libseccomp-dev libxxhash-dev libgtest-dev libgmock-dev
  libarchive-dev libboost-dev zlib1g-dev
  # hutch diff reads a box's ext4 disk with libext2fs (src/diff)
  libext2fs-dev
  # metrics in the Prometheus text format (src/observe)
  prometheus-cpp-dev
  # SSH into boxes ends in hutchd: libssh's server API (src/ssh, docs/ssh.md)
  libssh-dev
  # VMM and disks
  qemu-system-x86 qemu-utils e2fsprogs
  # box networks: namespaces and taps (ip), the wall (nft)
  iproute2 nftables
  # guest image pipeline
  mmdebstrap busybox-static cpio kmod zstd xz-utils binutils lz4
  # tests and benchmarks
  python3 python3-yaml procps psmisc util-linux sqlite3 jq
  # the network tests' stand-in internet resolver
  dnsmasq-base
  # bench/egress_bench.py makes a throw-away CA with the openssl tool
  openssl
  # the remote API's e2e tests talk to hutchd with someone else's HTTP client
  curl
  # SSH's e2e tests use Debian's own clients: ssh, scp, sftp, rsync -e ssh (tests/e2e/ssh_test.cc)
  openssh-client rsync
  # the Python SDK's and the API contract's tests run in venvs of their own
  python3-venv
  # the dashboard's browser tests (tests/dashboard) drive it headless
  chromium
  # templates from OCI images: hutchd pulls with skopeo; tests/registry builds images (umoci)
  # and serves them from a loopback registry with htpasswd (bcrypt) auth
  skopeo umoci docker-registry apache2-utils
  # shell scripts are checked with it (tests/registry)
  shellcheck
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: must run as root (try: sudo $0)" >&2
    exit 1
  fi
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The TypeScript SDK needs Node 20 or newer with npm, E2B's npm SDK (tests/e2b) 20.18.1 or
# newer; Debian 12's nodejs is 18. Say so rather than fail later in the middle of the tests.
if ! command -v node >/dev/null || ! command -v npm >/dev/null ||
  ! node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&(b>18||(b===18&&c>=1)))?0:1)'; then
  echo "install-deps: the SDK tests need Node 20.18.1 or newer and npm on PATH" \
    "(found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
