#!/usr/bin/python3
"""One pod, run from inside its own network, UTS, mount and PID namespaces (it is PID 1 there):
what the container runtime and the image would give it, then its containers.

  pod_agent.py pod PLAN.json              the sandbox, the init containers in order, then every
                                          container at once; prints one JSON event per line
  pod_agent.py container PLAN.json NAME   (run by the former in a mount namespace of its own)
                                          mounts the container's volumes, becomes its user, execs

The sandbox: overlays on /etc, /root, /home and /opt (lower: the host's directory; upper: the
pod's directory), so the pod writes /etc/mpi or /root/.ssh without touching the host; fresh
tmpfs on /run, /tmp and /dev/shm; the "image" content (below); the kubelet's /etc/hosts,
/etc/resolv.conf and /etc/hostname; the hostname. Nothing is mounted in the host's namespace
(the harness starts us with private propagation), so it all goes when the pod's last process does.
"""
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

OVERLAID = ("/etc", "/root", "/home", "/opt")
SCRATCH = {"/run": "0755", "/tmp": "1777", "/dev/shm": "1777"}
# Where a container may have mount points or a working dir created: the trees the pod owns.
POD_TREES = OVERLAID + tuple(SCRATCH)
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TORCH_MULTIPROCESSING = "/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing"
MPIUSER_ID = 1000
TRAINENV_IN_POD = "/opt/trainenv-image/trainenv"  # the binary under test, bound before /tmp hides it


def mount(*argv):
    subprocess.run(["mount", *argv], check=True)


def emit(event, **fields):
    """One event for the harness, on our stdout (the containers write to their logs)."""
    print(json.dumps({"event": event, **fields}), flush=True)


def in_pod_trees(path):
    path = os.path.normpath(path)
    return any(path == tree or path.startswith(tree + "/") for tree in POD_TREES)


def make_path(path, is_file):
    """A mount point or working dir the runtime creates; only inside the pod's own trees, since
    anywhere else it would be created on the host."""
    if os.path.lexists(path):
        return
    if not in_pod_trees(path):
        raise SystemExit(f"pod_agent: {path} does not exist and lies outside the pod's writable "
                         f"trees {', '.join(POD_TREES)}: creating it would change the host")
    if is_file:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Path(path).touch()
    else:
        os.makedirs(path, exist_ok=True)


# --- the sandbox ------------------------------------------------------------------------------

def overlay(lower, pod_directory, name):
    upper, work = pod_directory / "overlay" / name / "upper", pod_directory / "overlay" / name / "work"
    upper.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    mount("-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={upper},workdir={work}", lower)


def bind_image_trees(image):
    """The image's programs from host directories: bound before /tmp becomes the pod's own tmpfs,
    which would hide them when the checkout (and its build-deps/) lives under /tmp."""
    os.makedirs("/opt/train", exist_ok=True)
    mount("--bind", "-o", "ro", image["train"], "/opt/train")
    if image.get("xgboost"):
        os.makedirs("/opt/xgboost", exist_ok=True)
        mount("--bind", "-o", "ro", image["xgboost"], "/opt/xgboost")
    # trainenv's own image, which the readiness wait runs: the binary under test.
    os.makedirs("/opt/trainenv-image", exist_ok=True)
    Path(TRAINENV_IN_POD).touch()
    mount("--bind", image["trainenv"], TRAINENV_IN_POD)
    mount("-o", "remount,bind,ro", TRAINENV_IN_POD)


def trainenv_image(container):
    """The container runs trainenv's image: its binary at /usr/local/bin/trainenv, and a /dev of
    the runtime's making with the kubelet's termination-log file at /dev/termination-log (only
    the nodes it uses: null, zero, random, urandom). In the container's own mount namespace."""
    dev = Path("/run") / f"trainenv-dev-{os.getpid()}"  # /run is the pod's tmpfs
    dev.mkdir()
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", str(dev))
    for node in ("null", "zero", "random", "urandom"):
        (dev / node).touch()
        mount("--bind", f"/dev/{node}", str(dev / node))
    (dev / "termination-log").touch()
    mount("--bind", container["terminationLog"], str(dev / "termination-log"))
    mount("--move", str(dev), "/dev")
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/usr/local/bin")
    Path("/usr/local/bin/trainenv").touch()
    mount("--bind", TRAINENV_IN_POD, "/usr/local/bin/trainenv")


def install_image(image, pod_directory):
    """The image's content, as its Dockerfile would have put it there."""
    # mpi-operator's base image (build/base/Dockerfile): ssh asks nothing about host keys and
    # writes no known_hosts (the .ssh it gets is a read-only Secret), and sshd skips StrictModes
    # (a Secret volume's directory is a world-writable tmpfs root). The client's check of its own
    # private key's mode is untouched: a key trainenv mounts with a bad mode still fails.
    client = "Host *\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n"
    if image["name"] == "mpiuser":
        client += "    Port 2222\n"
    Path("/etc/ssh/ssh_config.d/image.conf").write_text(client)
    Path("/etc/ssh/sshd_config.d/image.conf").write_text("StrictModes no\n")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    if image["name"] == "mpiuser":
        add_mpiuser()
    if image.get("torchApi"):
        # torchrun 1.13 on Python 3.11: Std.from_str("0") returns None (3.11's IntFlag iteration
        # skips the zero member, so to_std's lookup never matches 0) and the agent fails right
        # after every successful rendezvous. The fixed copy of api.py goes in over the original
        # through an overlay of its package directory, so that the recompiled .pyc lands in the
        # pod's upper directory and never in the host's __pycache__.
        upper = pod_directory / "overlay" / "torch-multiprocessing" / "upper"
        upper.mkdir(parents=True)
        shutil.copyfile(image["torchApi"], upper / "api.py")
        overlay(TORCH_MULTIPROCESSING, pod_directory, "torch-multiprocessing")


def add_mpiuser():
    """mpi-operator's non-root images (`useradd -m mpiuser` in a fresh image: uid and gid 1000)
    with sshd set up to run as that user on port 2222, keyed by the mounted id_rsa."""
    def replace(path, entry, id_field=None):
        """Drops the host's lines for that name (or, in passwd and group, that id); adds ours."""
        def other(line):
            fields = line.split(":")
            return fields[0] != "mpiuser" and (id_field is None or fields[id_field] != str(MPIUSER_ID))

        kept = [line for line in Path(path).read_text().splitlines() if other(line)]
        with open(path, "w") as file:  # in place: the copied-up file keeps its mode and group
            file.write("\n".join(kept + [entry]) + "\n")

    replace("/etc/passwd", f"mpiuser:x:{MPIUSER_ID}:{MPIUSER_ID}::/home/mpiuser:/bin/bash", id_field=2)
    replace("/etc/group", f"mpiuser:x:{MPIUSER_ID}:", id_field=2)
    replace("/etc/shadow", "mpiuser:!:19000:0:99999:7:::")
    home = Path("/home/mpiuser")
    home.mkdir(mode=0o755, exist_ok=True)
    (home / ".sshd_config").write_text("PidFile /home/mpiuser/sshd.pid\n"
                                       "HostKey /home/mpiuser/.ssh/id_rsa\n"
                                       "StrictModes no\n"
                                       "Port 2222\n")
    for path in (home, home / ".sshd_config"):
        os.chown(path, MPIUSER_ID, MPIUSER_ID)


def prepare_sandbox(plan):
    pod_directory = Path(plan["directory"])
    for tree in OVERLAID:
        overlay(tree, pod_directory, tree.strip("/"))
    bind_image_trees(plan["image"])
    for tree, mode in SCRATCH.items():
        mount("-t", "tmpfs", "-o", f"mode={mode}", "tmpfs", tree)
    install_image(plan["image"], pod_directory)
    for target, source in plan["files"].items():  # the kubelet's /etc/hosts, resolv.conf, hostname
        mount("--bind", source, target)
    socket.sethostname(plan["hostname"])


# --- the containers -----------------------------------------------------------------------------

def start_container(plan_path, container):
    log = open(container["log"], "ab")
    try:
        return subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-I",
             os.path.abspath(__file__), "container", plan_path, container["name"]],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT).pid
    finally:
        log.close()


def exit_code(status):
    """A container's exit code as the kubelet reports it: 128 + the signal that killed it."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def wait_for(pid):
    """Waits for `pid`, reaping whatever else exits meanwhile: we are PID 1, orphans are ours."""
    while True:
        done, status = os.wait()
        if done == pid:
            return exit_code(status)


def run_pod(plan_path):
    plan = json.loads(Path(plan_path).read_text())
    prepare_sandbox(plan)
    for container in plan["initContainers"]:
        # The kubelet restarts a failed init container (restartPolicy OnFailure or Always) with
        # a back-off from 10 s, doubling; with Never the pod fails.
        backoff = 10
        while True:
            code = wait_for(start_container(plan_path, container))
            emit("exited", container=container["name"], init=True, code=code)
            if code == 0:
                break
            if plan["restartPolicy"] == "Never":
                return 1
            time.sleep(backoff)
            backoff = min(2 * backoff, 300)
    if plan["startDelay"]:
        time.sleep(plan["startDelay"])  # the app's image pulls late
    running = {start_container(plan_path, c): c["name"] for c in plan["containers"]}
    emit("running")
    failed = False
    while running:
        pid, status = os.wait()
        if pid in running:
            code = exit_code(status)
            emit("exited", container=running.pop(pid), init=False, code=code)
            failed = failed or code != 0
    return 1 if failed else 0


def exec_container(plan_path, name):
    plan = json.loads(Path(plan_path).read_text())
    container = next(c for c in plan["initContainers"] + plan["containers"] if c["name"] == name)
    if container.get("trainenvImage"):
        trainenv_image(container)
    for volume_mount in container["mounts"]:
        make_path(volume_mount["target"], is_file=os.path.isfile(volume_mount["source"]))
        mount("--bind", volume_mount["source"], volume_mount["target"])
        if volume_mount["readOnly"]:
            mount("-o", "remount,bind,ro", volume_mount["target"])
    # The user: runAsUser, else the image's (root); the group: runAsGroup, else the user's
    # primary group in the image's /etc/passwd; supplementary groups: the image's /etc/group
    # memberships, fsGroup and supplementalGroups; HOME from /etc/passwd, as runc sets it.
    uid = container["runAsUser"] if container["runAsUser"] is not None else 0
    try:
        account = pwd.getpwuid(uid)
    except KeyError:
        account = None
    gid = container["runAsGroup"]
    if gid is None:
        gid = account.pw_gid if account else 0
    groups = list(container["groups"])
    if account:
        groups += os.getgrouplist(account.pw_name, gid)
    env = {"PATH": IMAGE_PATH, "HOSTNAME": plan["hostname"], **plan["image"]["env"]}
    env.update(container["env"])
    env.setdefault("HOME", account.pw_dir if account else "/")
    workdir = container["workingDir"] or plan["image"]["workingDir"]
    make_path(workdir, is_file=False)
    os.chdir(workdir)
    group_flag = f"--groups={','.join(str(g) for g in sorted(set(groups)))}" if groups else "--clear-groups"
    # setpriv finds the command on the container's PATH, as the runtime does.
    os.execve("/usr/bin/setpriv", ["setpriv", f"--reuid={uid}", f"--regid={gid}", group_flag, "--",
                                   *container["argv"]], env)


def main():
    if sys.argv[1] == "pod":
        sys.exit(run_pod(sys.argv[2]))
    exec_container(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
