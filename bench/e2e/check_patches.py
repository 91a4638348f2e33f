#!/usr/bin/env python3
"""Like-for-like check before bench/e2e.sh measures anything.

    check_patches.py RESPONSES_DIR BODY.json...

For each body (an AdmissionReview) there must be RESPONSES_DIR/<server>-<shape>.json from each
server (trainenv and go), as curl saved them. Each response is decoded (base64 JSON Patch),
applied to the request's pod with python-jsonpatch (a strict RFC 6902 applier neither server
shares code with), and the target container's env and ports are compared between the servers:
the same set of env entries (name with value or valueFrom) and the same ports, or exit 1.
"""
import base64
import json
import os
import sys

import jsonpatch

SERVERS = ("trainenv", "go")
TORCH_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
             "PET_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT"}


def target(pod):
    containers = pod["spec"]["containers"]
    return next((c for c in containers if c.get("name") == "node"), containers[0])


def patched_pod(review, response_file):
    with open(response_file, "rb") as f:
        answer = json.load(f)
    resp = answer.get("response") or {}
    uid = review["request"]["uid"]
    if resp.get("uid") != uid or resp.get("allowed") is not True:
        raise SystemExit(f"{response_file}: expected allowed with uid {uid}, got {json.dumps(resp)[:300]}")
    if resp.get("patchType") != "JSONPatch" or not resp.get("patch"):
        raise SystemExit(f"{response_file}: no JSONPatch in the response")
    ops = json.loads(base64.b64decode(resp["patch"]))
    # apply_patch raises on any op that is invalid against the pod (missing parent, bad index).
    return jsonpatch.apply_patch(review["request"]["object"], ops), len(ops)


def env_and_ports(pod):
    c = target(pod)
    env = {json.dumps(e, sort_keys=True) for e in c.get("env", [])}
    ports = {json.dumps(p, sort_keys=True) for p in c.get("ports", [])}
    names = [e["name"] for e in c.get("env", [])]
    return env, ports, names


def main():
    responses, bodies = sys.argv[1], sys.argv[2:]
    failed = False
    for body in bodies:
        shape = os.path.splitext(os.path.basename(body))[0]
        with open(body, "rb") as f:
            review = json.load(f)
        pods, seen = {}, {}
        for server in SERVERS:
            pods[server], nops = patched_pod(review, os.path.join(responses, f"{server}-{shape}.json"))
            seen[server] = env_and_ports(pods[server]) + (nops,)
        (t_env, t_ports, t_names, t_ops), (g_env, g_ports, g_names, g_ops) = seen["trainenv"], seen["go"]
        missing = TORCH_ENV - set(t_names)
        if missing:
            print(f"FAIL {shape}: trainenv did not inject {sorted(missing)}")
            failed = True
        if t_env != g_env or t_ports != g_ports:
            failed = True
            print(f"FAIL {shape}: the servers disagree on the target container")
            for label, a, b in (("env", t_env, g_env), ("ports", t_ports, g_ports)):
                for x in sorted(a - b):
                    print(f"  {label} only in trainenv: {x}")
                for x in sorted(b - a):
                    print(f"  {label} only in go:       {x}")
            continue
        same_pod = pods["trainenv"] == pods["go"]
        print(f"ok   {shape}: {len(t_env)} env, {len(t_ports)} ports on the target container alike; "
              f"ops trainenv={t_ops} go={g_ops}; env order {'same' if t_names == g_names else 'differs'}; "
              f"whole patched pods {'identical' if same_pod else 'differ outside env/ports'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
