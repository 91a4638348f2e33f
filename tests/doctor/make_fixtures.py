"""Writes tests/fixtures/doctor/*.json: live jobs as `kubectl get -o json` lists them, for
`trainenv doctor --from` and tests/inputs/test_doctor.cpp.

Each starts from what the controllers and trainenv make of one of examples/jobs (the objects
and admitted pods of `trainenv preview --job -o json`, the runtime from examples/jobs/
runtimes.yaml), made live as the API server shows it: pods named from their generateName with
a uid, scheduled and Running with the kubelet's conditions and container statuses (trainenv-wait
and every init container exited 0), the Services' EndpointSlices as the EndpointSlice controller
writes them (hostname, targetRef, ready/serving/terminating). Then each failure case edits in the
one thing that goes wrong, as the cluster shows it (the Job controller's FailedCreate event, the
kubelet's FailedMount, a waiting reason, a pod condition). The expected findings of each file are
in tests/inputs/test_doctor.cpp.

  /usr/bin/python3 tests/doctor/make_fixtures.py --trainenv build/trainenv

Deterministic: the same binary and examples write the same bytes.
"""
import argparse
import copy
import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLES = REPO / "examples" / "jobs"
OUT = REPO / "tests" / "fixtures" / "doctor"
CREATED = "2026-11-29T09:00:00Z"
STARTED = "2026-11-29T09:00:20Z"


def stable(text, length):
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def uid_of(text):
    h = stable(text, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def preview(trainenv, job):
    """preview --job -o json of `job` (a dict), with the example runtimes as its owners."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(job, f)
        f.flush()
        done = subprocess.run([trainenv, "preview", "--job", "-f", f.name, "-o", "json",
                               "--policies", str(REPO / "policies"),
                               "--owners", str(EXAMPLES / "runtimes.yaml")],
                              capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"preview --job failed: {done.stderr}")
    return json.loads(done.stdout)


def example(name):
    return yaml.safe_load((EXAMPLES / name).read_text())


def running_status(pod, index):
    spec = pod["spec"]
    status = {
        "phase": "Running",
        "hostIP": "10.0.0.7",
        "podIP": f"10.244.{1 + index // 200}.{10 + index % 200}",
        "startTime": CREATED,
        "qosClass": "Burstable",
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": STARTED}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                 "ContainersReady", "PodScheduled")],
        "initContainerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "ready": True, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                      "startedAt": CREATED, "finishedAt": STARTED}}}
            for c in spec.get("initContainers", [])],
        "containerStatuses": [
            {"name": c["name"], "image": c.get("image", ""), "ready": True, "restartCount": 0,
             "started": True, "state": {"running": {"startedAt": STARTED}}}
            for c in spec.get("containers", [])],
    }
    return status


def live_pod(previewed, index, namespace):
    pod = copy.deepcopy(previewed["object"])
    metadata = pod["metadata"]
    base = metadata.get("generateName") or metadata.get("name")
    if metadata.get("generateName"):
        metadata["name"] = base + stable(base + str(index), 5)
    metadata["namespace"] = namespace
    metadata["uid"] = uid_of("pod/" + metadata["name"])
    metadata["creationTimestamp"] = CREATED
    metadata["resourceVersion"] = str(1000 + index)
    pod["spec"]["nodeName"] = f"gpu-node-{index % 3}"
    pod["status"] = running_status(pod, index)
    return pod


def selects(service, pod):
    selector = service["spec"].get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def endpoint_slices(services, pods):
    """What the EndpointSlice controller writes for each Service: every selected pod with an
    address, ready as its Ready condition, listed when Ready or the Service publishes not-ready
    addresses; the pod's hostname when its subdomain is the Service's name."""
    slices = []
    for service in services:
        name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
        not_ready_too = service["spec"].get("publishNotReadyAddresses", False)
        endpoints = []
        for pod in pods:
            status = pod.get("status", {})
            if not selects(service, pod) or not status.get("podIP"):
                continue
            ready = any(c["type"] == "Ready" and c["status"] == "True"
                        for c in status.get("conditions", []))
            endpoint = {"addresses": [status["podIP"]],
                        "conditions": {"ready": ready or not_ready_too, "serving": ready,
                                       "terminating": False},
                        "nodeName": pod["spec"].get("nodeName"),
                        "targetRef": {"kind": "Pod", "name": pod["metadata"]["name"],
                                      "namespace": namespace, "uid": pod["metadata"]["uid"]}}
            if pod["spec"].get("subdomain") == name and pod["spec"].get("hostname"):
                endpoint["hostname"] = pod["spec"]["hostname"]
            endpoints.append(endpoint)
        slices.append({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-{stable(name, 5)}", "namespace": namespace,
                         "uid": uid_of("slice/" + name),
                         "labels": {"kubernetes.io/service-name": name,
                                    "endpointslice.kubernetes.io/managed-by":
                                        "endpointslice-controller.k8s.io"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                                              "uid": service["metadata"].get("uid", ""),
                                              "controller": True, "blockOwnerDeletion": True}]},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": "", "port": None, "protocol": "TCP"}]})
    return slices


def event(kind, name, namespace, reason, message, source, type_="Warning"):
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{stable(reason + message, 16)}", "namespace": namespace},
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace,
                               "apiVersion": "batch/v1" if kind == "Job" else "v1"},
            "reason": reason, "message": message, "type": type_, "count": 3,
            "source": {"component": source},
            "firstTimestamp": CREATED, "lastTimestamp": STARTED}


class Live:
    """A job made live: its objects, pods, Services, EndpointSlices, events."""

    def __init__(self, answer, extra=(), runtime=None):
        self.namespace = answer["namespace"]
        self.objects = [copy.deepcopy(o) for o in answer["objects"] if o["kind"] != "Service"]
        for o in self.objects:
            o["metadata"].setdefault("namespace", self.namespace)
            o["metadata"]["creationTimestamp"] = CREATED
        self.services = [copy.deepcopy(o) for o in answer["objects"] if o["kind"] == "Service"]
        self.services += [copy.deepcopy(s) for s in extra]
        for s in self.services:
            s["metadata"].setdefault("namespace", self.namespace)
            s["metadata"].setdefault("uid", uid_of("service/" + s["metadata"]["name"]))
        self.runtime = runtime
        self.pods = [live_pod(p, i, self.namespace) for i, p in enumerate(answer["pods"])]
        self.events = []

    def pod(self, prefix):
        return next(p for p in self.pods if p["metadata"]["name"].startswith(prefix))

    def items(self):
        runtime = [self.runtime] if self.runtime else []
        return (runtime + self.objects + self.services + self.pods
                + endpoint_slices(self.services, self.pods) + self.events)

    def write(self, name):
        OUT.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                           "items": self.items()}, indent=1, sort_keys=True)
        (OUT / f"{name}.json").write_text(text + "\n")


def runtime_named(name):
    return next(d for d in yaml.safe_load_all((EXAMPLES / "runtimes.yaml").read_text())
                if d and d["metadata"]["name"] == name)


def pretrain_service():
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "pretrain-svc", "namespace": "team-a"},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {"batch.kubernetes.io/job-name": "pretrain"}}}


def conditions_false(pod, *types):
    """The pod's conditions of these types set False, as the kubelet does when they fail."""
    for c in pod["status"]["conditions"]:
        if c["type"] in types:
            c["status"] = "False"


def wait_state(pod, state):
    """Its trainenv-wait's status: state as the kubelet writes it, not ready."""
    for c in pod["status"]["initContainerStatuses"]:
        if c["name"] == "trainenv-wait":
            c["state"] = state
            c["ready"] = False


def app_containers_waiting(pod, reason):
    pod["status"]["containerStatuses"] = [
        {"name": c["name"], "ready": False, "restartCount": 0, "state": {"waiting": {"reason": reason}}}
        for c in pod["spec"]["containers"]]


def set_env(container, name, value):
    env = container.setdefault("env", [])
    env[:] = [e for e in env if e["name"] != name]
    env.append({"name": name, "value": value})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainenv", default=str(REPO / "build" / "trainenv"))
    args = parser.parse_args()
    t = args.trainenv

    # Healthy, one of each owner kind.
    jobset = example("jobset-master-worker.yaml")
    Live(preview(t, jobset)).write("healthy-jobset")
    trainjob = example("trainjob-torch.yaml")
    runtime = runtime_named(trainjob["spec"]["runtimeRef"]["name"])
    Live(preview(t, trainjob), runtime=runtime).write("healthy-trainjob")
    indexed = example("indexed-job.yaml")
    Live(preview(t, indexed), [pretrain_service()]).write("healthy-indexed-job")
    Live(preview(t, example("volcano-job.yaml"))).write("healthy-vcjob")

    # A pod admitted by an older trainenv: no trainenv-wait, its values current. A note only.
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-0-1-")
    pod["spec"]["initContainers"] = [c for c in pod["spec"]["initContainers"]
                                     if c["name"] != "trainenv-wait"]
    pod["status"]["initContainerStatuses"] = []
    live.write("older-trainenv")

    # Stale after a resize: the Indexed Job scaled from 3 to 4 pods (parallelism and completions,
    # as an elastic Indexed Job is); its first three pods keep what they were told for 3.
    old = Live(preview(t, indexed), [pretrain_service()])
    grown = copy.deepcopy(indexed)
    grown["spec"]["parallelism"] = grown["spec"]["completions"] = 4
    live = Live(preview(t, grown), [pretrain_service()])
    live.pods[:3] = old.pods
    live.write("stale-after-resize")

    # A pod created before the webhook: the controller's pod, never admitted.
    answer = preview(t, jobset)
    live = Live(answer)
    index = next(i for i, p in enumerate(answer["pods"]) if p["name"] == "gpt-worker-1-0")
    created = copy.deepcopy(answer["pods"][index])
    created["object"] = created["created"]
    live.pods[index] = live_pod(created, index, live.namespace)
    live.write("not-admitted")

    # A duplicate rank: the user set RANK on the workers' template (trainenv keeps it).
    dup = copy.deepcopy(jobset)
    worker = next(r for r in dup["spec"]["replicatedJobs"] if r["name"] == "worker")
    set_env(worker["template"]["spec"]["template"]["spec"]["containers"][0], "RANK", "1")
    Live(preview(t, dup)).write("duplicate-rank")

    # The Service named like the pods' subdomain selects another job's pods.
    live = Live(preview(t, jobset))
    live.services[0]["spec"]["selector"] = {"jobset.sigs.k8s.io/jobset-name": "gpt-old"}
    live.write("service-selects-other")

    # The pods' subdomain names no Service; the one that selects them has another name.
    live = Live(preview(t, jobset))
    live.services[0]["metadata"]["name"] = "gpt-svc"
    live.services[0]["metadata"]["uid"] = uid_of("service/gpt-svc")
    live.write("subdomain-mismatch")

    # Only ready addresses published, and the master not Ready (its readiness probe waits for
    # the rendezvous): its name is not published, and the workers cannot reach it.
    live = Live(preview(t, jobset))
    live.services[0]["spec"]["publishNotReadyAddresses"] = False
    master = live.pod("gpt-master-0-0-")
    for c in master["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "False"
            c["reason"] = "ContainersNotReady"
    for c in master["status"]["containerStatuses"]:
        c["ready"] = False
    live.write("not-published")

    # trainenv denied the pods of one Job: the Job controller's FailedCreate event.
    live = Live(preview(t, jobset))
    live.pods = [p for p in live.pods if not p["metadata"]["name"].startswith("gpt-worker-1-")]
    live.events.append(event(
        "Job", "gpt-worker-1", live.namespace, "FailedCreate",
        'Error creating: admission webhook "trainenv.trainenv.io" denied the request: trainenv: '
        'annotation trainenv.io/nproc-per-node of the pod is "eight"; expected a whole number '
        'from 1 to 1024, "auto", "gpu" or "cpu"', "job-controller"))
    live.write("denied")

    # A worker's trainenv-wait gave up: the master's name never appeared.
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-0-0-")
    pod["status"]["phase"] = "Failed"
    conditions_false(pod, "Ready", "ContainersReady", "Initialized")
    wait_state(pod, {"terminated": {
        "exitCode": 75, "reason": "Error", "startedAt": CREATED, "finishedAt": STARTED,
        "message": "trainenv wait: gave up after 600 s: 1 of 1 targets did not answer\n"
                   "no DNS record yet (NXDOMAIN): gpt-master-0-0.train-svc (600 s)\n"
                   "Why, and what to do: trainenv doctor jobset/gpt -n team-a\n"}})
    app_containers_waiting(pod, "PodInitializing")
    live.write("wait-timed-out")

    # An MPI launcher whose SSH Secret does not exist: the kubelet cannot mount it.
    deepspeed = example("trainjob-deepspeed.yaml")
    live = Live(preview(t, deepspeed), runtime=runtime_named(deepspeed["spec"]["runtimeRef"]["name"]))
    launcher = live.pod("ds-launcher-0-0-")
    launcher["status"] = {"phase": "Pending", "hostIP": "10.0.0.7", "startTime": CREATED,
                          "conditions": [{"type": "PodScheduled", "status": "True"},
                                         {"type": "Initialized", "status": "False",
                                          "reason": "ContainersNotInitialized"},
                                         {"type": "Ready", "status": "False"}],
                          "initContainerStatuses": [
                              {"name": c["name"], "ready": False, "restartCount": 0,
                               "state": {"waiting": {"reason": "PodInitializing"}}}
                              for c in launcher["spec"].get("initContainers", [])],
                          "containerStatuses": [
                              {"name": c["name"], "ready": False, "restartCount": 0,
                               "state": {"waiting": {"reason": "ContainerCreating"}}}
                              for c in launcher["spec"]["containers"]]}
    live.events.append(event(
        "Pod", launcher["metadata"]["name"], live.namespace, "FailedMount",
        'MountVolume.SetUp failed for volume "mpi-ssh-auth" : secret "ds-mpi-ssh-auth" not found',
        "kubelet"))
    live.write("missing-ssh-secret")

    # A hostNetwork pod left with ClusterFirst: it resolves with the node's DNS.
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-1-1-")
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["dnsPolicy"] = "ClusterFirst"
    live.write("host-network-dns")

    # More of what keeps pods pending, each as the scheduler or kubelet reports it.
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-1-0-")
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 "
                   "nodes are available: 4 No preemption victims found for incoming pod."}]}
    live.write("unschedulable")

    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-0-0-")
    pod["status"]["phase"] = "Pending"
    pod["status"].pop("podIP")
    conditions_false(pod, "Ready", "ContainersReady")
    pod["status"]["containerStatuses"] = [
        {"name": c["name"], "ready": False, "restartCount": 0, "image": "registry.example/gpt:v9",
         "state": {"waiting": {"reason": "ImagePullBackOff",
                               "message": 'Back-off pulling image "registry.example/gpt:v9"'}}}
        for c in pod["spec"]["containers"]]
    live.write("image-pull")

    live = Live(preview(t, jobset))
    pod = live.pod("gpt-master-0-0-")
    pod["status"]["containerStatuses"] = [
        {"name": c["name"], "ready": False, "restartCount": 6,
         "state": {"waiting": {"reason": "CrashLoopBackOff",
                               "message": "back-off 2m40s restarting failed container"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                      "message": "ModuleNotFoundError: No module named 'transformers'"}}}
        for c in pod["spec"]["containers"]]
    conditions_false(pod, "Ready", "ContainersReady")
    live.write("crash-loop")

    # A worker sits in its wait (the master's port does not answer yet).
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-0-1-")
    pod["status"]["phase"] = "Pending"
    conditions_false(pod, "Ready", "ContainersReady", "Initialized")
    wait_state(pod, {"running": {"startedAt": STARTED}})
    app_containers_waiting(pod, "PodInitializing")
    live.write("waiting")

    # A pod past the job's size: the Indexed Job shrank from 4 to 3 and index 3 still runs.
    live = Live(preview(t, indexed), [pretrain_service()])
    bigger = Live(preview(t, grown), [pretrain_service()])
    live.pods.append(bigger.pods[3])
    live.write("no-place")

    # No Service at all for the pods' subdomain.
    live = Live(preview(t, jobset))
    live.services = []
    live.write("no-service")

    # The Service has a cluster IP: no per-pod names.
    live = Live(preview(t, jobset))
    live.services[0]["spec"]["clusterIP"] = "10.96.14.7"
    live.write("service-not-headless")

    # A pod held by a scheduling gate (a controller that has not lifted it yet).
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-1-1-")
    pod["spec"]["schedulingGates"] = [{"name": "example.com/capacity-check"}]
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates"}]}
    live.write("scheduling-gated")

    # A container whose env names a Secret that does not exist.
    live = Live(preview(t, jobset))
    pod = live.pod("gpt-worker-0-0-")
    pod["status"]["phase"] = "Pending"
    conditions_false(pod, "Ready", "ContainersReady")
    pod["status"]["containerStatuses"] = [
        {"name": c["name"], "ready": False, "restartCount": 0,
         "state": {"waiting": {"reason": "CreateContainerConfigError",
                               "message": 'secret "hf-token" not found'}}}
        for c in pod["spec"]["containers"]]
    live.write("container-config")

    # Kueue holds the JobSet suspended: its Workload has no quota reserved yet.
    queued = copy.deepcopy(jobset)
    queued["spec"]["suspend"] = True
    queued["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "team-a-gpus"
    live = Live(preview(t, queued))
    live.pods = []
    owner = live.objects[0]
    live.objects.append({
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "jobset-gpt-5d3a1", "namespace": live.namespace,
                     "uid": uid_of("workload/gpt"),
                     "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": "JobSet",
                                          "name": "gpt", "uid": owner["metadata"]["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": "team-a-gpus", "podSets": []},
        "status": {"conditions": [{
            "type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": "couldn't assign flavors to pod set worker: insufficient unused quota for "
                       "nvidia.com/gpu in flavor a100, 8 more needed",
            "lastTransitionTime": STARTED}]}})
    live.write("queued")

    # Volcano's gang scheduler has not found room for the whole job: its PodGroup is Inqueue and
    # the pods wait, unscheduled.
    vcjob = example("volcano-job.yaml")
    live = Live(preview(t, vcjob))
    for pod in live.pods:
        pod["status"] = {"phase": "Pending"}
    owner = live.objects[0]
    live.objects.append({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "mnist-" + owner["metadata"]["uid"], "namespace": live.namespace,
                     "uid": uid_of("podgroup/mnist"),
                     "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": "Job",
                                          "name": "mnist", "uid": owner["metadata"]["uid"],
                                          "controller": True}]},
        "spec": {"minMember": 4, "queue": "default"},
        "status": {"phase": "Inqueue", "conditions": [{
            "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
            "message": "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 "
                       "minAvailable"}]}})
    live.write("podgroup-pending")

    # The whole job suspended (a queue has not admitted it): no pod yet.
    suspended = copy.deepcopy(jobset)
    suspended["spec"]["suspend"] = True
    live = Live(preview(t, suspended))
    live.pods = []
    live.write("suspended")

    # Pods not created yet, and nothing says why: the workers' second Job has made none (a role
    # that dependsOn another waits so; else its Jobs' events tell). A warning: it may yet come.
    live = Live(preview(t, jobset))
    live.pods = [p for p in live.pods
                 if not p["metadata"]["name"].startswith("gpt-worker-1-")]
    live.write("not-created")

    # The master's pod failed (restartPolicy Never; its Job has not made another yet): every
    # worker was told its name, and nothing answers there.
    live = Live(preview(t, jobset))
    master = live.pod("gpt-master-0-0-")
    master["status"]["phase"] = "Failed"
    for c in master["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "False"
            c["reason"] = "PodFailed"
    for c in master["status"]["containerStatuses"]:
        c["ready"] = False
        c["started"] = False
        c["state"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": STARTED,
                                     "finishedAt": "2026-11-29T09:03:00Z"}}
    live.write("host-not-live")


if __name__ == "__main__":
    main()
