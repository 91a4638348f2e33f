#!/usr/bin/env python3
"""Holds N idle keep-alive TLS connections open to a server, for its RSS to be read.

    idle_conns.py HOST PORT N CA_FILE

Opens N TLS connections one after another, sends GET /healthz on each and reads the answer
(so the server has done a full handshake and a request on every one), prints "ready N" and
then keeps them all open until stdin closes or 60 s pass (the caller reads the RSS meanwhile).
Exits non-zero if any connection fails.
"""
import http.client
import select
import ssl
import sys


def main():
    host, port, n, ca = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ctx = ssl.create_default_context(cafile=ca)
    conns = []
    for i in range(n):
        c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        if r.status != 200 or r.will_close:
            raise SystemExit(f"idle_conns.py: connection {i}: status {r.status}, will_close={r.will_close}")
        conns.append(c)
    print(f"ready {len(conns)}", flush=True)
    select.select([sys.stdin], [], [], 60)
    for c in conns:
        c.close()


if __name__ == "__main__":
    main()
