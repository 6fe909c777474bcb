#!/usr/bin/env bash
# etcd and kube-apiserver for meshnames' Kubernetes tests, built from the Go
# module proxy only (no binary downloads) from the pinned module in tools/.
#
#   test/k8s/k8s.sh build   # once per machine, ~30 min cold on 2 cores; a no-op when built
#   test/k8s/k8s.sh bin     # prints the directory of the binaries
#   eval "$(test/k8s/k8s.sh start)"; test/k8s/k8s.sh stop   # a cluster by hand
#
# The Go tests (internal/kubeapi/kubetest) start their own cluster on free
# loopback ports from the same binaries. The binaries live outside the
# repository, in $HOME/.cache/k8s-test/<version>/bin (or $MESHNAMES_K8S_BIN).
#
# The build uses the flags of a plain `go build` (no -trimpath), as the
# tests do, so that the packages both compile come from one build cache.
# To move to another Kubernetes version: change K8S_VERSION here and in
# internal/kubeapi/kubetest, require k8s.io/kubernetes at it in tools/go.mod
# with every k8s.io staging module replaced by the matching v0.X.Y (copy the
# ./staging replace list of kubernetes' own go.mod), then go mod tidy there.
set -euo pipefail
K8S_VERSION=v1.37.2
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${MESHNAMES_K8S_BIN:-$HOME/.cache/k8s-test/$K8S_VERSION/bin}
RUN=${K8S_RUN:-$HOME/.cache/k8s-test/$K8S_VERSION/run}
ETCD_PORT=${ETCD_PORT:-23791}; ETCD_PEER_PORT=${ETCD_PEER_PORT:-23792}; KAS_PORT=${KAS_PORT:-26444}
TOKEN=${KAS_TOKEN:-meshnames-test-admin}

built() { [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ]; }

build() {
  if built; then echo "k8s.sh: $BIN already has etcd and kube-apiserver $K8S_VERSION"; return; fi
  mkdir -p "$BIN"
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  cd "$HERE/tools"
  echo "k8s.sh: building kube-apiserver $K8S_VERSION and etcd into $BIN (about 30 minutes the first time)"
  go build -ldflags "$ld" -o "$BIN/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  go build -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"; mv "$BIN/etcd.tmp" "$BIN/etcd"
}

wait_ready() { # url name
  for _ in $(seq 1200); do
    curl -skf -H "Authorization: Bearer $TOKEN" "$1" >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$RUN/$2.pid")" 2>/dev/null || { tail -20 "$RUN/$2.log" >&2; return 1; }
    sleep 0.1
  done; echo "$2 not ready in 120s" >&2; return 1
}

start() {
  built || { echo "k8s.sh: not built; run $0 build" >&2; exit 1; }
  rm -rf "$RUN"; mkdir -p "$RUN"
  "$BIN/etcd" --name test --data-dir "$RUN/etcd-data" --unsafe-no-fsync --log-level warn \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "test=http://127.0.0.1:$ETCD_PEER_PORT" > "$RUN/etcd.log" 2>&1 &
  echo $! > "$RUN/etcd.pid"
  wait_ready "http://127.0.0.1:$ETCD_PORT/health" etcd
  openssl genrsa -out "$RUN/sa.key" 2048 2>/dev/null
  echo "$TOKEN,admin,admin-uid,system:masters" > "$RUN/tokens.csv"
  "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$KAS_PORT" --cert-dir "$RUN/certs" \
    --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
    --token-auth-file "$RUN/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$RUN/sa.key" --service-account-signing-key-file "$RUN/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --disable-admission-plugins ServiceAccount \
    > "$RUN/kube-apiserver.log" 2>&1 &
  echo $! > "$RUN/kube-apiserver.pid"
  wait_ready "https://127.0.0.1:$KAS_PORT/readyz" kube-apiserver
  cat > "$RUN/kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: "https://127.0.0.1:$KAS_PORT", certificate-authority: "$RUN/certs/apiserver.crt"}}]
users: [{name: admin, user: {token: "$TOKEN"}}]
contexts: [{name: t, context: {cluster: t, user: admin}}]
current-context: t
EOK
  echo "export KUBECONFIG=$RUN/kubeconfig"
}

stop() {
  for p in kube-apiserver etcd; do
    f="$RUN/$p.pid"; [ -f "$f" ] || continue; pid=$(cat "$f"); kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true; rm -f "$f"
  done
}

bin() { echo "$BIN"; }

case "${1:-}" in
  build|start|stop|bin) "$1" ;;
  *) echo "usage: $0 build|bin|start|stop" >&2; exit 2 ;;
esac
