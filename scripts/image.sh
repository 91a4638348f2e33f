#!/usr/bin/env bash
# Builds the trainenv image from the Dockerfile without a Docker engine, runs it the way the
# Deployment runs it, and checks it from outside over loopback. `scripts/dev.sh test` ends with it.
#
#   scripts/image.sh [all|base|build|check]      (also: scripts/dev.sh image [...]; default all)
#
#   base    makes the Dockerfile's base images (docker.io/library/debian:bookworm-slim; also
#           :bookworm if named) from the Debian mirror with mmdebstrap (minbase, merged /usr, the
#           official images' apt and dpkg settings), unless they are already in the local store
#   build   base, then buildah bud of the Dockerfile, tagged with the image of
#           manifests/base/deployment.yaml (the one tag in use); prints build time and size
#   check   runs that image with the Deployment's restrictions (read-only root, no capabilities,
#           no-new-privileges, uid/gid 65532, 256 MiB of memory, the certificates and policies
#           mounted read-only the way Secret and ConfigMap volumes mount them, the Deployment's
#           own args but on 127.0.0.1) and checks /healthz, /readyz, /metrics, a /mutate of a
#           fixture review over TLS with a freshly minted CA, a certificate rotation by ..data
#           swap, the process's uid, capabilities and read-only root, /readyz 503 and exit 0
#           within the grace period on `podman stop`, and that the key as certs/mint.sh leaves
#           it (root, 0600) is refused
#   all     build, then check
#
# Needs root (as on these machines and CI): the container store is /var/lib/containers, vfs
# driver, runc runtime, host network with the server bound to 127.0.0.1 only. Everything the
# check starts is removed on exit. Environment: IMAGE_BUILD_TIMEOUT (seconds, default 1500).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf 'image.sh: %s\n' "$*" >&2; }
fail() { printf 'image.sh: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root: buildah and podman run rootful here (store in /var/lib/containers)"

# The tag is the one the Deployment runs; the Dockerfile's comment names the same one (checked
# by tests/manifests/test_manifests.sh).
tag="$(sed -n 's/^ *image: *\([^ ]*\) *$/\1/p' manifests/base/deployment.yaml | head -n1)"
[ -n "$tag" ] || fail "no image: in manifests/base/deployment.yaml"
image="localhost/${tag}"
# vfs: no overlay mounts needed; runc: crun refuses this VM's cgroups.
buildah=(buildah --storage-driver vfs)
podman=(podman --storage-driver vfs --runtime runc)
# Lower than podman's defaults (nofile 1048576), which exceed this machine's hard limits.
ulimits=(--ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
grace=30  # terminationGracePeriodSeconds of the Deployment

work=""
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do "${podman[@]}" rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
  [ -z "$work" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
work="$(mktemp -d /tmp/trainenv-image.XXXXXX)"

mirror="http://deb.debian.org/debian"
security="http://deb.debian.org/debian-security"

# base: the Debian images the Dockerfile starts FROM, made here since no registry of images
# is reached. The settings are those of the official images (debuerreotype): no apt caches or
# .deb files left behind, gzipped indexes, no translations, unsafe-io for speed; the slim one
# also leaves out documentation, man pages and locales.
make_base() {
  local variant out conf variants
  # The Debian images the Dockerfile names (bookworm-slim, for both stages).
  variants="$(sed -n 's/^FROM debian:\([a-z-]*\).*/\1/p' Dockerfile | sort -u)"
  [ -n "$variants" ] || fail "the Dockerfile names no debian: base image"
  for variant in $variants; do
    case "$variant" in bookworm|bookworm-slim) ;; *) fail "cannot make base image debian:$variant" ;; esac
    if "${podman[@]}" image exists "docker.io/library/debian:$variant"; then
      log "base image debian:$variant present"
      continue
    fi
    conf="$work/base-$variant"
    mkdir -p "$conf/etc/apt/apt.conf.d" "$conf/etc/dpkg/dpkg.cfg.d"
    cat >"$conf/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
    echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$conf/etc/apt/apt.conf.d/docker-autoremove-suggests"
    printf 'Acquire::GzipIndexes "true";\nAcquire::CompressionTypes::Order:: "gz";\n' \
      >"$conf/etc/apt/apt.conf.d/docker-gzip-indexes"
    echo 'Acquire::Languages "none";' >"$conf/etc/apt/apt.conf.d/docker-no-languages"
    echo 'force-unsafe-io' >"$conf/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
    local slim=()
    if [ "$variant" = bookworm-slim ]; then
      cat >"$conf/etc/dpkg/dpkg.cfg.d/docker" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
DPKG
      # The same rules while the base system is unpacked (the file above is for later installs).
      slim=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/groff/*'
        --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
        --dpkgopt='path-exclude=/usr/share/linda/*' --dpkgopt='path-exclude=/usr/share/locale/*'
        --dpkgopt='path-include=/usr/share/locale/locale.alias')
    fi
    out="$work/debian-$variant.tar"
    log "making base image debian:$variant with mmdebstrap (one or two minutes)"
    local t0=$SECONDS
    # The customize hook's $1 is the chroot, expanded by mmdebstrap; the 99mmdebstrap file
    # repeats the slim rules that etc/dpkg/dpkg.cfg.d/docker already holds.
    # shellcheck disable=SC2016
    timeout 900 mmdebstrap --quiet --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      "${slim[@]}" --setup-hook="sync-in $conf /" \
      --customize-hook='rm -f "$1/etc/dpkg/dpkg.cfg.d/99mmdebstrap"' \
      bookworm "$out" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $security bookworm-security main" >"$work/mmdebstrap.log" 2>&1 || {
      tail -n 40 "$work/mmdebstrap.log" >&2
      fail "mmdebstrap of debian:$variant (log above)"
    }
    "${podman[@]}" import --quiet --change 'CMD ["bash"]' "$out" "docker.io/library/debian:$variant" >/dev/null ||
      fail "podman import of debian:$variant"
    rm -f "$out"
    log "made base image debian:$variant in $((SECONDS - t0)) s"
  done
}

build_image() {
  make_base
  local old start seconds size
  old="$("${podman[@]}" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  log "building $image from the Dockerfile (a few minutes on 2 cores)"
  start=$(date +%s)
  timeout "${IMAGE_BUILD_TIMEOUT:-1500}" "${buildah[@]}" bud --quiet --isolation chroot --network host \
    --pull-never --force-rm --layers=false -f Dockerfile -t "$image" . >"$work/build.log" 2>&1 || {
    tail -n 60 "$work/build.log" >&2
    fail "buildah bud (log above; exit $?)"
  }
  seconds=$(($(date +%s) - start))
  local new
  new="$("${podman[@]}" image inspect --format '{{.Id}}' "$image")"
  # The previous build of this tag, now untagged, would otherwise pile up in the store.
  if [ -n "$old" ] && [ "$old" != "$new" ]; then "${podman[@]}" rmi "$old" >/dev/null 2>&1 || true; fi
  size="$("${podman[@]}" image inspect --format '{{.Size}}' "$image")"
  log "built $image in ${seconds} s; size $((size / 1000000)) MB ($size bytes)"
}

# A directory laid out as the kubelet lays out a Secret or ConfigMap volume: the files in a
# timestamped directory, ..data pointing at it, and each name a link through ..data; files
# root-owned with the default mode 0644 (defaultMode 420), directories 0755.
projected_volume() {  # projected_volume DIR FILE...
  local dir="$1" ts f
  shift
  ts="..$(date -u +%Y_%m_%d_%H_%M_%S).000000001"
  mkdir -p "$dir/$ts"
  for f in "$@"; do
    install -m 0644 "$f" "$dir/$ts/$(basename "$f")"
    ln -s "..data/$(basename "$f")" "$dir/$(basename "$f")"
  done
  ln -s "$ts" "$dir/..data"
  chmod 0755 "$dir" "$dir/$ts"
}

served_fingerprint() {  # served_fingerprint PORT: SHA-256 fingerprint of the certificate served
  openssl s_client -connect "127.0.0.1:$1" -servername localhost </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null || true
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The Deployment's args, with the listeners moved to 127.0.0.1 (the container shares the host's
# network here, so nothing else may be reachable).
deployment_args() {  # deployment_args HTTPS_PORT METRICS_PORT
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, yaml
doc = yaml.safe_load(open("manifests/base/deployment.yaml"))
for arg in doc["spec"]["template"]["spec"]["containers"][0]["args"]:
    if arg.startswith("--listen="):
        arg = f"--listen=127.0.0.1:{sys.argv[1]}"
    elif arg.startswith("--metrics-listen="):
        arg = f"--metrics-listen=127.0.0.1:{sys.argv[2]}"
    print(arg)
PY
}

run_container() {  # run_container NAME TLS_DIR ARGS... : starts it detached as the Deployment would
  local name="$1" tls="$2"
  shift 2
  containers+=("$name")
  # A container of this name left by a killed run (same pid) would block the name.
  "${podman[@]}" rm -f -t 0 "$name" >/dev/null 2>&1 || true
  timeout 120 "${podman[@]}" run -d --name "$name" --network host \
    --read-only --read-only-tmpfs=false --cap-drop=ALL --security-opt no-new-privileges \
    --user 65532:65532 --memory 256m "${ulimits[@]}" --stop-timeout "$grace" \
    -v "$tls:/etc/trainenv/tls:ro" -v "$work/policies:/etc/trainenv/policies:ro" \
    "$image" "$@" >/dev/null
}

check_image() {
  "${podman[@]}" image exists "$image" || fail "$image is not built (scripts/image.sh build)"
  local start name pid https metrics args=() i
  start=$(date +%s)
  # Fresh certificates every run, so a served certificate that verifies came from this mount.
  certs/mint.sh "$work/mint" >/dev/null 2>&1 || fail "certs/mint.sh"
  projected_volume "$work/tls" "$work/mint/ca.crt" "$work/mint/tls.crt" "$work/mint/tls.key"
  local policies=()
  for i in policies/*.yaml; do [ "$(basename "$i")" = kustomization.yaml ] || policies+=("$i"); done
  projected_volume "$work/policies" "${policies[@]}"

  https="$(free_port)"
  metrics="$(free_port)"
  [ "$https" != "$metrics" ] || metrics="$(free_port)"
  mapfile -t args < <(deployment_args "$https" "$metrics")
  [ "${args[0]:-}" = serve ] || fail "the Deployment's args do not start with serve: ${args[*]}"

  name="trainenv-image-check-$$"
  run_container "$name" "$work/tls" "${args[@]}" || fail "podman run"
  local plain="http://127.0.0.1:$metrics" tls_url="https://127.0.0.1:$https"
  local ok=0
  for i in $(seq 1 150); do
    if curl -fsS -o /dev/null --max-time 2 "$plain/readyz" 2>/dev/null; then ok=1; break; fi
    [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$name")" = true ] || break
    sleep 0.2
  done
  if [ $ok = 0 ]; then
    "${podman[@]}" logs "$name" >&2 || true
    [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$name")" = true ] ||
      fail "the container exited ($("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")) before it was ready (its log above)"
    fail "the container did not become ready within 30 s (its log above)"
  fi
  log "serving: https on 127.0.0.1:$https, metrics on 127.0.0.1:$metrics"

  # The process: uid and gid 65532, no capabilities, no-new-privileges, read-only root.
  pid="$("${podman[@]}" inspect --format '{{.State.Pid}}' "$name")"
  local status
  status="$(cat "/proc/$pid/status")"
  grep -Eq '^Uid:[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532$' <<<"$status" ||
    fail "the server does not run as uid 65532: $(grep '^Uid:' <<<"$status")"
  grep -Eq '^Gid:[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532[[:space:]]+65532$' <<<"$status" ||
    fail "the server does not run as gid 65532: $(grep '^Gid:' <<<"$status")"
  grep -Eq '^CapEff:[[:space:]]+0+$' <<<"$status" || fail "the server has capabilities: $(grep '^CapEff:' <<<"$status")"
  grep -Eq '^CapPrm:[[:space:]]+0+$' <<<"$status" || fail "the server has permitted capabilities"
  grep -Eq '^NoNewPrivs:[[:space:]]+1$' <<<"$status" || fail "no-new-privileges is not set"
  [ "$(readlink "/proc/$pid/exe" | xargs basename)" = trainenv ] || fail "PID 1 is not trainenv"
  if timeout 30 "${podman[@]}" exec "$name" /bin/sh -c ': >/tmp/write-probe' 2>/dev/null; then
    fail "the root filesystem is writable"
  fi

  # The readiness wait (docs/readiness.md) from the same image, as the init container trainenv-wait
  # runs it: its own command, uid 65532, read-only root, no capabilities; the kubelet's
  # termination-log file mounted where it writes why it gave up.
  local wait_run=("${podman[@]}" run --rm --network host --read-only --cap-drop=ALL
    --security-opt no-new-privileges --user 65532:65532 "${ulimits[@]}" --entrypoint /usr/local/bin/trainenv)
  timeout 60 "${wait_run[@]}" "$image" wait --resolve localhost --connect "127.0.0.1:$https" \
    --timeout 30 >"$work/wait.out" 2>&1 || { cat "$work/wait.out" >&2; fail "trainenv wait in the image did not pass on a listening port"; }
  : >"$work/termination-log" && chmod 0666 "$work/termination-log"
  local wait_code=0
  timeout 60 "${wait_run[@]}" -v "$work/termination-log:/dev/termination-log" "$image" wait \
    --connect 127.0.0.1:1 --timeout 2 --job jobset/image-check -n default >"$work/wait.out" 2>&1 || wait_code=$?
  [ "$wait_code" = 75 ] || { cat "$work/wait.out" >&2; fail "trainenv wait in the image exited $wait_code on a refused port, wanted 75"; }
  grep -q "trainenv doctor jobset/image-check -n default" "$work/termination-log" ||
    fail "trainenv wait in the image left no termination message: $(cat "$work/termination-log")"

  # Health and metrics on the plain port; health on the TLS port as well.
  curl -fsS --max-time 5 "$plain/healthz" >/dev/null || fail "GET /healthz (plain)"
  curl -fsS --max-time 5 "$plain/readyz" >/dev/null || fail "GET /readyz (plain)"
  curl -fsS --max-time 5 --cacert "$work/mint/ca.crt" "$tls_url/healthz" >/dev/null ||
    fail "GET /healthz over TLS with the minted CA"
  curl -fsS --max-time 5 "$plain/metrics" >"$work/metrics" || fail "GET /metrics"
  grep -Eq '^trainenv_ready 1$' "$work/metrics" || fail "/metrics: trainenv_ready is not 1"
  grep -Eq '^trainenv_certificate_expiry_timestamp_seconds [1-9]' "$work/metrics" ||
    fail "/metrics: no certificate expiry (was the certificate read?)"

  # The served certificate is the mounted one (it was read through the ..data links).
  local served mounted
  served="$(served_fingerprint "$https")"
  mounted="$(openssl x509 -in "$work/mint/tls.crt" -noout -fingerprint -sha256)"
  [ "$served" = "$mounted" ] || fail "the served certificate is not the mounted one ($served)"

  # An AdmissionReview as kube-apiserver sends it: allowed, same uid, a JSON Patch that sets the
  # job's variables.
  local fixture="tests/fixtures/review-torch-jobset-node3.json"
  [ -f "$fixture" ] || fixture="$root/../shared/fixtures/review-torch-jobset-node3.json"
  curl -fsS --max-time 10 --cacert "$work/mint/ca.crt" -H 'Content-Type: application/json' \
    --data-binary "@$fixture" "$tls_url/mutate" >"$work/review.json" || fail "POST /mutate over TLS"
  jq -e --slurpfile req "$fixture" '
      .kind == "AdmissionReview" and .apiVersion == "admission.k8s.io/v1"
      and .response.uid == $req[0].request.uid and .response.allowed == true
      and .response.patchType == "JSONPatch"
      and (.response.patch | @base64d | fromjson | length > 0)
      and (.response.patch | @base64d | contains("WORLD_SIZE"))' "$work/review.json" >/dev/null ||
    fail "/mutate did not answer an allowed AdmissionReview with a patch: $(head -c 600 "$work/review.json")"
  curl -fsS --max-time 5 "$plain/metrics" >"$work/metrics" || fail "GET /metrics after /mutate"
  grep -Eq '^trainenv_requests_total\{decision="patched",path="/mutate",policy="torch"\} [1-9]' "$work/metrics" ||
    fail "/metrics does not count the patched /mutate: $(grep '^trainenv_requests_total' "$work/metrics" | head -n 5)"

  # Rotation as the kubelet does it when the Secret changes: a new timestamped directory, ..data
  # swapped to it in one rename. The new certificate must be served within seconds.
  certs/mint.sh "$work/mint2" >/dev/null 2>&1 || fail "certs/mint.sh (rotation)"
  local next old_dir
  next="..$(date -u +%Y_%m_%d_%H_%M_%S).000000002"
  old_dir="$(readlink "$work/tls/..data")"
  mkdir "$work/tls/$next"
  install -m 0644 "$work/mint2/ca.crt" "$work/mint2/tls.crt" "$work/mint2/tls.key" "$work/tls/$next/"
  chmod 0755 "$work/tls/$next"
  ln -s "$next" "$work/tls/..data_tmp"
  mv -T "$work/tls/..data_tmp" "$work/tls/..data"
  rm -rf "${work:?}/tls/$old_dir"
  mounted="$(openssl x509 -in "$work/mint2/tls.crt" -noout -fingerprint -sha256)"
  for i in $(seq 1 50); do
    served="$(served_fingerprint "$https")"
    [ "$served" = "$mounted" ] && break
    sleep 0.2
  done
  [ "$served" = "$mounted" ] || fail "the rotated certificate was not served within 10 s"
  local rotated_ms=$((i * 200))

  # SIGTERM (podman stop) drains: /readyz turns 503 while /healthz stays 200 (--drain-delay),
  # then it exits 0 within the grace period.
  local t0 t1 code stopper drained=0
  t0=$(date +%s)
  timeout $((grace + 30)) "${podman[@]}" stop -t "$grace" "$name" >/dev/null 2>"$work/stop.err" &
  stopper=$!
  for i in $(seq 1 20); do
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$plain/readyz" || true)"
    if [ "$code" = 503 ]; then drained=1; break; fi
    sleep 0.1
  done
  wait "$stopper" || fail "podman stop: $(cat "$work/stop.err")"
  t1=$(date +%s)
  [ $drained = 1 ] || fail "after SIGTERM /readyz did not answer 503 while draining (last: $code)"
  code="$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")"
  if [ "$code" != 0 ] || [ $((t1 - t0)) -ge "$grace" ]; then
    "${podman[@]}" logs "$name" >&2 || true
    fail "podman stop: exit $code after $((t1 - t0)) s (wanted 0 within ${grace} s)"
  fi
  "${podman[@]}" logs "$name" >"$work/server.log" 2>&1 || true
  "${podman[@]}" rm -f "$name" >/dev/null

  # The key as certs/mint.sh leaves it (root, 0600) is unreadable for uid 65532: the server must
  # refuse to start and say which file, not serve without TLS or hang.
  name="trainenv-image-check-$$-unreadable-key"
  run_container "$name" "$work/mint" "${args[@]}" || fail "podman run (unreadable key)"
  "${podman[@]}" wait "$name" >"$work/wait" 2>/dev/null &
  local waiter=$!
  for i in $(seq 1 100); do kill -0 "$waiter" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$waiter" 2>/dev/null; then
    kill "$waiter" 2>/dev/null || true
    fail "the server started with an unreadable key instead of refusing it"
  fi
  wait "$waiter" || true
  code="$(tr -d '[:space:]' <"$work/wait")"
  if [ -z "$code" ] || [ "$code" = 0 ]; then
    fail "with an unreadable key the server exited ${code:-?}, not an error"
  fi
  "${podman[@]}" logs "$name" 2>&1 | grep -q 'tls.key' ||
    fail "with an unreadable key the log does not name tls.key: $("${podman[@]}" logs "$name" 2>&1 | tail -n 3)"

  log "checked in $(($(date +%s) - start)) s: uid/gid 65532, no capabilities, no-new-privileges, read-only root;"
  log "  /healthz, /readyz, /metrics; TLS with the mounted certificate, and the next one after a"
  log "  ..data swap (served within ${rotated_ms} ms); /mutate allowed with a patch;"
  log "  SIGTERM: /readyz 503 while draining, exit 0 in $((t1 - t0)) s; an unreadable key refused (exit $code)"
}

case "${1:-all}" in
  base) "$root/scripts/dev.sh" deps --image; make_base ;;
  build) "$root/scripts/dev.sh" deps --image; build_image ;;
  check) "$root/scripts/dev.sh" deps --image; check_image ;;
  all) "$root/scripts/dev.sh" deps --image; build_image; check_image ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
