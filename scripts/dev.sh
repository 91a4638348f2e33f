#!/usr/bin/env bash
# The one way to set up, build, run and test trainenv on Debian bookworm. The README's two
# commands, .ci/run and the Dockerfile all go through here, so they cannot drift apart.
#
#   scripts/dev.sh serve [trainenv serve flags]   install, build, mint dev certs, run the webhook
#   scripts/dev.sh test                           install, build what ships, scripts/check.sh, the
#                                                 binary's tests on it, then the whole test suite
#                                                 under ASan+UBSan (build-sanitize/), the server
#                                                 tests under TSan (build-tsan/), each fuzz target
#                                                 for 15 s (build-fuzz/); the image is
#                                                 built meanwhile and checked last (image.sh)
#   scripts/dev.sh check [boundary|format|tidy]   the include boundary, clang-format, clang-tidy
#   scripts/dev.sh image [all|base|build|check]   build the image and check it (scripts/image.sh)
#   scripts/dev.sh deps [--build|--image] | build | certs   the individual steps
#
# Environment: BUILD_DIR (default build), BUILD_TYPE (default Release, as the image ships),
# BUILD_TESTS=OFF to configure without the test suite (serve does: it needs none of its packages),
# UNITY=OFF for one translation unit per file (unity batches are the default), CMAKE_ARGS (extra
# configure arguments), WERROR=1 to make warnings errors, IMAGE_CHECK=0 to leave the image out of
# `test`.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"

# Debian packages, in three lists: building trainenv (all the Dockerfile's build stage installs;
# the runtime image needs only their libraries), testing it, and building and checking the image.
build_packages=(build-essential cmake ninja-build pkg-config libboost1.81-dev libssl-dev
  nlohmann-json3-dev libsimdjson-dev libjemalloc-dev libspdlog-dev libyaml-dev prometheus-cpp-dev)
# The test suite and benchmarks (Catch2, Google Benchmark), and the tools it drives for real: curl
# over TLS, openssl to mint certificates, jq to read JSON, Kubernetes' own object model
# (python3-kubernetes) to validate the manifests, and promtool (prometheus) to check the metrics.
test_packages=(catch2 libbenchmark-dev openssl curl ca-certificates jq python3-kubernetes python3-yaml
  prometheus
  # tests/launch runs whole jobs with the real launchers in network namespaces: iproute2 (netns,
  # bridge, veth), dnsmasq-base (the cluster DNS), openssh-server and -client (sshd in the MPI
  # workers, ssh from the launchers), python3-torch (torchrun, gloo), openmpi-bin and mpich with
  # libopenmpi-dev and libmpich-dev (mpirun, mpiexec.mpich, and mpicc to build the MPI check), and
  # the libraries of the unpacked XGBoost and SciPy (python3-numpy, libgomp1, libblas3,
  # liblapack3, libgfortran5; see unpack_xgboost).
  iproute2 dnsmasq-base openssh-server openssh-client python3-torch openmpi-bin libopenmpi-dev mpich
  libmpich-dev python3-numpy libgomp1 libblas3 liblapack3 libgfortran5)
# scripts/image.sh: base images from the Debian mirror (mmdebstrap), the build (buildah), the run
# (podman with runc), and the checks (curl, openssl, jq; python3-yaml reads the Deployment's args).
image_packages=(mmdebstrap buildah podman runc openssl curl ca-certificates jq python3-yaml)

# tests/launch's XGBoost: Debian's python3-xgboost cannot be installed here (its python3-scipy
# needs python3-pythran, which pulls in libboost1.74-dev, and that conflicts with the
# libboost1.81-dev trainenv builds with), so these packages are unpacked, not installed, into
# build-deps/xgboost; the harness gives the pods PYTHONPATH and LD_LIBRARY_PATH into it.
xgboost_packages=(python3-xgboost libxgboost0 libdmlc0 python3-scipy python3-decorator)
xgboost_dir="$root/build-deps/xgboost"

log() { printf 'dev.sh: %s\n' "$*" >&2; }

unpack_xgboost() {
  [ -d "$xgboost_dir/usr" ] && return
  log "unpacking ${xgboost_packages[*]} into build-deps/xgboost"
  local debs sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  debs="$(mktemp -d)"
  chmod 777 "$debs"  # apt-get download writes there as the _apt user
  # With every package installed, deps has not run apt-get update: the lists may be missing.
  (cd "$debs" && apt-get download -qq "${xgboost_packages[@]}") ||
    { "${sudo[@]}" apt-get update -qq && (cd "$debs" && apt-get download -qq "${xgboost_packages[@]}"); }
  rm -rf "$xgboost_dir.partial"
  mkdir -p "$xgboost_dir.partial"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$xgboost_dir.partial"; done
  mv "$xgboost_dir.partial" "$xgboost_dir"
  rm -rf "$debs"
}

# deps [--build|--image] [PACKAGE...]: install what is missing of the build and test packages
# (and kubectl, and unpack XGBoost for tests/launch), of the build packages alone (--build: the
# Dockerfile), or of the image tools alone (--image: scripts/image.sh), plus the packages named.
deps() {
  local wanted=() missing=() kubectl=1 xgboost=0
  case "${1:-}" in
    --build) shift; wanted=("${build_packages[@]}"); kubectl=0 ;;
    --image) shift; wanted=("${image_packages[@]}"); kubectl=0 ;;
    *) wanted=("${build_packages[@]}" "${test_packages[@]}"); xgboost=1 ;;
  esac
  for p in "${wanted[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # kubectl renders the manifests (kubectl kustomize); Debian's package is kubernetes-client.
  [ $kubectl = 0 ] || command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
  if [ ${#missing[@]} -eq 0 ]; then
    log "all packages present"
  else
    log "installing: ${missing[*]}"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [ $xgboost = 0 ] || unpack_xgboost
}

build() {  # build [TARGET...]: everything by default
  local werror=OFF
  [ "${WERROR:-0}" = 1 ] && werror=ON
  local unity=()
  [ -n "${UNITY:-}" ] && unity=(-DCMAKE_UNITY_BUILD="$UNITY")
  # shellcheck disable=SC2086  # CMAKE_ARGS is a list of arguments
  # The test suite's switch is given each time: the cache would keep a serve's OFF for a test run.
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
    -DTRAINENV_WERROR="$werror" -DTRAINENV_BUILD_TESTS="${BUILD_TESTS:-ON}" "${unity[@]}" \
    ${CMAKE_ARGS:-} >/dev/null
  local targets=()
  [ $# -gt 0 ] && targets=(--target "$@")
  cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
  log "built $build_dir/${1:-trainenv and the tests}"
}

certs() { certs/mint.sh >/dev/null; }

# niced COMMAND...: runs it at the lowest CPU priority, so that beside a stage whose tests wait
# more than they compute it takes only what they leave (the builds in `test` below).
niced() { (renice -n 19 -p "$BASHPID" >/dev/null; "$@"); }

serve() {
  # What serving needs and no more: the build packages, openssl for the development certificates
  # and curl for the preview its message suggests (the test packages, torch and the MPIs among
  # them, are the test command's).
  deps --build openssl curl
  BUILD_TESTS=OFF build trainenv
  certs
  cat >&2 <<MSG

trainenv is starting: HTTPS on https://localhost:8443 (/mutate, /preview, /healthz, /readyz),
plain HTTP health on http://localhost:9090. Try, from another terminal:

  curl --cacert certs/ca.crt --data-binary @examples/torch-pod.yaml https://localhost:8443/preview

Stop it with Ctrl-C.
MSG
  exec "$build_dir/trainenv" serve "$@"
}

test_suite() {
  # The image builds in the background from the start: much of its time is making its base image
  # and installing its packages (downloads, unpacking, writing layers), which this machine's own
  # package installation below overlaps, so that its compile meets less of this machine's. Its
  # tools are installed first, since the host's apt cannot run twice at once (mmdebstrap and the
  # build's apt work in roots of their own). IMAGE_CHECK=0 skips the image on a machine without
  # root; CI builds and checks it.
  local image_pid="" image_log="$root/build-image.log"
  if [ "${IMAGE_CHECK:-1}" = 1 ]; then
    deps --image
    log "the image: building it in the background (scripts/image.sh build, log in build-image.log)"
    scripts/image.sh build >"$image_log" 2>&1 &
    image_pid=$!
  else
    log "IMAGE_CHECK=0: the image is neither built nor checked"
  fi
  deps clang-format clang-tidy clang-14  # for scripts/check.sh (clang-14: tidy.py's preprocessor); the image needs none
  # What ships, built as the image builds it (Release) with warnings as errors, and the
  # benchmarks, so they keep compiling. Its tests are the ones that drive the binary as a user
  # does (curl, the CLI, the manifests, operations); the whole suite runs once, under
  # ASan+UBSan, below: on two cores, a second whole build was a fifth of the run. binary_tests
  # holds the two tests that judge the binary as it ships (its memory, a rolling upgrade).
  build trainenv benchmarks binary_tests
  # The rules the compiler cannot see (include boundary, format, clang-tidy), before any test.
  scripts/check.sh
  # The tests run alone: some of them time things.
  if [ -n "$image_pid" ]; then
    log "waiting for the image build"
    local image_status=0
    wait "$image_pid" || image_status=$?
    grep -E '^image\.sh: ' "$image_log" >&2 || true
    [ "$image_status" -eq 0 ] || { tail -n 60 "$image_log" >&2; log "the image build FAILED"; exit 1; }
  fi
  ctest --test-dir "$build_dir" --output-on-failure --timeout 300 -j "$(nproc)" -LE launch -L binary
  # The real launchers' matrix (tests/launch) against the Release binary. Its cases wait on their
  # launchers more than they compute (under half of two cores busy, measured), so the ASan build
  # below runs beside it, at the lowest priority, taking only what the launchers leave.
  log "the real launchers (tests/launch), with the ASan+UBSan build beside them"
  local launch_log="$root/$build_dir/launch.log" launch_pid launch_status=0 asan_build_status=0
  ctest --test-dir "$build_dir" --output-on-failure --timeout 480 -L launch >"$launch_log" 2>&1 &
  launch_pid=$!
  BUILD_TYPE=Debug CMAKE_ARGS="${CMAKE_ARGS:-} -DTRAINENV_SANITIZE=ON" build_dir=build-sanitize \
    niced build || asan_build_status=$?
  wait "$launch_pid" || launch_status=$?
  cat "$launch_log"
  # A line per layout and launcher: ctest keeps the output of the tests that passed in its log only.
  grep -a '^launch: ' "$build_dir/Testing/Temporary/LastTest.log" >&2 || true
  [ "$launch_status" -eq 0 ] || { log "the real launchers: FAILED (above)"; exit 1; }
  [ "$asan_build_status" -eq 0 ] || { log "the ASan+UBSan build FAILED (above)"; exit 1; }
  # The whole suite under AddressSanitizer (with leak checks) and UndefinedBehaviorSanitizer, but
  # for tests/launch: its minutes go to the launchers, which ran above against the Release binary.
  # The server's tests once more under ThreadSanitizer, below: their build (server_tests only)
  # runs beside this suite, which keeps about one and a half of two cores busy.
  log "the whole suite under ASan+UBSan (build-sanitize/), the TSan build beside it"
  local tsan_build_log="$root/build-tsan.log" tsan_build_pid tsan_build_status=0 asan_status=0
  BUILD_TYPE=Debug CMAKE_ARGS="${CMAKE_ARGS:-} -DTRAINENV_SANITIZE_THREAD=ON" build_dir=build-tsan \
    niced build server_tests >"$tsan_build_log" 2>&1 &
  tsan_build_pid=$!
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-sanitize --output-on-failure --timeout 300 -j "$(nproc)" -LE launch ||
    asan_status=$?
  wait "$tsan_build_pid" || tsan_build_status=$?
  [ "$asan_status" -eq 0 ] || { log "the suite under ASan+UBSan: FAILED (above)"; exit 1; }
  [ "$tsan_build_status" -eq 0 ] || { cat "$tsan_build_log"; log "the TSan build FAILED (above)"; exit 1; }
  # ThreadSanitizer over the listeners, sessions, reloaders and metrics shared across the I/O
  # threads; a race stops the run.
  log "the server tests again under TSan (build-tsan/), the fuzz targets' build beside them"
  # Two processes, one per core, with the tests split about evenly by time ([server] is about
  # 40% of it); each writes its own log, printed whole after both end. They wait on sockets and
  # timers for about 40% of their time, so the fuzz targets build beside them.
  local fuzz_build_log="$root/build-fuzz.log" fuzz_build_pid
  niced scripts/fuzz.sh --build-only >"$fuzz_build_log" 2>&1 &
  fuzz_build_pid=$!
  local tsan_logs=(build-tsan/server.log build-tsan/adversarial-tls-kube.log) tsan_pids=() tsan_failed=0
  export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp"
  build-tsan/tests/server_tests "[server]" >"${tsan_logs[0]}" 2>&1 & tsan_pids+=($!)
  build-tsan/tests/server_tests "[adversarial]~[server],[tls]~[server],[kube]~[server]" \
    >"${tsan_logs[1]}" 2>&1 & tsan_pids+=($!)
  for pid in "${tsan_pids[@]}"; do wait "$pid" || tsan_failed=1; done
  cat "${tsan_logs[@]}"
  unset TSAN_OPTIONS
  local fuzz_build_status=0
  wait "$fuzz_build_pid" || fuzz_build_status=$?
  [ $tsan_failed = 0 ] || { log "ThreadSanitizer: FAILED (above)"; exit 1; }
  [ $fuzz_build_status = 0 ] || { cat "$fuzz_build_log"; log "the fuzz targets' build FAILED (above)"; exit 1; }
  # Each fuzz target briefly, after replaying the inputs that once broke something: a smoke
  # test, two at a time. scripts/fuzz.sh --seconds 1800 is the long run.
  log "the fuzz targets, 15 s each (build-fuzz/)"
  scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-15}"
  # The image built above, run as the Deployment runs it and checked from outside.
  if [ -n "$image_pid" ]; then
    log "the image: check it as the Deployment runs it (scripts/image.sh check)"
    scripts/image.sh check
  fi
}

case "${1:-}" in
  serve) shift; serve "$@" ;;
  test) shift; test_suite "$@" ;;
  deps) shift; deps "$@" ;;
  build) shift; build "$@" ;;
  certs) certs ;;
  image) shift; exec scripts/image.sh "$@" ;;
  check) shift; deps clang-format clang-tidy clang-14; scripts/check.sh "$@" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
