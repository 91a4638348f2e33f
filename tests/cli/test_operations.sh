#!/usr/bin/env bash
# Operating the real process: /metrics checked by promtool and counting what was sent, JSON log
# lines, SIGTERM in the middle of a stream of requests on several connections, the connection
# limit and the header limit, the reload lines operators grep for, and standard error read by
# nobody. Loopback only; every wait is bounded.
#   test_operations.sh BINARY SOURCE_DIR
set -uo pipefail
bin="$1"
src="$2"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
check() {
  local name="$1"
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name" >&2; fi
}

"$src/certs/mint.sh" "$work/certs" >/dev/null 2>&1
review="$src/tests/fixtures/review-torch-jobset-node3.json"

# shellcheck source=server_lib.sh
source "$src/tests/cli/server_lib.sh"
start() {  # start LOG [flags...]: start_server, remembering the pid for cleanup
  start_server "$@"
  pids+=("$server_pid")
}
mutate() {  # mutate [curl args...]: one admission, prints the HTTP code
  curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 --cacert "$work/certs/ca.crt" \
    -H 'Content-Type: application/json' --data-binary @"$review" "$@" "https://localhost:$https_port/mutate"
}
metric() {  # metric NAME_WITH_LABELS: its value in /metrics, or 0
  curl -s --max-time 5 "http://127.0.0.1:$http_port/metrics" | awk -v m="$1" '$1 == m {print $2; found=1} END {if (!found) print 0}'
}

# --- metrics ------------------------------------------------------------------------------
start "$work/metrics.log" --log-format json
check "promtool accepts /metrics before any request" bash -c "curl -s http://127.0.0.1:$http_port/metrics | promtool check metrics"
mutate >/dev/null
mutate >/dev/null
curl -s -o /dev/null --max-time 5 --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' -d '{nope' \
  "https://localhost:$https_port/mutate"
curl -s -o /dev/null --max-time 5 --cacert "$work/certs/ca.crt" "https://localhost:$https_port/nowhere"
check "promtool accepts /metrics after requests" bash -c "curl -s http://127.0.0.1:$http_port/metrics | promtool check metrics"
check "two patched admissions counted under torch" \
  [ "$(metric 'trainenv_requests_total{decision="patched",path="/mutate",policy="torch"}')" = 2 ]
check "the bad body counted as an error" [ "$(metric 'trainenv_requests_total{decision="error",path="/mutate",policy=""}')" = 1 ]
check "the unknown path counted" [ "$(metric 'trainenv_requests_total{decision="error",path="other",policy=""}')" = 1 ]
check "patch operations counted (13 per torch pod)" [ "$(metric 'trainenv_patch_operations_total{policy="torch"}')" = 26 ]
check "their readiness waits counted" [ "$(metric 'trainenv_waits_total{policy="torch",result="added"}')" = 2 ]
check "the latency histogram counts at least the four requests" \
  [ "$(metric 'trainenv_request_duration_seconds_count')" -ge 4 ]
check "a sub-millisecond bucket exists" [ "$(metric 'trainenv_request_duration_seconds_bucket{le="2.5e-05"}')" != "" ]
check "certificate expiry is a future Unix time" [ "$(metric trainenv_certificate_expiry_timestamp_seconds)" -gt "$(date +%s)" ]
check "build info carries the version" bash -c "curl -s http://127.0.0.1:$http_port/metrics | grep -q '^trainenv_build_info{version=\"'"

# --- JSON logs ----------------------------------------------------------------------------
kill -TERM "$server_pid"; wait "$server_pid"
check "every log line is a JSON object" bash -c "jq -e 'type == \"object\" and has(\"ts\") and has(\"level\")' '$work/metrics.log' >/dev/null"
check "admission lines carry every field" bash -c "jq -e 'select(.msg == \"admission\") | (.uid and .namespace and .pod and .operation
  and (.dryRun | type == \"boolean\") and .policy and .decision and (.ops | type == \"number\")
  and (.duration_us | type == \"number\"))' '$work/metrics.log' | grep -q true"
check "two admission lines" [ "$(jq -c 'select(.msg == "admission")' "$work/metrics.log" | wc -l)" = 2 ]
check "start-up logs the effective configuration once" [ "$(grep -c '"msg":"config listen=' "$work/metrics.log")" = 1 ]

# --- SIGTERM in the middle of a stream on several connections ------------------------------
start "$work/drain.log" --drain-delay 1 --shutdown-deadline 10
# Long enough to outlast the signal and the drain (about 2,000 requests a second here).
urls=()
for _ in $(seq 1 4000); do urls+=(-o /dev/null "https://localhost:$https_port/mutate"); done
for c in 1 2 3 4; do
  # One keep-alive connection each: curl reuses it for every URL; codes go one per line.
  curl -s --max-time 20 --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' --data-binary @"$review" \
    -w '%{http_code}\n' "${urls[@]}" >"$work/stream.$c" 2>/dev/null &
  pids+=($!)
done
sleep 0.3
term_at=$(date +%s%N)
kill -TERM "$server_pid"
sleep 0.3
ready_during_drain=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$http_port/readyz")
wait "$server_pid"
exit_code=$?
exit_ms=$(( ($(date +%s%N) - term_at) / 1000000 ))
for c in 1 2 3 4; do wait "${pids[-$c]}" 2>/dev/null; done
check "/readyz answered 503 while draining" [ "$ready_during_drain" = 503 ]
check "exit code 0 after SIGTERM" [ "$exit_code" = 0 ]
check "exited within the deadline (took ${exit_ms} ms)" [ "$exit_ms" -lt 10000 ]
check "every accepted request was answered 200 (000: refused after the drain, never sent)" \
  bash -c "! cat '$work'/stream.* | grep -vqE '^(200|000)$'"
check "requests were served during the drain" [ "$(cat "$work"/stream.* | grep -c '^200$')" -gt 4 ]

# --- connection limits, one per port ---------------------------------------------------------
start "$work/limit.log" --max-metrics-connections 2 --max-connections 3
exec 3<>"/dev/tcp/127.0.0.1/$http_port"
exec 4<>"/dev/tcp/127.0.0.1/$http_port"
sleep 0.2
check "a third connection is closed at once" bash -c "! curl -s --max-time 5 http://127.0.0.1:$http_port/healthz"
check "the admission port is not the metrics port's crowd" [ "$(curl -s -o /dev/null -w '%{http_code}' \
  --max-time 5 --cacert "$work/certs/ca.crt" "https://localhost:$https_port/healthz")" = 200 ]
printf 'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n' >&3
check "an existing connection is unaffected" bash -c "timeout 5 head -c 12 <&3 | grep -q 'HTTP/1.1 200'"
exec 3<&- 4<&-
sleep 0.2
check "the refusal is counted" [ "$(metric trainenv_refused_connections_total)" -ge 1 ]

# --- header limit ------------------------------------------------------------------------------
big=$(head -c 20000 /dev/zero | tr '\0' a)
check "oversized headers are answered 431" [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$work/certs/ca.crt" \
  -H "X-Padding: $big" "https://localhost:$https_port/healthz")" = 431 ]
kill -TERM "$server_pid"; wait "$server_pid"

# --- owner lookups: counted by kind and result, and promtool still accepts /metrics ------------
start "$work/owners.log" --log-format json --owners "$src/examples/owners/trainer-torch-owners.yaml"
# The example pod as JSON, wrapped in a review: preview with no owners passes it unchanged.
"$bin" preview -f "$src/examples/owners/trainer-torch-pod.yaml" --policies "$src/policies" \
  | jq '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: "owner-uid",
        namespace: "team-a", operation: "CREATE", kind: {group: "", version: "v1", kind: "Pod"},
        resource: {group: "", version: "v1", resource: "pods"}, object: .object}}' >"$work/trainer-review.json"
curl -s --max-time 10 --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
  --data-binary @"$work/trainer-review.json" "https://localhost:$https_port/mutate" >"$work/trainer-answer.json"
check "the Trainer pod is patched with owners from the file" bash -c "jq -e '.response.allowed and .response.patch' '$work/trainer-answer.json' >/dev/null"
check "its JobSet lookup is counted" [ "$(metric 'trainenv_owner_lookups_total{kind="jobset",result="ok"}')" = 1 ]
check "and its Job's" [ "$(metric 'trainenv_owner_lookups_total{kind="job",result="ok"}')" = 1 ]
check "the owner lookup histogram counts them" [ "$(metric 'trainenv_owner_lookup_duration_seconds_count')" -ge 2 ]
check "promtool accepts /metrics with owner series" bash -c "curl -s http://127.0.0.1:$http_port/metrics | promtool check metrics"
kill -TERM "$server_pid"; wait "$server_pid"
check "the admission line says where the counts came from" bash -c "grep '\"msg\":\"admission\"' '$work/owners.log' | grep -q 'JobSet team-a/bert'"

# --- the log lines operators grep for: written as docs/operations.md quotes them ------------------
mkdir -p "$work/reload/certs"
cp -r "$src/policies" "$work/reload/policies"
cp "$work/certs/tls.crt" "$work/certs/tls.key" "$work/reload/certs/"
start "$work/reload.log" --policies "$work/reload/policies" --tls-cert "$work/reload/certs/tls.crt" \
  --tls-key "$work/reload/certs/tls.key"
logged() {  # logged PHRASE: whether the reload log has it within 10 s
  for _ in $(seq 1 100); do grep -qF -- "$1" "$work/reload.log" && return 0; sleep 0.1; done
  return 1
}
printf 'name: [broken\n' >"$work/reload/policies/zz-broken.yaml"
logged "policy reload failed, keeping the last good set: "
rm "$work/reload/policies/zz-broken.yaml"
logged "policies reloaded: ["
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/reload/certs/tls.key" 2>/dev/null
logged "certificate reload failed, keeping the current certificate: "
"$src/certs/mint.sh" "$work/certs2" >/dev/null 2>&1
cp "$work/certs2/tls.key" "$work/certs2/tls.crt" "$work/reload/certs/"
logged "certificate reloaded: serial "
kill -TERM "$server_pid"; wait "$server_pid"
for phrase in "policy reload failed, keeping the last good set: " "policies reloaded: [" \
  "certificate reload failed, keeping the current certificate: " "certificate reloaded: serial "; do
  check "the log says \"$phrase\"" grep -qF -- "$phrase" "$work/reload.log"
  check "docs/operations.md quotes \"$phrase\"" grep -qF -- "$phrase" "$src/docs/operations.md"
done

# --- standard error read by nobody: requests answered, lines counted as dropped, no SIGPIPE death --
# start_piped: serve with standard error on a FIFO this shell holds open on descriptor 5, reading
# it only up to the line that gives the ports.
start_piped() {
  rm -f "$work/stderr.fifo"
  mkfifo "$work/stderr.fifo"
  "$bin" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --tls-cert "$work/certs/tls.crt" \
    --tls-key "$work/certs/tls.key" --policies "$src/policies" 2>"$work/stderr.fifo" &
  server_pid=$!
  pids+=("$server_pid")
  exec 5<"$work/stderr.fifo"
  https_port=""
  local line
  while IFS= read -r -t 10 line <&5; do
    if [[ $line =~ listening\ https=127\.0\.0\.1:([0-9]+)\ http=127\.0\.0\.1:([0-9]+) ]]; then
      https_port=${BASH_REMATCH[1]}
      http_port=${BASH_REMATCH[2]}
      break
    fi
  done
  [ -n "$https_port" ] || { echo "FAILED: server did not start" >&2; exit 1; }
}
mutate_many() {  # mutate_many N: N admissions on one keep-alive connection; prints how many got 200
  local urls=()
  for _ in $(seq 1 "$1"); do urls+=("https://localhost:$https_port/mutate"); done
  curl -s --max-time 60 --cacert "$work/certs/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$review" -w '\ncode=%{http_code}\n' "${urls[@]}" | grep -c '^code=200$'
}

start_piped
exec 5<&-  # the reader goes away
check "after the log's reader went away, 50 admissions answered 200" [ "$(mutate_many 50)" = 50 ]
check "the server is alive" kill -0 "$server_pid"
sleep 0.5  # the writer's batch window
check "their log lines are counted as dropped" [ "$(metric trainenv_log_lines_dropped_total)" -ge 50 ]
check "promtool accepts /metrics with the dropped lines" bash -c "curl -s http://127.0.0.1:$http_port/metrics | promtool check metrics"
kill -TERM "$server_pid"; wait "$server_pid"
check "it stops on SIGTERM with exit code 0 (141 would be death by SIGPIPE)" [ "$?" = 0 ]

start_piped  # the reader stays but stops reading: the pipe's 64 KiB fill up
check "while the log's reader stalls, 600 admissions answered 200" [ "$(mutate_many 600)" = 600 ]
exec 5<&-  # then goes: the write blocked on the full pipe fails
check "after it went, 50 more answered 200" [ "$(mutate_many 50)" = 50 ]
check "the server is alive" kill -0 "$server_pid"
sleep 0.5
check "the lines the pipe did not take are counted as dropped" [ "$(metric trainenv_log_lines_dropped_total)" -ge 50 ]
kill -TERM "$server_pid"; wait "$server_pid"
check "it stops on SIGTERM with exit code 0" [ "$?" = 0 ]

# The alert rules are a manifests component (manifests/components/monitoring), checked with promtool
# by tests/manifests/test_manifests.sh.

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
