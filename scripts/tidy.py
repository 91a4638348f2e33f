#!/usr/bin/env python3
"""clang-tidy over src/**/*.cpp, each file alone, skipping files whose whole input already passed.

Run by scripts/check.sh tidy (which configures the compile database and says why each option is
what it is); not meant to be called by hand.

    tidy.py --tidy BINARY --clang CLANG --db DIR --jobs N --passed FILE [--] [TIDY_ARG...] FILE...

A file's *input key* is the SHA-256 of everything clang-tidy reads for it: the file as clang's own
preprocessor expands it with every header and comment (`clang -E -C`: NOLINT comments count), its
compile flags, .clang-tidy, the clang-tidy version and the arguments given here, with the
repository's path replaced so that a clone elsewhere gets the same key. FILE (--passed) keeps the
keys of the files that passed, one `KEY PATH` line each; a file whose key is there passed on exactly
this input and is not checked again, as ccache skips a compile. Any change to the file, a header it
includes (ours or a system one), a flag, the configuration or the tool makes a new key, and the
file is checked. Only passes are kept: a file with findings is checked every time.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time

NOISE = re.compile(r"^(\d+ warnings? (and \d+ errors? )?generated\.?|Suppressed \d+ warnings.*|"
                   r"Use -header-filter=.*|\s*)$")


def compile_args(entry, root):
    """The entry's compiler flags, without the compiler, -o OUT and -c FILE."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = True
            continue
        out.append(a)
    return out


def input_key(clang, entry, root, fixed):
    args = compile_args(entry, root)
    pre = subprocess.run([clang, *args, "-E", "-C", entry["file"]], cwd=entry["directory"],
                         capture_output=True, check=False)
    if pre.returncode != 0:
        return None  # tidy will say why; such a file is never taken as passed
    h = hashlib.sha256()
    h.update(fixed)
    h.update(" ".join(args).replace(root, "@ROOT@").encode())
    h.update(b"\0")
    h.update(pre.stdout.replace(root.encode(), b"@ROOT@"))
    return h.hexdigest()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tidy", required=True)
    p.add_argument("--clang", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--passed", required=True)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    a = p.parse_args()
    tidy_args = [x for x in a.rest if x.startswith("-") and x != "--"]
    files = [x for x in a.rest if not x.startswith("-")]
    root = os.getcwd()

    with open(os.path.join(a.db, "compile_commands.json")) as f:
        entries = {os.path.relpath(e["file"], root): e for e in json.load(f)}
    version = subprocess.run([a.tidy, "--version"], capture_output=True, text=True).stdout
    with open(".clang-tidy", "rb") as f:
        fixed = version.encode() + b"\0" + f.read() + b"\0" + " ".join(tidy_args).encode() + b"\0"

    passed = {}
    if os.path.exists(a.passed):
        with open(a.passed) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    key, path = line.split()
                    passed[path] = key

    start = time.monotonic()
    missing = [x for x in files if x not in entries]
    if missing:
        print("tidy: not in the compile database: " + " ".join(missing))
        return 2
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        keys = dict(zip(files, pool.map(lambda x: input_key(a.clang, entries[x], root, fixed),
                                        files)))
    todo = [x for x in files if keys[x] is None or passed.get(x) != keys[x]]
    print(f"tidy: {len(files) - len(todo)} of {len(files)} files unchanged since they passed "
          f"({os.path.relpath(a.passed)}; keys in {time.monotonic() - start:.0f} s), "
          f"{len(todo)} to check")

    def run(path):
        r = subprocess.run([a.tidy, "--quiet", "-p", a.db, "--warnings-as-errors=*", *tidy_args,
                            path], capture_output=True, text=True)
        text = "\n".join(l for l in (r.stdout + r.stderr).splitlines() if not NOISE.match(l))
        # A pass counts for the input it was checked on: an edit during the run voids it.
        if r.returncode == 0 and input_key(a.clang, entries[path], root, fixed) != keys[path]:
            keys[path] = None
        return path, r.returncode, text

    failed, findings = [], set()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for path, status, text in pool.map(run, todo):
            if text:
                print(text, flush=True)
            found = re.findall(r"^\S+:\d+:\d+: (?:warning|error): .*\[([A-Za-z0-9.,-]+)\]$",
                               text, re.M)
            findings.update(check.split(",")[0] for check in found)
            if status == 0 and keys[path] is not None:
                passed[path] = keys[path]
            else:
                failed.append(path)
                passed.pop(path, None)

    with open(a.passed, "w") as f:
        f.write("# scripts/check.sh tidy: the input key of each file as it last passed clang-tidy\n"
                "# (scripts/tidy.py says what a key covers). Commit it with the change that\n"
                "# made it; a stale line only makes tidy check that file again.\n")
        for path in sorted(x for x in files if x in passed):
            f.write(f"{passed[path]} {path}\n")
    if failed:
        # A header's finding repeats once per file including it: the checks, each once.
        print("tidy: findings in " + " ".join(failed) + "; checks: " + ", ".join(sorted(findings)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
