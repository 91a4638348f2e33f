#!/usr/bin/env python3
"""Check trainenv against the corpus of real published training manifests.

Each directory under the corpus holds:
  job.yaml     what a user would give trainenv (the published job, hand-wiring removed)
  expect.json  the values the published author wired by hand, per pod
  owners.yaml  (optional) owner objects for `--owners`

For every entry this runs `trainenv preview --job -f job.yaml -o json` and checks,
for every pod in expect.json, that the admitted pod's env (the container that got
trainenv's values; the last entry of a name wins, as the kubelet does) carries the
expected value of every listed variable, that the launcher's hostfile lists the
expected hosts in order, and that preview's `.ok` is true -- or, when expect.json says
"refused": "<text>", that the job (or one of its pods) is refused with that text.

Usage:
  python3 tests/corpus/check.py --binary build/trainenv [--policies DIR] [--corpus tests/corpus] [ID...]

Prints one line per entry and a summary; exits 1 if any entry failed.
Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys

TIMEOUT_SECONDS = 60
HOSTFILE_ANNOTATION = "trainenv.io/hostfile"


def env_of(container):
    """The container's env as the kubelet resolves names: the last entry of a name wins."""
    values = {}
    for entry in container.get("env") or []:
        name = entry.get("name")
        if name is None:
            continue
        if "value" in entry:
            values[name] = entry.get("value")
        elif "valueFrom" in entry:
            values[name] = {"valueFrom": entry["valueFrom"]}
        else:
            values[name] = ""
    return values


def target_container(pod, names):
    """The container that got trainenv's values.

    First the container whose env gained one of `names` at admission (present in the
    admitted pod, absent from the pod as created); else the first container holding one
    of `names`; else the first container.
    """
    admitted = ((pod.get("object") or {}).get("spec") or {}).get("containers") or []
    created = ((pod.get("created") or {}).get("spec") or {}).get("containers") or []
    created_by_name = {c.get("name"): c for c in created}
    for c in admitted:
        before = env_of(created_by_name.get(c.get("name"), {}))
        after = env_of(c)
        if any(n in after and (n not in before or before[n] != after[n]) for n in names):
            return c
    for c in admitted:
        if any(n in env_of(c) for n in names):
            return c
    return admitted[0] if admitted else {}


def hostfile_hosts(pod):
    """Hosts of the hostfile trainenv wrote into the pod's annotation, in order."""
    annotations = ((pod.get("object") or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(HOSTFILE_ANNOTATION)
    if text is None:
        return None
    hosts = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        host = line.split()[0]
        # Intel MPI / MPICH lines are host:slots
        if ":" in host:
            host = host.split(":", 1)[0]
        hosts.append(host)
    return hosts


def show(value):
    if value is None:
        return "<absent>"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return json.dumps(value)


def check_entry(binary, corpus, entry_id, policies=None):
    """Returns a list of failure strings (empty when the entry passes)."""
    directory = os.path.join(corpus, entry_id)
    expect_path = os.path.join(directory, "expect.json")
    job_path = os.path.join(directory, "job.yaml")
    try:
        with open(expect_path, encoding="utf-8") as f:
            expect = json.load(f)
    except (OSError, ValueError) as e:
        return ["expect.json unreadable: %s" % e]
    if not os.path.exists(job_path):
        return ["job.yaml missing"]

    cmd = [binary, "preview", "--job", "-f", job_path, "-o", "json"]
    if policies:
        cmd += ["--policies", policies]
    owners = os.path.join(directory, "owners.yaml")
    if os.path.exists(owners):
        cmd += ["--owners", owners]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return ["preview did not finish within %d s" % TIMEOUT_SECONDS]
    except OSError as e:
        return ["cannot run %s: %s" % (binary, e)]

    try:
        result = json.loads(run.stdout)
    except ValueError:
        result = None

    refused = expect.get("refused")
    if refused is not None:
        texts = [run.stdout, run.stderr]
        if isinstance(result, dict):
            for pod in result.get("pods") or []:
                if not pod.get("allowed", True):
                    texts.append(pod.get("message") or "")
        if run.returncode == 0 and not (isinstance(result, dict) and
                                         any(not p.get("allowed", True)
                                             for p in result.get("pods") or [])):
            return ["expected a refusal containing %s, but preview accepted the job" % show(refused)]
        if not any(refused in t for t in texts):
            return ["expected a refusal containing %s, got exit %d: %s" %
                    (show(refused), run.returncode, (run.stderr or run.stdout).strip()[:300])]
        return []

    if not isinstance(result, dict):
        return ["preview exited %d without JSON: %s" %
                (run.returncode, (run.stderr or run.stdout).strip()[:300])]

    failures = []
    pods = {p.get("name"): p for p in result.get("pods") or []}
    for pod_name, variables in sorted((expect.get("pods") or {}).items()):
        pod = pods.get(pod_name)
        if pod is None:
            failures.append("%s missing from preview (pods: %s)" % (pod_name, ", ".join(sorted(pods))))
            continue
        if not pod.get("allowed", True):
            failures.append("%s refused: %s" % (pod_name, pod.get("message")))
            continue
        container = target_container(pod, list(variables))
        env = env_of(container)
        for var, expected in sorted(variables.items()):
            got = env.get(var)
            if got != expected:
                failures.append("%s %s expected %s got %s" % (pod_name, var, show(expected), show(got)))

    for pod_name, expected_hosts in sorted((expect.get("hostfile") or {}).items()):
        pod = pods.get(pod_name)
        if pod is None:
            failures.append("%s missing from preview (hostfile)" % pod_name)
            continue
        if not pod.get("allowed", True):
            if pod_name not in (expect.get("pods") or {}):
                failures.append("%s refused: %s" % (pod_name, pod.get("message")))
            continue
        got = hostfile_hosts(pod)
        if got != expected_hosts:
            failures.append("%s hostfile expected %s got %s" % (pod_name, show(expected_hosts), show(got)))

    if not result.get("ok"):
        problems = result.get("problems") or []
        text = "; ".join(p if isinstance(p, str) else json.dumps(p, sort_keys=True) for p in problems)
        failures.append("preview checks failed (ok=false): %s" % (text or "exit %d" % run.returncode))
    return failures


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="path to the trainenv binary")
    parser.add_argument("--policies", help="policy directory (default: the binary's, policies/)")
    parser.add_argument("--corpus", default=os.path.dirname(os.path.abspath(__file__)),
                        help="corpus directory (default: this script's directory)")
    parser.add_argument("ids", nargs="*", help="entries to check (default: all)")
    args = parser.parse_args(argv)

    ids = args.ids or sorted(
        d for d in os.listdir(args.corpus)
        if os.path.isfile(os.path.join(args.corpus, d, "expect.json")))
    if not ids:
        print("corpus: no entries found in %s" % args.corpus)
        return 1

    passed = failed = 0
    for entry_id in ids:
        failures = check_entry(args.binary, args.corpus, entry_id, args.policies)
        if failures:
            failed += 1
            for failure in failures:
                print("corpus: %s: FAILED: %s" % (entry_id, failure))
        else:
            passed += 1
            print("corpus: %s: ok" % entry_id)
    print("corpus: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
