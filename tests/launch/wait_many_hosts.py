"""`trainenv wait` on a 10,000-host hostfile against a real resolver: the launcher of a
10,000-node MPI job waits on every worker's name and sshd port before mpirun starts.

The emulated cluster's network (cluster.py): dnsmasq on the bridge serves a record for each of
the 10,000 workers, as a headless Service would; the waiting pod runs in a network namespace of
its own with the kubelet's /etc/resolv.conf (the namespace's search list, ndots:5), so each short
`hostname.subdomain` of the hostfile goes through the search list as in a pod. The workers'
addresses are a /16 routed to the pod's own loopback, where one listener stands for every
worker's sshd. Two runs:

  1. every worker answers: the wait exits 0 well within its bound (the figure is printed);
  2. 1,000 names withheld, a 6 s bound: it exits 75, and its termination message (at most
     4 KiB) says how many did not answer, why (NXDOMAIN, from the real resolver) and for how long.

Usage: wait_many_hosts.py --trainenv build/trainenv [--hosts 10000] [--keep]
Needs root (namespaces, mounts); exits 77 without it, which ctest reports as skipped.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cluster
import kubelet

NAMESPACE = "team-a"
SUBDOMAIN = "big"
SSH_PORT = 2222
WORKERS_NETWORK = "10.214"  # the workers' addresses: routed to the waiting pod's own loopback
WITHHELD = 1000
# What "in seconds" allows on a loaded 2-core machine: the first run took 2 to 4 s here.
PASS_WITHIN = 60
GIVE_UP_BOUND = 6

LISTENER = r"""
import socket, sys, threading
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", int(sys.argv[1])))
listener.listen(4096)
print("listening", flush=True)
while True:
    connection, _ = listener.accept()
    connection.close()
"""


def worker(i):
    return f"{SUBDOMAIN}-worker-0-{i}"


def address(i):
    return f"{WORKERS_NETWORK}.{i // 250}.{1 + i % 250}"


def run_wait(args, pod_namespace, directory, hostfile, timeout):
    """(exit code, seconds, log, termination message) of `trainenv wait` in the pod's namespace."""
    termination = directory / f"termination-{timeout}"
    termination.write_text("")
    script = ('mount --bind "$1" /etc/resolv.conf && shift && exec "$@"')
    argv = ["ip", "netns", "exec", pod_namespace, "unshare", "--mount", "sh", "-c", script, "wait",
            str(directory / "resolv.conf"), str(Path(args.trainenv).resolve()), "wait",
            f"--hostfile={hostfile}", f"--hostfile-port={SSH_PORT}", f"--timeout={timeout}",
            f"--termination-log={termination}", f"--job=mpijob/{SUBDOMAIN}",
            f"--namespace={NAMESPACE}"]
    started = time.monotonic()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout + 60, preexec_fn=cluster.die_with_parent)
    took = time.monotonic() - started
    return done.returncode, took, done.stdout + done.stderr, termination.read_text()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainenv", required=True)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("wait_many_hosts: needs root (network namespaces, mounts): skipped")
        sys.exit(77)
    cluster.remove_stale_runs()
    prefix = f"{cluster.RUN_PREFIX}{os.getpid()}"
    directory = cluster.RUN_DIRECTORY / f"{prefix}-many"
    directory.mkdir()
    network = cluster.Network(prefix)
    dns = listener = None
    problems = []
    try:
        network.create()
        dns = cluster.ClusterDNS(network.cluster, directory)
        dns.start()
        pod_namespace, _ = network.add_pod(0)
        cluster.run("ip", "-n", pod_namespace, "route", "add", "local", f"{WORKERS_NETWORK}.0.0/16",
                    "dev", "lo")
        listener = subprocess.Popen(
            ["ip", "netns", "exec", pod_namespace, sys.executable, "-c", LISTENER, str(SSH_PORT)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
            preexec_fn=cluster.die_with_parent, start_new_session=True)
        if listener.stdout.readline().strip() != "listening":
            raise cluster.HarnessError("the workers' listener did not start")
        (directory / "resolv.conf").write_text(kubelet.resolv_conf({}, NAMESPACE))
        hostfile = directory / "hostfile"
        hostfile.write_text("".join(f"{worker(i)}.{SUBDOMAIN} slots=8\n" for i in range(args.hosts)))
        domain = f"{SUBDOMAIN}.{NAMESPACE}.svc.{cluster.CLUSTER_DOMAIN}"
        records = {f"{worker(i)}.{domain}": [address(i)] for i in range(args.hosts)}

        dns.publish(records)
        code, took, log, _ = run_wait(args, pod_namespace, directory, hostfile, 300)
        said = log.strip().splitlines()[-1] if log.strip() else "nothing"
        if code != 0:
            problems.append(f"all {args.hosts} answering: exit {code}, not 0: {said}")
        elif took > PASS_WITHIN:
            problems.append(f"all {args.hosts} answering: passed in {took:.1f} s, over {PASS_WITHIN} s")
        first = f"{args.hosts} hosts answered in {took:.1f} s ({said})"

        withheld = {f"{worker(i)}.{domain}" for i in range(0, args.hosts, args.hosts // WITHHELD)}
        dns.publish({name: a for name, a in records.items() if name not in withheld})
        code, took, log, message = run_wait(args, pod_namespace, directory, hostfile, GIVE_UP_BOUND)
        wanted = [f"{len(withheld)} of {args.hosts} targets did not answer",
                  f"no DNS record yet (NXDOMAIN): {worker(0)}.{SUBDOMAIN}",
                  f"trainenv doctor mpijob/{SUBDOMAIN} -n {NAMESPACE}"]
        if code != 75:
            problems.append(f"{len(withheld)} withheld: exit {code}, not 75: {log.strip()[-300:]}")
        if took > GIVE_UP_BOUND + 5:
            problems.append(f"{len(withheld)} withheld: gave up after {took:.1f} s, bound {GIVE_UP_BOUND} s")
        if len(message.encode()) > 4096:
            problems.append(f"termination message of {len(message.encode())} bytes, over 4 KiB")
        problems += [f"termination message lacks {w!r}: {message[:300]!r}" for w in wanted
                     if w not in message]
        second = f"{len(withheld)} withheld: exit {code} after {took:.1f} s, message {len(message)} bytes"
    except cluster.HarnessError as error:
        problems.append(f"harness: {error}")
        first = second = ""
    finally:
        if listener is not None:
            listener.kill()
            listener.wait()
        if dns is not None:
            dns.stop()
        network.destroy()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    if problems:
        print(f"launch: wait-{args.hosts}-hosts: FAIL — {problems[0]}")
        for line in problems[1:]:
            print(f"  {line}")
        sys.exit(1)
    print(f"launch: wait-{args.hosts}-hosts: PASS — {first}; {second}")


if __name__ == "__main__":
    main()
