#!/usr/bin/env bash
# Issue 19 item 3, for real on this machine: two hutchd "nodes", each in its own network
# namespace (made by this test, joined to the host by a bridge of its own) with its own state
# directory, socket, image cache and uid range, and its node agent beside it in that namespace,
# register with the real control plane (k8s/scripts/control-plane.sh, its apiserver on the
# bridge). Boxes created
# with kubectl and through the gateway (hutch's own API) land on nodes by their requests (each
# node offers 1 CPU, each box asks for 1), run, answer exec through the gateway, stop and start;
# the template built on node A is fetched by node B as checksummed chunks and verified;
# killing node B's hutchd marks its box Lost and taints the node, and both recover when it
# returns. Prints 'N passed, N failed'. Needs root, QEMU and hutch's build (it builds it).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S=$(cd "$HERE/.." && pwd)
ROOT=$(cd "$K8S/.." && pwd)
CP=$K8S/scripts/control-plane.sh
DIR=$(mktemp -d /tmp/hk8s.XXXXXX) # short: hutchd's socket paths must fit sun_path
HUTCH_BIN=${HUTCH_BIN:-}
if [ -z "$HUTCH_BIN" ]; then
  # shellcheck disable=SC1091
  (cd "$ROOT" && source scripts/common.sh && hutch_build >&2) || { echo "0 passed, 1 failed"; exit 1; }
  HUTCH_BIN=${HUTCH_BUILD_DIR:-$ROOT/build}
fi
HUTCHD=$HUTCH_BIN/src/daemon/hutchd
GO_BIN=$("$K8S/scripts/build-go.sh" | tail -n 1) || { echo "0 passed, 1 failed"; exit 1; }
pass=0 fail=0
ok() { pass=$((pass + 1)); printf 'ok   %s\n' "$*"; }
bad() { fail=$((fail + 1)); printf 'FAIL %s\n' "$*"; }
pids=()
# The nodes' network: a bridge in the host's namespace and a namespace per node, with a /24
# picked at random in 10.251.0.0/16 (the test's own; nothing outside this host is addressed).
NET=10.251.$((RANDOM % 250)) BR=hk8s$$
declare -A NS=([a]=hk8s-$$-a [b]=hk8s-$$-b) IP=([a]=$NET.11 [b]=$NET.12)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  "$CP" stop "$DIR"
  for n in a b; do ip netns del "${NS[$n]}" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
  if [ -n "${HUTCH_K8S_KEEP:-}" ]; then echo "kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT
make_network() {
  ip link add "$BR" type bridge && ip addr add "$NET.1/24" dev "$BR" && ip link set "$BR" up || return 1
  local n
  for n in a b; do
    ip netns add "${NS[$n]}" &&
      ip link add "$BR$n" type veth peer name eth0 netns "${NS[$n]}" &&
      ip link set "$BR$n" master "$BR" && ip link set "$BR$n" up &&
      ip -n "${NS[$n]}" addr add "${IP[$n]}/24" dev eth0 &&
      ip -n "${NS[$n]}" link set eth0 up && ip -n "${NS[$n]}" link set lo up || return 1
  done
}
make_network || { echo "cannot make the nodes' network namespaces"; echo "0 passed, 1 failed"; exit 1; }
"$CP" start "$DIR" --address "$NET.1" || { echo "0 passed, 1 failed"; exit 1; }
# shellcheck disable=SC1091
. "$DIR/env"
kubectl apply -f "$K8S/crds/" >/dev/null && kubectl wait --for condition=established --timeout=60s crd/boxes.hutch.dev >/dev/null
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/node-token"
key=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s default\n' "$key" >"$DIR/keys"
# The gateway and the node agents serve TLS with a certificate of the cluster's CA, and check
# each other's against it: API keys and the node token never cross in clear.
(
  cd "$DIR" && umask 077 &&
    openssl req -newkey rsa:2048 -nodes -subj "/CN=hutch-k8s-test" -keyout tls.key -out tls.csr 2>/dev/null &&
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:%s,IP:%s\nextendedKeyUsage=serverAuth\n' "$NET.1" "${IP[a]}" "${IP[b]}" >tls.ext &&
    openssl x509 -req -in tls.csr -CA pki/ca.crt -CAkey pki/ca.key -CAcreateserial -days 1 -extfile tls.ext \
      -out tls.crt 2>/dev/null
) || { echo "cannot make the test's TLS certificate"; echo "0 passed, 1 failed"; exit 1; }
TLS=(--tls-cert "$DIR/tls.crt" --tls-key "$DIR/tls.key" --ca-file "$DIR/pki/ca.crt")

# Node A's image cache is the shared one (a template built before is found there); node B's is
# empty: B gets the template only from A.
declare -A CACHE=([a]=${HUTCH_CACHE_DIR:-/var/cache/hutch} [b]=$DIR/b/cache)
declare -A ADDR=([a]=${IP[a]}:$((20000 + RANDOM % 20000)) [b]=${IP[b]}:$((40000 + RANDOM % 20000)))
declare -A HPID=()
start_hutchd() {
  local n=$1
  mkdir -p "$DIR/$n/state" "${CACHE[$n]}"
  # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup hierarchies hutchd uses.
  nsenter --net="/run/netns/${NS[$n]}" setsid "$HUTCHD" --socket "$DIR/$n/hutchd.sock" --state-dir "$DIR/$n/state" --image-cache "${CACHE[$n]}" \
    --pool-size 0 >>"$DIR/$n/hutchd.log" 2>&1 </dev/null &
  HPID[$n]=$!
  pids+=("$!")
  for _ in $(seq 100); do [ -S "$DIR/$n/hutchd.sock" ] && curl -fsS --unix-socket "$DIR/$n/hutchd.sock" http://h/v1/info >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "hutchd of node $n did not start:" >&2
  tail -n 20 "$DIR/$n/hutchd.log" >&2
  return 1
}
for n in a b; do
  start_hutchd $n || { echo "$pass passed, $((fail + 1)) failed"; exit 1; }
  nsenter --net="/run/netns/${NS[$n]}" "$GO_BIN/hutch-node" --node-name "node-$n" --hutchd-socket "$DIR/$n/hutchd.sock" --image-cache "${CACHE[$n]}" \
    --listen "${ADDR[$n]}" --token-file "$DIR/node-token" --cpus 1 --memory-mib 2048 "${TLS[@]}" >"$DIR/$n/agent.log" 2>&1 &
  pids+=("$!")
done
"$GO_BIN/hutch-controller" >"$DIR/controller.log" 2>&1 &
pids+=("$!")
gw=127.0.0.1:$((30000 + RANDOM % 20000))
"$GO_BIN/hutch-gateway" --listen "$gw" --keys "$DIR/keys" --node-token-file "$DIR/node-token" --wait 15m "${TLS[@]}" >"$DIR/gateway.log" 2>&1 &
pids+=("$!")
GW=(curl -sS --cacert "$DIR/pki/ca.crt" -H "Authorization: Bearer $key" -H 'Content-Type: application/json')

wait_until() { # seconds description command...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then bad "$what (timed out)"; return 1; fi
    sleep 1
  done
  ok "$what"
}
phase() { kubectl get box "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
node_of() { kubectl get box "$1" -o jsonpath='{.status.nodeName}' 2>/dev/null; }

wait_until 30 "both nodes registered Ready with 1 CPU" sh -c \
  '[ "$(kubectl get nodes -l hutch.dev/node=true -o jsonpath="{range .items[*]}{.metadata.name}={.status.allocatable.cpu}/{.status.conditions[?(@.type==\"Ready\")].status} {end}")" = "node-a=1/True node-b=1/True " ]'

same_ns=0
for n in a b; do
  want=$(stat -Lc %i "/run/netns/${NS[$n]}")
  [ "$(stat -Lc %i "/proc/${HPID[$n]}/ns/net")" = "$want" ] && [ "$(stat -Lc %i "/proc/self/ns/net")" != "$want" ] && same_ns=$((same_ns + 1))
done
if [ $same_ns = 2 ]; then ok "each node's hutchd runs in its own network namespace (${NS[a]}, ${NS[b]}), reached over a bridge"; else bad "the nodes' hutchds are not in their own network namespaces"; fi

# Everything reachable over TCP asks who is calling.
code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$DIR/pki/ca.crt" "https://$gw/v1/boxes")
if [ "$code" = 401 ]; then ok "the gateway refuses a call without an API key (401, over TLS)"; else bad "the gateway without a key: HTTP $code"; fi
code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$DIR/pki/ca.crt" "https://${ADDR[a]}/hutchd/v1/boxes")
if [ "$code" = 401 ]; then ok "a node agent refuses a call without the node token (401, over TLS)"; else bad "a node agent without the token: HTTP $code"; fi
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $key" "http://$gw/v1/boxes" 2>/dev/null)
if [ "$code" != 200 ]; then ok "the gateway does not serve plain HTTP (a plain request gets $code)"; else bad "the gateway answered plain HTTP"; fi

t0=$SECONDS
printf 'apiVersion: hutch.dev/v1alpha1\nkind: BoxTemplate\nmetadata: {name: base}\nspec: {recipe: base, buildOn: node-a}\n' | kubectl apply -f - >/dev/null
wait_until 1800 "node A builds template base and publishes its digest" sh -c \
  'kubectl get boxtemplate base -o jsonpath="{.status.digest}" | grep -qE "^[0-9a-f]{64}$"'
echo "   template ready on node A after $((SECONDS - t0)) s: $(kubectl get boxtemplate base -o jsonpath='{.status.nodes}')"

box() { printf 'apiVersion: hutch.dev/v1alpha1\nkind: Box\nmetadata: {name: %s}\nspec: {template: base, resources: {cpus: 1, memoryMiB: 512}}\n' "$1" | kubectl apply -f - >/dev/null; }
t0=$SECONDS
box one
wait_until 900 "Box one (kubectl) runs" sh -c "[ \"\$(kubectl get box one -o jsonpath='{.status.phase}')\" = Running ]"
echo "   one: $(node_of one) after $((SECONDS - t0)) s"
t0=$SECONDS
box two
wait_until 1200 "Box two (kubectl) runs" sh -c "[ \"\$(kubectl get box two -o jsonpath='{.status.phase}')\" = Running ]"
echo "   two: $(node_of two) after $((SECONDS - t0)) s"
n1=$(node_of one) n2=$(node_of two)
if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n1" != "$n2" ]; then ok "the scheduler put them on different nodes ($n1, $n2): each node has 1 CPU"; else bad "placement: one=$n1 two=$n2"; fi
other=$([ "$n1" = node-a ] && echo "$n2" || echo "$n1")
msg=$(kubectl get boxtemplate base -o jsonpath="{.status.nodes[?(@.name==\"node-b\")].message}")
state=$(kubectl get boxtemplate base -o jsonpath="{.status.nodes[?(@.name==\"node-b\")].state}")
if [ "$state" = Ready ] && echo "$msg" | grep -q verified; then ok "node B fetched template base from node A and verified it: $msg"; else bad "template on node B: $state $msg"; fi
da=$(ls "${CACHE[a]}/images" | grep "^$(basename "$(readlink -f "$DIR/a/state/templates/base")")$")
if [ -n "$da" ] && cmp -s "$DIR/a/state/templates/base/rootfs.img" "$DIR/b/state/templates/base/rootfs.img"; then
  ok "node B's template rootfs.img is byte-identical to node A's ($(du -h --apparent-size "$DIR/b/state/templates/base/rootfs.img" | cut -f1) apparent, $(du -h "$DIR/b/state/templates/base/rootfs.img" | cut -f1) on disk)"
else bad "rootfs.img differs between node A and node B"; fi

# exec through the gateway: the request reaches the node that runs the box.
for b in one two; do
  out=$("${GW[@]}" -D "$DIR/h.$b" -X POST "https://$gw/v1/boxes/$b/exec" -d '{"argv":["sh","-c","echo hello from $(hostname)"]}')
  hn=$(tr -d '\r' <"$DIR/h.$b" | awk -F': ' 'tolower($1)=="x-hutch-node" {print $2}')
  if echo "$out" | jq -e '.exit_code == 0 or .code == 0 or .exit.code == 0' >/dev/null 2>&1 && echo "$out" | grep -q 'hello from' && [ "$hn" = "$(node_of $b)" ]; then
    ok "exec in $b through the gateway answered from $hn: $(echo "$out" | jq -c '.stdout' 2>/dev/null)"
  else bad "exec in $b: $out (node header '$hn')"; fi
done
"${GW[@]}" -X POST "https://$gw/v1/boxes/two/exec" -d '{"argv":["sh","-c","echo kept > /home/hutch/mark"]}' >/dev/null
id2=$(kubectl get box two -o jsonpath='{.status.boxID}')

# stop through the gateway; its CPU is free, so a box created through the gateway lands there.
out=$("${GW[@]}" -X POST "https://$gw/v1/boxes/two/stop")
if echo "$out" | jq -e '.phase == "Stopped"' >/dev/null; then ok "two stopped through the gateway"; else bad "stop: $out"; fi
wait_until 30 "two's pod is gone and its disk is recorded on $n2" sh -c \
  "! kubectl get pod box-two >/dev/null 2>&1 && [ \"\$(kubectl get box two -o jsonpath='{.status.snapshot.node}')\" = $n2 ]"
out=$("${GW[@]}" -X POST "https://$gw/v1/boxes" -d '{"name":"three","template":"base","cpus":1,"memory_mib":512}')
if echo "$out" | jq -e --arg n "$n2" '.phase == "Running" and .node == $n' >/dev/null; then ok "three, created through the gateway (hutch's API), runs on the freed node $n2"; else bad "create through gateway: $out"; fi
out=$("${GW[@]}" -X POST "https://$gw/v1/boxes/two/start" --max-time 15 2>&1)
wait_until 30 "two cannot start while its node is full: Pending with the scheduler's reason" sh -c \
  "kubectl get box two -o jsonpath='{.status.phase} {.status.message}' | grep -E '^Pending .*(Insufficient cpu|affinity|selector)'"
echo "   $(kubectl get box two -o jsonpath='{.status.message}')"
out=$("${GW[@]}" -X DELETE "https://$gw/v1/boxes/three")
wait_until 600 "with three removed, two starts again on $n2 with its disk" sh -c \
  "[ \"\$(kubectl get box two -o jsonpath='{.status.phase} {.status.nodeName} {.status.boxID}')\" = 'Running $n2 $id2' ]"
out=$("${GW[@]}" -X POST "https://$gw/v1/boxes/two/exec" -d '{"argv":["cat","/home/hutch/mark"]}')
if echo "$out" | grep -q kept; then ok "the file written before the stop is still there"; else bad "after restart: $out"; fi
wait_until 60 "three is removed from its hutchd (finalizer)" sh -c \
  "! kubectl get box three >/dev/null 2>&1 && ! curl -fsS --unix-socket $DIR/${n2#node-}/hutchd.sock http://h/v1/boxes/default.three"

# Kill the hutchd of two's node: the box is Lost, the node tainted; both recover when it returns.
nb=${n2#node-}
{
  kill -KILL "${HPID[$nb]}"
  wait "${HPID[$nb]}" # reaped here, quietly: bash would report the kill
} 2>/dev/null
t0=$SECONDS
wait_until 30 "two is Lost when $n2's hutchd dies" sh -c "[ \"\$(kubectl get box two -o jsonpath='{.status.phase}')\" = Lost ]"
echo "   after $((SECONDS - t0)) s: $(kubectl get box two -o jsonpath='{.status.message}')"
wait_until 15 "$n2 is tainted hutch.dev/hutchd-down and HutchdReady=False" sh -c \
  "kubectl get node $n2 -o jsonpath='{.spec.taints[*].key} {.status.conditions[?(@.type==\"HutchdReady\")].status}' | grep -q 'hutch.dev/hutchd-down False'"
start_hutchd "$nb"
t0=$SECONDS
wait_until 60 "two is Running again (same box id) when hutchd returns" sh -c \
  "[ \"\$(kubectl get box two -o jsonpath='{.status.phase} {.status.boxID}')\" = 'Running $id2' ]"
echo "   after $((SECONDS - t0)) s"
wait_until 15 "the taint is gone" sh -c "! kubectl get node $n2 -o jsonpath='{.spec.taints[*].key}' | grep -q hutchd-down"
out=$("${GW[@]}" -X POST "https://$gw/v1/boxes/two/exec" -d '{"argv":["cat","/home/hutch/mark"]}')
if echo "$out" | grep -q kept; then ok "two answers exec after its hutchd came back (its QEMU outlived hutchd)"; else bad "exec after hutchd restart: $out"; fi

kubectl delete box one two --wait=true --timeout=120s >/dev/null
for n in a b; do
  left=$(curl -fsS --unix-socket "$DIR/$n/hutchd.sock" http://h/v1/boxes | jq '.boxes | length')
  [ "$left" = 0 ] || bad "node $n's hutchd still has $left boxes after the Boxes were deleted"
done
ok "deleting the Boxes removed them from both hutchds"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
