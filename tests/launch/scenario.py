"""Scenarios: jobs whose size changes while they live, admitted through a real `trainenv serve`.

A case with a `scenario:` list (cases/elastic-grow-shrink.yaml, cases/trainjob-resized.yaml) does
not take its pods from preview's answer. The harness runs a fake Kubernetes API server
(apiserver.py) that serves the job's objects as `trainenv preview --job -o json` lays them out,
and the real `trainenv serve` reading its pods' owners from it (--kubeconfig). Each pod is created
as its controller creates it (preview's `created`), sent to serve as an AdmissionReview over
HTTPS (POST /mutate, TLS verified against serve's own CA), its JSON Patch applied, and then run
on the emulated cluster as every case's pods are. Between the steps the harness resizes the job
(the objects it serves change), admits and starts more pods, kills some, and waits for the world
that the real launcher forms:

  resize: {PATH: VALUE, ...}  edit the job (`spec.replicatedJobs[node].template.spec.parallelism`:
                              a list entry by its name), lay it out again, serve the new objects
  stale: {pod: I, env: [NAME, ...]}
                              pod I of the layout is created with those env values as its
                              controller wrote them before the last resize
  admit: [I, ...] | all       (or {pods: ..., warnings: {I: TEXT}}: TEXT must be among the
                              warnings serve answered for pod I) admit and start those pods
  world: N                    (or {size: N, rounds: R, hosts: [...], within: S}) wait until the
                              pods alive form one world of N: ranks 0..N-1 once each, one per pod,
                              right sums, after the last admission or kill, each rank R rounds
  kill: [I, ...]              delete those pods (SIGKILL to the whole pod)
  stop: {within: S}           write the stop file the training program watches; every pod alive
                              must then exit 0
  finish: {within: S}         every pod alive must exit 0 (a program that ends by itself)

`--break nnodes|endpoint|stale` edits, after admission, what trainenv must not have answered (a
numeric PET_NNODES, the short `hostname.subdomain` rendezvous endpoint, the stale value kept):
the scenario must then FAIL, and the harness exits 0 only if it did (README.md, "Scenarios").
"""
import base64
import copy
import http.client
import json
import re
import signal
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

import apiserver
import cluster
import launch
from cluster import HarnessError

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
STEP_KINDS = ("resize", "stale", "admit", "world", "kill", "stop", "finish")
BREAKS = ("nnodes", "endpoint", "stale")
STOP_FILE = "STOP"  # in the image's /opt/train: the pods see it appear
OWNER_CACHE_TTL = 600  # long: a pod admitted after a resize is not helped by an expired cache
POLL = 0.2


class StepFailed(Exception):
    """A step of the scenario did not happen as it must: the case fails with this message."""

    def __init__(self, message, pods=()):
        super().__init__(message)
        self.pods = list(pods)


# --- RFC 6902, as the API server applies trainenv's patch -----------------------------------------

def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise HarnessError(f"JSON pointer {path!r} does not start with /")
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _parent(document, tokens, path):
    at = document
    for token in tokens[:-1]:
        if isinstance(at, list):
            if not token.isdigit() or int(token) >= len(at):
                raise HarnessError(f"patch path {path}: no element {token}")
            at = at[int(token)]
        elif isinstance(at, dict) and token in at:
            at = at[token]
        else:
            raise HarnessError(f"patch path {path}: no member {token}")
    return at


def apply_patch(document, operations):
    """Applies add, replace and remove strictly (a missing parent, or a missing target of replace
    or remove, is an error, as in the API server's applier); returns the patched copy."""
    document = copy.deepcopy(document)
    for op in operations:
        kind, path = op["op"], op["path"]
        tokens = _pointer(path)
        if not tokens:
            raise HarnessError(f"patch op {kind} on the whole document")
        parent, last = _parent(document, tokens, path), tokens[-1]
        if isinstance(parent, list):
            if kind == "add" and last == "-":
                parent.append(copy.deepcopy(op["value"]))
                continue
            if not last.isdigit() or int(last) > len(parent) or (kind != "add" and int(last) == len(parent)):
                raise HarnessError(f"patch op {kind} {path}: index {last} out of range")
            index = int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[index]
            else:
                raise HarnessError(f"patch op {kind} is not applied here")
        elif isinstance(parent, dict):
            if kind in ("replace", "remove") and last not in parent:
                raise HarnessError(f"patch op {kind} {path}: no member {last}")
            if kind in ("add", "replace"):
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[last]
            else:
                raise HarnessError(f"patch op {kind} is not applied here")
        else:
            raise HarnessError(f"patch op {kind} {path}: the parent is not an object or array")
    return document


# --- the webhook -----------------------------------------------------------------------------------

class Webhook:
    """`trainenv serve` on 127.0.0.1 (free ports), with a certificate minted by certs/mint.sh and
    the fake API server's kubeconfig; admit() sends it one pod as kube-apiserver does."""

    def __init__(self, args, directory, kubeconfig):
        self.args, self.directory, self.kubeconfig = args, directory, kubeconfig
        self.process = self.port = self.context = None
        self.log = directory / "serve.log"

    def start(self):
        certs = self.directory / "serve-certs"
        cluster.run(str(REPO / "certs" / "mint.sh"), "--days", "1", str(certs))
        self.context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        log = open(self.log, "wb")
        try:
            self.process = subprocess.Popen(
                [self.args.trainenv, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                 "--tls-cert", str(certs / "tls.crt"), "--tls-key", str(certs / "tls.key"),
                 "--policies", self.args.policies, "--kubeconfig", str(self.kubeconfig),
                 "--owner-cache-ttl", f"{self.args.owner_cache_ttl:g}", "--threads", "2", "--drain-delay", "0",
                 "--shutdown-deadline", "5", "--log-format", "text", "--log-level", "debug"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=cluster.die_with_parent, start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + 10
        while self.port is None:
            found = re.search(r"listening https=127\.0\.0\.1:(\d+)", self.log.read_text(errors="replace"))
            if found:
                self.port = int(found.group(1))
            elif self.process.poll() is not None:
                raise HarnessError(f"trainenv serve exited {self.process.returncode}: {self.tail()}")
            elif time.monotonic() > deadline:
                raise HarnessError(f"trainenv serve did not say where it listens within 10 s: {self.tail()}")
            else:
                time.sleep(0.05)

    def tail(self, lines=5):
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return " / ".join(text.strip().splitlines()[-lines:])

    def admit(self, pod):
        """POST /mutate of a CREATE of `pod`: returns (the AdmissionReview's response, the pod
        with its patch applied, or None when it was denied)."""
        uid = str(uuid.uuid4())
        namespace = pod["metadata"].get("namespace", "default")
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
            "object": pod, "oldObject": None, "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)
        try:
            connection.request("POST", "/mutate?timeout=10s", json.dumps(review).encode(),
                               {"Content-Type": "application/json"})
            reply = connection.getresponse()
            body = reply.read()
        except (OSError, ssl.SSLError) as error:
            raise HarnessError(f"POST /mutate to trainenv serve: {error}; serve said: {self.tail()}")
        finally:
            connection.close()
        if reply.status != 200:
            raise HarnessError(f"trainenv serve answered {reply.status}: {body[:300]!r}")
        answer = json.loads(body)
        response = answer.get("response") or {}
        if answer.get("apiVersion") != "admission.k8s.io/v1" or response.get("uid") != uid:
            raise HarnessError(f"trainenv serve answered another review: {body[:300]!r}")
        if not response.get("allowed"):
            return response, None
        admitted = copy.deepcopy(pod)
        if response.get("patch"):
            if response.get("patchType") != "JSONPatch":
                raise HarnessError(f"patchType {response.get('patchType')!r}, expected JSONPatch")
            admitted = apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
        return response, admitted

    def stop(self):
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- the scenario --------------------------------------------------------------------------------

def parse_steps(path, steps):
    """[(kind, arguments)], checked before anything runs."""
    if not isinstance(steps, list) or not steps:
        raise HarnessError(f"{path}: scenario is not a list of steps")
    parsed = []
    for step in steps:
        if isinstance(step, str):
            step = {step: {}}
        if not isinstance(step, dict) or len(step) != 1 or next(iter(step)) not in STEP_KINDS:
            raise HarnessError(f"{path}: scenario step {step!r} is not one of {STEP_KINDS}")
        kind, value = next(iter(step.items()))
        value = {} if value is None else value
        if kind == "admit" and not isinstance(value, dict):
            value = {"pods": value}
        if kind == "world" and not isinstance(value, dict):
            value = {"size": value}
        if kind == "kill" and not isinstance(value, dict):
            value = {"pods": value}
        parsed.append((kind, value))
    return parsed


def set_path(document, dotted, value):
    """document[a][b]...= value for `a.b[name].c`: `[name]` picks the list entry so named."""
    at = document
    tokens = re.findall(r"([^.\[\]]+)(?:\[([^\]]+)\])?", dotted)
    for number, (key, name) in enumerate(tokens):
        last = number == len(tokens) - 1
        if last and not name:
            at[key] = value
            return
        if key not in at:
            raise HarnessError(f"resize: {dotted}: the job has no {key}")
        at = at[key]
        if name:
            entry = next((e for e in at if isinstance(e, dict) and e.get("name") == name), None)
            if entry is None:
                raise HarnessError(f"resize: {dotted}: no entry named {name}")
            at = entry
            if last:
                raise HarnessError(f"resize: {dotted}: names a list entry, not a value")


def target_container(pod):
    """The pod's first container: the one trainenv writes into for these jobs (`node`)."""
    return pod["spec"]["containers"][0]


def env_of(pod):
    return {e["name"]: e.get("value") for e in target_container(pod).get("env", []) if "value" in e}


def set_env(pod, name, value):
    env = target_container(pod).setdefault("env", [])
    for entry in env:
        if entry["name"] == name:
            entry.pop("valueFrom", None)
            entry["value"] = value
            return
    env.append({"name": name, "value": value})


class ScenarioRun(launch.Run):
    """The emulated cluster of launch.Run, with pods added while it runs."""

    def __init__(self, case, args, breaking=None):
        super().__init__(case, {"pods": [], "objects": [], "name": ""}, args)
        self.breaking = breaking  # --break: what to edit into the admitted pods
        self.api = self.webhook = None
        self.layout = self.previous = None  # preview --job's answers: now, before the last resize
        self.job = yaml.safe_load(case.job.read_text())
        self.owners = list(yaml.safe_load_all(case.owners.read_text())) if case.owners else []
        self.by_index = {}  # layout index -> Pod
        self.stale = {}  # layout index -> {env name: the value before the resize}
        self.mark = None  # time.time() of the last admission or kill: worlds count from there
        self.mark_what = ""
        self.sizes, self.formed, self.notes = [], [], []
        self.job_sizes = []  # the job's pod count: laid out, after each resize and each kill
        self.broken = 0  # pods --break edited
        self.admissions = []  # (pod name, what serve read from the API while admitting it)
        self.read_at = {}  # API path -> when serve last read it

    def __exit__(self, *exc):
        handlers = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            if self.webhook is not None:
                self.webhook.stop()
            if self.api is not None:
                self.api.stop()
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
        return super().__exit__(*exc)

    # --- set-up ---------------------------------------------------------------------------------

    def prepare(self):
        self.prepare_cluster()
        self.api = apiserver.FakeAPIServer(self.directory / "apiserver")
        self.api.start()
        apiserver.check_served(self.api)
        self._lay_out(self.job)
        self.webhook = Webhook(self.args, self.directory,
                               self.api.write_kubeconfig(self.directory / "kubeconfig"))
        self.webhook.start()

    def _lay_out(self, job):
        """preview --job of `job`; the fake API server serves its objects (and the owners file's)."""
        path = self.directory / f"job-{len(self.job_sizes)}.yaml"  # kept with --keep
        path.write_text(yaml.safe_dump(job))
        answer = launch.preview_file(self.args, path, self.case.owners)
        for problem in answer.get("problems", []):
            self.notes.append(f"preview --job: {problem['message']} (pods: {', '.join(problem.get('pods', []))})")
        if self.layout is not None:
            before = {apiserver.api_path(o): o["metadata"].get("uid") for o in self.layout["objects"]}
            for obj in answer["objects"]:
                uid = before.get(apiserver.api_path(obj))
                if uid is not None and uid != obj["metadata"].get("uid"):
                    raise HarnessError(f"the resized layout gives {apiserver.api_path(obj)} uid "
                                       f"{obj['metadata'].get('uid')}, it was {uid}: not the same object")
        self.previous, self.layout = self.layout, answer
        self.job_sizes.append(len(answer["pods"]))
        self.answer, self.objects = answer, answer["objects"]
        owners = []
        for obj in self.owners:
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("uid", f"uid-{obj['kind'].lower()}-{obj['metadata']['name']}")
            owners.append(obj)
        self.api.serve(answer["objects"] + owners)

    # --- steps ----------------------------------------------------------------------------------

    def step_resize(self, edits):
        job = copy.deepcopy(self.job)
        for dotted, value in edits.items():
            set_path(job, dotted, value)
        self.job = job
        self._lay_out(job)

    def step_stale(self, spec):
        index, names = spec["pod"], spec["env"]
        if self.previous is None:
            raise HarnessError("stale: no resize came before it, nothing is stale")
        pod = self._layout_pod(index)
        # The controller writes these values into the role's pod template (Trainer: the
        # JobSet's), so every pod the old template made carries the same ones.
        before = next((p for p in self.previous["pods"] if p["role"] == pod["role"]), None)
        if before is None:
            raise HarnessError(f"stale: role {pod['role']} had no pod before the resize")
        old, new = env_of(before["created"]), env_of(pod["created"])
        self.stale[index] = {}
        for name in names:
            if name not in old:
                raise HarnessError(f"stale: {name} was not in {pod['name']}'s env before the resize")
            if old[name] == new.get(name):
                raise HarnessError(f"stale: {name}={old[name]} did not change with the resize")
            self.stale[index][name] = old[name]

    def _layout_pod(self, index):
        if not 0 <= index < len(self.layout["pods"]):
            raise HarnessError(f"pod {index}: the layout has {len(self.layout['pods'])} pods")
        return self.layout["pods"][index]

    def step_admit(self, spec):
        indexes = spec["pods"]
        if indexes == "all":
            indexes = list(range(len(self.layout["pods"])))
        wanted = {int(k): v for k, v in (spec.get("warnings") or {}).items()}
        started = time.time()
        for index in indexes:
            laid_out = self._layout_pod(index)
            if index in self.by_index:
                raise HarnessError(f"admit: pod {index} ({laid_out['name']}) was admitted already")
            created = copy.deepcopy(laid_out["created"])
            for name, value in self.stale.get(index, {}).items():
                set_env(created, name, value)
            since = time.time()
            response, admitted = self.webhook.admit(created)
            self.admissions.append((laid_out["name"], self._reads(since)))
            if admitted is None:
                message = (response.get("status") or {}).get("message", "")
                code = (response.get("status") or {}).get("code")
                raise StepFailed(f"trainenv serve denied {laid_out['name']} ({code}): {message}")
            warnings = response.get("warnings") or []
            if index in wanted and not any(wanted[index] in w for w in warnings):
                raise StepFailed(f"trainenv serve's warnings for {laid_out['name']} lack "
                                 f"{wanted[index]!r}: {warnings or 'none'}")
            for warning in warnings:
                self.notes.append(f"serve warned on {laid_out['name']}: {warning}")
            if admitted != laid_out["object"]:  # the same engine: they must agree
                self.notes.append(f"serve's {laid_out['name']} differs from preview's object")
            self._break(index, admitted)
            pod = launch.Pod(len(self.pods), {"object": admitted, "role": laid_out["role"],
                                              "name": laid_out["name"]})
            self.pods.append(pod)
            self.by_index[index] = pod
            self.add_pod(pod)
        self.mark, self.mark_what = started, "admitting " + ", ".join(
            self._layout_pod(i)["name"] for i in indexes)
        for pod in (self.by_index[i] for i in indexes):
            pod.state = "started"  # created: a Service that publishes not-ready pods lists it
            pod.started_at = time.monotonic()  # late_names count from here
        self.dns.publish(self._dns_records())
        for pod in (self.by_index[i] for i in indexes):
            self._start(pod)

    def _reads(self, since):
        """What serve read from the API server since `since`, each as `jobsets/el`, and for an
        object it had read before within its cache time, that it read it again and when."""
        reads = []
        for t, path, code in self.api.gets(since):
            text = "/".join(path.rsplit("/", 2)[-2:]) + ("" if code == 200 else f" ({code})")
            last = self.read_at.get(path)
            if last is not None and t - last < self.args.owner_cache_ttl:
                text += (f" again, {t - last:.1f} s after it last did (cache time "
                         f"{self.args.owner_cache_ttl:g} s: the cached copy was contradicted, not expired)")
            self.read_at[path] = t
            reads.append(text)
        return reads

    def _break(self, index, pod):
        """--break: what trainenv must not have answered, edited into the admitted pod."""
        what = self.breaking
        env = env_of(pod)
        if what == "nnodes" and ":" in env.get("PET_NNODES", ""):
            set_env(pod, "PET_NNODES", env["PET_NNODES"].split(":")[0])
        elif what == "endpoint" and env.get("PET_RDZV_ENDPOINT"):
            host, port = env["PET_RDZV_ENDPOINT"].rsplit(":", 1)
            set_env(pod, "PET_RDZV_ENDPOINT", ".".join(host.split(".")[:2]) + ":" + port)
        elif what == "stale" and self.stale.get(index):
            for name, value in self.stale[index].items():
                set_env(pod, name, value)
        else:
            return
        self.broken += 1

    def step_kill(self, spec):
        self.mark, self.mark_what = time.time(), "killing " + ", ".join(
            self.by_index[i].name for i in spec["pods"])
        for index in spec["pods"]:
            self.by_index[index].kill()
        self.job_sizes.append(len(self._members()))
        self.dns.publish(self._dns_records())

    def step_world(self, spec, deadline):
        size, hosts, rounds = spec["size"], spec.get("hosts"), spec.get("rounds", 1)
        until = min(deadline, time.monotonic() + spec.get("within", deadline - time.monotonic()))
        what = f"world {size}" + (f" to all-reduce {rounds} rounds" if rounds > 1 else "")
        while True:
            self._check_alive()
            formed = self._world(size, hosts, rounds)
            if formed is not None:
                self.sizes.append(size)
                self.formed.append((self.mark_what, formed[0] - self.mark, formed[1]))
                return
            if time.monotonic() > until:
                raise StepFailed(self._waiting(what), self._members())
            self._wait()

    def step_stop(self, spec, deadline):
        (self.directory / "image" / "train" / STOP_FILE).write_text("stop\n")
        self.step_finish(spec, deadline, "every pod to exit 0 after the stop file")

    def step_finish(self, spec, deadline, what="every pod to exit 0"):
        until = min(deadline, time.monotonic() + spec.get("within", deadline - time.monotonic()))
        while not all(p.state == "succeeded" for p in self._members()):
            self._check_alive(ending=True)
            if time.monotonic() > until:
                raise StepFailed(self._waiting(what), self._members())
            self._wait()

    # --- watching ---------------------------------------------------------------------------------

    def _wait(self):
        self.poll(POLL)
        self.dns.publish(self._dns_records())

    def _members(self):
        """The pods of the job now: admitted and not killed."""
        return [p for p in self.pods if p.state != "killed"]

    def _check_alive(self, ending=False):
        """A pod of the job that failed, or (before the end) ended at all, fails the step."""
        for pod in self._members():
            if pod.failure:
                raise StepFailed(f"pod {pod.name} ({pod.role}): {pod.failure}", self._members())
            if pod.state == "failed":
                raise StepFailed(f"pod {pod.name}: its sandbox failed", self._members())

    def _results(self, pod):
        found = []
        for log in pod.logs.values():
            if log.exists():
                found += [json.loads(m.group(1)) for m in
                          launch.RESULT.finditer(log.read_text(errors="replace"))]
        return found

    def _world(self, size, hosts, rounds):
        """(when every rank of a world of `size` on the pods alive had reported its first
        round, its ranks' hosts) once such a world formed after the mark and every rank reported
        `rounds` rounds in it, else None. One world is one rendezvous: the reports that name the
        same master (torchrun picks a new port on rank 0's host for each). A wrong sum anywhere
        fails at once."""
        members = self._members()
        groups = {}  # master -> rank -> [its reports]
        for pod in members:
            for r in self._results(pod):
                want = r["world"] * (r["world"] + 1) // 2
                if r["sum"] != want:
                    raise StepFailed(f"rank {r['rank']} on {r['host']} got sum {r['sum']} in a world "
                                     f"of {r['world']}, expected {want}", members)
                if r["world"] != size or r.get("t", self.mark) < self.mark:
                    continue
                groups.setdefault(r.get("master"), {}).setdefault(r["rank"], []).append(r)
        for group in groups.values():
            if sorted(group) != list(range(size)):
                continue
            hosts_of = {rank: {r["host"] for r in reports} for rank, reports in group.items()}
            if any(len(h) != 1 for h in hosts_of.values()):
                raise StepFailed(f"one rank of world {size} reported from two hosts: {hosts_of}", members)
            ranked = [next(iter(hosts_of[rank])) for rank in range(size)]
            if sorted(ranked) != sorted(p.hostname for p in members):
                continue
            if hosts and ranked != hosts:
                raise StepFailed(f"world {size} formed with ranks on {', '.join(ranked)}, "
                                 f"expected {', '.join(hosts)}", members)
            if any(len(reports) < rounds for reports in group.values()):
                continue
            first = max(min(r.get("t", time.time()) for r in reports) for reports in group.values())
            return first, ranked
        return None

    def _waiting(self, what):
        """What the step was waiting for and what the pods said meanwhile."""
        seen = []
        for pod in self._members():
            results = [r for r in self._results(pod) if r.get("t", self.mark) >= self.mark]
            latest = results[-1] if results else None
            said = (f"rank {latest['rank']} of world {latest['world']}" if latest
                    else f"no report{launch.telling_line(pod.logs.get('node'))}")
            seen.append(f"{pod.name} ({pod.state}): {said}")
        return (f"timed out waiting for {what} after {self.mark_what} "
                f"({time.time() - self.mark:.1f} s); since then: " + "; ".join(seen))


def run_scenario(path, args, case):
    """Runs a scenario case and prints its summary line (on a failure, what the pods said);
    then, when it passed, its self-tests: the case again with each break of `self_test` in,
    each of which must fail. With --break, only the case with that break in."""
    if args.break_:
        return _run_once(path, args, case, args.break_)
    passed = _run_once(path, args, case, None)
    if passed and not args.no_self_test:
        for what in case.self_tests:
            passed = _run_once(path, args, case, what, self_test=True) and passed
    return passed


def _run_once(path, args, case, breaking, self_test=False):
    started = time.monotonic()
    name, layout, launcher = path.stem, "?", case.launcher
    details, said, passed = [], "", False
    broke_it, failed_step = False, None
    try:
        with ScenarioRun(case, args, breaking) as run:
            deadline = started + case.timeout
            run.prepare()
            try:
                for kind, spec in case.steps:
                    if kind == "resize":
                        run.step_resize(spec)
                    elif kind == "stale":
                        run.step_stale(spec)
                    elif kind == "admit":
                        run.step_admit(spec)
                    elif kind == "kill":
                        run.step_kill(spec)
                    elif kind == "world":
                        run.step_world(spec, deadline)
                    elif kind == "stop":
                        run.step_stop(spec, deadline)
                    elif kind == "finish":
                        run.step_finish(spec, deadline)
                waited = run._check_waited()
                if waited:
                    raise StepFailed(waited[0])
                passed = True
            except StepFailed as failure:
                said, failed_step = str(failure), kind
                details = run._details(failure.pods) if failure.pods else []
                details.append(f"trainenv serve's log ends: {run.webhook.tail(3) if run.webhook else ''}")
            layout, launcher = _describe(run, case)
            broke_it = run.broken > 0
            if passed:
                said = _success_text(run)
            details = [f"admitting {pod}: serve read {_gets_text(gets)}"
                       for pod, gets in run.admissions] + run.notes + details
    except HarnessError as error:
        said = f"harness: {error}"
        passed = None
    verdict = "PASS" if passed else "FAIL"
    if breaking:
        name = f"{name} --break {breaking}"
        if passed is None:
            verdict = "FAIL"
        elif not broke_it:
            verdict, passed, said = "FAIL", None, f"--break {breaking}: nothing in this scenario to break"
        elif not passed and failed_step not in ("world", "stop", "finish"):
            verdict, passed = f"FAIL at its {failed_step} step, before the launcher could judge the " \
                              "break: self-test inconclusive", None
        else:
            # The scenario must fail with the break in: the harness's verdict is inverted.
            verdict = "FAIL (as it must with the break: self-test PASS)" if not passed else \
                "PASS (with the break in: self-test FAIL — the scenario cannot see the breakage)"
            passed = not passed
        if self_test and passed:
            details = []  # the broken run failed as it must: what its pods said is no news
    print(f"launch: {name} ({layout}, {launcher}): {verdict} in {time.monotonic() - started:.1f} s — {said}")
    for line in details:
        print(f"  {line}")
    sys.stdout.flush()
    return bool(passed)


def _describe(run, case):
    """('JobSet node 2 -> 3 -> 2', 'torchrun elastic 2:4') from what happened."""
    kind = run.layout["kind"] if run.layout else "?"
    roles = {p["role"] for p in run.layout["pods"]} if run.layout else set()
    role = next(iter(roles)) if len(roles) == 1 else "pods"
    path = [size for i, size in enumerate(run.job_sizes) if i == 0 or size != run.job_sizes[i - 1]]
    sizes = " -> ".join(str(s) for s in path)
    nnodes = {env_of(p.object).get("PET_NNODES") for p in run.pods}
    launcher = case.launcher
    elastic = next((n for n in nnodes if n and ":" in n), None)
    if elastic:
        launcher += f" elastic {elastic}"
    elif run.stale:
        launcher += " static"
    return f"{kind} {role} {sizes}", launcher


def _success_text(run):
    worlds = ", ".join(str(s) for s in run.sizes)
    first, *rest = run.formed
    text = f"worlds {worlds}; formed in {first[1]:.1f} s"
    if rest:
        text += "; re-rendezvous " + ", ".join(f"{seconds:.1f} s ({what})" for what, seconds, _ in rest)
    return text


def _gets_text(reads):
    return ", ".join(reads) if reads else "nothing (all from its cache)"
