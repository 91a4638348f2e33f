#!/usr/bin/python3
"""Strict checks of rendered manifests (kubectl kustomize output on stdin).

Every object is decoded against the Kubernetes object model from Debian's python3-kubernetes,
field by field: an unknown field, a wrong type or a missing required field fails. cert-manager
objects, which that model does not know, are checked against the few fields they may use. Then
the settings the deployment depends on are asserted.

    validate.py OVERLAY < rendered.yaml
        (OVERLAY: base, cert-manager, opt-in-namespaces, static-certs or previews)
"""
import base64
import re
import sys

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
EXCLUDED_NAMESPACES = {"kube-system", "kube-public", "kube-node-lease", "trainenv-system"}
OPT_IN = {"key": "trainenv.io/injection", "operator": "In", "values": ["enabled"]}

# cert-manager.io/v1 fields this project uses, as a nested whitelist (True: any scalar).
CERT_MANAGER = {
    "Issuer": {"spec": {"selfSigned": {}}},
    "Certificate": {
        "spec": {
            "secretName": True, "duration": True, "renewBefore": True, "dnsNames": True,
            "privateKey": {"algorithm": True, "size": True, "rotationPolicy": True},
            "issuerRef": {"kind": True, "name": True, "group": True},
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
    elif api == "cert-manager.io/v1" and kind in CERT_MANAGER:
        check(obj.get("metadata"), "V1ObjectMeta", f"{name}.metadata", errors)
        rest = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind", "metadata")}
        check_whitelist(rest, CERT_MANAGER[kind], name, errors)
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
                 "ConfigMap", "MutatingWebhookConfiguration"):
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
        expect(expressions[0]["key"] == "kubernetes.io/metadata.name" and expressions[0]["operator"] == "NotIn"
               and set(expressions[0]["values"]) == EXCLUDED_NAMESPACES, f"{name} namespaceSelector exclusions", errors)
        expect((OPT_IN in expressions) == opted_in, f"{name} namespace opt-in {'missing' if opted_in else 'unexpected'}",
               errors)
        expect(hook["sideEffects"] == "None", f"{name} sideEffects", errors)
        expect(hook["admissionReviewVersions"] == ["v1"], f"{name} admissionReviewVersions", errors)
        expect(isinstance(hook.get("timeoutSeconds"), int) and 1 <= hook["timeoutSeconds"] <= 30,
               f"{name} timeoutSeconds", errors)
        expect(hook.get("reinvocationPolicy") == "IfNeeded", f"{name} reinvocationPolicy", errors)
        expect(hook["clientConfig"]["service"] == {"name": "trainenv", "namespace": "trainenv-system",
                                                   "path": "/mutate", "port": 443}, f"{name} clientConfig.service", errors)
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
        expect(bindings.get("trainenv-token-reviewer", {}).get("subjects") ==
               [{"kind": "ServiceAccount", "name": "trainenv", "namespace": "trainenv-system"}],
               "the token reviewer is bound to the trainenv ServiceAccount", errors)
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
    expect(binding["subjects"] == [{"kind": "ServiceAccount", "name": "trainenv", "namespace": "trainenv-system"}],
           "ClusterRoleBinding subject: the trainenv ServiceAccount", errors)

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
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED:
            expect(obj["metadata"].get("namespace") == "trainenv-system", f"{obj['kind']} namespace", errors)
    config_map = by_kind["ConfigMap"][0]
    expect(config_map["metadata"]["name"] == "trainenv-policies", "ConfigMap name without hash", errors)
    expect("torch.yaml" in config_map["data"], "policies in the ConfigMap", errors)

    annotations = by_kind["MutatingWebhookConfiguration"][0]["metadata"].get("annotations", {})
    if overlay in ("cert-manager", "opt-in-namespaces", "previews"):
        expect(annotations.get("cert-manager.io/inject-ca-from") == "trainenv-system/trainenv-serving-cert",
               "cert-manager inject-ca-from", errors)
        certificate = by_kind.get("Certificate", [{}])[0]
        expect(certificate.get("spec", {}).get("secretName") == "trainenv-tls", "Certificate secretName", errors)
        expect("trainenv.trainenv-system.svc" in certificate.get("spec", {}).get("dnsNames", []), "dnsNames", errors)
    if overlay == "static-certs":
        for hook in hooks:
            bundle = base64.b64decode(hook["clientConfig"].get("caBundle", ""))
            expect(bundle.startswith(b"-----BEGIN CERTIFICATE-----"), f"{hook['name']} caBundle holds the CA", errors)
        secret = by_kind.get("Secret", [{}])[0]
        expect(secret.get("type") == "kubernetes.io/tls" and secret["metadata"]["name"] == "trainenv-tls",
               "TLS Secret", errors)


def main():
    overlay = sys.argv[1]
    objects = [obj for obj in yaml.safe_load_all(sys.stdin) if obj]
    errors = []
    for obj in objects:
        validate(obj, errors)
    check_settings(objects, overlay, errors)
    for error in errors:
        print(f"{overlay}: {error}")
    print(f"{overlay}: {len(objects)} objects, {len(errors)} problems")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
