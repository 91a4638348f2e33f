#!/usr/bin/env bash
# The checks the compiler cannot make, run by `scripts/dev.sh test` after the build and before
# ctest (and alone by `scripts/dev.sh check`). docs/architecture.md says which rule each enforces.
#
#   scripts/check.sh [boundary|format|tidy]...    all three by default
#
#   boundary  the layering: which headers core/, inputs/ and server/ may include
#   format    clang-format --dry-run -Werror over every tracked .cpp/.hpp
#   tidy      clang-tidy 14 (root .clang-tidy) over src/**/*.cpp, warnings as errors, each file
#             alone (a compile database of its own in build-tidy/, configured, never built);
#             the static analyzer in its shallow mode, TIDY_ANALYZER=deep for the full one;
#             a file whose whole input passed before is skipped (scripts/tidy.py, .ci/tidy-passed)
#
# Environment: TIDY_JOBS (default: the number of CPUs), TIDY_ANALYZER (shallow or deep).
# Exit status: 0 when every check passed, 1 when any failed, 2 on a usage or set-up error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
failed=()

say() { printf 'check.sh: %s\n' "$*"; }
fail() { failed+=("$1"); }

# --- boundary ------------------------------------------------------------------------------

# forbid LABEL REGEX DIR... : print every #include in DIRs matching REGEX as file:line, with the
# rule it breaks. A missing directory is reported, not skipped silently (src/inputs/ and
# src/server/ arrive with issue 11's split). Returns 1 if any line matched.
forbid() {
  local rule="$1" regex="$2"
  shift 2
  local dirs=() d
  for d in "$@"; do
    if [ -d "$d" ]; then
      dirs+=("$d")
    else
      say "  (no $d/ yet: rule \"$rule\" not applied there)"
    fi
  done
  [ ${#dirs[@]} -gt 0 ] || return 0
  local hits
  hits="$(grep -rnE --include='*.hpp' --include='*.cpp' --include='*.h' \
    "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($regex)" "${dirs[@]}" || true)"
  [ -n "$hits" ] || return 0
  while IFS= read -r line; do
    printf '  %s\n      breaks: %s\n' "$line" "$rule"
  done <<<"$hits"
  return 1
}

check_boundary() {
  say "boundary: includes allowed in core/, inputs/, server/"
  local ok=0 core=(include/trainenv/core src/core) inputs=(include/trainenv/inputs src/inputs)
  forbid "core includes no Boost, OpenSSL, spdlog, fmt, libyaml or prometheus-cpp" \
    'boost/|openssl/|spdlog/|fmt/|yaml\.h|prometheus/' "${core[@]}" || ok=1
  forbid "inputs includes no Boost, OpenSSL, spdlog or prometheus-cpp" 'boost/|openssl/|spdlog/|prometheus/' "${inputs[@]}" || ok=1
  forbid "core includes nothing from inputs/ or server/ (or the old app/)" \
    '(trainenv/|\.\./)(inputs|server|app)/' "${core[@]}" || ok=1
  forbid "inputs includes nothing from server/ (or the old app/)" \
    '(trainenv/|\.\./)(server|app)/' "${inputs[@]}" || ok=1
  # simdjson reads untrusted text (json_text.cpp) and holds what it read (json_ref: the DOM the
  # pod is read from in place); every other file reads JSON through those two.
  local hits
  hits="$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]simdjson" \
    include/trainenv src 2>/dev/null |
    grep -vE '^(src/core/text/json_text\.cpp|include/trainenv/core/text/json_ref\.hpp):' || true)"
  if [ -n "$hits" ]; then
    while IFS= read -r line; do
      printf '  %s\n      breaks: simdjson is included only by json_text.cpp and json_ref.hpp\n' "$line"
    done <<<"$hits"
    ok=1
  fi
  check_core_layers || ok=1
  if [ $ok -eq 0 ]; then say "boundary: ok"; else say "boundary: FAILED"; fail boundary; fi
}

# The core's wings, lowest first (docs/architecture.md draws them): one folder each under
# include/trainenv/core/ and src/core/. A core file may include core headers of its own wing and
# of the wings below it, never above: each wing can be read knowing only those below it.
# A new file goes into a wing's folder; a new wing needs a line here.
core_wings=(text model policy job decide preview diagnose)

wing_rank() {
  local i
  for i in "${!core_wings[@]}"; do
    [ "${core_wings[$i]}" = "$1" ] && { echo "$i"; return; }
  done
  echo ""
}

check_core_layers() {
  local ok=0 file wing rank included inc_wing inc_rank
  while IFS= read -r file; do
    wing="$(basename "$(dirname "$file")")"
    rank="$(wing_rank "$wing")"
    if [ -z "$rank" ]; then
      printf '  %s\n      breaks: every core file sits in a wing folder (%s)\n' "$file" "${core_wings[*]}"
      ok=1
      continue
    fi
    while IFS= read -r included; do
      [ -n "$included" ] || continue
      inc_wing="${included%%/*}"
      inc_rank="$(wing_rank "$inc_wing")"
      if [ -z "$inc_rank" ] || [ "$inc_rank" -gt "$rank" ]; then
        printf '  %s includes trainenv/core/%s\n      breaks: core includes go down the wings (%s is wing %s, %s is %s)\n' \
          "$file" "$included" "$wing" "$rank" "$inc_wing" "${inc_rank:-not a wing}"
        ok=1
      fi
    done < <(grep -oE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"trainenv/core/[a-z_/]+\.hpp"' "$file" |
      sed -E 's|.*trainenv/core/([a-z_/]+)\.hpp"|\1|')
  done < <(find include/trainenv/core src/core -name '*.hpp' -o -name '*.cpp' | sort)
  return $ok
}

# --- format --------------------------------------------------------------------------------

check_format() {
  command -v clang-format >/dev/null || { say "format: clang-format not found (apt-get install clang-format)"; exit 2; }
  local files
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
  say "format: clang-format $(clang-format --version | grep -oE '[0-9]+\.[0-9.]+' | head -1) over ${#files[@]} tracked files"
  if clang-format --dry-run -Werror "${files[@]}"; then
    say "format: ok"
  else
    say "format: FAILED (clang-format -i the files named above)"
    fail format
  fi
}

# --- tidy ----------------------------------------------------------------------------------

check_tidy() {
  local tidy
  tidy="$(command -v clang-tidy-14 || command -v clang-tidy || true)"
  [ -n "$tidy" ] || { say "tidy: clang-tidy-14 not found (apt-get install clang-tidy)"; exit 2; }
  # A unity build's compile database names its batches, not the files: tidy configures its own,
  # one entry per file, so each is checked alone (a missing include shows here).
  local db=build-tidy
  cmake -S . -B "$db" -G Ninja -DCMAKE_UNITY_BUILD=OFF -DTRAINENV_BUILD_TESTS=OFF \
    -DTRAINENV_GCC_LARGE_HEAP=OFF >/dev/null ||
    { say "tidy: configuring $db/ failed"; exit 2; }
  # The analyzer's deep mode (clang's default) inlines callees up to a large budget and was
  # about half of the whole check's time; shallow, as Xcode runs it on every build, still
  # analyses every function with a smaller inlining budget. TIDY_ANALYZER=deep for the full one.
  local analyzer="${TIDY_ANALYZER:-shallow}"
  case "$analyzer" in shallow|deep) ;; *) say "tidy: TIDY_ANALYZER is shallow or deep"; exit 2 ;; esac
  local extra=(-extra-arg=-Xclang -extra-arg=-analyzer-config -extra-arg=-Xclang -extra-arg="mode=$analyzer")
  local clang
  clang="$(command -v clang++-14 || true)"
  [ -n "$clang" ] || { say "tidy: clang++-14 not found (apt-get install clang-14)"; exit 2; }
  local jobs="${TIDY_JOBS:-$(nproc)}" files start
  mapfile -t files < <(git ls-files 'src/*.cpp')
  say "tidy: $(basename "$tidy") over ${#files[@]} files in src/, $jobs jobs, analyzer $analyzer, warnings as errors"
  start=$SECONDS
  local status=0
  # scripts/tidy.py checks each file alone and skips those whose whole input (the file expanded
  # with every header, its flags, .clang-tidy, the tool) passed before: .ci/tidy-passed keeps
  # those inputs' keys, committed with the change, so CI checks only what changed since.
  /usr/bin/python3 scripts/tidy.py --tidy "$tidy" --clang "$clang" --db "$db" --jobs "$jobs" \
    --passed .ci/tidy-passed -- "${extra[@]}" "${files[@]}" || status=1
  if [ $status -eq 0 ]; then
    say "tidy: ok ($((SECONDS - start)) s)"
  else
    say "tidy: FAILED ($((SECONDS - start)) s; .clang-tidy says why each check is on or off)"
    fail tidy
  fi
}

# -------------------------------------------------------------------------------------------

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(boundary format tidy)
for step in "${steps[@]}"; do
  case "$step" in
    boundary) check_boundary ;;
    format) check_format ;;
    tidy) check_tidy ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all passed: ${steps[*]}"
