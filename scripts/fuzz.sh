#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 14, ASan+UBSan) and fuzzes each for a given time.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--build-only] [TARGET...]
#
#   --seconds N   fuzzing time per target (default 60)
#   --jobs J      targets fuzzed at once (default: the number of cores)
#   --build-only  build the targets and stop (scripts/dev.sh test builds them beside TSan's run)
#   TARGET        fuzz_review, fuzz_policy, fuzz_quantity, fuzz_preview, fuzz_owners (default:
#                 all five)
#
# Each target first replays tests/fuzz/regressions/<target>/ (inputs that once broke something;
# any failure there stops the run), then fuzzes from its corpus in build-fuzz/corpus/<target>,
# seeded from tests/fixtures, examples/, policies/, tests/fuzz/seeds and (fuzz_review) the
# bodies whose answers tests/answers keeps, with the dictionary
# tests/fuzz/kubernetes.dict. A finding (crash, leak, UB, broken invariant, timeout, memory blow-up)
# is written to build-fuzz/findings/<target>/ and fails the run; add it to regressions/ once fixed.
# Environment: FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
seconds=60
jobs="$(nproc)"
targets=()
build_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --build-only) build_only=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    fuzz_*) targets+=("$1") ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_review fuzz_policy fuzz_quantity fuzz_preview fuzz_owners fuzz_job)

log() { printf 'fuzz.sh: %s\n' "$*" >&2; }

# clang 14 and its runtimes (libFuzzer, ASan, UBSan) come from Debian.
scripts/dev.sh deps clang-14 libclang-rt-14-dev python3-yaml
# -O1, as libFuzzer's documentation builds its targets: a quarter less compile time than -O2
# on a core batch here.
CXX=clang++-14 cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" \
  -DTRAINENV_BUILD_TESTS=OFF -DTRAINENV_SANITIZE=ON -DTRAINENV_FUZZ=ON >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)" --target "${targets[@]}"
[ $build_only = 0 ] || exit 0

# Seeds: the real-shaped reviews, the example pods (as pods and wrapped in reviews), the
# shipped policies, and hand-written quantities.
seeds="$build_dir/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{fuzz_review,fuzz_policy,fuzz_quantity,fuzz_preview,fuzz_owners,fuzz_job}
cp tests/fixtures/*.json tests/answers/mutate/* "$seeds/fuzz_review/"
cp tests/fixtures/*.json examples/*.yaml "$seeds/fuzz_preview/"
cp policies/*.yaml "$seeds/fuzz_policy/"
rm -f "$seeds/fuzz_policy/kustomization.yaml"
cp tests/fuzz/seeds/quantity/* "$seeds/fuzz_quantity/"
cp examples/jobs/*.yaml tests/fixtures/owners/*.yaml "$seeds/fuzz_job/"
/usr/bin/python3 - "$seeds/fuzz_review" examples/*.yaml <<'PY'
import json, os, sys, yaml
out = sys.argv[1]
for path in sys.argv[2:]:
    with open(path) as f:
        pod = yaml.safe_load(f)
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "seed", "operation": "CREATE", "namespace": "team-a",
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "object": pod}}
    with open(os.path.join(out, "review-" + os.path.basename(path) + ".json"), "w") as f:
        json.dump(review, f)
PY
# fuzz_owners: a selector byte (which pod, which of its owners), then an owner object as the API
# server answers it (JSON), for every owner of every example pod.
/usr/bin/python3 - "$seeds/fuzz_owners" examples/owners/*-owners.yaml <<'PY'
import json, os, sys, yaml
out = sys.argv[1]
for path in sys.argv[2:]:
    with open(path) as f:
        objects = [o for o in yaml.safe_load_all(f) if o]
    for i, obj in enumerate(objects):
        for selector in range(12):
            name = "%s-%d-%d" % (os.path.basename(path), i, selector)
            with open(os.path.join(out, name), "wb") as f:
                f.write(bytes([selector]) + json.dumps(obj).encode())
PY

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

fuzz_one() {
  local target="$1" binary="$build_dir/tests/fuzz/$1"
  local corpus="$build_dir/corpus/$target" findings="$build_dir/findings/$target"
  mkdir -p "$corpus" "$findings"
  local regressions=(tests/fuzz/regressions/"$target"/*)
  regressions=("${regressions[@]/*\/.keep/}")
  local replay=()
  for r in "${regressions[@]}"; do [ -n "$r" ] && [ -f "$r" ] && replay+=("$r"); done
  if [ ${#replay[@]} -gt 0 ]; then
    "$binary" "${replay[@]}" >"$findings/replay.log" 2>&1 ||
      { log "$target: a regression input fails again; see $findings/replay.log"; return 1; }
  fi
  # -max_len: 64 KiB reaches every structure; the large bodies are the benchmarks' business.
  "$binary" "$corpus" "$seeds/$target" -dict=tests/fuzz/kubernetes.dict \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$findings/" -print_final_stats=1 >"$findings/fuzz.log" 2>&1 || {
    log "$target: FOUND a failing input; see $findings/fuzz.log and $findings/"
    return 1
  }
  local runs cov
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$findings/fuzz.log" | grep -o '[0-9]*$' || echo '?')"
  cov="$(grep -o 'cov: [0-9]*' "$findings/fuzz.log" | tail -1 | grep -o '[0-9]*' || echo '?')"
  log "$target: ${seconds} s, $runs inputs, coverage $cov edges, corpus $(ls "$corpus" | wc -l) files, nothing found"
}

log "fuzzing ${targets[*]} for $seconds s each, $jobs at a time"
failed=0
pids=()
for target in "${targets[@]}"; do
  fuzz_one "$target" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit $failed
