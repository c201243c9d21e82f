#!/usr/bin/env bash
# Shows the real control plane (k8s/scripts/control-plane.sh: Kubernetes 1.20.2 built from
# Debian's source package, Debian's etcd) serving hutch's custom resources: the CRDs are
# accepted and established, a Box is created, read, listed and watched, defaults and schema
# validation apply, status is a subresource, quotas count Boxes, BoxPool scales.
# Prints 'N passed, N failed'; exits non-zero on any failure. Needs root the first time (apt).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S=$(cd "$HERE/.." && pwd)
CP=$K8S/scripts/control-plane.sh
DIR=$(mktemp -d /tmp/hutch-k8s-crd.XXXXXX)
pass=0 fail=0
ok() { pass=$((pass + 1)); printf 'ok   %s\n' "$*"; }
bad() { fail=$((fail + 1)); printf 'FAIL %s\n' "$*"; }
check() { # description command...
  local what=$1
  shift
  if out=$("$@" 2>&1); then ok "$what"; else bad "$what: $out"; fi
}
cleanup() {
  [ -n "${watch_pid:-}" ] && kill "$watch_pid" 2>/dev/null
  "$CP" stop "$DIR"
  [ -n "${HUTCH_K8S_KEEP:-}" ] || rm -rf "$DIR"
}
trap cleanup EXIT

t0=$(date +%s.%N)
"$CP" start "$DIR" || { echo "0 passed, 1 failed"; exit 1; }
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "control plane started in %.1f s\n", b - a }'
# shellcheck disable=SC1091
. "$DIR/env"
api() { # METHOD PATH [BODY [CONTENT-TYPE]]
  curl -sS --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" --key "$DIR/pki/admin.key" \
    -X "$1" ${3:+-d "$3"} -H "Content-Type: ${4:-application/json}" "$HUTCH_K8S_APISERVER$2"
}

check "kubectl is Debian's 1.20 client (kubernetes-client)" bash -c 'kubectl version --client --short | grep -q "v1.20"'
check "the server is Kubernetes 1.20" bash -c 'kubectl version --short | grep -q "Server Version: v1.20"'
check "the four CRDs apply" kubectl apply -f "$K8S/crds/"
check "the CRDs are established" kubectl wait --for condition=established --timeout=60s \
  crd/boxes.hutch.dev crd/boxtemplates.hutch.dev crd/boxsnapshots.hutch.dev crd/boxpools.hutch.dev
check "discovery lists the hutch.dev resources" bash -c \
  'kubectl api-resources --api-group=hutch.dev -o name | sort | tr "\n" " " | grep -qx "boxes.hutch.dev boxpools.hutch.dev boxsnapshots.hutch.dev boxtemplates.hutch.dev "'

# A watch from now on, in the background: it must see the box come, change and go. An ERROR
# event (a Status: the apiserver ended the watch) prints its reason and message.
kubectl get boxes --watch --output-watch-events -o 'jsonpath={.type} {.object.metadata.name} {.object.spec.runState}{.object.reason} {.object.message}{"\n"}' \
  >"$DIR/watch.out" 2>"$DIR/watch.err" &
watch_pid=$!
sleep 2

cat >"$DIR/box.yaml" <<'YAML'
apiVersion: hutch.dev/v1alpha1
kind: Box
metadata: {name: demo}
spec:
  template: base
  resources: {cpus: 2}
  unknownField: dropped
YAML
# kubectl 1.20 validates against the served schema before sending; the server's own pruning
# is what is checked next, so the object goes in with that client-side check off. The apiserver
# publishes a new CRD's schema in its OpenAPI document a moment after the CRD is established
# (seconds on a busy host): wait for it first.
deadline=$((SECONDS + 60))
until kubectl explain box.spec.resources >/dev/null 2>&1 || [ $SECONDS -ge $deadline ]; do sleep 1; done
out=$(kubectl apply -f "$DIR/box.yaml" 2>&1)
if echo "$out" | grep -q 'unknown field "unknownField"'; then ok "kubectl validates against the served schema: ${out:0:110}"; else bad "kubectl's validation: $out"; fi
check "a Box is created" kubectl apply --validate=false -f "$DIR/box.yaml"
check "get: defaults are applied (memoryMiB 512, runState Running)" bash -c \
  '[ "$(kubectl get box demo -o jsonpath="{.spec.resources.memoryMiB} {.spec.runState} {.spec.resources.cpus}")" = "512 Running 2" ]'
check "unknown fields are pruned (structural schema)" bash -c \
  '[ "$(kubectl get box demo -o jsonpath="{.metadata.name}|{.spec.unknownField}")" = "demo|" ]'
check "list: kubectl get boxes shows it with its printer columns" bash -c \
  'kubectl get boxes | grep -E "^demo +Running? *[^ ]* *base +2 +512" >/dev/null || kubectl get boxes | grep -E "^demo +base +2 +512"'
check "the short name hbox works" kubectl get hbox demo
names=$(api GET /apis/hutch.dev/v1alpha1/namespaces/default/boxes | jq -r '[.items[].metadata.name] | join(",")' 2>&1)
if [ "$names" = demo ]; then ok "list through the REST API"; else bad "REST list: $names"; fi

# status is a subresource: a status patch cannot change spec, a spec patch cannot change status.
out=$(api PATCH /apis/hutch.dev/v1alpha1/namespaces/default/boxes/demo/status \
  '{"status":{"phase":"Running","nodeName":"n1"},"spec":{"runState":"Stopped"}}' application/merge-patch+json)
if [ "$(echo "$out" | jq -r '.status.phase + " " + .spec.runState')" = "Running Running" ]; then
  ok "status subresource: status changed, spec untouched"
else bad "status subresource: $out"; fi
# Kubernetes 1.20's validator took "" for null when built with Go 1.18 or newer (k8s-build.sh
# fixes it): controllers clear messages with "".
out=$(api PATCH /apis/hutch.dev/v1alpha1/namespaces/default/boxes/demo/status '{"status":{"message":""}}' application/merge-patch+json)
if [ "$(echo "$out" | jq -r '.status.message | type')" = string ]; then
  ok "an empty string is a value, not null (status.message \"\")"
else bad "an empty status.message: $out"; fi
check "a spec patch leaves status alone" bash -c \
  'kubectl patch box demo --type merge -p "{\"spec\":{\"runState\":\"Stopped\"},\"status\":{\"phase\":\"Failed\"}}" >/dev/null &&
   [ "$(kubectl get box demo -o jsonpath="{.spec.runState} {.status.phase}")" = "Stopped Running" ]'

# Validation: the schema refuses bad values with a message naming the field.
bad_box() { printf 'apiVersion: hutch.dev/v1alpha1\nkind: Box\nmetadata: {name: %s}\nspec: %s\n' "$1" "$2" | kubectl apply -f - 2>&1; }
out=$(bad_box zero '{resources: {cpus: 0}}')
if echo "$out" | grep -q 'spec.resources.cpus'; then ok "cpus 0 is refused: ${out##*: }"; else bad "cpus 0 was not refused: $out"; fi
out=$(bad_box paused '{runState: Paused}')
if echo "$out" | grep -q 'spec.runState'; then ok "runState Paused is refused (enum)"; else bad "runState Paused: $out"; fi
out=$(bad_box badtmpl '{template: "Not_A_Name"}')
if echo "$out" | grep -q 'spec.template'; then ok "an invalid template name is refused"; else bad "bad template name: $out"; fi

check "delete" kubectl delete box demo --wait=true --timeout=30s
sleep 1
kill "$watch_pid" 2>/dev/null
wait "$watch_pid" 2>/dev/null
watch_pid=
if grep -q '^ADDED demo Running' "$DIR/watch.out" && grep -q '^MODIFIED demo Stopped' "$DIR/watch.out" &&
  grep -q '^DELETED demo' "$DIR/watch.out"; then
  ok "watch saw ADDED, MODIFIED (runState Stopped) and DELETED"
else bad "watch: $(cat "$DIR/watch.out" "$DIR/watch.err")"; fi

# A raw watch from a resourceVersion, as client-go's reflector does it.
rv=$(api GET /apis/hutch.dev/v1alpha1/namespaces/default/boxes | jq -r .metadata.resourceVersion)
(curl -sS -N --max-time 8 --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" --key "$DIR/pki/admin.key" \
  "$HUTCH_K8S_APISERVER/apis/hutch.dev/v1alpha1/namespaces/default/boxes?watch=1&resourceVersion=$rv" >"$DIR/raw.watch" 2>/dev/null &)
sleep 1
bad_box raw '{template: base}' >/dev/null
sleep 2
if jq -e -s 'map(select(.type == "ADDED" and .object.metadata.name == "raw")) | length == 1' "$DIR/raw.watch" >/dev/null; then
  ok "a raw watch from resourceVersion $rv streams the new Box"
else bad "raw watch: $(cat "$DIR/raw.watch")"; fi

# Quotas across nodes are Kubernetes' own: an object-count quota on Boxes per namespace.
kubectl create namespace team-a >/dev/null
kubectl -n team-a create quota boxes --hard=count/boxes.hutch.dev=2 >/dev/null
deadline=$((SECONDS + 90))
# The quota controller counts a custom resource once it has discovered it: wait until it does.
until [ -n "$(kubectl -n team-a get quota boxes -o jsonpath='{.status.used.count/boxes\.hutch\.dev}' 2>/dev/null)" ] || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
for i in 1 2 3; do
  # "status unknown for quota" is transient (the apiserver's quota cache lags the controller's
  # status on a busy host): asked again, as a client should.
  for _ in $(seq 30); do
    printf 'apiVersion: hutch.dev/v1alpha1\nkind: Box\nmetadata: {name: q%s, namespace: team-a}\nspec: {template: base}\n' $i |
      kubectl apply -f - >"$DIR/quota.$i" 2>&1
    grep -q 'status unknown for quota' "$DIR/quota.$i" || break
    sleep 1
  done
done
if grep -q created "$DIR/quota.1" && grep -q created "$DIR/quota.2" && grep -q 'exceeded quota' "$DIR/quota.3"; then
  ok "a namespace quota of 2 Boxes refuses the third: $(cut -c1-120 "$DIR/quota.3")"
else bad "quota: $(cat "$DIR"/quota.*); the quota: $(kubectl -n team-a get quota boxes -o jsonpath="{.status}" 2>&1)"; fi

printf 'apiVersion: hutch.dev/v1alpha1\nkind: BoxPool\nmetadata: {name: warm}\nspec: {template: base}\n' | kubectl apply -f - >/dev/null
check "BoxPool scales through the scale subresource" bash -c \
  'kubectl scale boxpool warm --replicas=5 >/dev/null && [ "$(kubectl get boxpool warm -o jsonpath="{.spec.replicas}")" = 5 ]'
check "BoxTemplate is cluster-scoped" bash -c \
  'printf "apiVersion: hutch.dev/v1alpha1\nkind: BoxTemplate\nmetadata: {name: base}\nspec: {recipe: base}\n" | kubectl apply -f - >/dev/null &&
   [ "$(kubectl get boxtemplate base -o jsonpath="{.metadata.name}|{.metadata.namespace}")" = "base|" ] &&
   kubectl api-resources --api-group=hutch.dev --namespaced=false -o name | grep -qx boxtemplates.hutch.dev'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
