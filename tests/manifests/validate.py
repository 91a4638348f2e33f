#!/usr/bin/python3
"""Strict checks of rendered manifests (kubectl kustomize output on stdin).

Every object is decoded against the Kubernetes object model from Debian's python3-kubernetes,
field by field: an unknown field, a wrong type or a missing required field fails. cert-manager
and Prometheus Operator objects, which that model does not know, are checked against the few
fields they may use. Then the settings the deployment depends on are asserted (check_settings),
and every reference from one object to another is followed (check_references): a render that
is valid object by object can still install nothing that works, as one whose namespace was
changed while the webhook still calls the Service in the old one.

    validate.py NAME OVERLAY NAMESPACE < rendered.yaml
        NAME: the prefix of the messages; OVERLAY: the shipped overlay the render is built on
        (base, cert-manager, opt-in-namespaces, previews or static-certs), which decides the
        settings expected; NAMESPACE: the one namespace every namespaced object, and every
        reference to one, must be in.
"""
import base64
import math
import os
import re
import subprocess
import sys
import tempfile

import kubernetes.client as k8s
import yaml

MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): "V1MutatingWebhookConfiguration",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("v1", "ResourceQuota"): "V1ResourceQuota",
}

CLUSTER_SCOPED = {"Namespace", "MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding"}

# The owner kinds trainenv reads (docs/contract.md §2.1) are data: policies/owners.yaml, shipped in
# the policies ConfigMap. The ClusterRole must grant `get` on exactly the (API group, resource)
# pairs it lists, so adding a kind there without its RBAC (or the reverse) fails here.
def owner_resources(config_map, errors):
    text = config_map["data"].get("owners.yaml")
    expect(text is not None, "owners.yaml (the owner kinds) in the policies ConfigMap", errors)
    if text is None:
        return set()
    # A kind its own operator wires (spec.wiredBy) is never read, so needs no grant.
    return {(doc["spec"].get("apiGroup", ""), doc["spec"]["resource"])
            for doc in yaml.safe_load_all(text)
            if doc and doc.get("kind") == "OwnerKind" and "wiredBy" not in doc["spec"]}
# The webhook's namespaceSelector leaves out these and its own namespace (docs/deploy.md).
SYSTEM_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease"}
OPT_IN = {"key": "trainenv.io/injection", "operator": "In", "values": ["enabled"]}

# Kinds the Kubernetes model does not know, cert-manager's and the Prometheus Operator's: the
# fields this project uses, as a nested whitelist (True: any value; a one-item list: a list whose
# every item has that shape).
WHITELISTS = {
    ("cert-manager.io/v1", "Issuer"): {"spec": {"selfSigned": {}}},
    ("cert-manager.io/v1", "Certificate"): {
        "spec": {
            "secretName": True, "duration": True, "renewBefore": True, "dnsNames": True,
            "privateKey": {"algorithm": True, "size": True, "rotationPolicy": True},
            "issuerRef": {"kind": True, "name": True, "group": True},
        }
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "spec": {"groups": [{"name": True, "rules": [{"alert": True, "expr": True, "for": True, "labels": True}]}]}
    },
    # No namespaceSelector: a ServiceMonitor without one looks in its own namespace, which
    # check_references holds to the Service's.
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "spec": {
            "selector": {"matchLabels": True},
            "endpoints": [{"port": True, "path": True, "scheme": True, "interval": True}],
        }
    },
}

PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object, "datetime": str, "date": str}


def check(value, type_name, path, errors):
    if value is None:
        return
    m = re.fullmatch(r"list\[(.*)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list")
            return
        for i, item in enumerate(value):
            check(item, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(([^,]*), (.*)\)", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a mapping")
            return
        for key, item in value.items():
            check(item, m.group(2), f"{path}.{key}", errors)
        return
    if type_name in PRIMITIVES:
        if (type_name == "int" and isinstance(value, bool)) or not isinstance(value, PRIMITIVES[type_name]):
            errors.append(f"{path}: expected {type_name}, got {type(value).__name__} {value!r}")
        return
    model = getattr(k8s, type_name)
    if not isinstance(value, dict):
        errors.append(f"{path}: expected a {type_name} object")
        return
    by_json_name = {json: attr for attr, json in model.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json_name:
            errors.append(f"{path}.{key}: unknown field of {type_name}")
            continue
        check(item, model.openapi_types[by_json_name[key]], f"{path}.{key}", errors)
    # Required fields: the model's constructor refuses None for them.
    try:
        model(**{by_json_name[key]: item for key, item in value.items() if key in by_json_name})
    except ValueError as error:
        errors.append(f"{path}: {error}")


def check_whitelist(value, allowed, path, errors):
    if allowed is True:
        return
    if isinstance(allowed, list):
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list")
            return
        for i, item in enumerate(value):
            check_whitelist(item, allowed[0], f"{path}[{i}]", errors)
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: expected a mapping")
        return
    for key, item in value.items():
        if key not in allowed:
            errors.append(f"{path}.{key}: unknown field")
        else:
            check_whitelist(item, allowed[key], f"{path}.{key}", errors)


def validate(obj, errors):
    api, kind = obj.get("apiVersion"), obj.get("kind")
    name = f"{kind}/{obj.get('metadata', {}).get('name')}"
    if (api, kind) in MODELS:
        check(obj, MODELS[(api, kind)], name, errors)
    elif (api, kind) in WHITELISTS:
        check(obj.get("metadata"), "V1ObjectMeta", f"{name}.metadata", errors)
        rest = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "metadata")}
        check_whitelist(rest, WHITELISTS[(api, kind)], name, errors)
    else:
        errors.append(f"{name}: {api} {kind} is not a kind this project deploys")


def expect(condition, message, errors):
    if not condition:
        errors.append(message)


def check_settings(objects, overlay, errors):
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    previews = overlay == "previews"
    for kind in ("Namespace", "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy",
                 "ConfigMap", "MutatingWebhookConfiguration", "ResourceQuota"):
        expect(len(by_kind.get(kind, [])) == 1, f"expected one {kind}", errors)
    # The owner reader and doctor's three roles for people, and with the previews' port the token
    # reviewer too; bound: the owner reader (and the token reviewer).
    expect(len(by_kind.get("ClusterRole", [])) == (5 if previews else 4),
           f"expected {5 if previews else 4} ClusterRoles", errors)
    expect(len(by_kind.get("ClusterRoleBinding", [])) == (2 if previews else 1),
           f"expected {2 if previews else 1} ClusterRoleBinding", errors)
    if errors:
        return
    hooks = by_kind["MutatingWebhookConfiguration"][0]["webhooks"]
    expect([h["name"] for h in hooks] == ["pods.trainenv.io", "jobset-pods.trainenv.io"], "two webhook entries", errors)
    if errors:
        return
    labelled, jobset = hooks
    expect(labelled["objectSelector"] == {"matchLabels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
           "pods.trainenv.io objectSelector: the ancestor-step label", errors)
    # JobSet pods that lack the label (Kubeflow Trainer's layout), and only those: a pod with the
    # label goes to the first entry and must not be sent twice.
    expect(jobset["objectSelector"] == {"matchExpressions": [
        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"},
        {"key": "trainer.kubeflow.org/trainjob-ancestor-step", "operator": "DoesNotExist"}]},
        "jobset-pods.trainenv.io objectSelector: jobset-name exists, ancestor-step does not", errors)
    opted_in = overlay == "opt-in-namespaces"
    for hook in hooks:
        name = hook["name"]
        expressions = hook["namespaceSelector"]["matchExpressions"]
        expect((OPT_IN in expressions) == opted_in, f"{name} namespace opt-in {'missing' if opted_in else 'unexpected'}",
               errors)
        expect(hook["sideEffects"] == "None", f"{name} sideEffects", errors)
        expect(hook["admissionReviewVersions"] == ["v1"], f"{name} admissionReviewVersions", errors)
        expect(isinstance(hook.get("timeoutSeconds"), int) and 1 <= hook["timeoutSeconds"] <= 30,
               f"{name} timeoutSeconds", errors)
        expect(hook.get("reinvocationPolicy") == "IfNeeded", f"{name} reinvocationPolicy", errors)
        # Which Service, in which namespace: check_references.
        expect({key: hook["clientConfig"]["service"].get(key) for key in ("path", "port")} ==
               {"path": "/mutate", "port": 443}, f"{name} clientConfig.service path and port", errors)
        expect(hook["rules"] == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                  "resources": ["pods"], "scope": "Namespaced"}], f"{name} rules", errors)
    # docs/deploy.md argues these: labelled pods fail closed; the cluster-wide JobSet entry fails
    # open unless the namespaces opted in.
    expect(labelled["failurePolicy"] == "Fail", "pods.trainenv.io failurePolicy Fail", errors)
    expect(jobset["failurePolicy"] == ("Fail" if opted_in else "Ignore"),
           f"jobset-pods.trainenv.io failurePolicy {'Fail' if opted_in else 'Ignore'}", errors)

    roles = {r["metadata"]["name"]: r for r in by_kind["ClusterRole"]}
    bindings = {b["metadata"]["name"]: b for b in by_kind["ClusterRoleBinding"]}
    if previews:
        reviewer = roles.get("trainenv-token-reviewer", {})
        expect(reviewer.get("rules") == [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                                          "verbs": ["create"]}],
               "the previews' port may create TokenReviews, and nothing else", errors)
        expect(bindings.get("trainenv-token-reviewer", {}).get("roleRef", {}).get("name") == "trainenv-token-reviewer",
               "the token reviewer is bound (to the ServiceAccount: check_references)", errors)
    # doctor's roles (docs/doctor.md): read-only, no Secrets, bound by nobody here (an admin binds
    # them per namespace); tests/server/test_doctor_cluster.cpp holds their rules against what
    # doctor reads.
    for name in ("trainenv-doctor", "trainenv-doctor-cluster", "trainenv-doctor-logs"):
        rules = roles.get(name, {}).get("rules", [])
        expect(rules, f"the {name} ClusterRole", errors)
        for rule in rules:
            expect(set(rule["verbs"]) <= {"get", "list"}, f"{name} only reads (found {rule['verbs']})", errors)
            expect("secrets" not in rule["resources"] and "*" not in rule["resources"] and
                   "*" not in rule["apiGroups"], f"{name}: no Secrets, no wildcards", errors)
        expect(all(b["roleRef"]["name"] != name for b in by_kind["ClusterRoleBinding"]),
               f"{name} is bound by the admin, not the manifests", errors)
    expect(roles.get("trainenv-doctor-logs", {}).get("rules") ==
           [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}],
           "trainenv-doctor-logs grants pods/log only", errors)
    role = roles.get("trainenv-owner-reader", {"metadata": {"name": "?"}, "rules": []})
    expect("rules" in role and role["rules"], "the trainenv-owner-reader ClusterRole", errors)
    granted = set()
    for rule in role["rules"]:
        expect(rule["verbs"] == ["get"], f"ClusterRole grants only get (found {rule['verbs']})", errors)
        expect(not rule.get("resourceNames") and not rule.get("nonResourceURLs"), "ClusterRole rule shape", errors)
        granted |= {(group, resource) for group in rule["apiGroups"] for resource in rule["resources"]}
    wanted = owner_resources(by_kind["ConfigMap"][0], errors)
    expect(len(wanted) == 6, f"policies/owners.yaml reads the six owner kinds (found {len(wanted)})", errors)
    expect(granted == wanted, f"ClusterRole resources: extra {sorted(granted - wanted)}, "
           f"missing {sorted(wanted - granted)}", errors)
    binding = bindings.get("trainenv-owner-reader", {"roleRef": None, "subjects": None})
    expect(binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}, "ClusterRoleBinding roleRef", errors)
    expect([subject.get("name") for subject in binding["subjects"] or []] == ["trainenv"],
           "ClusterRoleBinding subject: the trainenv ServiceAccount (its namespace: check_references)", errors)

    deployment = by_kind["Deployment"][0]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    expect(deployment["spec"]["replicas"] == 2, "two replicas", errors)
    expect(pod["securityContext"]["runAsNonRoot"] is True, "runAsNonRoot", errors)
    expect(pod.get("automountServiceAccountToken") is True and pod["serviceAccountName"] == "trainenv",
           "the pod mounts the trainenv ServiceAccount's token (owner lookups)", errors)
    expect(pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, "seccomp", errors)
    expect(container["securityContext"]["readOnlyRootFilesystem"] is True, "readOnlyRootFilesystem", errors)
    expect(container["securityContext"]["capabilities"] == {"drop": ["ALL"]}, "capabilities", errors)
    expect(container["securityContext"]["allowPrivilegeEscalation"] is False, "allowPrivilegeEscalation", errors)
    expect("readinessProbe" in container and "livenessProbe" in container, "probes", errors)
    expect("requests" in container["resources"] and "limits" in container["resources"], "resources", errors)
    expect(pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname", "spread", errors)
    service = by_kind["Service"][0]
    expect({"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"} in service["spec"]["ports"],
           "service 443 -> https", errors)
    expect(container["ports"][0] == {"name": "https", "containerPort": 8443, "protocol": "TCP"}, "port 8443", errors)
    expect(container["args"][0] == "serve", "the image's entrypoint is the binary: args start with serve", errors)
    # The memory limit was measured with these threads (tests/server/test_memory.cpp reads both).
    expect(any(re.fullmatch(r"--threads=\d+", a) for a in container["args"]), "--threads is set", errors)
    expect(re.fullmatch(r"\d+Mi", str(container["resources"]["limits"].get("memory", ""))) is not None,
           "a memory limit in Mi", errors)
    listens_previews = any(a.startswith("--preview-listen=") for a in container["args"])
    expect(listens_previews == previews, f"--preview-listen {'missing' if previews else 'unexpected'}", errors)
    if previews:
        expect({"name": "previews", "port": 8444, "targetPort": "previews", "protocol": "TCP"}
               in service["spec"]["ports"], "service 8444 -> previews", errors)

    # The NetworkPolicy: the metrics port only from labelled namespaces; out, only the API server.
    policy = by_kind["NetworkPolicy"][0]["spec"]
    metrics_rules = [r for r in policy["ingress"] if any(p["port"] == 9090 for p in r.get("ports", []))]
    expect(len(metrics_rules) == 1 and metrics_rules[0].get("from") ==
           [{"namespaceSelector": {"matchLabels": {"trainenv.io/metrics-scraper": "true"}}}],
           "metrics ingress only from namespaces labelled trainenv.io/metrics-scraper", errors)
    expect(len(policy["egress"]) == 1 and sorted(p["port"] for p in policy["egress"][0]["ports"]) == [443, 6443],
           "egress only to the API server's ports", errors)
    if previews:
        expect(policy["egress"][0].get("to", [{}])[0].get("ipBlock", {}).get("cidr") == "192.0.2.10/32",
               "egress narrowed to the API server's address (api-server.env)", errors)
    else:
        expect("to" not in policy["egress"][0], "egress to the API server's ports, any address", errors)
    config_map = by_kind["ConfigMap"][0]
    expect(config_map["metadata"]["name"] == "trainenv-policies", "ConfigMap name without hash", errors)
    expect("torch.yaml" in config_map["data"], "policies in the ConfigMap", errors)

    annotations = by_kind["MutatingWebhookConfiguration"][0]["metadata"].get("annotations", {})
    # What the certificate names and where cainjector finds it: check_references.
    if overlay in ("cert-manager", "opt-in-namespaces", "previews"):
        expect(len(by_kind.get("Certificate", [])) == 1 and len(by_kind.get("Issuer", [])) == 1,
               "a cert-manager Certificate and its Issuer", errors)
        expect("cert-manager.io/inject-ca-from" in annotations, "cert-manager inject-ca-from", errors)
    if overlay == "static-certs":
        for hook in hooks:
            bundle = base64.b64decode(hook["clientConfig"].get("caBundle", ""))
            expect(bundle.startswith(b"-----BEGIN CERTIFICATE-----"), f"{hook['name']} caBundle holds the CA", errors)
        secret = by_kind.get("Secret", [{}])[0]
        expect(secret.get("type") == "kubernetes.io/tls" and secret["metadata"]["name"] == "trainenv-tls",
               "TLS Secret", errors)


def selects(selector, labels):
    """Whether a LabelSelector selects these labels. An empty one, which selects every pod of the
    namespace, counts as not selecting: ours must name the webhook's pods."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        present, value = e["key"] in labels, labels.get(e["key"])
        listed = value in e.get("values", [])
        if not {"In": present and listed, "NotIn": not present or not listed,
                "Exists": present, "DoesNotExist": not present}[e["operator"]]:
            return False
    return True


# The server's listeners, by the name of the container port each must be.
LISTENERS = {"--listen": "https", "--metrics-listen": "metrics", "--preview-listen": "previews"}


def covers(quota, priority_class):
    """Whether a ResourceQuota's scope admits pods of this priority class."""
    return any(e.get("scopeName") == "PriorityClass" and e.get("operator") == "In" and
               priority_class in e.get("values", [])
               for e in quota["spec"].get("scopeSelector", {}).get("matchExpressions", []))


def check_served_certificate(certificate, bundles, names, errors):
    """The static Secret's certificate: it names the Service as the API server dials it, and each
    webhook entry's caBundle is the CA that issued it (openssl, as the API server would)."""
    with tempfile.TemporaryDirectory() as tmp:
        cert_path = os.path.join(tmp, "tls.crt")
        with open(cert_path, "wb") as f:
            f.write(certificate)
        sans = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", cert_path],
                              capture_output=True, text=True).stdout
        named = set(re.findall(r"DNS:([^,\s]+)", sans))
        missing = [name for name in names if name not in named]
        expect(not missing, f"the TLS Secret's certificate names {missing} (it names {sorted(named)}): mint it for "
               "this namespace (docs/deploy.md, \"Another namespace\")", errors)
        for i, bundle in enumerate(bundles):
            ca_path = os.path.join(tmp, f"ca{i}.crt")
            with open(ca_path, "wb") as f:
                f.write(bundle)
            verified = subprocess.run(["openssl", "verify", "-CAfile", ca_path, cert_path], capture_output=True)
            expect(verified.returncode == 0, f"webhook entry {i}'s caBundle is the CA that issued the TLS Secret's "
                   "certificate", errors)


def check_references(objects, overlay, namespace, errors):
    """Every reference from one object to another, followed to the object it names: what kustomize
    cannot see when a `namespace:` above an overlay moves the objects but not a name written into
    a string."""
    named = {}
    for obj in objects:
        named.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    if any(len(named.get(kind, {})) != 1 for kind in ("Deployment", "Service", "MutatingWebhookConfiguration")):
        return  # check_settings reports the count
    deployment = next(iter(named["Deployment"].values()))
    service = next(iter(named["Service"].values()))
    webhook = next(iter(named["MutatingWebhookConfiguration"].values()))

    # manifests/base/namespace-var.yaml lists where kustomize substitutes the namespace; a use
    # anywhere else is left as written.
    def strings(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)
        elif isinstance(value, str):
            yield value
    for obj in objects:
        expect(not any("$(TRAINENV_NAMESPACE)" in text for text in strings(obj)),
               f"{obj['kind']}/{obj['metadata']['name']} keeps $(TRAINENV_NAMESPACE) unsubstituted", errors)

    # One namespace: the Namespace shipped is the one every namespaced object is in.
    expect(sorted(named.get("Namespace", {})) == [namespace],
           f"the Namespace object is {namespace} (found {sorted(named.get('Namespace', {}))})", errors)
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED:
            found = obj["metadata"].get("namespace")
            expect(found == namespace, f"{obj['kind']}/{obj['metadata']['name']} is in {namespace} (found {found})",
                   errors)

    # The Deployment's pods, their ports and what the server listens on.
    template = deployment["spec"]["template"]
    pod_labels = template["metadata"].get("labels", {})
    pod = template["spec"]
    container = pod["containers"][0]
    args = container.get("args", [])
    expect(selects(deployment["spec"]["selector"], pod_labels), "the Deployment's selector selects its pod template",
           errors)
    ports = {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
    listening = {}
    for arg in args:
        flag, _, value = arg.partition("=")
        if flag in LISTENERS:
            listening[LISTENERS[flag]] = int(value.rpartition(":")[2])
    for name, port in listening.items():
        expect(ports.get(name) == port, f"container port {name} is {port}, where the server listens (found "
               f"{ports.get(name)})", errors)
    for probe in ("readinessProbe", "livenessProbe"):
        port = container.get(probe, {}).get("httpGet", {}).get("port")
        expect(port in ports or port in ports.values(), f"the {probe}'s port {port} is a container port", errors)

    def target(service_port):  # the container port a Service port sends to, or None
        wanted = service_port.get("targetPort", service_port["port"])
        return ports.get(wanted) if isinstance(wanted, str) else (wanted if wanted in ports.values() else None)

    # The Service reaches those pods, on container ports.
    selector = service["spec"].get("selector") or {}
    expect(selector and all(pod_labels.get(key) == value for key, value in selector.items()),
           "the Service's selector selects the Deployment's pods", errors)
    for port in service["spec"]["ports"]:
        expect(target(port) is not None, f"Service port {port.get('name')} targets a container port (found "
               f"{port.get('targetPort')})", errors)

    # The webhook calls that Service, in its namespace, on the port that reaches --listen; and it
    # never waits on itself or the control plane: its own namespace and the system ones are out.
    for hook in webhook["webhooks"]:
        ref = hook["clientConfig"].get("service", {})
        expect((ref.get("namespace"), ref.get("name")) == (namespace, service["metadata"]["name"]),
               f"{hook['name']} calls the Service {namespace}/{service['metadata']['name']} (found "
               f"{ref.get('namespace')}/{ref.get('name')})", errors)
        via = [p for p in service["spec"]["ports"] if p["port"] == ref.get("port", 443)]
        expect(via and target(via[0]) == listening.get("https"),
               f"{hook['name']}: Service port {ref.get('port', 443)} reaches the admission listener", errors)
        names_out = [e for e in hook.get("namespaceSelector", {}).get("matchExpressions", [])
                     if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"]
        expect(len(names_out) == 1 and set(names_out[0]["values"]) == SYSTEM_NAMESPACES | {namespace},
               f"{hook['name']} leaves out {sorted(SYSTEM_NAMESPACES | {namespace})} (found "
               f"{[sorted(e['values']) for e in names_out]})", errors)

    # RBAC: the pods run as a ServiceAccount that is shipped, and every binding names it where it is.
    accounts = named.get("ServiceAccount", {})
    expect(pod.get("serviceAccountName") in accounts, f"the Deployment's ServiceAccount "
           f"{pod.get('serviceAccountName')} is shipped", errors)
    for name, binding in named.get("ClusterRoleBinding", {}).items():
        expect(binding["roleRef"]["name"] in named.get("ClusterRole", {}), f"ClusterRoleBinding/{name} binds a "
               "shipped ClusterRole", errors)
        for subject in binding.get("subjects") or []:
            expect(subject.get("kind") == "ServiceAccount" and subject.get("name") in accounts and
                   subject.get("namespace") == namespace, f"ClusterRoleBinding/{name} binds the ServiceAccount in "
                   f"{namespace} (found {subject.get('kind')} {subject.get('namespace')}/{subject.get('name')})",
                   errors)

    # The PDB and the NetworkPolicy apply to these pods; the policy lets in every port they open.
    for name, budget in named.get("PodDisruptionBudget", {}).items():
        expect(selects(budget["spec"].get("selector"), pod_labels), f"PodDisruptionBudget/{name} selects the "
               "Deployment's pods", errors)
        expect(budget["spec"].get("minAvailable", 0) < deployment["spec"]["replicas"],
               f"PodDisruptionBudget/{name} lets a node drain: minAvailable below the replicas", errors)
    for name, policy in named.get("NetworkPolicy", {}).items():
        expect(selects(policy["spec"].get("podSelector"), pod_labels), f"NetworkPolicy/{name} selects the "
               "Deployment's pods", errors)
        admitted = {p.get("port") for rule in policy["spec"].get("ingress", []) for p in rule.get("ports", [])}
        for port_name, number in ports.items():
            expect(port_name in admitted or number in admitted, f"NetworkPolicy/{name} lets in container port "
                   f"{port_name} ({number})", errors)

    # What the pods mount and read exists: ConfigMaps shipped, Secrets shipped or issued.
    config_maps = named.get("ConfigMap", {})
    certificates = named.get("Certificate", {})
    secrets = set(named.get("Secret", {})) | {c["spec"].get("secretName") for c in certificates.values()}
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            expect(volume["configMap"]["name"] in config_maps, f"volume {volume['name']}: ConfigMap "
                   f"{volume['configMap']['name']} is shipped", errors)
        if "secret" in volume and overlay != "base":  # the base leaves the serving Secret to an overlay
            expect(volume["secret"]["secretName"] in secrets, f"volume {volume['name']}: Secret "
                   f"{volume['secret']['secretName']} is shipped or issued by a Certificate", errors)
    for c in pod["containers"] + pod.get("initContainers", []):
        refs = [e["valueFrom"]["configMapKeyRef"]["name"] for e in c.get("env", [])
                if "configMapKeyRef" in e.get("valueFrom", {})]
        refs += [e["configMapRef"]["name"] for e in c.get("envFrom", []) if "configMapRef" in e]
        for ref in refs:
            expect(ref in config_maps, f"container {c['name']} reads ConfigMap {ref}, which is shipped", errors)

    # The serving certificate: the Secret mounted where --tls-cert points, naming the Service as
    # the API server dials it (<service>.<namespace>.svc), trusted through the caBundle.
    tls_dir = os.path.dirname(next((a.partition("=")[2] for a in args if a.startswith("--tls-cert=")), ""))
    mounted = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    tls_secret = volumes.get(mounted.get(tls_dir), {}).get("secret", {}).get("secretName")
    expect(tls_secret is not None, f"the --tls-cert directory {tls_dir} is a mounted Secret", errors)
    dns_names = [f"{service['metadata']['name']}.{namespace}.svc",
                 f"{service['metadata']['name']}.{namespace}.svc.cluster.local"]
    inject = webhook["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    for name, certificate in certificates.items():
        spec = certificate["spec"]
        expect(spec.get("dnsNames") == dns_names,
               f"Certificate/{name} names {dns_names} (found {spec.get('dnsNames')})", errors)
        expect(spec.get("secretName") == tls_secret, f"Certificate/{name} writes the Secret the Deployment mounts, "
               f"{tls_secret} (found {spec.get('secretName')})", errors)
        issuer = spec.get("issuerRef", {})
        expect(issuer.get("kind", "Issuer") == "Issuer" and issuer.get("group", "cert-manager.io") == "cert-manager.io"
               and issuer.get("name") in named.get("Issuer", {}), f"Certificate/{name} is issued by a shipped Issuer "
               f"(found {issuer})", errors)
    if certificates or inject:
        wanted = [f"{namespace}/{name}" for name in certificates]
        expect(len(wanted) == 1 and inject == wanted[0], f"cert-manager.io/inject-ca-from is {wanted} (found {inject})",
               errors)
    if tls_secret in named.get("Secret", {}):
        secret = named["Secret"][tls_secret]
        expect(secret.get("type") == "kubernetes.io/tls", f"Secret/{tls_secret} is kubernetes.io/tls", errors)
        bundles = [base64.b64decode(hook["clientConfig"].get("caBundle", "")) for hook in webhook["webhooks"]]
        check_served_certificate(base64.b64decode(secret.get("data", {}).get("tls.crt", "")), bundles, dns_names,
                                 errors)

    # system-cluster-critical outside kube-system: GKE, and any cluster whose ResourceQuota
    # admission lists it under limitedResources, refuses such pods unless a quota in their
    # namespace covers the priority class. Room for every replica and the rollout's surge.
    priority_class = pod.get("priorityClassName")
    if priority_class:
        replicas = deployment["spec"].get("replicas", 1)
        surge = deployment["spec"].get("strategy", {}).get("rollingUpdate", {}).get("maxSurge", "25%")
        if isinstance(surge, str):
            surge = math.ceil(replicas * int(surge.rstrip("%")) / 100)
        quotas = {name: q for name, q in named.get("ResourceQuota", {}).items() if covers(q, priority_class)}
        expect(quotas, f"a ResourceQuota in {namespace} covers priority class {priority_class}", errors)
        for name, quota in quotas.items():
            allowed = quota["spec"].get("hard", {}).get("pods")
            expect(allowed is not None and int(allowed) >= replicas + surge, f"ResourceQuota/{name} admits "
                   f"{replicas} replicas and a surge of {surge} (found pods: {allowed})", errors)

    # The monitoring component: the ServiceMonitor scrapes the Service port that reaches
    # --metrics-listen.
    monitors = named.get("ServiceMonitor", {})
    rules = named.get("PrometheusRule", {})
    if monitors or rules:
        expect(len(monitors) == 1 and len(rules) == 1, "one ServiceMonitor and one PrometheusRule", errors)
    service_ports = {p.get("name"): p for p in service["spec"]["ports"]}
    for name, monitor in monitors.items():
        spec = monitor["spec"]
        expect(selects(spec.get("selector"), service["metadata"].get("labels", {})), f"ServiceMonitor/{name} selects "
               "the Service", errors)
        for endpoint in spec.get("endpoints", []):
            port = service_ports.get(endpoint.get("port"))
            expect(port is not None and target(port) == listening.get("metrics"), f"ServiceMonitor/{name} scrapes the "
                   f"Service port that reaches --metrics-listen (found {endpoint.get('port')})", errors)
            expect(endpoint.get("path", "/metrics") == "/metrics" and endpoint.get("scheme", "http") == "http",
                   f"ServiceMonitor/{name} scrapes http /metrics", errors)


def main():
    label, overlay, namespace = sys.argv[1:4]
    objects = [obj for obj in yaml.safe_load_all(sys.stdin) if obj]
    errors = []
    for obj in objects:
        validate(obj, errors)
    check_settings(objects, overlay, errors)
    check_references(objects, overlay, namespace, errors)
    for error in errors:
        print(f"{label}: {error}")
    print(f"{label}: {len(objects)} objects, {len(errors)} problems")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
