-- wrk script for bench/e2e.sh: POSTs one AdmissionReview body and prints one JSON line.
--   wrk ... -s bench/e2e/post.lua URL -- BODY_FILE [close]
-- "close" adds "Connection: close", so every request goes over a new TLS connection.
-- The body is read once per thread at start-up and the request is formatted once (no
-- request()/response() callbacks), so wrk spends its CPU on sockets and TLS, not in Lua.

function init(args)
  local f = assert(io.open(args[1], "rb"), "cannot open body file " .. tostring(args[1]))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json"
  if args[2] == "close" then
    wrk.headers["Connection"] = "close"
  end
end

-- Latencies are in microseconds; duration too.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'E2E {"requests":%d,"duration_us":%d,"bytes":%d,"err_connect":%d,"err_read":%d,' ..
    '"err_write":%d,"err_status":%d,"err_timeout":%d,"p50_us":%d,"p99_us":%d,' ..
    '"p999_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean))
end
