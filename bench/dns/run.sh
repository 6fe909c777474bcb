#!/usr/bin/env bash
# run.sh: serve the same N names from meshnames, CoreDNS (file plugin, and
# hosts plugin) and a bare miekg/dns map server, and measure each with
# dnsperf in the same run (issue 5; ARCHITECTURE.md section 9). Not a test:
# CI never runs it.
#
#   bench/dns/run.sh [N...]     N defaults to 1000 and 100000
#
# Environment: DURATION (s per dnsperf run, default 15), ROUNDS (throughput
# runs per server, interleaved, default 5), RATE (fixed rate of the latency
# run, default 10000), SKIP_HOSTS=1 to leave out CoreDNS hosts, SUMMARY=FILE
# to keep the raw figures (tab-separated) after the temporary files go,
# MESHNAMES_REV=<commit> to measure meshnames as of that commit (built from
# `git archive`) rather than the working tree.
#
# For each N:
#   - bench/dns/seed writes an embedded store with mesh default, the
#     HostnameGenerator "bench" ({{ .Name }}.{{ label "ns" }}.svc.mesh.local)
#     and N MeshServices svc-<i> whose status already holds their hostname
#     svc-<i>.ns-<i%100>.svc.mesh.local and VIP 241.0.0.0+1+i, plus the same
#     names as a zone file, a hosts file and "name ip" lines, and one dnsperf
#     query file (200,000 A queries, 10% unknown names of the same shape);
#   - it starts `meshnames serve --skip-default-generators` on that store,
#     CoreDNS (file), CoreDNS (hosts) and bench/dns/baremap, all on
#     127.0.0.1, waits until each answers, and checks every name and 1,000
#     unknown ones against each (bench/dns/check);
#   - throughput: `dnsperf -c 8 -T 1 -q 100 -l DURATION`, ROUNDS times per
#     server, the servers taking turns; the median QPS is reported;
#   - latency: `dnsperf -c 8 -T 1 -q 100 -Q RATE -l DURATION -v`, every
#     response's latency is printed by dnsperf (-v) and the percentiles are
#     computed from those lines (dnsperf 2.10 reports only mean and max);
#   - VmRSS of each server after loading (3 s after it first answers) and
#     after all runs.
#
# CoreDNS is built from the Go module proxy into the temporary directory
# (the first build takes a few minutes). dnsperf comes from the Debian
# package, installed with apt-get when missing. Servers, dnsperf and this
# script share the machine's cores; nothing is pinned.
set -euo pipefail
cd "$(dirname "$0")/../.."

COREDNS_VERSION=v1.15.0
DURATION="${DURATION:-15}"
ROUNDS="${ROUNDS:-5}"
RATE="${RATE:-10000}"
SKIP_HOSTS="${SKIP_HOSTS:-0}"
if [ $# -gt 0 ]; then sizes=("$@"); else sizes=(1000 100000); fi

work=$(mktemp -d /tmp/meshnames-dnsbench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

if ! command -v dnsperf >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "installing dnsperf (Debian package)"
    apt-get install -y dnsperf >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y dnsperf >/dev/null; }
  else
    echo "dnsperf is missing and cannot be installed here (apt-get install dnsperf as root)" >&2
    exit 1
  fi
fi

bin="$work/bin"
mkdir -p "$bin"
log "building meshnames and the bench tools"
if [ -n "${MESHNAMES_REV:-}" ]; then
  mkdir -p "$work/src"
  git archive "$MESHNAMES_REV" | tar -x -C "$work/src"
  (cd "$work/src" && go build -o "$bin/meshnames" ./cmd/meshnames)
  log "meshnames built from $(git rev-parse --short "$MESHNAMES_REV")"
else
  go build -o "$bin/meshnames" ./cmd/meshnames
  log "meshnames built from the working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/dns' || echo ', with uncommitted changes'))"
fi
for t in seed check baremap; do go build -tags dnsbench -o "$bin/$t" "./bench/dns/$t"; done
log "building CoreDNS $COREDNS_VERSION from the module proxy"
(cd "$work" && GOBIN="$bin" GOFLAGS= go install "github.com/coredns/coredns@$COREDNS_VERSION")

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime+stime, 1/100 s
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }   # all CPUs, not idle or iowait

# start NAME CMD... runs a server in the background; its pid goes to
# $work/NAME.pid and its output to $work/NAME.log.
start() {
  local name=$1; shift
  "$@" > "$work/$name.log" 2>&1 &
  pids+=($!)
  echo $! > "$work/$name.pid"
}

alive() {
  kill -0 "$(cat "$work/$1.pid")" 2>/dev/null || { echo "$1 exited:" >&2; tail -20 "$work/$1.log" >&2; exit 1; }
}

summary="$work/summary.tsv"
printf 'N\tserver\tqps_runs\tqps\tmean_ms\tlat_qps\tp50_ms\tp99_ms\tp999_ms\tmax_ms\tlost\trss_loaded_mib\trss_after_mib\tserver_cores\tdnsperf_cores\tmachine_cores\trcodes\n' > "$summary"

for N in "${sizes[@]}"; do
  d="$work/n$N"
  mkdir -p "$d"
  log "N=$N: seeding"
  "$bin/seed" -n "$N" -data "$d/data" -names "$d/names.txt" -zone "$d/mesh.local.zone" -hosts "$d/hosts" -queries "$d/queries.txt"

  servers=(meshnames coredns-file)
  [ "$SKIP_HOSTS" = 1 ] || servers+=(coredns-hosts)
  servers+=(baremap)
  declare -A port=()
  free=$(python3 bench/freeports.py $((${#servers[@]} + 1)))
  read -r -a ports <<< "$free"
  for i in "${!servers[@]}"; do port[${servers[$i]}]=${ports[$i]}; done
  api_port=${ports[${#servers[@]}]}

  start meshnames "$bin/meshnames" serve --data-dir "$d/data" --api-addr "127.0.0.1:$api_port" \
    --dns-addr "127.0.0.1:${port[meshnames]}" --xds-addr 127.0.0.1:0 --skip-default-generators --log-level warn
  printf 'mesh.local:%s {\n    file %s mesh.local\n}\n' "${port[coredns-file]}" "$d/mesh.local.zone" > "$d/Corefile.file"
  start coredns-file "$bin/coredns" -conf "$d/Corefile.file"
  if [ "$SKIP_HOSTS" != 1 ]; then
    printf 'mesh.local:%s {\n    hosts %s mesh.local {\n        no_reverse\n    }\n}\n' "${port[coredns-hosts]}" "$d/hosts" > "$d/Corefile.hosts"
    start coredns-hosts "$bin/coredns" -conf "$d/Corefile.hosts"
  fi
  start baremap "$bin/baremap" -addr "127.0.0.1:${port[baremap]}" -names "$d/names.txt"

  declare -A rss0=() rss1=() qpsruns=() cores=() pcores=() mcores=()
  for s in "${servers[@]}"; do
    t0=$(date +%s.%N)
    "$bin/check" -s "127.0.0.1:${port[$s]}" -names "$d/names.txt" -wait 120s >/dev/null || { alive "$s"; exit 1; }
    log "N=$N: $s answers after $(python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.2f}')" "$t0" "$(date +%s.%N)") s of waiting"
  done
  sleep 3
  for s in "${servers[@]}"; do
    alive "$s"
    rss0[$s]=$(rss_kib "$(cat "$work/$s.pid")")
  done
  for s in "${servers[@]}"; do
    lenient=()
    [ "$s" = coredns-hosts ] && lenient=(-any-negative)   # it answers unknown names SERVFAIL
    out=$("$bin/check" -s "127.0.0.1:${port[$s]}" -names "$d/names.txt" -all "${lenient[@]}" 2>&1) || { echo "$s gives wrong answers: $out" >&2; exit 1; }
    log "N=$N: $s: $out"
  done

  log "N=$N: load average before the runs: $(loadavg)"
  for r in $(seq 1 "$ROUNDS"); do
    for s in "${servers[@]}"; do
      pid=$(cat "$work/$s.pid")
      c0=$(cpu_ticks "$pid")
      b0=$(busy_ticks)
      /usr/bin/time -f '%U %S %e' -o "$d/$s.max$r.time" \
        dnsperf -s 127.0.0.1 -p "${port[$s]}" -d "$d/queries.txt" -c 8 -T 1 -q 100 -l "$DURATION" > "$d/$s.max$r.out" 2>&1
      c1=$(cpu_ticks "$pid")
      b1=$(busy_ticks)
      alive "$s"
      q=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$d/$s.max$r.out")
      qpsruns[$s]="${qpsruns[$s]:+${qpsruns[$s]},}$q"
      cores[$s]="${cores[$s]:+${cores[$s]},}$(python3 -c "import sys; print(f'{(int(sys.argv[2])-int(sys.argv[1]))/100/float(sys.argv[3]):.2f}')" "$c0" "$c1" "$DURATION")"
      pcores[$s]="${pcores[$s]:+${pcores[$s]},}$(awk '{printf "%.2f", ($1+$2)/$3}' "$d/$s.max$r.time")"
      mcores[$s]="${mcores[$s]:+${mcores[$s]},}$(awk -v b="$((b1 - b0))" '{printf "%.2f", b/100/$3}' "$d/$s.max$r.time")"
      log "N=$N round $r: $s $q QPS ($(grep -o 'Queries lost:.*' "$d/$s.max$r.out" | tr -s ' '))"
    done
  done
  log "N=$N: load average after the throughput runs: $(loadavg)"

  for s in "${servers[@]}"; do
    dnsperf -s 127.0.0.1 -p "${port[$s]}" -d "$d/queries.txt" -c 8 -T 1 -q 100 -Q "$RATE" -l "$DURATION" -v > "$d/$s.lat.out" 2>&1
    alive "$s"
    rss1[$s]=$(rss_kib "$(cat "$work/$s.pid")")
  done
  log "N=$N: load average after the latency runs: $(loadavg)"

  for s in "${servers[@]}"; do
    # Median of the throughput runs; the mean latency of the median run.
    med=$(tr ',' '\n' <<< "${qpsruns[$s]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    medrun=1
    for r in $(seq 1 "$ROUNDS"); do
      [ "$(awk '/Queries per second:/ {printf "%.0f", $4}' "$d/$s.max$r.out")" = "$med" ] && medrun=$r
    done
    mean=$(awk '/Average Latency/ {printf "%.3f", $4*1000}' "$d/$s.max$medrun.out")
    rcodes=$(sed -n 's/^ *Response codes: *//p' "$d/$s.max$medrun.out" | sed 's/ ([^)]*)//g')
    latqps=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$d/$s.lat.out")
    pct=$(awk '/^> / {if ($2 == "T") lost++; else print $NF*1000} END {print "lost", lost+0 > "/dev/stderr"}' "$d/$s.lat.out" 2>"$d/$s.lat.lost" \
      | sort -g | awk '{a[NR]=$1} END {n=NR; if (n == 0) {print "- - - -"; exit}
          i50=int(n*0.50); if (i50<1) i50=1; i99=int(n*0.99); if (i99<1) i99=1; i999=int(n*0.999); if (i999<1) i999=1
          printf "%.3f %.3f %.3f %.3f", a[i50], a[i99], a[i999], a[n]}')
    lost=$(awk '{print $2}' "$d/$s.lat.lost")
    read -r p50 p99 p999 pmax <<< "$pct"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t%s\n' "$N" "$s" "${qpsruns[$s]}" "$med" "$mean" "$latqps" \
      "$p50" "$p99" "$p999" "$pmax" "$lost" "$(awk -v k="${rss0[$s]}" 'BEGIN {print k/1024}')" "$(awk -v k="${rss1[$s]}" 'BEGIN {print k/1024}')" \
      "${cores[$s]}" "${pcores[$s]}" "${mcores[$s]}" "$rcodes" >> "$summary"
  done

  for s in "${servers[@]}"; do
    kill "$(cat "$work/$s.pid")" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  pids=()
  unset port rss0 rss1 qpsruns cores pcores mcores
done

cp "$summary" "${SUMMARY:-/dev/null}" 2>/dev/null || true
python3 - "$summary" "$RATE" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
RATE = int(sys.argv[2])
print()
print("| N | server | QPS (median; runs) | mean latency at max (ms) | at %s QPS: p50 / p99 / p99.9 / max (ms), lost | RSS loaded / after (MiB) | CPU cores in the max runs: server; dnsperf; whole machine | rcodes |" % f"{RATE:,}")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    print(f"| {int(r['N']):,} | {r['server']} | {int(r['qps']):,} ({r['qps_runs']}) | {r['mean_ms']} | "
          f"{r['p50_ms']} / {r['p99_ms']} / {r['p999_ms']} / {r['max_ms']}, {r['lost']} (at {int(r['lat_qps']):,} QPS) | "
          f"{float(r['rss_loaded_mib']):.1f} / {float(r['rss_after_mib']):.1f} | {r['server_cores']}; {r['dnsperf_cores']}; {r['machine_cores']} | {r['rcodes']} |")
print()
by = {(r["N"], r["server"]): r for r in rows}
for n in dict.fromkeys(r["N"] for r in rows):
    m = by.get((n, "meshnames"))
    if not m:
        continue
    def ratio(other):
        o = by.get((n, other))
        return float(m["qps"]) / float(o["qps"]) if o else float("nan")
    p99 = float(m["p99_ms"]) if m["p99_ms"] != "-" else float("nan")
    print(f"N={int(n):,}: meshnames/CoreDNS-file QPS {ratio('coredns-file'):.2f}x (goal >= 2x); "
          f"meshnames/bare-map {ratio('baremap'):.2f}x (goal >= 0.9x); "
          f"meshnames/CoreDNS-hosts {ratio('coredns-hosts'):.2f}x; "
          f"p99 at {int(m['lat_qps']):,} QPS {p99:.3f} ms (goal < 2 ms); "
          f"RSS {float(m['rss_after_mib']):.1f} MiB after the runs (goal < 60 MiB at 100,000)")
PY
