#!/usr/bin/env bash
# Self-test of the registry harness: builds (or takes from the cache) every test image, starts a
# TLS + basic-auth registry on loopback, pushes the images, checks each with skopeo inspect
# over TLS with the CA and the credentials, pulls `layers` back and checks its unpacked tree,
# checks that anonymous and wrong-password requests are refused, stops the registry and checks
# that nothing is left running. Ends with "selftest: N passed, N failed"; exits 1 on a failure.
#
#   tests/registry/selftest.sh [--keep]      (--keep: leave the temp dir for a look)
set -euo pipefail

REG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
keep=no
[ "${1:-}" != --keep ] || keep=yes

T0=$SECONDS
say() { printf '[selftest %4ds] %s\n' $((SECONDS - T0)) "$*" >&2; }

passed=0 failed=0
pass() {
  passed=$((passed + 1))
  printf 'ok   %s\n' "$1"
}
fail() {
  failed=$((failed + 1))
  printf 'FAIL %s\n' "$1"
}
# not CMD...: CMD failed.
not() { ! "$@"; }
# check DESC CMD...: runs CMD; passes if it exits 0.
check() {
  local desc=$1
  shift
  if "$@" >/dev/null 2>"$work/check.err"; then pass "$desc"; else
    fail "$desc: $(head -c 600 "$work/check.err")"
  fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/hutch-registry-selftest.XXXXXX")
reg=$work/registry
cleanup() {
  "$REG_DIR/registry.sh" stop "$reg" 2>/dev/null || true
  if [ "$keep" = yes ]; then say "kept $work"; else rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT

say "images"
declare -A img=()
while read -r name path; do img[$name]=$path; done < <("$REG_DIR/images.sh" "$work/images")
for name in debian busybox static layers multiarch arm64only zstd; do
  check "image $name built as an OCI layout" test -f "${img[$name]:-/nonexistent}/index.json"
done

say "registry"
env_lines=$("$REG_DIR/registry.sh" start "$reg")
eval "$env_lines"
for v in REGISTRY REGISTRY_URL REGISTRY_USER REGISTRY_PASSWORD REGISTRY_CA REGISTRY_CERT_DIR REGISTRY_PID; do
  check "start printed $v" test -n "${!v}"
done
check "REGISTRY is 127.0.0.1:PORT" grep -Eq '^127\.0\.0\.1:[0-9]+$' <<<"$REGISTRY"
check "cert dir holds ca.crt" cmp "$REGISTRY_CA" "$REGISTRY_CERT_DIR/ca.crt"
san=$(openssl x509 -in "$reg/server.crt" -noout -ext subjectAltName 2>&1 || true)
check "server cert names IP 127.0.0.1" grep -q 'IP Address:127\.0\.0\.1' <<<"$san"
check "server cert names DNS localhost" grep -q 'DNS:localhost' <<<"$san"
check "server cert verifies against the CA" openssl verify -CAfile "$REGISTRY_CA" "$reg/server.crt"

say "push"
push() { check "push $*" "$REG_DIR/registry.sh" push "$reg" "$@"; }
push "${img[debian]}:latest" test/debian:latest
push "${img[busybox]}:latest" test/busybox:latest
push "${img[zstd]}:latest" test/busybox:zstd
push "${img[busybox]}:latest" test/busybox:v2s2 -- --format v2s2
push "${img[static]}:latest" test/static:latest
push "${img[layers]}:latest" test/layers:latest
push "${img[multiarch]}:latest" test/multiarch:latest --all
push "${img[arm64only]}:latest" test/arm64only:latest --all
push "${img[arm64only]}:manifest" test/arm64only:manifest

say "inspect"
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$work/policy.json"
sk() {
  skopeo --policy "$work/policy.json" inspect --cert-dir "$REGISTRY_CERT_DIR" \
    --creds "$REGISTRY_USER:$REGISTRY_PASSWORD" "$@"
}
# jq_check DESC FILE FILTER: FILTER (jq -e) holds on FILE's JSON.
jq_check() { check "$1" jq -e "$3" "$2"; }
# fetch NAME REF [ARGS...]: skopeo inspect ARGS docker://$REGISTRY/REF into $work/NAME.json.
fetch() {
  local name=$1 ref=$2
  shift 2
  if sk "$@" "docker://$REGISTRY/$ref" >"$work/$name.json" 2>"$work/$name.err"; then
    pass "inspect $* $ref"
  else
    fail "inspect $* $ref: $(cat "$work/$name.err")"
    echo null >"$work/$name.json"
  fi
}
gz='application/vnd.oci.image.layer.v1.tar+gzip'
zst='application/vnd.oci.image.layer.v1.tar+zstd'

fetch debian-raw test/debian:latest --raw
fetch debian-cfg test/debian:latest --config
jq_check "debian: one gzip layer" "$work/debian-raw.json" \
  "(.layers | length) == 1 and .layers[0].mediaType == \"$gz\""
jq_check "debian: linux/amd64, Env, WorkingDir /root, Cmd bash" "$work/debian-cfg.json" \
  '.os == "linux" and .architecture == "amd64" and (.config.Env | index("LANG=C.UTF-8")) != null
   and (.config.Env | any(startswith("PATH="))) and .config.WorkingDir == "/root"
   and .config.Cmd == ["bash"]'

fetch busybox-raw test/busybox:latest --raw
fetch busybox-cfg test/busybox:latest --config
jq_check "busybox: one gzip layer, OCI manifest" "$work/busybox-raw.json" \
  "(.layers | length) == 1 and .layers[0].mediaType == \"$gz\" and .config.mediaType == \"application/vnd.oci.image.config.v1+json\""
jq_check "busybox: User app, WorkingDir, Entrypoint, Cmd, ExposedPorts, Label" "$work/busybox-cfg.json" \
  '.architecture == "amd64" and .config.User == "app" and .config.WorkingDir == "/home/app"
   and .config.Entrypoint == ["/bin/sh", "-c"] and .config.Cmd == ["echo hello"]
   and (.config.ExposedPorts | has("8080/tcp")) and .config.Labels["org.example.test"] == "busybox"'
check "busybox: the registry serves the layout's manifest unchanged" test \
  "$(sha256sum <"$work/busybox-raw.json" | cut -d' ' -f1)" = \
  "$(jq -r '.manifests[0].digest | sub("sha256:"; "")' "${img[busybox]}/index.json")"

fetch zstd-raw test/busybox:zstd --raw
fetch zstd-cfg test/busybox:zstd --config
jq_check "busybox:zstd: zstd layers" "$work/zstd-raw.json" \
  "(.layers | length) == 1 and .layers[0].mediaType == \"$zst\""
jq_check "busybox:zstd: same config as busybox" "$work/zstd-cfg.json" '.config.User == "app"'

fetch v2s2-raw test/busybox:v2s2 --raw
jq_check "busybox:v2s2: a Docker schema 2 manifest" "$work/v2s2-raw.json" \
  '.mediaType == "application/vnd.docker.distribution.manifest.v2+json"
   and .layers[0].mediaType == "application/vnd.docker.image.rootfs.diff.tar.gzip"'

fetch static-cfg test/static:latest --config
jq_check "static: Entrypoint /hello, numeric user, Env" "$work/static-cfg.json" \
  '.config.Entrypoint == ["/hello"] and .config.Cmd == ["from-cmd"] and .config.User == "65532:65532"
   and (.config.Env | index("HELLO_ENV=from-image")) != null'

fetch layers-raw test/layers:latest --raw
fetch layers-cfg test/layers:latest --config
jq_check "layers: four gzip layers" "$work/layers-raw.json" \
  "(.layers | length) == 4 and all(.layers[]; .mediaType == \"$gz\")"
jq_check "layers: busybox's config with its own label" "$work/layers-cfg.json" \
  '.config.User == "app" and .config.Labels["org.example.test"] == "layers"'

fetch multi-raw test/multiarch:latest --raw
jq_check "multiarch: an OCI index of linux/amd64 and linux/arm64/v8" "$work/multi-raw.json" \
  '.mediaType == "application/vnd.oci.image.index.v1+json"
   and ([.manifests[].platform | "\(.os)/\(.architecture)\(if .variant then "/" + .variant else "" end)"]
        == ["linux/amd64", "linux/arm64/v8"])'
amd=$(jq -r '.manifests[] | select(.platform.architecture == "amd64") | .digest' "$work/multi-raw.json" 2>/dev/null || true)
arm=$(jq -r '.manifests[] | select(.platform.architecture == "arm64") | .digest' "$work/multi-raw.json" 2>/dev/null || true)
fetch multi-amd-cfg "test/multiarch@${amd:-none}" --config
fetch multi-arm-cfg "test/multiarch@${arm:-none}" --config
jq_check "multiarch: the amd64 entry is busybox" "$work/multi-amd-cfg.json" \
  '.architecture == "amd64" and .config.Labels["org.example.test"] == "busybox"'
jq_check "multiarch: the arm64 entry's config says arm64" "$work/multi-arm-cfg.json" \
  '.architecture == "arm64" and .os == "linux"'
fetch multi-default test/multiarch:latest
jq_check "multiarch: an amd64 host gets the amd64 image" "$work/multi-default.json" \
  '.Architecture == "amd64"'

fetch arm-raw test/arm64only:latest --raw
jq_check "arm64only:latest: an index with one linux/arm64 entry" "$work/arm-raw.json" \
  '.mediaType == "application/vnd.oci.image.index.v1+json" and (.manifests | length) == 1
   and .manifests[0].platform.architecture == "arm64"'
fetch armm-raw test/arm64only:manifest --raw
fetch armm-cfg test/arm64only:manifest --config
jq_check "arm64only:manifest: a plain image manifest" "$work/armm-raw.json" \
  '.config.mediaType == "application/vnd.oci.image.config.v1+json" and (.manifests == null)'
jq_check "arm64only:manifest: its config says arm64" "$work/armm-cfg.json" '.architecture == "arm64"'
check "arm64only:latest: no image for amd64 in it (skopeo refuses)" \
  not sk "docker://$REGISTRY/test/arm64only:latest"

say "pull layers back and unpack it"
check "pull test/layers" skopeo --policy "$work/policy.json" copy --quiet \
  --src-cert-dir "$REGISTRY_CERT_DIR" --src-creds "$REGISTRY_USER:$REGISTRY_PASSWORD" \
  "docker://$REGISTRY/test/layers:latest" "oci:$work/pulled:latest"
if command -v umoci >/dev/null && [ "$(id -u)" -eq 0 ]; then
  check "umoci unpack of the pulled layers image" umoci unpack --image "$work/pulled:latest" "$work/bundle"
  check "the unpacked layers image is as README.md says" \
    python3 "$REG_DIR/ocitool.py" verify-layers "$work/bundle/rootfs"
fi

say "pull busybox and static back and run them (chroot)"
for name in busybox static; do
  check "pull test/$name" skopeo --policy "$work/policy.json" copy --quiet \
    --src-cert-dir "$REGISTRY_CERT_DIR" --src-creds "$REGISTRY_USER:$REGISTRY_PASSWORD" \
    "docker://$REGISTRY/test/$name:latest" "oci:$work/pulled-$name:latest"
  if command -v umoci >/dev/null && [ "$(id -u)" -eq 0 ]; then
    check "umoci unpack of test/$name" umoci unpack --image "$work/pulled-$name:latest" \
      "$work/bundle-$name"
  fi
done
if [ "$(id -u)" -eq 0 ] && [ -d "$work/bundle-busybox/rootfs" ]; then
  out=$(chroot --userspec=1000:1000 "$work/bundle-busybox/rootfs" /bin/sh -c 'echo hello; id -un' 2>&1 || true)
  check "busybox: /bin/sh runs, user app resolves" test "$out" = $'hello\napp'
fi
if [ "$(id -u)" -eq 0 ] && [ -d "$work/bundle-static/rootfs" ]; then
  out=$(chroot --userspec=65532:65532 "$work/bundle-static/rootfs" /hello from-cmd 2>&1 || true)
  check "static: /hello runs and prints its argv and uid" \
    grep -qz 'argv\[1\]=from-cmd.*uid=65532 gid=65532' <<<"$out"
  check "static: no /bin/sh, no /etc/passwd" \
    not test -e "$work/bundle-static/rootfs/bin/sh" -o -e "$work/bundle-static/rootfs/etc/passwd"
fi

say "auth"
code() { curl -s -o /dev/null -w '%{http_code}' --cacert "$REGISTRY_CA" "$@" || true; }
check "anonymous GET /v2/ is 401" test "$(code "$REGISTRY_URL/v2/")" = 401
check "anonymous manifest GET is 401" test \
  "$(code "$REGISTRY_URL/v2/test/busybox/manifests/latest")" = 401
check "a wrong password is 401" test "$(code -u "$REGISTRY_USER:wrong" "$REGISTRY_URL/v2/")" = 401
check "the right password is 200" test \
  "$(code -u "$REGISTRY_USER:$REGISTRY_PASSWORD" "$REGISTRY_URL/v2/")" = 200
check "https://localhost:PORT verifies too" test \
  "$(code -u "$REGISTRY_USER:$REGISTRY_PASSWORD" "https://localhost:${REGISTRY##*:}/v2/")" = 200
check "skopeo without credentials is refused" not skopeo --policy "$work/policy.json" inspect \
  --cert-dir "$REGISTRY_CERT_DIR" --no-creds "docker://$REGISTRY/test/busybox:latest"
check "TLS without the CA is refused" not curl -s -o /dev/null "$REGISTRY_URL/v2/"
catalog=$(curl -s --cacert "$REGISTRY_CA" -u "$REGISTRY_USER:$REGISTRY_PASSWORD" "$REGISTRY_URL/v2/_catalog" || true)
check "catalog lists the six repos" test "$(jq -c '.repositories' <<<"$catalog")" = \
  '["test/arm64only","test/busybox","test/debian","test/layers","test/multiarch","test/static"]'

say "stop"
check "registry.sh stop" "$REG_DIR/registry.sh" stop "$reg"
# (A zombie is gone too: it waits for PID 1, its parent since registry.sh start returned.)
check "the registry process is gone" not grep -qE '^State:[[:space:]]+[^Z]' "/proc/$REGISTRY_PID/status"
left=$(grep -lsF "$reg/config.yml" /proc/[0-9]*/cmdline || true)
check "no process mentions the registry's config" test -z "$left"
check "the port is closed" not curl -s -o /dev/null --max-time 2 --cacert "$REGISTRY_CA" "$REGISTRY_URL/v2/"
check "registry.sh stop again is a no-op" "$REG_DIR/registry.sh" stop "$reg"

say "done"
echo "selftest: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
