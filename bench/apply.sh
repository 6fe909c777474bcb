#!/usr/bin/env bash
# apply.sh: time `meshnames apply -f` of N MeshServices against a real
# `meshnames serve` process, on the embedded store and (when reachable) on
# PostgreSQL. Prints one line per backend: services, seconds, services/s.
#
#   bench/apply.sh [N]          N defaults to 10000
#   PG_URL=postgres://... bench/apply.sh
#
# It builds the binary, uses free loopback ports and temporary directories,
# and cleans up after itself. PostgreSQL runs use a fresh schema.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/meshnames" ./cmd/meshnames
bin="$work/meshnames"

python3 - "$N" > "$work/services.yaml" <<'PY'
import sys
n = int(sys.argv[1])
for i in range(n):
    print(f"""---
type: MeshService
name: svc-{i}
mesh: default
labels:
  app: svc-{i}
  team: team-{i % 50}
spec:
  selector:
    dataplaneTags:
      kuma.io/service: svc-{i}
  ports:
  - name: http
    port: 80
    targetPort: 8080
    appProtocol: http
  - port: 9090
    appProtocol: grpc""")
PY

run() {
  local name=$1; shift
  local ports port dns; ports=$(python3 bench/freeports.py 2); read -r port dns <<< "$ports"
  "$bin" serve --api-addr "127.0.0.1:$port" --dns-addr "127.0.0.1:$dns" --xds-addr 127.0.0.1:0 "$@" > "$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  local start end
  start=$(date +%s.%N)
  MESHNAMES_SERVER="http://127.0.0.1:$port" "$bin" apply -f "$work/services.yaml" > "$work/$name.out"
  end=$(date +%s.%N)
  local created; created=$(grep -c ' created$' "$work/$name.out" || true)
  python3 -c "import sys; n,s=int(sys.argv[1]),float(sys.argv[2])-float(sys.argv[3]); print(f'{sys.argv[4]:<9} {n} services created in {s:.2f} s: {n/s:.0f} services/s')" "$created" "$end" "$start" "$name"
  [ "$created" -eq "$N" ] || { echo "$name: created $created of $N"; tail -5 "$work/$name.log"; exit 1; }
}

run embedded --data-dir "$work/data"

schema="bench_$$_$(date +%s)"
if psql "$PG_URL" -qc "CREATE SCHEMA $schema" >/dev/null 2>&1; then
  sep='?'; case "$PG_URL" in *\?*) sep='&';; esac
  run postgres --store "${PG_URL}${sep}search_path=$schema"
  psql "$PG_URL" -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true
else
  echo "postgres  skipped: cannot reach $PG_URL"
fi
