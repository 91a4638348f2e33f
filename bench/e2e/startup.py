#!/usr/bin/env python3
"""Startup-to-ready time of trainenv: spawn -> first 200 from /readyz on the plain port.

    startup.py REPEATS TRAINENV [serve flags...]

The serve flags must not include --metrics-listen: each repeat gets a fresh free loopback port
for it (and the caller passes --listen 127.0.0.1:0 so the HTTPS port never collides).
/readyz is polled about every millisecond over a new TCP connection. Prints one JSON line:
{"runs_ms": [...], "median_ms": m, "max_ms": x}. Each process is killed (SIGKILL: the drain
delay is not what is measured) and reaped before the next starts.
"""
import json
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def main():
    repeats, cmd = int(sys.argv[1]), sys.argv[2:]
    runs = []
    for _ in range(repeats):
        port = free_port()
        start = time.monotonic()
        proc = subprocess.Popen(cmd + ["--metrics-listen", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while not ready(port):
                if proc.poll() is not None:
                    raise SystemExit(f"startup.py: trainenv exited with {proc.returncode} before ready")
                if time.monotonic() - start > 10:
                    raise SystemExit("startup.py: trainenv not ready within 10 s")
                time.sleep(0.001)
            runs.append((time.monotonic() - start) * 1000)
        finally:
            proc.kill()
            proc.wait(timeout=10)
    print(json.dumps({"runs_ms": [round(r, 2) for r in runs],
                      "median_ms": round(statistics.median(runs), 2), "max_ms": round(max(runs), 2)}))


if __name__ == "__main__":
    main()
