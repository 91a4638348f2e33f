#!/usr/bin/python3
"""The real-launcher test: does a job that trainenv wired really start?

For one case (cases/*.yaml), `trainenv preview --job` lays out every pod the controllers would
create, each patched as the webhook would patch it. This harness then runs those pods on a small
emulated cluster built from namespaces (cluster.py: a bridge, a DNS that answers as the cluster
DNS does; kubelet.py and pod_agent.py: each pod's network, hostname, /etc/hosts, resolv.conf,
volumes, users and containers), with the host as the image, and lets the real launcher judge:
torchrun's rendezvous, a python env:// process group, Open MPI's mpirun and MPICH's mpiexec over
real ssh to real sshd, XGBoost's tracker. Every training process prints one E2E-RESULT line; the
case passes when the expected world formed, with ranks 0..N-1 on the expected hosts and a right
all-reduce sum, and every pod that should finish exited 0.

  launch.py [--trainenv BIN] [--policies DIR] [--xgboost DIR] [--keep] [--timeout S]
            [--owner-cache-ttl S] [--no-self-test] [--break nnodes|endpoint|stale] CASE.yaml...

A case with a `scenario:` (scenario.py) instead admits its pods through a real `trainenv serve`
reading their owners from a fake API server (apiserver.py), while the job grows, shrinks or is
resized.

Run as root (namespaces, mounts). See README.md.
"""
import argparse
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

import cluster
import kubelet
from cluster import HarnessError

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LAUNCHERS = ("torchrun", "env", "openmpi", "mpich", "xgboost")
MPI_COMPILERS = {"openmpi": "mpicc.openmpi", "mpich": "mpicc.mpich"}
# The "images" a case can run on: the host's programs plus what the image's Dockerfile adds
# (pod_agent.install_image); here, what differs in the environment and working directory.
IMAGES = {
    "root": {"env": {}, "workingDir": "/"},
    "mpiuser": {"env": {}, "workingDir": "/home/mpiuser"},
    "xgboost": {"env": {"PYTHONPATH": "/opt/xgboost/usr/lib/python3/dist-packages",
                        "LD_LIBRARY_PATH": "/opt/xgboost/usr/lib/x86_64-linux-gnu"},
                "workingDir": "/"},
}
TORCH_API = Path("/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py")
# Std.from_str's lookup that Python 3.11 breaks for "0" (pod_agent.install_image says why).
TORCH_BROKEN_LOOKUP = ("            for s in Std:\n"
                       "                if s == v:\n"
                       "                    return s\n")
TORCH_FIXED_LOOKUP = "            return Std(v)\n"
RESULT = re.compile(r"E2E-RESULT (\{.*\})")
# A case's own break: its pods without the readiness wait trainenv injects (docs/readiness.md).
WAIT_BREAKS = ("no-wait",)
# Debian's MPICH 4.0.2 on UCX 1.13 can leave a rank in MPI_Finalize for good after the world has
# formed and all-reduced (openucx/ucx#8738; about 1 run in 20 here): once every rank reported, the
# pods still running after this many seconds are deleted and the case judged on what they said.
FINALIZE_GRACE = 15
WAIT_CONTAINER = "trainenv-wait"
# The env that wires a process into its job, shown with a failing pod's logs.
WIRING = re.compile(r"PET_|MASTER_|WORLD_SIZE$|RANK$|DMLC_|OMPI_|PRTE_|HYDRA_|I_MPI_|JAX_")
# Log lines worth quoting as the reason of a failure, most telling first: ssh refusing a key,
# an ssh login refused, a name that does not resolve, a connection refused, a Python exception,
# then any complaint.
TELLING = [re.compile(pattern) for pattern in (
    r"bad permissions|are too open",
    r"Permission denied \(",
    r"not known|could not resolve|Could not resolve|unable to get host address|"
    r"Temporary failure in name resolution|No address associated",
    r"Connection refused|No route to host|Connection timed out",
    r"^(?:\w+\.)*\w+(Error|Exception)\b",
    r"(?i)error|failed|unable|cannot|timed? ?out",
)]


class Interrupted(Exception):
    """SIGINT or SIGTERM: the run stops and cleans up."""


class Case:
    KEYS = {"description", "job", "owners", "launcher", "image", "background", "services",
            "expect", "timeout", "scenario", "self_test", "late_names", "late_start",
            "self_test_timeout"}

    def __init__(self, path):
        data = yaml.safe_load(path.read_text())
        unknown = set(data) - self.KEYS
        if unknown:
            raise HarnessError(f"{path}: unknown keys {sorted(unknown)}")
        self.name = path.stem
        self.job = (path.parent / data["job"]).resolve()
        self.owners = (path.parent / data["owners"]).resolve() if data.get("owners") else None
        self.launcher = data["launcher"]
        if self.launcher not in LAUNCHERS:
            raise HarnessError(f"{path}: launcher {self.launcher} is not one of {LAUNCHERS}")
        self.image = data.get("image", "root")
        if self.image not in IMAGES:
            raise HarnessError(f"{path}: image {self.image} is not one of {sorted(IMAGES)}")
        # Roles, or single pods by name, that serve the others (sshd, a TensorBoard): killed once
        # the rest end (an MPI job with no launcher role: every pod but node rank 0's).
        self.background = set(data.get("background", []))
        # The user's own objects applied with the job: headless Services named like a subdomain.
        self.services = data.get("services", [])
        # A job whose size changes while it lives, admitted through `trainenv serve` (scenario.py).
        self.steps = scenario.parse_steps(path, data["scenario"]) if "scenario" in data else None
        # Breaks that the case must fail with, each run after it passed: a scenario's
        # (scenario.BREAKS), or for any case no-wait (the pods without trainenv's wait).
        self.self_tests = data.get("self_test", [])
        allowed = scenario.BREAKS if self.steps else WAIT_BREAKS
        if any(b not in allowed for b in self.self_tests):
            raise HarnessError(f"{path}: self_test takes {allowed}")
        self.self_test_timeout = data.get("self_test_timeout")
        # The cluster being slow, as it is: pods (a role, or single pods by name) whose DNS names
        # the headless Service publishes only this many seconds after it would ("never": not at
        # all), and whose app containers start this many seconds late (a slow image pull).
        self.late_names = data.get("late_names", {})
        self.late_start = data.get("late_start", {})
        expect = data.get("expect") or {}
        # A wait that must give up: {role, within, message: [text the termination message has]}.
        self.wait_gives_up = expect.get("wait_gives_up")
        # A wait that must have waited: {role or pod (its name): ..., log: text its log has}.
        self.waited = expect.get("waited")
        if self.steps is None and "world" not in expect and not self.wait_gives_up:
            raise HarnessError(f"{path}: expect.world is missing")
        self.world = expect.get("world")
        self.hosts = expect.get("hosts")  # the hostname of each rank, in rank order
        self.timeout = data.get("timeout", 60)

    def late(self, table, pod):
        """The pod's entry in late_names or late_start (by its name, else its role), or None."""
        return table.get(pod.created_name, table.get(pod.role))

    def in_background(self, pod):
        return pod.role in self.background or pod.created_name in self.background


class Pod:
    """One pod of the job: its object as trainenv admitted it, its place in the network, and
    its life as the pod agent reports it."""

    def __init__(self, index, answer):
        self.object = answer["object"]
        self.role = answer["role"]
        self.created_name = answer["name"]  # as preview names it: no generated suffix
        metadata, spec = self.object["metadata"], self.object["spec"]
        self.name = metadata["name"] = kubelet.pod_name(metadata)
        self.namespace = metadata.get("namespace", "default")
        self.labels = metadata.get("labels") or {}
        self.hostname = kubelet.hostname_of(spec, self.name)
        self.subdomain = spec.get("subdomain")
        self.index = index
        self.netns = self.address = self.directory = self.process = None
        self.state = "waiting"  # -> started -> running -> succeeded | failed | killed
        self.exits = {}  # container -> exit code
        self.logs = {}  # container -> log file
        self.argv = {}  # container -> its command line
        self.env = {}  # container -> its env, resolved
        self.failure = None
        self.started_at = None  # when it was created (time.monotonic())
        self.exit_times = {}  # container -> when it last exited

    def alive(self):
        return self.state in ("started", "running")

    def kill(self):
        """Deletes the pod: SIGKILL to its agent, the PID 1 of the pod's PID namespace, which
        takes every process of the namespace with it before `unshare` sees it exit. (Were
        `unshare` killed instead, its --kill-child would do the same, only without our waiting
        for it.)

        The pod is "killed" from the moment it is deleted, before any signal: however its
        sandbox ends from here on (`unshare` reports its child's SIGKILL as "sigprocmask unblock
        failed" on these kernels), and even if it ended a moment before with its end not yet
        read, that end is the deletion's, not a failure."""
        if self.process is None:
            return
        if self.alive():
            self.state = "killed"
        if self.process.poll() is not None:
            return
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        agents = children.read_text().split() if children.exists() else []
        for pid in agents:
            os.kill(int(pid), signal.SIGKILL)
        if not agents:
            self.process.kill()
        self.process.wait()

    def handle(self, event):
        if event["event"] == "running":
            self.state = "running"
        elif event["event"] == "exited":
            self.exits[event["container"]] = event["code"]
            self.exit_times[event["container"]] = time.monotonic()
            restarted = event["init"] and self.object["spec"].get("restartPolicy", "Always") != "Never"
            if event["code"] != 0 and self.failure is None and not restarted:
                kind = "init container" if event["init"] else "container"
                self.failure = (f"{kind} {event['container']} exited {event['code']}"
                                f"{telling_line(self.logs.get(event['container']))}")

    def ended(self, code):
        """The agent exited: the pod's containers are done (or its sandbox failed)."""
        if self.state == "killed":
            return
        self.state = "succeeded" if code == 0 else "failed"
        if code != 0 and self.failure is None:
            age = ("" if self.started_at is None
                   else f", {time.monotonic() - self.started_at:.1f} s after it started")
            self.failure = (f"the pod's sandbox failed (exit {code}{age})"
                            f"{telling_line(self.directory / 'agent.log')}")


def telling_line(log):
    """': <the line or two of the log that say best what went wrong>', or ''."""
    if log is None or not Path(log).exists():
        return ""
    lines = [line.strip() for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
    telling = [next((line for line in lines if pattern.search(line)), None) for pattern in TELLING]
    telling = list(dict.fromkeys(line for line in telling if line is not None))[:2]
    return ": " + " / ".join(telling or lines[-1:]) if lines else ""


def excerpt(path, ends=8):
    """A log's first and last lines (where a launcher says what it tried, and how it ended), a
    run of lines that differ only in their numbers (a retry loop's timestamps) shown once."""
    if not Path(path).exists():
        return []
    lines = []
    for line in Path(path).read_text(errors="replace").splitlines():
        shape = re.sub(r"\d+", "#", line)
        if lines and lines[-1][0] == shape:
            lines[-1][2] += 1
        else:
            lines.append([shape, line, 1])
    lines = [line if count == 1 else f"{line} (and {count - 1} more like it)" for _, line, count in lines]
    if len(lines) <= 2 * ends + 1:
        return lines
    return lines[:ends] + [f"... ({len(lines) - 2 * ends} lines)"] + lines[-ends:]


class Run:
    """One case on its own emulated cluster; leaving the `with` block removes all of it."""

    def __init__(self, case, answer, args):
        self.case, self.answer, self.args = case, answer, args
        self.prefix = f"{cluster.RUN_PREFIX}{os.getpid()}"
        self.objects = answer.get("objects", [])
        self.pods = [Pod(index, pod) for index, pod in enumerate(answer["pods"])]
        self.selector = selectors.DefaultSelector()
        self.timed_out = False
        self.all_reported_at = None  # when every rank of an MPICH world had reported
        self.finalize_note = ""
        self.directory = self.network = self.dns = None
        self.image = self.secrets = self.config_maps = None

    def __enter__(self):
        self.directory = Path(tempfile.mkdtemp(prefix=self.prefix + "-", dir=cluster.RUN_DIRECTORY))
        self.network = cluster.Network(self.prefix)
        self.dns = cluster.ClusterDNS(self.network.cluster, self.directory)
        return self

    def __exit__(self, *exc):
        # A second Ctrl-C must not cut the cleanup short.
        handlers = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for pod in self.pods:
                pod.kill()
            self.dns.stop()
            self.network.destroy()
            if self.args.keep:  # renamed out of the te-<pid>- pattern that marks leftovers
                kept = self.directory.with_name("kept-" + self.directory.name)
                self.directory.rename(kept)
                print(f"  kept {kept}")
            else:
                shutil.rmtree(self.directory, ignore_errors=True)
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    # --- set-up -------------------------------------------------------------------------------

    def prepare(self):
        self.prepare_cluster()
        for pod in self.pods:
            self.add_pod(pod)

    def prepare_cluster(self):
        """The run's directory, image, Secrets and ConfigMaps, the network and the cluster DNS:
        everything but the pods."""
        # The agent runs from the run's directory: a checkout under /tmp would vanish behind the
        # pod's own /tmp before the agent starts the containers.
        shutil.copy(HERE / "pod_agent.py", self.directory / "pod_agent.py")
        self.image = self._image()
        self.secrets = self._ssh_secrets()
        self.config_maps = {(o["metadata"].get("namespace", "default"), o["metadata"]["name"]):
                            kubelet.config_map_data(o) for o in self.objects if o["kind"] == "ConfigMap"}
        self.network.create()
        self.dns.start()

    def add_pod(self, pod):
        """The pod's network namespace and its plan (it starts later, in execute or a scenario)."""
        pod.netns, pod.address = self.network.add_pod(pod.index)
        self._write_plan(pod, self.image, self.secrets, self.config_maps)

    def _image(self):
        """The run's image content: /opt/train (the pods' programs, the MPI check built with the
        case's MPI), the torchrun fix, and the unpacked XGBoost for the xgboost image."""
        image_directory = self.directory / "image"
        train = image_directory / "train"
        shutil.copytree(HERE / "pods", train, ignore=shutil.ignore_patterns("*.c"))
        compiler = MPI_COMPILERS.get(self.case.launcher)
        if compiler:
            cluster.run(compiler, "-O2", "-o", str(train / "mpi_check"), str(HERE / "pods" / "mpi_check.c"))
        image = {"name": self.case.image, "train": str(train), **IMAGES[self.case.image],
                 "trainenv": str(Path(self.args.trainenv).resolve())}
        source = TORCH_API.read_text() if TORCH_API.exists() else ""
        if TORCH_BROKEN_LOOKUP in source:
            image["torchApi"] = str(image_directory / "torch-api.py")
            Path(image["torchApi"]).write_text(source.replace(TORCH_BROKEN_LOOKUP, TORCH_FIXED_LOOKUP))
        if self.case.image == "xgboost":
            if not self.args.xgboost or not (Path(self.args.xgboost) / "usr").is_dir():
                raise HarnessError(f"the xgboost image needs XGBoost unpacked at {self.args.xgboost} "
                                   "(scripts/dev.sh deps puts it in build-deps/xgboost)")
            image["xgboost"] = str(Path(self.args.xgboost).resolve())
        return image

    def _ssh_secrets(self):
        """The job's SSH Secret, one fresh key pair per run, when a pod mounts it:
        `<job>-mpi-ssh-auth` (keys ssh-privatekey, ssh-publickey), as Kubeflow Trainer creates it
        for a TrainJob and a user creates it for a hand-written MPI job; `<job>-ssh` (id_rsa,
        id_rsa.pub, config), as Volcano's ssh plugin creates it (ssh.go: its config turns off
        host key checking). Any other Secret does not exist."""
        job = self.answer["name"]
        mounted = {v.get("secret", {}).get("secretName")
                   for pod in self.pods for v in pod.object["spec"].get("volumes", [])}
        secrets = {}
        for name in (f"{job}-mpi-ssh-auth", f"{job}-ssh"):
            if name not in mounted:
                continue
            keys = self.directory / "keys" / name
            keys.mkdir(parents=True)
            cluster.run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name,
                        "-f", str(keys / "id"))
            private, public = (keys / "id").read_bytes(), (keys / "id.pub").read_bytes()
            if name.endswith("-mpi-ssh-auth"):
                data = {"ssh-privatekey": private, "ssh-publickey": public}
            else:
                data = {"id_rsa": private, "id_rsa.pub": public,
                        "config": b"StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"}
            secrets.update({(pod.namespace, name): data for pod in self.pods})
        return secrets

    def _write_plan(self, pod, image, secrets, config_maps):
        """Everything the kubelet decides for the pod, written where its agent reads it."""
        spec = pod.object["spec"]
        pod.directory = self.directory / "pods" / pod.name
        (pod.directory / "logs").mkdir(parents=True)
        files = {
            "/etc/hosts": kubelet.hosts_file(pod.address, pod.hostname, pod.subdomain, pod.namespace,
                                             spec.get("hostAliases")),
            "/etc/resolv.conf": kubelet.resolv_conf(spec, pod.namespace),
            "/etc/hostname": pod.hostname + "\n",
        }
        for target, text in files.items():
            (pod.directory / Path(target).name).write_text(text)
        volumes = kubelet.Volumes(pod.object, pod.address, pod.directory / "volumes", secrets,
                                  config_maps).materialize()

        def plans(containers, kind):
            result = []
            for container in containers:
                if kind == "init" and container.get("restartPolicy") == "Always":
                    raise HarnessError(f"pod {pod.name}: sidecar init container {container['name']} "
                                       "is not emulated")
                log = pod.directory / "logs" / f"{container['name']}.log"
                pod.logs[container["name"]] = log
                result.append(kubelet.container_plan(pod.object, container, pod.address, volumes, log))
                # The file the kubelet mounts at terminationMessagePath, read back as the
                # container's termination message; trainenv's own image runs its binary.
                result[-1]["terminationLog"] = str(pod.directory / f"termination-{container['name']}")
                Path(result[-1]["terminationLog"]).touch(mode=0o666)
                os.chmod(result[-1]["terminationLog"], 0o666)
                result[-1]["trainenvImage"] = kubelet.is_trainenv_image(container.get("image", ""))
                pod.argv[container["name"]] = result[-1]["argv"]
                pod.env[container["name"]] = result[-1]["env"]
            return result

        plan = {"directory": str(pod.directory), "hostname": pod.hostname, "image": image,
                "restartPolicy": spec.get("restartPolicy", "Always"),
                "startDelay": self.case.late(self.case.late_start, pod) or 0,
                "files": {target: str(pod.directory / Path(target).name) for target in files},
                "initContainers": plans(spec.get("initContainers", []), "init"),
                "containers": plans(spec["containers"], "main")}
        (pod.directory / "plan.json").write_text(json.dumps(plan, indent=1))

    # --- running ----------------------------------------------------------------------------

    def _start(self, pod):
        agent_log = open(pod.directory / "agent.log", "wb")
        try:
            pod.process = subprocess.Popen(
                ["ip", "netns", "exec", pod.netns,
                 "unshare", "--uts", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
                 "--propagation", "private",
                 sys.executable, "-I", str(self.directory / "pod_agent.py"), "pod",
                 str(pod.directory / "plan.json")],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=agent_log,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
                preexec_fn=cluster.die_with_parent, start_new_session=True)
        finally:
            agent_log.close()
        self.selector.register(pod.process.stdout, selectors.EVENT_READ, pod)

    def _dependencies(self):
        """role -> [(role it waits for, "Complete" | "Ready")], from the JobSet's dependsOn."""
        waits = {}
        for jobset in (o for o in self.objects if o["kind"] == "JobSet"):
            for replicated in jobset["spec"].get("replicatedJobs", []):
                waits[replicated["name"]] = [(d["name"], d["status"])
                                             for d in replicated.get("dependsOn", [])]
        return waits

    def _startable(self, pod, waits):
        """JobSet creates a replicatedJob's Jobs once those it dependsOn are Complete (all their
        pods succeeded) or Ready (all their pods running)."""
        for role, status in waits.get(pod.role, []):
            ready = ("succeeded",) if status == "Complete" else ("running", "succeeded")
            if not all(p.state in ready for p in self.pods if p.role == role):
                return False
        return True

    def _dns_records(self):
        """What the EndpointSlice controller and the cluster DNS make of the headless Services:
        `<svc>.<ns>.svc` for each selected pod, and `<hostname>.<svc>.<ns>.svc` for a selected
        pod with spec.hostname whose subdomain is the Service. A pod counts while it lives, from
        its creation if the Service publishes not-ready addresses, else once it runs."""
        records = {}
        services = [o for o in self.objects + self.case.services
                    if o["kind"] == "Service" and o["spec"].get("clusterIP") == "None"]
        for service in services:
            name = service["metadata"]["name"]
            namespace = service["metadata"].get("namespace", "default")
            selector = service["spec"].get("selector") or {}
            listed = ("started", "running") if service["spec"].get("publishNotReadyAddresses") else ("running",)
            for pod in self.pods:
                if (pod.namespace != namespace or not selector or pod.state not in listed
                        or any(pod.labels.get(k) != v for k, v in selector.items())
                        or self._named_late(pod)):
                    continue
                domain = f"{name}.{namespace}.svc.{cluster.CLUSTER_DOMAIN}"
                records.setdefault(domain, []).append(pod.address)
                if pod.subdomain == name and pod.object["spec"].get("hostname"):
                    records[f"{pod.hostname}.{domain}"] = [pod.address]
        return records

    def _named_late(self, pod):
        """Whether the pod's name is not published yet (late_names)."""
        late = self.case.late(self.case.late_names, pod)
        return late is not None and (late == "never" or time.monotonic() - pod.started_at < late)

    def execute(self):
        """Starts the pods as their dependencies allow and follows them until every pod that
        should finish has (then the background pods are killed), one fails, or time runs out."""
        waits = self._dependencies()
        deadline = time.monotonic() + self.case.timeout
        finishing = [p for p in self.pods if not self.case.in_background(p)]
        while True:
            starting = [p for p in self.pods if p.state == "waiting" and self._startable(p, waits)]
            for pod in starting:
                pod.state = "started"  # created: a Service that publishes not-ready pods lists it
                pod.started_at = time.monotonic()
            self.dns.publish(self._dns_records())
            for pod in starting:
                self._start(pod)
            # A case whose waits must give up goes on until one of that role has: another pod's
            # own wait (the master's, on its own name) may give up first.
            gives_up = self.case.wait_gives_up
            if any(p.state == "failed" and (not gives_up or p.role == gives_up["role"])
                   for p in self.pods):
                return
            if all(p.state == "succeeded" for p in finishing):
                return
            if self._hung_in_finalize(finishing):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return
            self.poll(min(remaining, 1.0))

    def _hung_in_finalize(self, finishing):
        """An MPICH world that formed, all-reduced and reported, whose launcher has not ended
        FINALIZE_GRACE s later: a rank stuck in MPI_Finalize (openucx/ucx#8738), not a wiring
        fault. Deletes the pods still running and says so in the verdict."""
        if self.case.launcher != "mpich" or not self.case.world:
            return False
        if len(self.results()) < self.case.world:
            return False
        now = time.monotonic()
        if self.all_reported_at is None:
            self.all_reported_at = now
        if now - self.all_reported_at < FINALIZE_GRACE:
            return False
        stuck = [p for p in finishing if p.alive()]
        for pod in stuck:
            pod.kill()
        self.finalize_note = (f" (every rank reported; {', '.join(p.name for p in stuck)} still ran "
                              f"{FINALIZE_GRACE} s later, a rank stuck in MPI_Finalize: "
                              "openucx/ucx#8738, deleted)")
        return True

    def poll(self, timeout):
        """Takes in what the pod agents report within `timeout` seconds."""
        for key, _ in self.selector.select(timeout=timeout):
            pod = key.data
            line = key.fileobj.readline()
            if line:
                pod.handle(json.loads(line))
            else:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()
                pod.ended(pod.process.wait())

    # --- judging -------------------------------------------------------------------------------

    def results(self):
        found = []
        for pod in self.pods:
            for log in pod.logs.values():
                if log.exists():
                    found += [json.loads(m.group(1)) for m in RESULT.finditer(log.read_text(errors="replace"))]
        return found

    def verdict(self):
        """(passed, what to say after PASS/FAIL, detail lines for a failure)."""
        if self.case.wait_gives_up:
            return self._wait_verdict()
        failed = [p for p in self.pods if p.failure]
        if failed:
            first = failed[0]
            return False, f"pod {first.name} ({first.role}): {first.failure}", self._details(failed)
        if self.timed_out:
            running = [p for p in self.pods if p.alive() and not self.case.in_background(p)]
            waiting = [p for p in self.pods if p.state == "waiting"]
            containers = [(p, c, log) for p in running for c, log in p.logs.items() if c not in p.exits]
            what = ", ".join(f"{p.name} ({c})" for p, c, _ in containers)
            if waiting:
                what += f"; never started: {', '.join(p.name for p in waiting)}"
            if containers:  # what the first of them was waiting for, in its own words
                pod, container, log = containers[0]
                what += f" — {pod.name}/{container}{telling_line(log)}"
            return (False, f"timed out after {self.case.timeout:g} s, still running: {what}",
                    self._details(running + [p for p in self.pods if p not in running + waiting]))
        problems = self._check_results() + self._check_waited()
        if problems:
            return False, problems[0], problems[1:] + self._details(self.pods)
        world = self.case.world
        return True, f"world {world}, ranks 0..{world - 1}{self.finalize_note}", []

    def _check_waited(self):
        """expect.waited: the pods of that role (or that pod) sat in their wait, saying what they
        waited for."""
        if not self.case.waited:
            return []
        who, text = self.case.waited.get("pod") or self.case.waited["role"], self.case.waited["log"]
        matched = [p for p in self.pods if who in (p.role, p.created_name)]
        problems = [] if matched else [f"expect.waited: no pod is {who!r}"]
        for pod in matched:
            log = pod.logs.get(WAIT_CONTAINER)
            said = log.read_text(errors="replace") if log and log.exists() else ""
            if text not in said:
                problems.append(f"{pod.name}: its {WAIT_CONTAINER} log does not say {text!r}")
        return problems

    def _wait_verdict(self):
        """expect.wait_gives_up: a pod of that role ended its wait with 75 within the bound, its
        termination message naming what it waited for; nothing else failed."""
        expected = self.case.wait_gives_up
        gave_up = [p for p in self.pods if p.role == expected["role"] and p.exits.get(WAIT_CONTAINER) == 75]
        others = [p for p in self.pods if p.failure and p.exits.get(WAIT_CONTAINER) != 75]
        if others:
            return False, f"pod {others[0].name} ({others[0].role}): {others[0].failure}", self._details(others)
        if not gave_up:
            return False, f"no {expected['role']} pod's {WAIT_CONTAINER} exited 75", self._details(self.pods)
        pod = gave_up[0]
        took = pod.exit_times[WAIT_CONTAINER] - pod.started_at
        message = Path(pod.directory / f"termination-{WAIT_CONTAINER}").read_text(errors="replace")
        missing = [text for text in expected.get("message", []) if text not in message]
        if took > expected["within"]:
            return False, f"{pod.name} gave up after {took:.1f} s, later than {expected['within']} s", []
        if missing:
            return False, f"{pod.name}'s termination message lacks {missing[0]!r}: {message!r}", []
        first = message.splitlines()[1] if len(message.splitlines()) > 1 else message
        return True, f"{pod.name} gave up after {took:.1f} s (exit 75): {first}", []

    def _check_results(self):
        world, results = self.case.world, self.results()
        problems = []
        if len(results) != world:
            hosts = {r["host"] for r in results}
            per_host = f" ({len(results) / len(hosts):g} per pod)" if hosts else ""
            problems.append(f"{len(results)} processes reported{per_host}, expected {world}")
        ranks = sorted(r["rank"] for r in results)
        if ranks != list(range(len(results))):
            problems.append(f"ranks {ranks}, expected 0..{len(results) - 1} once each")
        expected_sum = world * (world + 1) // 2
        for r in sorted(results, key=lambda r: r["rank"]):
            if r["world"] != world:
                problems.append(f"rank {r['rank']} on {r['host']} saw world {r['world']}, expected {world}")
            if r["sum"] != expected_sum:
                problems.append(f"rank {r['rank']} on {r['host']} got sum {r['sum']}, expected {expected_sum}")
            if self.case.hosts and r["rank"] < len(self.case.hosts) and r["host"] != self.case.hosts[r["rank"]]:
                problems.append(f"rank {r['rank']} ran on {r['host']}, expected {self.case.hosts[r['rank']]}")
        return problems

    def _details(self, pods):
        lines = []
        for pod in pods:
            lines.append(f"pod {pod.name} ({pod.role}, {pod.address}, {pod.state}):")
            lines += [f"  agent | {line}" for line in excerpt(pod.directory / "agent.log", 3)]
            for container, log in pod.logs.items():
                status = f"exit {pod.exits[container]}" if container in pod.exits else "running"
                lines.append(f"  {container} ({status}): $ {' '.join(pod.argv[container])}")
                wiring = [f"{k}={v}" for k, v in pod.env[container].items() if WIRING.match(k)]
                if wiring:
                    lines.append(f"    env: {' '.join(wiring)}")
                lines += [f"    | {line}" for line in excerpt(log)]
        searches = {search for p in self.pods for line in (p.directory / "resolv.conf").read_text().splitlines()
                    if line.startswith("search ") for search in line.split()[1:]}
        unresolved = self.dns.unresolved({p.address: p.hostname for p in self.pods}, searches)
        if unresolved:
            lines.append(f"names the cluster DNS answered NXDOMAIN: {', '.join(unresolved)}")
        return lines


def preview(args, case):
    return preview_file(args, case.job, case.owners)


def preview_file(args, job, owners):
    argv = [args.trainenv, "preview", "--job", "-f", str(job), "-o", "json", "--policies", args.policies]
    if owners:
        argv += ["--owners", str(owners)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: its own checks found problems; the launcher judges
        raise HarnessError(f"trainenv preview --job exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def layout_of(answer):
    counts = {}
    for pod in answer["pods"]:
        counts[pod["role"]] = counts.get(pod["role"], 0) + 1
    return f"{answer['kind']} " + " + ".join(f"{role} {n}" for role, n in counts.items())


def run_case(path, args):
    """Runs one case and prints its summary line (and, on failure, what the pods said)."""
    started = time.monotonic()
    name, layout, launcher = path.stem, "?", "?"
    details = []
    try:
        case = Case(path)
        case.timeout = args.timeout or case.timeout
        launcher = case.launcher
        if case.steps is not None:
            return scenario.run_scenario(path, args, case)
        if args.break_:
            raise HarnessError(f"--break applies to scenarios only, and {name} is none")
        answer = preview(args, case)
        layout = layout_of(answer)
        for problem in answer.get("problems", []):
            print(f"  preview --job: {problem['message']} (pods: {', '.join(problem.get('pods', []))})")
        denied = [p for p in answer["pods"] if not p["allowed"]]
        if denied:
            passed, said = False, f"trainenv denied pod {denied[0]['name']}: {denied[0]['message']}"
        else:
            with Run(case, answer, args) as run:
                run.prepare()
                run.execute()
                passed, said, details = run.verdict()
            if passed and not args.no_self_test:
                for name_of_break in case.self_tests:
                    passed, note = self_test(case, answer, args, name_of_break)
                    said += f"; {note}"
                    if not passed:
                        break
    except HarnessError as error:
        passed, said = False, f"harness: {error}"
    except Interrupted:
        print(f"launch: {name} ({layout}, {launcher}): INTERRUPTED after "
              f"{time.monotonic() - started:.1f} s (cleaned up)")
        raise
    print(f"launch: {name} ({layout}, {launcher}): {'PASS' if passed else 'FAIL'} in "
          f"{time.monotonic() - started:.1f} s — {said}")
    for line in details:
        print(f"  {line}")
    sys.stdout.flush()
    return passed


def self_test(case, answer, args, name_of_break):
    """Runs the case again with its pods broken as `name_of_break` says; it must fail. (passed,
    what to say)."""
    broken = json.loads(json.dumps(answer))
    if name_of_break == "no-wait":
        for pod in broken["pods"]:
            spec = pod["object"]["spec"]
            spec["initContainers"] = [c for c in spec.get("initContainers", [])
                                      if c["name"] != WAIT_CONTAINER]
    saved = case.timeout
    case.timeout = case.self_test_timeout or case.timeout
    try:
        with Run(case, broken, args) as run:
            run.prepare()
            run.execute()
            failed_too, said, _ = run.verdict()
    finally:
        case.timeout = saved
    if failed_too:
        return False, f"self-test {name_of_break}: PASSED, but it must fail (the case does not need the wait)"
    return True, f"self-test {name_of_break} fails as it must ({said[:160]})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="+", type=Path, help="cases/*.yaml")
    parser.add_argument("--trainenv", default=str(REPO / "build" / "trainenv"))
    parser.add_argument("--policies", default=str(REPO / "policies"))
    parser.add_argument("--xgboost", default=str(REPO / "build-deps" / "xgboost"),
                        help="XGBoost unpacked from Debian's packages (scripts/dev.sh deps)")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (logs, plans)")
    parser.add_argument("--timeout", type=float, help="seconds, instead of the case's own (60 by default)")
    parser.add_argument("--owner-cache-ttl", type=float, default=scenario.OWNER_CACHE_TTL,
                        help="scenarios: trainenv serve's --owner-cache-ttl (default %(default)g s, "
                             "longer than any scenario: a pod admitted after a resize must be wired "
                             "from the owners trainenv reads again, not from an expired cache)")
    parser.add_argument("--no-self-test", action="store_true",
                        help="skip the case's self_test runs")
    parser.add_argument("--break", dest="break_", choices=scenario.BREAKS,
                        help="scenarios: edit into the admitted pods what trainenv must not answer "
                             "(a numeric PET_NNODES, the short rendezvous endpoint, the stale value "
                             "kept); the scenario must then fail, and the exit code says whether it did")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("launch.py: needs root (network namespaces, mounts): skipped")
        sys.exit(77)  # ctest's SKIP_RETURN_CODE

    def interrupt(signum, frame):
        raise Interrupted()

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    for leftover in cluster.remove_stale_runs():
        print(f"launch: removed {leftover}, left by a run that was killed")
    try:
        passed = [run_case(path, args) for path in args.cases]
    except Interrupted:
        sys.exit(130)
    sys.exit(0 if all(passed) else 1)


# scenario.py builds on this module (its run is a Run): imported once all of it is defined, and
# as this same module when it runs as the program, not as a second copy.
if __name__ == "__main__":
    sys.modules.setdefault("launch", sys.modules["__main__"])
import scenario  # noqa: E402

if __name__ == "__main__":
    main()
