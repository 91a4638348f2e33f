#!/usr/bin/env bash
# Runs a test command with a temporary directory of its own (TMPDIR) and fails if the command
# fails or leaves anything in it: certificates, Secret-like directories, token files and logs
# made by the tests are theirs to remove.
#   leaves_no_temp_files.sh COMMAND [ARGS...]
set -uo pipefail
dir="$(mktemp -d)"
chmod 755 "$dir"
TMPDIR="$dir" "$@" >"$dir.out" 2>&1
status=$?
left="$(ls -A "$dir")"
rm -rf "$dir"
if [ "$status" -ne 0 ]; then
  cat "$dir.out" >&2
  rm -f "$dir.out"
  echo "FAILED: $* exited $status" >&2
  exit 1
fi
rm -f "$dir.out"
if [ -n "$left" ]; then
  echo "FAILED: $* left in its temporary directory: $left" >&2
  exit 1
fi
echo "$*: nothing left behind"
