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


def without_empty_sections(lines):
    """Drops the sections a partial run (--floor-only) has nothing for: a heading followed by
    nothing but a table's header."""
    kept, section = [], []

    def flush():
        body = [l for l in section[1:] if l.strip() and not l.startswith("|---")]
        if not section or not section[0].startswith("## ") or len(body) > 1 or (body and not body[0].startswith("|")):
            kept.extend(section)

    for line in lines:
        if line.startswith("## "):
            flush()
            section = []
        section.append(line)
    flush()
    return kept


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
    w(f"- tools: {meta['wrk']}; {meta['go']}; {meta.get('nginx', '')}; {meta['openssl']}")
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

    # The floor runs: per body and connection count, three rounds per server in turn; each
    # figure is that server's median over its rounds.
    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    def cpu_us(r):
        return 1e6 * r["server_cpu_s"] / r["requests"]

    floor = {}
    for shape in ("small", "typical"):
        for conc in (64, 8):
            for server in ("trainenv", "trainenv-info", "go", "nginx"):
                found = runs("floor", server=server, conc=conc, shape=shape)
                if found:
                    floor[(shape, conc, server)] = found
    if floor:
        w("## Against the floor: nginx answering the same bytes, and the Go peer")
        w("")
        w("The floor is nginx (2 workers, no access log) answering each POST with trainenv's own"
          " answer to that body from a static file: TLS, HTTP and the kernel, no JSON work."
          " trainenv at warn (no line per admission), at info (the default: one line per"
          " admission, standard error read through a pipe), the Go peer and the floor ran in"
          " turn, three rounds; each figure is the server's median round (all rounds in brackets).")
        w("")
        w("| body | c | server | req/s (rounds) | p50 ms | p99 ms | server CPU us/req (rounds) | CPU / floor's |")
        w("|---|---|---|---:|---:|---:|---:|---:|")
        for (shape, conc, server), found in floor.items():
            base = floor.get((shape, conc, "nginx"))
            base_cpu = median([cpu_us(r) for r in base]) if base else 0
            cpu = median([cpu_us(r) for r in found])
            rps_rounds = ", ".join(f"{r['rps']:.0f}" for r in found)
            cpu_rounds = ", ".join(f"{cpu_us(r):.1f}" for r in found)
            w(f"| {shape} | {conc} | {server} | {median([r['rps'] for r in found]):.0f} ({rps_rounds}) | "
              f"{ms(median([r['p50_us'] for r in found]))} | {ms(median([r['p99_us'] for r in found]))} | "
              f"{cpu:.1f} ({cpu_rounds}) | {ratio(cpu, base_cpu)} |")
        w("")

        def med(shape, conc, server, key):
            found = floor.get((shape, conc, server))
            if not found:
                return None
            return median([cpu_us(r) if key == "cpu" else r[key] for r in found])

        def target(name, value, bound, fmt, ok):
            if value is None:
                return
            w(f"- {name}: {fmt(value)} (target {bound}): {'met' if ok(value) else 'MISSED'}")

        w("Targets (issue 22), at info unless said:")
        w("")
        for shape, limit in (("small", 2.0), ("typical", 2.5)):
            t, f = med(shape, 64, "trainenv-info", "cpu"), med(shape, 64, "nginx", "cpu")
            if t and f:
                target(f"{shape} body, c=64: trainenv CPU per request / the floor's", t / f,
                       f"<= {limit}x", lambda v: f"{v:.2f}x ({t:.1f} vs {f:.1f} us)", lambda v, l=limit: v <= l)
        for shape in ("small", "typical"):
            t, g = med(shape, 64, "trainenv-info", "rps"), med(shape, 64, "go", "rps")
            if t and g:
                target(f"{shape} body, c=64: trainenv req/s / the Go peer's", t / g, ">= 2x",
                       lambda v: f"{v:.2f}x ({t:.0f} vs {g:.0f})", lambda v: v >= 2)
        for shape in ("small", "typical"):
            p = med(shape, 8, "trainenv-info", "p99_us")
            target(f"{shape} body, c=8: trainenv p99", p, "< 1 ms", lambda v: f"{ms(v)} ms",
                   lambda v: v < 1000)
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
    print("\n".join(without_empty_sections(out)))


if __name__ == "__main__":
    main()
