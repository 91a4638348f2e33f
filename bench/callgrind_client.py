#!/usr/bin/env python3
"""A fixed number of POST /mutate requests over C TLS keep-alive connections, for counting the
server's instructions under callgrind (bench/callgrind.sh); the client's own speed does not matter.

  callgrind_client.py --port P --ca CA --conns 64 --requests 2000 [--zero-pid PID] BODY...

Opens C connections and sends one warm-up request on each (TLS handshakes, first-use paths), then,
with --zero-pid, zeroes callgrind's counters in that process (callgrind_control -z), sends
--requests requests spread evenly over the C connections (all in flight together, each connection
sending its share one after the other, the bodies taken in turn), dumps the counters
(callgrind_control -d) and closes. Every answer must be 200.
"""
import argparse
import asyncio
import ssl
import subprocess
import sys


def request(body: bytes) -> bytes:
    return (b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def one(reader, writer, req: bytes):
    writer.write(req)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status != b"200":
        sys.exit(f"status {status.decode()}: {head!r}")
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        sys.exit("no Content-Length in the answer")
    await reader.readexactly(length)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--zero-pid", type=int)
    ap.add_argument("bodies", nargs="+")
    a = ap.parse_args()
    reqs = [request(open(p, "rb").read()) for p in a.bodies]
    ctx = ssl.create_default_context(cafile=a.ca)
    conns = [await asyncio.open_connection("127.0.0.1", a.port, ssl=ctx, server_hostname="localhost")
             for _ in range(a.conns)]
    await asyncio.gather(*(one(r, w, reqs[i % len(reqs)]) for i, (r, w) in enumerate(conns)))
    if a.zero_pid:
        subprocess.run(["callgrind_control", "-z", str(a.zero_pid)], check=True,
                       stdout=subprocess.DEVNULL)
    share = [a.requests // a.conns + (1 if i < a.requests % a.conns else 0) for i in range(a.conns)]

    async def run(i, r, w):
        for k in range(share[i]):
            await one(r, w, reqs[(i + k) % len(reqs)])

    await asyncio.gather(*(run(i, r, w) for i, (r, w) in enumerate(conns)))
    if a.zero_pid:
        subprocess.run(["callgrind_control", "-d", "measured", str(a.zero_pid)], check=True,
                       stdout=subprocess.DEVNULL)
    for _, w in conns:
        w.close()
    print(f"{sum(share)} requests over {a.conns} connections")


asyncio.run(main())
