"""What the kubelet and the container runtime decide for a pod before its containers run,
computed from the pod object alone: its name and hostname, /etc/hosts and /etc/resolv.conf, its
volumes' files, and each container's command, environment, user and mounts.

The pod agent (pod_agent.py) then applies this plan from inside the pod's namespaces.
"""
import base64
import json
import os
import random
import re
import stat
import time
from pathlib import Path

from cluster import CLUSTER_DOMAIN, DNS_ADDRESS, HarnessError

# metadata.generateName's random suffix: apimachinery's alphabet, without vowels and look-alikes.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# pkg/volume/volume_linux.go: with an fsGroup, volumes become the group's, files group-readable
# (and group-writable where the volume is writable), directories setgid.
_RW_MASK, _RO_MASK, _EXEC_MASK = 0o660, 0o440, 0o110


def pod_name(metadata):
    """metadata.name, or what the API server makes of generateName."""
    if metadata.get("name"):
        return metadata["name"]
    return metadata["generateName"] + "".join(random.choices(_NAME_ALPHABET, k=5))


def hostname_of(spec, name):
    """spec.hostname, else the pod's name cut to a DNS label, as the kubelet does."""
    return spec.get("hostname") or name[:63].rstrip("-.")


def hosts_file(address, hostname, subdomain, namespace, host_aliases):
    """/etc/hosts exactly as the kubelet writes it (managedHostsFileContent)."""
    lines = ["# Kubernetes-managed hosts file.",
             "127.0.0.1\tlocalhost",
             "::1\tlocalhost ip6-localhost ip6-loopback",
             "fe00::0\tip6-localnet",
             "fe00::0\tip6-mcastprefix",
             "fe00::1\tip6-allnodes",
             "fe00::2\tip6-allrouters"]
    if subdomain:
        lines.append(f"{address}\t{hostname}.{subdomain}.{namespace}.svc.{CLUSTER_DOMAIN}\t{hostname}")
    else:
        lines.append(f"{address}\t{hostname}")
    if host_aliases:
        lines += ["", "# Entries added by HostAliases."]
        lines += [f"{alias['ip']}\t" + "\t".join(alias.get("hostnames", [])) for alias in host_aliases]
    return "\n".join(lines) + "\n"


def resolv_conf(spec, namespace):
    """/etc/resolv.conf as the kubelet has the runtime write it: for dnsPolicy ClusterFirst the
    cluster DNS and the namespace's search list, then the pod's own dnsConfig merged in."""
    policy = spec.get("dnsPolicy", "ClusterFirst")
    if policy in ("ClusterFirst", "ClusterFirstWithHostNet"):
        servers = [DNS_ADDRESS]
        searches = [f"{namespace}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}", CLUSTER_DOMAIN]
        options = {"ndots": "5"}
    elif policy == "None":
        servers, searches, options = [], [], {}
    else:
        raise HarnessError(f"dnsPolicy {policy} is not emulated (the node's own resolv.conf)")
    config = spec.get("dnsConfig") or {}
    servers += config.get("nameservers", [])
    searches += config.get("searches", [])
    for option in config.get("options", []):
        options[option["name"]] = option.get("value")

    def unique(items):
        return list(dict.fromkeys(items))

    text = f"search {' '.join(unique(searches)[:32])}\n" if searches else ""
    text += "".join(f"nameserver {server}\n" for server in unique(servers)[:3])
    if options:
        text += "options " + " ".join(name if value is None else f"{name}:{value}"
                                      for name, value in options.items()) + "\n"
    return text


def field_value(pod, path, address):
    """A downward API fieldRef, for env (valueFrom.fieldRef) and downwardAPI volume items."""
    metadata = pod["metadata"]
    simple = {"metadata.name": metadata.get("name", ""),
              "metadata.namespace": metadata.get("namespace", "default"),
              "metadata.uid": metadata.get("uid", ""),
              "status.podIP": address,
              "status.podIPs": address,
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default")}
    if path in simple:
        return simple[path]
    match = re.fullmatch(r"metadata\.(labels|annotations)(?:\['(.*)'\])?", path)
    if match is None:
        raise HarnessError(f"fieldRef {path} is not emulated")
    values = metadata.get(match.group(1)) or {}
    if match.group(2) is not None:
        return values.get(match.group(2), "")
    # The whole map, one `key="value"` per line in key order (fieldpath.FormatMap).
    return "\n".join(f"{key}={json.dumps(values[key])}" for key in sorted(values))


def expand(text, env):
    """Kubernetes' $(VAR) expansion: a defined name is replaced, an undefined reference stays as
    written, and $$ is a literal $."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2:end]
            out.append(env[name] if name in env else text[i:end + 1])
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def container_env(pod, container, address):
    """The container's env as the kubelet resolves it, in order (a later duplicate wins)."""
    if container.get("envFrom"):
        raise HarnessError(f"container {container['name']}: envFrom is not emulated")
    env = {}
    for item in container.get("env", []):
        if "valueFrom" not in item:
            env[item["name"]] = expand(item.get("value", ""), env)
        elif "fieldRef" in item["valueFrom"]:
            env[item["name"]] = field_value(pod, item["valueFrom"]["fieldRef"]["fieldPath"], address)
        else:
            raise HarnessError(f"container {container['name']}: env {item['name']}: "
                               f"valueFrom {sorted(item['valueFrom'])} is not emulated")
    return env


def is_trainenv_image(image):
    """trainenv's own image (`trainenv:<tag>`, or a registry's path ending in /trainenv): the
    readiness wait's, which runs the binary under test."""
    name = image.rsplit("@", 1)[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return name == "trainenv" or name.endswith("/trainenv")


def container_plan(pod, container, address, volumes, log):
    """What the runtime needs to start one container: argv, env, user, working dir, mounts."""
    if not container.get("command"):
        raise HarnessError(f"container {container['name']}: no command, and the host 'image' "
                           "has no entrypoint")
    env = container_env(pod, container, address)
    pod_security = pod["spec"].get("securityContext") or {}
    security = container.get("securityContext") or {}
    mounts = []
    for mount in container.get("volumeMounts", []):
        if mount["name"] not in volumes:
            raise HarnessError(f"container {container['name']}: volumeMount {mount['name']} "
                               "names no volume of the pod")
        source, read_only = volumes[mount["name"]]
        if mount.get("subPath"):
            source = source / mount["subPath"]
        mounts.append({"source": str(source), "target": mount["mountPath"],
                       "readOnly": read_only or bool(mount.get("readOnly"))})
    return {
        "name": container["name"],
        "argv": [expand(word, env) for word in container["command"] + container.get("args", [])],
        "env": env,
        "workingDir": container.get("workingDir"),
        "runAsUser": security.get("runAsUser", pod_security.get("runAsUser")),
        "runAsGroup": security.get("runAsGroup", pod_security.get("runAsGroup")),
        "groups": [g for g in [pod_security.get("fsGroup")] if g is not None]
        + pod_security.get("supplementalGroups", []),
        # The runtime mounts a parent before what lies under it.
        "mounts": sorted(mounts, key=lambda m: m["target"].rstrip("/").count("/")),
        "log": str(log),
    }


class Volumes:
    """The pod's volumes, written under `directory` as the kubelet writes them: Secrets,
    ConfigMaps and downward API files through its atomic writer (`..data` and a timestamped
    directory, one symlink per item), each kind's default mode, and then, with an fsGroup,
    SetVolumeOwnership. `secrets` and `config_maps` map (namespace, name) to their data."""

    def __init__(self, pod, address, directory, secrets, config_maps):
        self.pod, self.address, self.directory = pod, address, directory
        self.secrets, self.config_maps = secrets, config_maps
        self.namespace = pod["metadata"].get("namespace", "default")

    def materialize(self):
        """{volume name: (its directory, whether the kubelet mounts it read-only)}: Secret,
        ConfigMap and downward API volumes always are (ReadOnlyAPIDataVolumes)."""
        paths = {}
        fs_group = (self.pod["spec"].get("securityContext") or {}).get("fsGroup")
        for volume in self.pod["spec"].get("volumes", []):
            path = self.directory / volume["name"]
            path.mkdir(parents=True)
            if "emptyDir" in volume:
                path.chmod(0o777)
                read_only = False
            else:
                # Secret, ConfigMap and downward API volumes are memory-backed emptyDirs to the
                # kubelet: a fresh tmpfs, whose root is 1777.
                path.chmod(0o1777)
                self._atomic_write(path, self._files(volume))
                read_only = True
            if fs_group is not None:
                _set_volume_ownership(path, fs_group, read_only)
            paths[volume["name"]] = (path, read_only)
        return paths

    def _files(self, volume):
        """{relative path: (bytes, mode)} of one projected volume."""
        if "secret" in volume:
            source = volume["secret"]
            data = self._lookup(self.secrets, "Secret", source["secretName"], source)
        elif "configMap" in volume:
            source = volume["configMap"]
            data = self._lookup(self.config_maps, "ConfigMap", source["name"], source)
        elif "downwardAPI" in volume:
            source = volume["downwardAPI"]
            data = None
        else:
            kinds = sorted(set(volume) - {"name"})
            raise HarnessError(f"volume {volume['name']}: {kinds} is not emulated")
        default_mode = source.get("defaultMode", 0o644)
        files = {}
        if data is None:
            for item in source.get("items", []):
                if "fieldRef" not in item:
                    raise HarnessError(f"volume {volume['name']}: item {item['path']}: only "
                                       "fieldRef is emulated")
                value = field_value(self.pod, item["fieldRef"]["fieldPath"], self.address)
                files[item["path"]] = (value.encode(), item.get("mode", default_mode))
            return files
        for item in source.get("items") or [{"key": key, "path": key} for key in sorted(data)]:
            if item["key"] not in data:
                if source.get("optional"):
                    continue
                raise HarnessError(f"volume {volume['name']}: key {item['key']} is not in it")
            files[item["path"]] = (data[item["key"]], item.get("mode", default_mode))
        return files

    def _lookup(self, store, kind, name, source):
        data = store.get((self.namespace, name))
        if data is None and not source.get("optional"):
            raise HarnessError(f"{kind} {self.namespace}/{name} does not exist: the pod would "
                               "wait in ContainerCreating")
        return data or {}

    @staticmethod
    def _atomic_write(root, files):
        """pkg/volume/util/atomic_writer.go: the files in `..<timestamp>`, `..data` pointing at
        it, and each top-level name a symlink through `..data`."""
        stamp = root / (time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
                        + str(random.randrange(10**9)))
        stamp.mkdir(mode=0o755)
        stamp.chmod(0o755)
        for relative, (content, mode) in files.items():
            target = stamp / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(mode)
        (root / "..data").symlink_to(stamp.name)
        for top in sorted({Path(relative).parts[0] for relative in files}):
            (root / top).symlink_to(Path("..data") / top)


def _set_volume_ownership(root, fs_group, read_only):
    """SetVolumeOwnership: the fsGroup owns everything; files gain group read (and write on a
    writable volume), directories setgid and group search; symlinks are left as they are."""
    mask = _RO_MASK if read_only else _RW_MASK
    paths = [str(root)] + [os.path.join(directory, name) for directory, subdirectories, files
                           in os.walk(root) for name in subdirectories + files]
    for path in paths:
        os.lchown(path, -1, fs_group)
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            continue
        extra = mask | (stat.S_ISGID | _EXEC_MASK if stat.S_ISDIR(mode) else 0)
        os.chmod(path, stat.S_IMODE(mode) | extra)


def config_map_data(config_map):
    """A ConfigMap's files: data as text, binaryData decoded."""
    data = {key: value.encode() for key, value in (config_map.get("data") or {}).items()}
    data.update({key: base64.b64decode(value)
                 for key, value in (config_map.get("binaryData") or {}).items()})
    return data
