"""The emulated cluster's network: one network namespace (the "cluster") holding a Linux bridge
and the cluster DNS on the bridge's address, and one namespace per pod wired to the bridge by a
veth pair.

Every link is created inside these namespaces (`ip -n`), so the root namespace's interfaces and
routes are never touched; the namespaces' names carry the run's prefix (`te-<pid>`), so
concurrent runs do not collide, and each process started here dies with the harness
(PR_SET_PDEATHSIG) even when the harness itself is killed.
"""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

NETWORK = "10.213"  # a /16 that exists only inside our namespaces
DNS_ADDRESS = f"{NETWORK}.0.1"  # the bridge's own address
CLUSTER_DOMAIN = "cluster.local"
# Prefix of everything a run creates: netns names and its directory (te-<pid>-...).
RUN_PREFIX = "te-"
RUN_DIRECTORY = Path("/var/tmp")  # not /tmp: each pod gets a tmpfs there and must still see its files

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


class HarnessError(Exception):
    """The harness could not do what a cluster would: the case fails with this message."""


def die_with_parent():
    """preexec_fn: the child gets SIGKILL when the harness dies, however it dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def run(*argv):
    """Runs a set-up command; a failure is the harness's, with the command's own words."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        raise HarnessError(f"{' '.join(argv)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


class Network:
    """The bridge in the cluster namespace, and a namespace with one address per pod."""

    def __init__(self, prefix):
        self.cluster = f"{prefix}-cluster"
        self.prefix = prefix
        self.namespaces = []

    def _add_namespace(self, name):
        run("ip", "netns", "add", name)
        self.namespaces.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")

    def create(self):
        self._add_namespace(self.cluster)
        run("ip", "-n", self.cluster, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.cluster, "addr", "add", f"{DNS_ADDRESS}/16", "dev", "br0")
        run("ip", "-n", self.cluster, "link", "set", "br0", "up")

    def add_pod(self, index):
        """A namespace for pod `index`: eth0 with its own address, its peer on the bridge."""
        namespace = f"{self.prefix}-pod{index}"
        address = f"{NETWORK}.{1 + index // 250}.{1 + index % 250}"
        self._add_namespace(namespace)
        # Created inside the cluster namespace with the peer born in the pod's: never in ours.
        run("ip", "-n", self.cluster, "link", "add", f"veth{index}", "type", "veth",
            "peer", "name", "eth0", "netns", namespace)
        run("ip", "-n", self.cluster, "link", "set", f"veth{index}", "master", "br0", "up")
        run("ip", "-n", namespace, "addr", "add", f"{address}/16", "dev", "eth0")
        run("ip", "-n", namespace, "link", "set", "eth0", "up")
        return namespace, address

    def destroy(self):
        """Deletes every namespace (a pod's veth pair goes with it). Kill their processes first."""
        for name in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self.namespaces.clear()


class ClusterDNS:
    """dnsmasq on the bridge, answering as the cluster DNS would: the records it is given
    (headless Services' pod and Service names) and NXDOMAIN for every other name (`--local=/#/`:
    no upstream, no host files). Queries are logged, so that a failure can name the names that
    did not resolve."""

    def __init__(self, namespace, directory):
        self.namespace = namespace
        self.hosts = directory / "dns-hosts"
        self.log = directory / "dns.log"
        self.process = None
        self.records = {}

    def start(self):
        self.hosts.write_text("")
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, "dnsmasq", "--keep-in-foreground",
             "--conf-file=/dev/null", "--no-resolv", "--no-hosts", f"--addn-hosts={self.hosts}",
             "--local=/#/", f"--listen-address={DNS_ADDRESS}", "--bind-interfaces",
             "--pid-file=", "--user=root", "--group=root", f"--log-facility={self.log}",
             "--log-queries"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=die_with_parent, start_new_session=True)
        # It reads the hosts file once its socket is bound: from then on it answers.
        self._wait_for_reads(1, "start")

    def _log_text(self):
        return self.log.read_text() if self.log.exists() else ""

    def _wait_for_reads(self, count, doing):
        """Waits until dnsmasq has read the hosts file `count` times."""
        deadline = time.monotonic() + 10
        while self._log_text().count(f"read {self.hosts}") < count:
            if self.process.poll() is not None:
                raise HarnessError(f"dnsmasq exited {self.process.returncode}: "
                                   f"{self.process.stderr.read().decode().strip()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"dnsmasq did not {doing} within 10 s")
            time.sleep(0.01)

    def publish(self, records):
        """Serves exactly `records` (name -> addresses) once this returns (SIGHUP re-reads the
        file), so that a pod started next finds its peers' names."""
        if records == self.records:
            return
        self.records = dict(records)
        lines = [f"{address} {name}" for name, addresses in sorted(records.items())
                 for address in addresses]
        self.hosts.write_text("".join(line + "\n" for line in lines))
        reads = self._log_text().count(f"read {self.hosts}")
        self.process.send_signal(signal.SIGHUP)
        self._wait_for_reads(reads + 1, "re-read its records")

    def unresolved(self, hostnames, searches):
        """The names pods asked for that never resolved, each as the pod asked for it (its
        `searches` expansions stripped), in the order first asked. A pod's own hostname is left
        out (its /etc/hosts answers it; the IPv6 lookups that reach us are noise), and so are
        reverse lookups. `hostnames` maps a pod's address to its hostname."""
        suffixes = sorted({"." + search for search in searches}, key=len, reverse=True)

        def base(name):
            stripped = True
            while stripped:  # a full name may come back with a suffix more
                stripped = next((suffix for suffix in suffixes if name.endswith(suffix)), "")
                name = name[:len(name) - len(stripped)]
            return name

        askers, answered, missing = {}, set(), []
        for line in self._log_text().splitlines():
            query = re.search(r"query\[\w+\] (\S+) from (\S+)", line)
            reply = re.search(r"(?:config|/\S+) (\S+) is (\S+)", line)
            if query:
                askers.setdefault(base(query.group(1)), set()).add(query.group(2))
            elif reply and reply.group(2) == "NXDOMAIN":
                if base(reply.group(1)) not in missing:
                    missing.append(base(reply.group(1)))
            elif reply and not reply.group(2).startswith("NODATA"):  # an address
                answered.add(base(reply.group(1)))
        return [name for name in missing if name not in answered and not name.endswith(".arpa")
                and any(hostnames.get(asker) != name for asker in askers.get(name, ()))]

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def remove_stale_runs():
    """Removes what runs whose harness process is gone (SIGKILLed: nothing of it could clean
    up) left behind: their network namespaces and directories. Live runs are not touched."""
    def dead(name):
        match = re.match(re.escape(RUN_PREFIX) + r"(\d+)-", name)
        return match is not None and not Path(f"/proc/{match.group(1)}").exists()

    removed = []
    for name in sorted(os.listdir("/run/netns")) if Path("/run/netns").is_dir() else []:
        if dead(name):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            removed.append(name)
    for path in sorted(RUN_DIRECTORY.glob(RUN_PREFIX + "*")):
        if dead(path.name):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed
