# Shared by the shell tests: start `trainenv serve` on loopback port 0 with the test's
# certificates and the shipped policies, and learn the ports it bound from its log.
# Needs $bin, $src and $work (with $work/certs minted); sets server_pid, https_port, http_port.
#   start_server LOG [more serve flags...]
start_server() {
  local log="$1"
  shift
  "$bin" serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --tls-cert "$work/certs/tls.crt" \
    --tls-key "$work/certs/tls.key" --policies "$src/policies" "$@" 2>"$log" &
  server_pid=$!
  https_port=""
  for _ in $(seq 1 100); do
    https_port=$(sed -n 's/.*listening https=127.0.0.1:\([0-9]*\) .*/\1/p' "$log")
    [ -n "$https_port" ] && break
    sleep 0.05
  done
  http_port=$(sed -n 's/.*listening https=127.0.0.1:[0-9]* http=127.0.0.1:\([0-9]*\).*/\1/p' "$log")
  [ -n "$https_port" ] || { echo "FAILED: server did not start:" >&2; cat "$log" >&2; exit 1; }
}
