#!/usr/bin/env bash
# Renders the kustomize base and each overlay offline with kubectl kustomize and validates every
# object strictly, and every reference between them (validate.py): each overlay as shipped, and
# again under a kustomization of one's own that sets `namespace: ml-platform`, as
# docs/deploy.md#install does; then that page's example itself, and the monitoring component,
# whose alert rules go through promtool. The static-certs overlay is filled by certs/mint.sh in
# a copy.
#   test_manifests.sh SOURCE_DIR
set -euo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

status=0
render() {  # render NAME DIR OVERLAY NAMESPACE: OVERLAY is the shipped overlay DIR builds on
  if ! kubectl kustomize "$2" >"$work/$1.yaml" 2>"$work/$1.err"; then
    echo "FAILED: kubectl kustomize $2"; cat "$work/$1.err"; status=1; return
  fi
  /usr/bin/python3 "$src/tests/manifests/validate.py" "$1" "$3" "$4" <"$work/$1.yaml" || status=1
}
# A kustomization of one's own beside the copy of trainenv, as docs/deploy.md#install lays it
# out (kustomize takes no absolute paths): own NAME, then its lines on stdin.
own() {
  mkdir -p "$work/$1"
  cat >"$work/$1/kustomization.yaml"
}

# The copy: static-certs is filled by certs/mint.sh for trainenv-system, and a second copy of it
# by mint.sh --namespace ml-platform (docs/deploy.md, "Another namespace").
mkdir -p "$work/trainenv"
cp -r "$src/manifests" "$src/policies" "$work/trainenv/"
overlays="$work/trainenv/manifests/overlays"
"$src/certs/mint.sh" --static-overlay "$overlays/static-certs" "$work/certs" >/dev/null 2>&1
cp -r "$overlays/static-certs" "$overlays/static-certs-ml-platform"
"$src/certs/mint.sh" --namespace ml-platform --static-overlay "$overlays/static-certs-ml-platform" "$work/certs-ml-platform" \
  >/dev/null 2>&1

for overlay in base cert-manager opt-in-namespaces previews static-certs; do
  dir=overlays/$overlay
  [ "$overlay" = base ] && dir=base
  render "$overlay" "$work/trainenv/manifests/$dir" "$overlay" trainenv-system
  [ "$overlay" = static-certs ] && dir=overlays/static-certs-ml-platform
  own "$overlay-in-ml-platform" <<YAML
namespace: ml-platform
resources:
  - ../trainenv/manifests/$dir
YAML
  render "$overlay-in-ml-platform" "$work/$overlay-in-ml-platform" "$overlay" ml-platform
done
# Fails safe: mint.sh's pair, made for trainenv-system, under namespace: ml-platform is refused
# for the names it lacks (the API server would refuse the handshake).
own static-certs-wrong-names <<'YAML'
namespace: ml-platform
resources:
  - ../trainenv/manifests/overlays/static-certs
YAML
kubectl kustomize "$work/static-certs-wrong-names" 2>/dev/null |
  /usr/bin/python3 "$src/tests/manifests/validate.py" wrong-names static-certs ml-platform >"$work/wrong-names.out" ||
  true
if ! grep -q "the TLS Secret's certificate names \['trainenv.ml-platform.svc'" "$work/wrong-names.out"; then
  echo "FAILED: a certificate for trainenv-system under namespace: ml-platform is not refused"
  cat "$work/wrong-names.out"; status=1
fi

# docs/deploy.md#install's example kustomization, as printed there.
/usr/bin/python3 - "$src/docs/deploy.md" >"$work/example-kustomization.yaml" <<'PY'
import re, sys
blocks = re.findall(r"^```yaml\n(.*?)^```$", open(sys.argv[1]).read(), re.S | re.M)
print(next((b for b in blocks if re.search(r"^namespace: ml-platform$", b, re.M)), ""), end="")
PY
own example <"$work/example-kustomization.yaml"
render example "$work/example" opt-in-namespaces ml-platform
for want in "image: registry.example.com/platform/trainenv:0.1.0" \
            "value: registry.example.com/platform/trainenv:0.1.0"; do
  grep -qF -- "$want" "$work/example.yaml" || { echo "FAILED: docs/deploy.md's example does not give $want"; status=1; }
done

# The README's install (its "Install it in a cluster"), as printed there: its one kustomization,
# indented under a list item, rendered and validated the same way.
/usr/bin/python3 - "$src/README.md" >"$work/readme-kustomization.yaml" <<'PY'
import re, sys, textwrap
blocks = re.findall(r"^( *)```yaml\n(.*?)^\1```$", open(sys.argv[1]).read(), re.S | re.M)
print(next((textwrap.dedent(b) for _, b in blocks if "overlays/opt-in-namespaces" in b), ""), end="")
PY
[ -s "$work/readme-kustomization.yaml" ] || { echo "FAILED: the README has no install kustomization"; status=1; }
own readme <"$work/readme-kustomization.yaml"
render readme "$work/readme" opt-in-namespaces trainenv-system
grep -qF -- "image: registry.example.com/platform/trainenv:0.1.0" "$work/readme.yaml" ||
  { echo "FAILED: the README's install does not deploy the image it names"; status=1; }

# The monitoring component (docs/operations.md, "Alerts"): added to the example, and to an
# overlay that sets no namespace of its own, whose objects must still join the Service's.
{ cat "$work/example-kustomization.yaml"; printf 'components:\n  - ../trainenv/manifests/components/monitoring\n'; } |
  own monitoring
render monitoring "$work/monitoring" opt-in-namespaces ml-platform
own monitoring-as-shipped <<'YAML'
resources:
  - ../trainenv/manifests/overlays/opt-in-namespaces
components:
  - ../trainenv/manifests/components/monitoring
YAML
render monitoring-as-shipped "$work/monitoring-as-shipped" opt-in-namespaces trainenv-system
# Its alert rules: the PrometheusRule's spec is a Prometheus rules file; promtool checks it and
# runs alerts_test.yaml's cases on it (each alert fires on failing series, not on healthy ones).
mkdir -p "$work/rules"
cp "$src/tests/manifests/alerts_test.yaml" "$work/rules/"
if ! /usr/bin/python3 -c '
import sys, yaml
rules = [o for o in yaml.safe_load_all(sys.stdin) if o and o["kind"] == "PrometheusRule"]
assert len(rules) == 1, f"{len(rules)} PrometheusRules"
print(yaml.safe_dump(rules[0]["spec"]))' <"$work/monitoring.yaml" >"$work/rules/trainenv-rules.yaml"; then
  echo "FAILED: the monitoring render has no PrometheusRule"; status=1
elif ! command -v promtool >/dev/null; then
  echo "FAILED: promtool is missing (apt-get install prometheus; scripts/dev.sh deps installs it)"; status=1
else
  promtool check rules "$work/rules/trainenv-rules.yaml" >"$work/rules/check.out" 2>&1 ||
    { echo "FAILED: promtool check rules"; cat "$work/rules/check.out"; status=1; }
  (cd "$work/rules" && promtool test rules alerts_test.yaml) >"$work/rules/test.out" 2>&1 ||
    { echo "FAILED: promtool test rules tests/manifests/alerts_test.yaml"; cat "$work/rules/test.out"; status=1; }
fi

# The readiness wait runs the deployed image: an overlay's `images:` reaches TRAINENV_WAIT_IMAGE,
# which the Deployment passes to --wait-image (manifests/base/wait-image.yaml).
mkdir -p "$overlays/registry"
cat >"$overlays/registry/kustomization.yaml" <<'YAML'
resources:
  - ../cert-manager
images:
  - name: trainenv
    newName: registry.example.com/platform/trainenv
    newTag: "1.2.3"
YAML
render registry "$overlays/registry" cert-manager trainenv-system
for want in "image: registry.example.com/platform/trainenv:1.2.3" \
            "value: registry.example.com/platform/trainenv:1.2.3" "- --wait-image=\$(TRAINENV_WAIT_IMAGE)"; do
  grep -qF -- "$want" "$work/registry.yaml" || { echo "FAILED: an images: override does not give $want"; status=1; }
done
for name in base cert-manager opt-in-namespaces previews static-certs; do
  image=$(sed -n 's/^ *image: *\(trainenv[^ ]*\) *$/\1/p' "$work/$name.yaml")
  waits=$(grep -A1 "name: TRAINENV_WAIT_IMAGE" "$work/$name.yaml" | sed -n 's/^ *value: *//p')
  [ -n "$image" ] && [ "$image" = "$waits" ] || { echo "FAILED: $name: the wait's image $waits is not the Deployment's $image"; status=1; }
done

# The ConfigMap generator lists files by hand: it must list every policy, and nothing else.
listed=$(sed -n 's/^ *- \(.*\.yaml\)$/\1/p' "$src/policies/kustomization.yaml" | sort)
present=$(cd "$src/policies" && ls *.yaml | grep -v '^kustomization.yaml$' | sort)
if [ "$listed" != "$present" ]; then
  echo "FAILED: policies/kustomization.yaml lists [$(echo $listed)] but the directory has [$(echo $present)]"
  status=1
fi
# The image is built by the same script as the README's commands, so they cannot drift.
for needle in "scripts/dev.sh deps" "scripts/dev.sh build"; do
  grep -q "^RUN.*$needle" "$src/Dockerfile" || { echo "FAILED: the Dockerfile does not run $needle"; status=1; }
done
for needle in "scripts/dev.sh serve" "scripts/dev.sh test"; do
  grep -q "^$needle" "$src/README.md" || { echo "FAILED: the README does not give $needle"; status=1; }
done
grep -q "scripts/dev.sh test" "$src/.ci/run" || { echo "FAILED: .ci/run does not run scripts/dev.sh test"; status=1; }
# One tag: the Deployment's image is the one the Dockerfile's comment builds (scripts/image.sh
# builds and checks that tag).
tag=$(sed -n 's/^ *image: *\([^ ]*\) *$/\1/p' "$src/manifests/base/deployment.yaml")
grep -q "^#.* -t $tag " "$src/Dockerfile" || { echo "FAILED: the Dockerfile's comment does not build the Deployment's image $tag"; status=1; }
# The build stage installs the build packages only.
grep -q "^RUN scripts/dev.sh deps --build" "$src/Dockerfile" || { echo "FAILED: the Dockerfile's build stage installs more than the build packages"; status=1; }
# The image runs as the numeric user the Deployment expects.
grep -q "^USER 65532:65532" "$src/Dockerfile" || { echo "FAILED: Dockerfile USER is not 65532"; status=1; }
[ $status -eq 0 ] && echo "manifests: base and the four overlays render and validate, as shipped and in namespace" \
  "ml-platform; so do the README's install, docs/deploy.md's example and the monitoring component, whose alerts pass promtool;" \
  "an images: override reaches the wait"
exit $status
