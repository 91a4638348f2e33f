#!/usr/bin/env bash
# Counts the instructions `trainenv serve` executes per /mutate request, under callgrind: a figure
# that does not depend on the machine's load, for A/B comparisons a shared machine cannot time.
#
#   bench/callgrind.sh [--conns C] [--requests N] [--log-level L] [--out DIR] [BODY...]
#                                                               (BUILD_DIR: default build)
#
# Starts $BUILD_DIR/trainenv under valgrind --tool=callgrind with throw-away certificates and the
# shipped policies (log level L, default warn; info is the product's default: one line per
# admission), opens C (64) TLS keep-alive connections with bench/callgrind_client.py and sends
# one warm-up request on each, zeroes the counters, sends N (2,000) requests cycling through the
# BODY files (default tests/fixtures/review-*.json; bench/e2e.sh's small.json is a plain pod),
# and dumps the counters. Prints the instructions per request and the inclusive share of
# trainenv::server::metrics; keeps the dump in DIR (default a temporary directory).
# Needs valgrind, python3, curl, openssl. bench/callgrind_inclusive.py sums the metrics' share.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
conns=64
requests=2000
out=""
log_level=warn
bodies=()
while [ $# -gt 0 ]; do
  case "$1" in
    --conns) conns="$2"; shift ;;
    --requests) requests="$2"; shift ;;
    --log-level) log_level="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "callgrind.sh: unknown argument $1" >&2; exit 2 ;;
    *) bodies+=("$1") ;;
  esac
  shift
done
[ ${#bodies[@]} -gt 0 ] || bodies=(tests/fixtures/review-*.json)
build_dir="${BUILD_DIR:-build}"
trainenv="$build_dir/trainenv"
[ -x "$trainenv" ] || { echo "callgrind.sh: no $trainenv (scripts/dev.sh build trainenv)" >&2; exit 1; }
work="${out:-$(mktemp -d)}"
mkdir -p "$work"
certs/mint.sh "$work/certs" >/dev/null 2>&1

read -r port metrics_port <<< "$(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')"

valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
  "$trainenv" serve --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" \
  --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" --policies policies \
  --log-level "$log_level" --max-connections 20000 > "$work/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf --max-time 2 "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf --max-time 2 "http://127.0.0.1:$metrics_port/readyz" >/dev/null ||
  { cat "$work/server.log" >&2; echo "callgrind.sh: the server did not come up" >&2; exit 1; }

python3 bench/callgrind_client.py --port "$port" --ca "$work/certs/ca.crt" --conns "$conns" \
  --requests "$requests" --zero-pid "$pid" "${bodies[@]}"
curl -sf --max-time 30 "http://127.0.0.1:$metrics_port/metrics" > "$work/metrics.txt"
kill -TERM "$pid"
wait "$pid" || true
trap - EXIT

dump="$(ls "$work"/callgrind.out.*1 | head -1)"
total="$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')"
# Inclusive cost of the metrics entry points (on_request_started, on_request, ...).
metrics_ir="$(python3 bench/callgrind_inclusive.py "$dump" '^trainenv::server::metrics::on_')"
awk -v t="$total" -v m="$metrics_ir" -v n="$requests" -v d="$dump" 'BEGIN {
  printf "%s: %d Ir, %d requests: %.0f Ir/request; metrics::on_* inclusive %.0f Ir/request (%.3f%%)\n",
    d, t, n, t / n, m / n, 100 * m / t }'
