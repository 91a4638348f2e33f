#!/usr/bin/env python3
"""Renders bench/e2e.sh's results.jsonl as the Markdown summary.

    report.py RESULTS.jsonl

Ratios are trainenv / go: above 1 means trainenv has more of it (throughput: better; latency,
CPU and RSS: worse).
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def ms(us):
    return f"{us / 1000:.2f}"


def ratio(a, b):
    return f"{a / b:.2f}" if b else "n/a"


def main():
    rows = load(sys.argv[1])
    meta = next(r for r in rows if r["kind"] == "meta")

    def runs(kind, **match):
        return [r for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]

    def one(kind, **match):
        found = runs(kind, **match)
        return found[0] if found else None

    def cpu_pct(r, key):
        return 100 * r[key] / (r["duration_us"] / 1e6)

    def other_pct(r):  # CPU used by neither wrk nor the server during the run
        return 100 * (r["machine_cpu_s"] - r["server_cpu_s"] - r["wrk_cpu_s"]) / (r["duration_us"] / 1e6)

    out = []
    w = out.append
    w(f"# trainenv end-to-end benchmark ({meta['date']})")
    w("")
    w(f"- git: {meta['git']}")
    w(f"- machine: {meta['nproc']} CPUs, {meta['cpu']}, kernel {meta['kernel']}")
    w(f"- tools: {meta['wrk']}; {meta['go']}; {meta['openssl']}")
    w(f"- trainenv serve {meta['trainenv_flags']} (threads: one per core)")
    w("- Go peer: bench/peers/go-webhook (net/http, crypto/tls, encoding/json; GOMAXPROCS = cores)")
    w(f"- bodies (bytes): {meta['body_sizes']}")
    w(f"- {meta['duration']} s per wrk run, wrk -t min(2, c) on the same machine: wrk, server and"
      " kernel share the cores; CPU is per run, 100% = one core")
    noisy = [r for r in rows if "machine_cpu_s" in r and other_pct(r) > 15]
    if meta.get("busy_before_pct", 0) > 10 or noisy:
        w(f"- **WARNING: the machine was not quiet**: {meta.get('busy_before_pct')}% of a core busy before the"
          f" load; {len(noisy)} of {sum(1 for r in rows if 'machine_cpu_s' in r)} runs saw more than 15% of a"
          " core used by other processes (column \"other CPU %\"). Treat the numbers as indicative.")
    w("")

    w("## Keep-alive load, typical body")
    w("")
    w("| c | server | req/s | p50 ms | p99 ms | p99.9 ms | server CPU % | CPU us/req | wrk CPU % | other CPU % | peak RSS MiB |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for conc in (1, 8, 64, 256):
        pair = {}
        for server in ("trainenv", "go"):
            r = one("load", server=server, conc=conc)
            if not r:
                continue
            pair[server] = r
            w(f"| {conc} | {server} | {r['rps']:.0f} | {ms(r['p50_us'])} | {ms(r['p99_us'])} | "
              f"{ms(r['p999_us'])} | {cpu_pct(r, 'server_cpu_s'):.0f} | "
              f"{1e6 * r['server_cpu_s'] / r['requests']:.1f} | {cpu_pct(r, 'wrk_cpu_s'):.0f} | "
              f"{other_pct(r):.0f} | {r['hwm_kb'] / 1024:.1f} |")
        if len(pair) == 2:
            t, g = pair["trainenv"], pair["go"]
            ratios.append((conc, t, g))
    w("")

    # The small body: three rounds per server; each server's median run by req/s.
    small = {}
    for conc in (64, 8):
        for server in ("trainenv", "trainenv-info", "go"):
            found = sorted(runs("small", server=server, conc=conc), key=lambda r: r["rps"])
            if found:
                small[(conc, server)] = (found[len(found) // 2], [r["rps"] for r in found])
    if small:
        w("## Small body (a plain pod): the fixed cost of a request, and the log line")
        w("")
        w("trainenv at warn (no line per admission), at info (the default: one line per admission,"
          " standard error read through a pipe) and the Go peer, in turn, three rounds; each row is"
          " that server's median round.")
        w("")
        w("| c | server | req/s (rounds) | p50 ms | p99 ms | server CPU us/req | wrk CPU % | other CPU % |")
        w("|---|---|---:|---:|---:|---:|---:|---:|")
        for (conc, server), (r, all_rps) in small.items():
            w(f"| {conc} | {server} | {r['rps']:.0f} ({', '.join(f'{x:.0f}' for x in all_rps)}) | "
              f"{ms(r['p50_us'])} | {ms(r['p99_us'])} | {1e6 * r['server_cpu_s'] / r['requests']:.1f} | "
              f"{cpu_pct(r, 'wrk_cpu_s'):.0f} | {other_pct(r):.0f} |")
        w("")
        for conc in (64, 8):
            t, i, g = (small.get((conc, s)) for s in ("trainenv", "trainenv-info", "go"))
            if t and i and g:
                t, i, g = t[0], i[0], g[0]
                w(f"- c={conc}: trainenv / go {ratio(t['rps'], g['rps'])} at warn, "
                  f"{ratio(i['rps'], g['rps'])} at info; the info line costs "
                  f"{100 * (1 - i['rps'] / t['rps']):.1f}% of throughput; p99 {ms(t['p99_us'])} ms "
                  f"(warn), {ms(i['p99_us'])} ms (info), go {ms(g['p99_us'])} ms")
        w("")

    w("## New TLS connection per request (Connection: close, c=8)")
    w("")
    w("| server | handshakes/s | p50 ms | p99 ms | accepted connections / requests | server CPU us/handshake | wrk CPU % | other CPU % |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    hs = {}
    for server in ("trainenv", "go"):
        r = one("handshake", server=server)
        if r:
            hs[server] = r
            w(f"| {server} | {r['rps']:.0f} | {ms(r['p50_us'])} | {ms(r['p99_us'])} | "
              f"{r['passive_opens']} / {r['requests']} | {1e6 * r['server_cpu_s'] / r['requests']:.0f} | "
              f"{cpu_pct(r, 'wrk_cpu_s'):.0f} | {other_pct(r):.0f} |")
    w("")

    w("## Latency by body size")
    w("")
    w("| body | c | trainenv req/s | trainenv p50 ms | trainenv p99 ms | go req/s | go p50 ms | go p99 ms | trainenv CPU us/req | go CPU us/req |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in ("small", "typical", "large", "huge"):
        for conc in (1, 8):
            t, g = one("shape", server="trainenv", shape=shape, conc=conc), one("shape", server="go", shape=shape, conc=conc)
            if not (t and g):
                continue
            w(f"| {shape} | {conc} | {t['rps']:.0f} | {ms(t['p50_us'])} | {ms(t['p99_us'])} | "
              f"{g['rps']:.0f} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | "
              f"{1e6 * t['server_cpu_s'] / t['requests']:.0f} | {1e6 * g['server_cpu_s'] / g['requests']:.0f} |")
    huge = one("shape", server="trainenv", shape="huge", conc=1)
    if huge:
        verdict = "meets" if huge["p99_us"] < 10000 else "MISSES"
        w("")
        w(f"Huge body at c=1: trainenv p50 {ms(huge['p50_us'])} ms, p99 {ms(huge['p99_us'])} ms — {verdict} the < 10 ms target.")
    w("")

    w("## Startup, idle connections, RSS over a long run")
    w("")
    st = one("startup")
    if st:
        w(f"- trainenv startup to /readyz 200: median {st['median_ms']} ms, max {st['max_ms']} ms "
          f"over {len(st['runs_ms'])} starts ({', '.join(str(x) for x in st['runs_ms'])})")
    idle = {r["server"]: r for r in runs("idle")}
    for server, r in idle.items():
        delta = r["rss_after_kb"] - r["rss_before_kb"]
        w(f"- {server}: {r['conns']} idle keep-alive TLS connections ({r['established']} established): "
          f"RSS {r['rss_before_kb'] / 1024:.1f} -> {r['rss_after_kb'] / 1024:.1f} MiB "
          f"({delta / r['conns']:.1f} KiB per connection)")
    flat = {r["server"]: r for r in runs("flatness")}
    for server, r in flat.items():
        w(f"- {server}: RSS after {r['requests_first']} requests {r['rss_first_kb'] / 1024:.1f} MiB, after "
          f"{r['requests']} {r['rss_end_kb'] / 1024:.1f} MiB (end / first = {r['rss_end_kb'] / r['rss_first_kb']:.3f})")
    w("")

    w("## trainenv / go")
    w("")
    w("| measure | trainenv | go | trainenv / go |")
    w("|---|---:|---:|---:|")
    for conc, t, g in ratios:
        w(f"| req/s, c={conc} | {t['rps']:.0f} | {g['rps']:.0f} | {ratio(t['rps'], g['rps'])} |")
    for conc, t, g in ratios:
        w(f"| p99 ms, c={conc} | {ms(t['p99_us'])} | {ms(g['p99_us'])} | {ratio(t['p99_us'], g['p99_us'])} |")
    for conc, t, g in ratios:
        tc, gc = t["server_cpu_s"] / t["requests"], g["server_cpu_s"] / g["requests"]
        w(f"| server CPU us/req, c={conc} | {1e6 * tc:.1f} | {1e6 * gc:.1f} | {ratio(tc, gc)} |")
    for conc, t, g in ratios:
        w(f"| peak RSS MiB, c={conc} | {t['hwm_kb'] / 1024:.1f} | {g['hwm_kb'] / 1024:.1f} | {ratio(t['hwm_kb'], g['hwm_kb'])} |")
    if len(hs) == 2:
        w(f"| handshakes/s | {hs['trainenv']['rps']:.0f} | {hs['go']['rps']:.0f} | {ratio(hs['trainenv']['rps'], hs['go']['rps'])} |")
    if len(idle) == 2:
        t, g = idle["trainenv"], idle["go"]
        w(f"| RSS MiB, {t['conns']} idle connections | {t['rss_after_kb'] / 1024:.1f} | {g['rss_after_kb'] / 1024:.1f} | "
          f"{ratio(t['rss_after_kb'], g['rss_after_kb'])} |")
    if len(flat) == 2:
        t, g = flat["trainenv"], flat["go"]
        w(f"| RSS MiB after {t['requests']} requests | {t['rss_end_kb'] / 1024:.1f} | {g['rss_end_kb'] / 1024:.1f} | "
          f"{ratio(t['rss_end_kb'], g['rss_end_kb'])} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
