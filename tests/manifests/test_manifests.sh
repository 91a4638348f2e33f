#!/usr/bin/env bash
# Renders the kustomize base and each overlay offline with kubectl kustomize and validates every
# object strictly (validate.py). The static-certs overlay is filled by certs/mint.sh in a copy.
#   test_manifests.sh SOURCE_DIR
set -euo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

status=0
render() {  # render NAME DIR
  if ! kubectl kustomize "$2" >"$work/$1.yaml" 2>"$work/$1.err"; then
    echo "FAILED: kubectl kustomize $2"; cat "$work/$1.err"; status=1; return
  fi
  /usr/bin/python3 "$src/tests/manifests/validate.py" "$1" <"$work/$1.yaml" || status=1
}

render base "$src/manifests/base"
render cert-manager "$src/manifests/overlays/cert-manager"
render opt-in-namespaces "$src/manifests/overlays/opt-in-namespaces"
render previews "$src/manifests/overlays/previews"

cp -r "$src/manifests" "$src/policies" "$work/"
"$src/certs/mint.sh" --static-overlay "$work/manifests/overlays/static-certs" "$work/certs" >/dev/null 2>&1
render static-certs "$work/manifests/overlays/static-certs"

# The readiness wait runs the deployed image: an overlay's `images:` reaches TRAINENV_WAIT_IMAGE,
# which the Deployment passes to --wait-image (manifests/base/wait-image.yaml).
mkdir -p "$work/manifests/overlays/registry"
cat >"$work/manifests/overlays/registry/kustomization.yaml" <<'YAML'
resources:
  - ../cert-manager
images:
  - name: trainenv
    newName: registry.example.com/platform/trainenv
    newTag: "1.2.3"
YAML
render registry "$work/manifests/overlays/registry"
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
[ $status -eq 0 ] && echo "manifests: base and the four overlays render and validate; an images: override reaches the wait"
exit $status
