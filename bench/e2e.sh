#!/usr/bin/env bash
# End-to-end benchmark: trainenv against the webhook a team would write in Go (bench/peers/
# go-webhook: net/http, crypto/tls, encoding/json) and against a floor (nginx answering the same
# POST with trainenv's answer as a static file: what TLS, HTTP and the kernel cost alone), all
# over real HTTPS on loopback, driven by wrk, with real AdmissionReview bodies
# (build/bench/pod_bodies: small, typical, large, huge).
#
#   bench/e2e.sh [--duration S] [--quick] [--out FILE] [--bodies DIR] [--requests N] [--keep]
#
#   --duration S   seconds per wrk run (default 10)
#   --quick        a smoke run: 3 s per run, 200k requests for the RSS-flatness run, 5 startups
#   --out FILE     where the summary goes (default bench/results/e2e-<UTC date>.md)
#   --bodies DIR   use DIR/{small,typical,large,huge}.json instead of building pod_bodies
#   --requests N   requests for the RSS-flatness run (default 1000000)
#   --keep         keep the work directory (wrk outputs, logs, responses, results.jsonl)
#   --floor-only   only the correctness check and the floor runs (step 4's second half)
#
# Environment: BUILD_DIR (default build) and BUILD_TYPE (default Release), as for
# scripts/dev.sh, which builds trainenv and pod_bodies. Needs wrk, go (standard library only,
# built offline), nginx-light, curl, python3-jsonpatch: Debian packages, installed if missing.
#
# What it does, in order (every server and client on 127.0.0.1, every step bounded in time):
#  1. builds trainenv, pod_bodies and the Go peer; mints throw-away certificates; starts both
#     servers with request logging at warn (trainenv --log-level warn: one info line per
#     admission would otherwise be part of what is measured; the Go peer logs nothing), and a
#     second trainenv at the default level, info, its standard error read through a pipe as a
#     container runtime reads it;
#  2. correctness: each body POSTed once to each server with curl; each patch applied with
#     python-jsonpatch; the target container's env and ports must be the same from both;
#  3. startup-to-ready of trainenv (spawn -> /readyz 200), 10 times;
#  4. keep-alive load with the typical body at 1, 8, 64 and 256 connections, alternating the
#     servers: req/s, p50/p99/p99.9, server CPU, wrk CPU, everything else's CPU, peak RSS;
#     any wrk error (socket error, non-2xx, timeout) fails the run; then the small body (a
#     plain pod: the fixed cost of a request) and the typical body at 64 and 8 connections,
#     three rounds of trainenv at warn, trainenv at info, the Go peer and the floor (nginx
#     answering the same POST with trainenv's answer as a static file), in turn
#     (--floor-only: steps 1, 2 and this);
#  5. a new TLS connection per request ("Connection: close"), checked against the kernel's
#     count of accepted connections: handshakes/s;
#  6. the four body shapes at 1 and 8 connections;
#  7. RSS flatness over 1,000,000 requests at 64 connections: RSS after ~100k and at the end;
#  8. RSS with 1000 idle keep-alive TLS connections.
# Then it prints the summary (Markdown) and writes it to --out.
# The machine must be otherwise idle: each run records the CPU that neither wrk nor the server
# used ("other CPU"), and the summary warns when it is not negligible.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
here="$root/bench/e2e"

duration=10
flat_requests=1000000
startups=10
out=""
bodies=""
keep=0
floor_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="$2"; shift ;;
    --quick) duration=3; flat_requests=200000; startups=5 ;;
    --out) out="$2"; shift ;;
    --bodies) bodies="$(cd "$2" && pwd)"; shift ;;
    --requests) flat_requests="$2"; shift ;;
    --keep) keep=1 ;;
    --floor-only) floor_only=1 ;;
    -h|--help) sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "e2e.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$out" ] || out="$root/bench/results/e2e-$(date -u +%Y%m%dT%H%M%SZ).md"

log() { printf 'e2e: %s\n' "$*" >&2; }
die() { printf 'e2e: FAILED: %s\n' "$*" >&2; exit 1; }

# The tools, all Debian packages, installed through scripts/dev.sh deps when missing: wrk, Go
# (the peer), nginx-light (the floor), python3-jsonpatch (the correctness check's applier).
bench_packages=(wrk golang-go nginx-light python3-jsonpatch curl jq openssl iproute2)
missing=()
for p in "${bench_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] || scripts/dev.sh deps --build "${missing[@]}"
# Debian's python3, which has jsonpatch (a python3 earlier on PATH may not).
py=/usr/bin/python3
"$py" -c 'import jsonpatch' || die "python3-jsonpatch is not importable by $py"

# 1000 idle connections plus wrk's need descriptors in this shell's children (the servers).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 4096 ] || die "ulimit -n is $(ulimit -n); the idle-connection run needs more"

work="$(mktemp -d /tmp/trainenv-e2e.XXXXXX)"
pids=()
cleanup() {
  local pid
  # nginx's workers outlive a killed master, and a master that sees a worker die starts another:
  # the workers are listed first, then the master goes, then they do.
  local floor_workers=()
  [ -z "${nginx_pid:-}" ] || read -r -a floor_workers <<< "$(pgrep -P "$nginx_pid" | tr '\n' ' ')"
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${floor_workers[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$keep" = 1 ]; then log "work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
results="$work/results.jsonl"
: > "$results"

# ---- 1. build, certificates, servers ----

build_dir="${BUILD_DIR:-build}"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
if [ -n "$bodies" ]; then
  BUILD_DIR="$build_dir" scripts/dev.sh build trainenv
else
  BUILD_DIR="$build_dir" scripts/dev.sh build trainenv pod_bodies
  bodies="$work/bodies"
  mkdir -p "$bodies"
  "$build_dir/bench/pod_bodies" "$bodies"
fi
shapes=(small typical large huge)
for s in "${shapes[@]}"; do [ -s "$bodies/$s.json" ] || die "no body $bodies/$s.json"; done
trainenv="$build_dir/trainenv"

# The Go peer: standard library only, so it builds offline; its caches live in the build dir
# because HOME may not be writable.
log "building the Go peer"
(cd bench/peers/go-webhook &&
  GOCACHE="$build_dir/e2e-go/cache" GOPATH="$build_dir/e2e-go/path" GOFLAGS="" GOPROXY=off \
    go build -trimpath -o "$build_dir/e2e-go/go-webhook" .)
go_webhook="$build_dir/e2e-go/go-webhook"

certs/mint.sh "$work/certs" >/dev/null 2>&1
ca="$work/certs/ca.crt"

# Seven distinct free loopback ports, held open together so they differ. A command
# substitution (not "read < <(...)") so the picker has exited, and freed them, before use.
ports="$("$py" -c '
import socket
ss = [socket.socket() for _ in range(7)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')"
read -r tls_port metrics_port go_port info_port info_metrics_port floor_small_port floor_typical_port <<< "$ports"

trainenv_common=(--tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key"
  --policies "$root/policies" --max-connections 20000)
trainenv_flags=(--listen "127.0.0.1:$tls_port" "${trainenv_common[@]}" --log-level warn)
"$trainenv" serve "${trainenv_flags[@]}" --metrics-listen "127.0.0.1:$metrics_port" \
  > "$work/trainenv.log" 2>&1 &
trainenv_pid=$!
pids+=("$trainenv_pid")
# The same server at the default log level; a pipe to a reader, as a container runtime holds.
info_flags=(--listen "127.0.0.1:$info_port" "${trainenv_common[@]}" --log-level info)
"$trainenv" serve "${info_flags[@]}" --metrics-listen "127.0.0.1:$info_metrics_port" \
  > >(cat > /dev/null) 2>&1 &
info_pid=$!
pids+=("$info_pid")
"$go_webhook" -addr "127.0.0.1:$go_port" -cert "$work/certs/tls.crt" -key "$work/certs/tls.key" \
  > "$work/go.log" 2>&1 &
go_pid=$!
pids+=("$go_pid")

wait_for() {  # wait_for WHAT CMD...: retry CMD for up to 10 s
  local what="$1" _
  shift
  for _ in $(seq 1 200); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  die "$what did not come up within 10 s"
}
wait_for "trainenv" curl -sf --max-time 1 "http://127.0.0.1:$metrics_port/readyz"
wait_for "trainenv at info" curl -sf --max-time 1 "http://127.0.0.1:$info_metrics_port/readyz"
wait_for "the Go peer" curl -sf --max-time 1 --cacert "$ca" "https://127.0.0.1:$go_port/healthz"
log "trainenv pid $trainenv_pid on :$tls_port (metrics :$metrics_port), go pid $go_pid on :$go_port"

server_pid() {
  case "$1" in trainenv) echo "$trainenv_pid" ;; trainenv-info) echo "$info_pid" ;; *) echo "$go_pid" ;; esac
}
# server_pids SERVER: its processes, nginx's master and workers alike (the floor's CPU is theirs
# together).
server_pids() {
  case "$1" in
    nginx) echo "$nginx_pid" $(pgrep -P "$nginx_pid") ;;
    *) server_pid "$1" ;;
  esac
}
# server_port SERVER [SHAPE]: the floor has one port per body, each answering with its answer.
server_port() {
  case "$1" in
    trainenv) echo "$tls_port" ;;
    trainenv-info) echo "$info_port" ;;
    nginx) [ "${2:-}" = small ] && echo "$floor_small_port" || echo "$floor_typical_port" ;;
    *) echo "$go_port" ;;
  esac
}
# utime+stime in clock ticks, summed over PIDs; the fields after "(comm)" are counted from the
# closing paren.
cpu_ticks() {
  local pid total=0
  for pid in "$@"; do total=$((total + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'))); done
  echo "$total"
}
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
# status_kb_sum FIELD PID...: a /proc status field (kB) summed over PIDs.
status_kb_sum() {
  local field="$1" pid total=0
  shift
  for pid in "$@"; do total=$((total + $(status_kb "$pid" "$field"))); done
  echo "$total"
}
# Connections the kernel accepted (all loopback traffic here is ours).
passive_opens() { awk '$1 == "Tcp:" && $2 ~ /^[0-9]/ {print $6}' /proc/net/snmp; }
hz="$(getconf CLK_TCK)"
# Busy clock ticks of the whole machine (user nice system irq softirq steal).
machine_busy() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }

# Two cores shared by wrk and the server leave no room for anything else: say so up front.
b0="$(machine_busy)"
sleep 2
quiet_pct=$(( ($(machine_busy) - b0) * 100 / (2 * hz) ))
[ "$quiet_pct" -le 10 ] ||
  log "WARNING: the machine was ${quiet_pct}% busy (100% = one core) before any load; numbers will be noisy"

# ---- 2. correctness, like for like ----

log "correctness: every body through both servers, patches applied with python-jsonpatch"
mkdir -p "$work/responses"
for s in "${shapes[@]}"; do
  for server in trainenv go; do
    code="$(curl -sS --max-time 10 --cacert "$ca" -H 'Content-Type: application/json' \
      --data-binary @"$bodies/$s.json" -o "$work/responses/$server-$s.json" -w '%{http_code}' \
      "https://127.0.0.1:$(server_port "$server")/mutate")"
    [ "$code" = 200 ] || die "$server answered $code for $s"
  done
done
body_files=()
for s in "${shapes[@]}"; do body_files+=("$bodies/$s.json"); done
"$py" "$here/check_patches.py" "$work/responses" "${body_files[@]}" | sed 's/^/e2e: /' >&2 ||
  die "correctness check: the servers must inject the same env and ports (like for like)"

# ---- the floor: nginx answering /mutate with trainenv's own answer, as a static file ----
# What answering costs with no JSON work at all: the same certificate, TLS settings a browser
# would get, HTTP/1.1 keep-alive, the kernel. Two workers for the two cores (trainenv runs a
# thread per core); no access log; keep-alive without a request limit, as trainenv's. nginx
# answers a POST to a static file 405; error_page turns that into the file, 200, the body read
# and discarded first. One port per body, each answering with trainenv's answer to that body.

floor_dir="$work/nginx"
mkdir -p "$floor_dir/tmp"
for s in small typical; do
  mkdir -p "$floor_dir/$s"
  cp "$work/responses/trainenv-$s.json" "$floor_dir/$s/mutate"
done
floor_user=""
[ "$(id -u)" -ne 0 ] || floor_user="user root;"  # its workers read files in a 0700 directory
floor_server() {  # floor_server PORT SHAPE
  cat <<EOF
  server {
    listen 127.0.0.1:$1 ssl;
    root $floor_dir/$2;
    location = /mutate { error_page 405 =200 \$uri; }
  }
EOF
}
cat > "$floor_dir/nginx.conf" <<EOF
$floor_user
worker_processes 2;
daemon off;
pid $floor_dir/nginx.pid;
error_log $floor_dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  default_type application/json;
  etag off;
  keepalive_timeout 600s;
  keepalive_requests 1000000000;
  client_body_buffer_size 64k;
  client_body_temp_path $floor_dir/tmp/body;
  proxy_temp_path $floor_dir/tmp/proxy;
  fastcgi_temp_path $floor_dir/tmp/fastcgi;
  uwsgi_temp_path $floor_dir/tmp/uwsgi;
  scgi_temp_path $floor_dir/tmp/scgi;
  ssl_certificate $work/certs/tls.crt;
  ssl_certificate_key $work/certs/tls.key;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_session_tickets off;
$(floor_server "$floor_small_port" small)
$(floor_server "$floor_typical_port" typical)
}
EOF
nginx -p "$floor_dir" -c "$floor_dir/nginx.conf" -e "$floor_dir/error.log" > "$floor_dir/stdout.log" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
wait_for "nginx (the floor)" curl -sf --max-time 1 --cacert "$ca" "https://127.0.0.1:$floor_typical_port/mutate"
for s in small typical; do
  code="$(curl -sS --max-time 10 --cacert "$ca" -H 'Content-Type: application/json' --data-binary @"$bodies/$s.json" \
    -o "$work/responses/nginx-$s.json" -w '%{http_code}' "https://127.0.0.1:$(server_port nginx "$s")/mutate")"
  [ "$code" = 200 ] && cmp -s "$work/responses/nginx-$s.json" "$work/responses/trainenv-$s.json" ||
    die "nginx (the floor) does not answer the $s body 200 with trainenv's answer (got $code)"
done
log "nginx (the floor) pid $nginx_pid, workers $(pgrep -P "$nginx_pid" | tr '\n' ' ')on :$floor_small_port (small), :$floor_typical_port (typical)"

# ---- measuring one wrk run ----

# run_wrk KIND SERVER CONNECTIONS SHAPE [close]: one wrk run of $duration seconds (or $run_for
# if set); appends a JSON record to $results and leaves it in $last.
last=""
run_wrk() {
  local kind="$1" server="$2" conc="$3" shape="$4" mode="${5:-}"
  local secs="${run_for:-$duration}" pids threads url wout t0 t1 o0 o1 m0 m1 line user sys p
  read -r -a pids <<< "$(server_pids "$server")"
  threads=$((conc < 2 ? conc : 2))  # two cores: wrk never gets more than two threads
  url="https://127.0.0.1:$(server_port "$server" "$shape")/mutate"
  wout="$work/wrk-$kind-$server-$shape-c$conc.out"
  for p in "${pids[@]}"; do echo 5 > "/proc/$p/clear_refs"; done  # resets VmHWM: this run's peak
  t0="$(cpu_ticks "${pids[@]}")"
  o0="$(passive_opens)"
  m0="$(machine_busy)"
  local TIMEFORMAT='%U %S'  # wrk's own CPU (user, system), via bash's time
  local -a args=("$bodies/$shape.json")
  [ -z "$mode" ] || args+=("$mode")
  { time timeout $((secs + 30)) wrk -t"$threads" -c"$conc" -d"${secs}s" --timeout 5s --latency \
      -s "$here/post.lua" "$url" -- "${args[@]}" > "$wout" 2>&1; } 2> "$wout.time" ||
    { cat "$wout" >&2; die "wrk failed ($kind $server c=$conc $shape)"; }
  t1="$(cpu_ticks "${pids[@]}")"
  o1="$(passive_opens)"
  m1="$(machine_busy)"
  read -r user sys < "$wout.time"
  line="$(sed -n 's/^E2E //p' "$wout")"
  [ -n "$line" ] || { cat "$wout" >&2; die "no summary from wrk ($kind $server c=$conc $shape)"; }
  last="$(jq -c --arg kind "$kind" --arg server "$server" --arg shape "$shape" --arg mode "${mode:-keep-alive}" \
    --argjson conc "$conc" --argjson threads "$threads" --argjson ticks $((t1 - t0)) --argjson hz "$hz" \
    --argjson opens $((o1 - o0)) --argjson busy $((m1 - m0)) --argjson wrk_user "$user" --argjson wrk_sys "$sys" \
    --argjson hwm "$(status_kb_sum VmHWM "${pids[@]}")" --argjson rss "$(status_kb_sum VmRSS "${pids[@]}")" \
    '. + {kind: $kind, server: $server, shape: $shape, mode: $mode, conc: $conc, threads: $threads,
          rps: (.requests / (.duration_us / 1e6)), server_cpu_s: ($ticks / $hz),
          wrk_cpu_s: ($wrk_user + $wrk_sys), machine_cpu_s: ($busy / $hz), passive_opens: $opens, hwm_kb: $hwm, rss_kb: $rss}' <<< "$line")"
  echo "$last" >> "$results"
  jq -r '"\(.server) \(.kind) \(.shape) c=\(.conc): \(.rps | floor) req/s, p50 \(.p50_us) us, p99 \(.p99_us) us, p99.9 \(.p999_us) us, server CPU \((100 * .server_cpu_s / (.duration_us / 1e6)) | floor)%, wrk CPU \((100 * .wrk_cpu_s / (.duration_us / 1e6)) | floor)%, other CPU \((100 * (.machine_cpu_s - .server_cpu_s - .wrk_cpu_s) / (.duration_us / 1e6)) | floor)%"' \
    <<< "$last" | sed 's/^/e2e: /' >&2
  local errors
  errors="$(jq '.err_connect + .err_read + .err_write + .err_status + .err_timeout' <<< "$last")"
  if [ "$errors" != 0 ] || [ "$(jq .requests <<< "$last")" = 0 ]; then
    cat "$wout" >&2
    die "$server: $errors errors (connect/read/write/non-2xx/timeout) in $kind c=$conc $shape: $last"
  fi
}

# ---- 4b. the floor, trainenv and the Go peer on the small and the typical body ----
# CPU per request against nginx answering the same bytes (the floor) and the Go peer: each body
# at 64 and 8 connections, three rounds of trainenv at warn, trainenv at info (the default: one
# line per admission, standard error read through a pipe), the Go peer and the floor, in turn,
# so that a noisy moment touches each alike; report.py takes each server's median.

floor_runs() {
  local shape conc round server
  log "small and typical bodies, ${duration} s per run: trainenv at warn, at info, the Go peer, the floor"
  for shape in small typical; do
    for conc in 64 8; do
      for round in 1 2 3; do
        for server in trainenv trainenv-info go nginx; do run_wrk floor "$server" "$conc" "$shape"; done
      done
    done
  done
}

if [ "$floor_only" = 1 ]; then
  floor_runs
  steps_run="correctness, floor"
else  # the whole run: steps 3 to 8

# ---- 3. startup to ready ----

log "startup to ready, $startups times"
"$py" "$here/startup.py" "$startups" "$trainenv" serve --listen 127.0.0.1:0 \
  --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" --policies "$root/policies" \
  --log-level warn | jq -c '. + {kind: "startup"}' >> "$results"
tail -1 "$results" | sed 's/^/e2e: /' >&2

# ---- 4. keep-alive load, typical body, alternating the servers ----

log "keep-alive load, typical body, ${duration} s per run"
for conc in 1 8 64 256; do
  for server in trainenv go; do run_wrk load "$server" "$conc" typical; done
done
floor_runs

# ---- 5. a new TLS connection per request ----

log "new TLS connection per request (Connection: close), 8 connections"
for server in trainenv go; do
  run_wrk handshake "$server" 8 typical close
  # Every request must have come over its own connection: the kernel's accepted-connection
  # count must be at least the requests wrk completed.
  jq -e '.passive_opens >= .requests' <<< "$last" >/dev/null ||
    die "$server: only $(jq .passive_opens <<< "$last") connections for $(jq .requests <<< "$last") requests: wrk reused connections"
done

# ---- 6. body shapes ----

log "body shapes at 1 and 8 connections"
for s in "${shapes[@]}"; do
  for conc in 1 8; do
    for server in trainenv go; do run_wrk shape "$server" "$conc" "$s"; done
  done
done

# ---- 7. RSS flatness over $flat_requests requests ----

for server in trainenv go; do
  log "$server: RSS over $flat_requests requests at 64 connections"
  rps="$(jq -s --arg s "$server" 'map(select(.kind == "load" and .server == $s and .conc == 64))[0].rps | floor' "$results")"
  # First about 100k requests (a tenth of the run when it is shorter), then the rest in runs of
  # at most two minutes.
  first=$((flat_requests / 10 < 100000 ? flat_requests / 10 : 100000))
  run_for=$((first / rps + 1)) run_wrk flat "$server" 64 typical
  done_requests="$(jq .requests <<< "$last")"
  first_rss="$(status_kb "$(server_pid "$server")" VmRSS)"
  first_done="$done_requests"
  while [ "$done_requests" -lt "$flat_requests" ]; do
    secs=$(((flat_requests - done_requests) / rps + 1))
    run_for=$((secs > 120 ? 120 : secs)) run_wrk flat "$server" 64 typical
    done_requests=$((done_requests + $(jq .requests <<< "$last")))
  done
  end_rss="$(status_kb "$(server_pid "$server")" VmRSS)"
  jq -nc --arg server "$server" --argjson n1 "$first_done" --argjson n "$done_requests" \
    --argjson r1 "$first_rss" --argjson r "$end_rss" \
    '{kind: "flatness", server: $server, requests_first: $n1, requests: $n, rss_first_kb: $r1, rss_end_kb: $r}' \
    | tee -a "$results" | sed 's/^/e2e: /' >&2
done

# ---- 8. RSS with 1000 idle keep-alive TLS connections ----
# Last, because memory a server does not hand back after the connections close would inflate
# every peak RSS measured after it.

idle_conns=1000
for server in trainenv go; do
  pid="$(server_pid "$server")"
  before="$(status_kb "$pid" VmRSS)"
  # The holder keeps its connections while its stdin (a fifo we hold open) stays open.
  rm -f "$work/idle.fifo"
  mkfifo "$work/idle.fifo"
  timeout 120 "$py" "$here/idle_conns.py" 127.0.0.1 "$(server_port "$server")" "$idle_conns" "$ca" \
    < "$work/idle.fifo" > "$work/idle-$server.out" 2>&1 &
  holder=$!
  pids+=("$holder")
  exec 9> "$work/idle.fifo"
  for _ in $(seq 1 600); do
    grep -q '^ready' "$work/idle-$server.out" && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "^ready $idle_conns" "$work/idle-$server.out" ||
    { cat "$work/idle-$server.out" >&2; die "could not hold $idle_conns connections to $server"; }
  sleep 1  # let the server settle after the last handshake
  open="$(ss -Htn state established "( sport = :$(server_port "$server") )" | wc -l)"
  after="$(status_kb "$pid" VmRSS)"
  exec 9>&-
  wait "$holder" || die "the idle-connection holder failed for $server"
  [ "$open" -ge "$idle_conns" ] || die "$server had only $open established connections, not $idle_conns"
  jq -nc --arg server "$server" --argjson before "$before" --argjson after "$after" \
    --argjson conns "$idle_conns" --argjson open "$open" \
    '{kind: "idle", server: $server, conns: $conns, established: $open, rss_before_kb: $before, rss_after_kb: $after}' \
    | tee -a "$results" | sed 's/^/e2e: /' >&2
done
steps_run="all"
fi

# ---- summary ----

kill -0 "$trainenv_pid" || die "trainenv died during the run"
kill -0 "$go_pid" || die "the Go peer died during the run"
kill -0 "$info_pid" || die "trainenv at info died during the run"
kill -0 "$nginx_pid" || die "nginx (the floor) died during the run"
git_rev="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || git_rev="$git_rev (with uncommitted changes)"
jq -nc --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg git "$git_rev" --arg nproc "$(nproc)" \
  --arg cpu "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" --arg kernel "$(uname -r)" \
  --arg go "$(go version)" --arg nginx "$(nginx -v 2>&1)" --arg wrk "$(wrk -v 2>&1 | head -1)" --arg openssl "$(openssl version)" \
  --arg duration "$duration" --argjson quiet "$quiet_pct" --arg flags "${trainenv_flags[*]}" --arg bodies "$bodies" --arg steps "$steps_run" \
  --arg sizes "$(for s in "${shapes[@]}"; do printf '%s=%s ' "$s" "$(stat -c %s "$bodies/$s.json")"; done)" \
  '{kind: "meta", date: $date, git: $git, nproc: $nproc, cpu: $cpu, kernel: $kernel, go: $go,
    nginx: $nginx, wrk: $wrk, openssl: $openssl, duration: $duration, busy_before_pct: $quiet, trainenv_flags: $flags, body_sizes: $sizes,
    steps: $steps}' >> "$results"
mkdir -p "$(dirname "$out")"
"$py" "$here/report.py" "$results" | tee "$out"
log "summary written to $out"
