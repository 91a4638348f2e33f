#!/usr/bin/env bash
# docs/support.md's table of API versions against the code: every API group/version trainenv
# reads must have a row, and every row must be an API version trainenv reads. The code's side is
#   - every C++ string literal under src/ and include/ (comments left out) that names one:
#     "jobset.x-k8s.io/v1alpha2", "batch/v1", "/apis/authentication.k8s.io/v1/tokenreviews",
#     a bare "v1" (the core group's version, as in get("v1", "Pod", ...)) or "/api/v1/...";
#   - every owner kind's spec.apiGroup and spec.versions in policies/owners.yaml, which trainenv
#     reads as data (a kind there is matched, and read unless its operator wires it).
# The document's side is the first cell of each row of the table under the heading
# "## API versions trainenv reads": the `group/version` (or `v1` for the core group) in
# backticks. Either side having one the other lacks fails, and the difference is printed.
#   test_support_matrix.sh SOURCE_DIR
set -euo pipefail
src="${1:?usage: test_support_matrix.sh SOURCE_DIR}"

exec /usr/bin/python3 - "$src" <<'PY'
import os
import re
import sys

import yaml

src = sys.argv[1]
DOC = os.path.join(src, "docs", "support.md")
HEADING = "## API versions trainenv reads"

VERSION = r"v[0-9]+(?:(?:alpha|beta)[0-9]+)?"
# A group is a DNS name with a dot, or one of Kubernetes' own groups that have none.
GROUP = r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?|batch|apps|policy|autoscaling|extensions"
GROUP_VERSION = re.compile(r"(?<![A-Za-z0-9_.-])(" + GROUP + r")/(" + VERSION + r")(?![A-Za-z0-9_.])")
CORE_PATH = re.compile(r"(?<![A-Za-z0-9_.-])/?api/(" + VERSION + r")(?![A-Za-z0-9_.])")
BARE_VERSION = re.compile(r"^" + VERSION + r"$")


def literals(text):
    """The string literals of C++ source, comments skipped, with their line numbers."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            close = ")" + delim + '"'
            j = text.find(close, open_paren + 1)
            j = n if j < 0 else j
            out.append((text[open_paren + 1:j], line))
            line += text.count("\n", i, j)
            i = j + len(close)
        elif c == "'" and i > 0 and text[i - 1].isalnum():
            i += 1  # a digit separator (20'000)
        elif c == '"' or c == "'":
            j, buf = i + 1, []
            while j < n and text[j] != c and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            if c == '"':
                out.append(("".join(buf), line))
            i = j + 1 if j < n and text[j] == c else j
        else:
            i += 1
    return out


def from_source():
    found = {}  # "group/version" -> first place it was seen
    for top in ("src", "include"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".hpp", ".h", ".cc")):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                where = os.path.relpath(path, src)
                for literal, line in literals(text):
                    hits = [m.group(1) + "/" + m.group(2) for m in GROUP_VERSION.finditer(literal)]
                    hits += [m.group(1) for m in CORE_PATH.finditer(literal)]
                    if BARE_VERSION.match(literal):
                        hits.append(literal)
                    for hit in hits:
                        found.setdefault(hit, "%s:%d" % (where, line))
    owners = os.path.join(src, "policies", "owners.yaml")
    with open(owners, encoding="utf-8") as f:
        for doc in yaml.safe_load_all(f):
            if not doc or doc.get("kind") != "OwnerKind":
                continue
            spec = doc["spec"]
            group = spec.get("apiGroup") or ""
            for version in spec["versions"]:
                key = group + "/" + version if group else version
                found.setdefault(key, "policies/owners.yaml (owner kind %s)" % doc["metadata"]["name"])
    return found


def from_doc(problems):
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index(HEADING)
    except ValueError:
        sys.exit("FAILED: docs/support.md has no heading %r" % HEADING)
    found, rows = {}, 0
    for number, text in enumerate(lines[start + 1:], start + 2):
        if text.startswith("## "):
            break
        if not text.startswith("|") or re.match(r"^\|[\s:|-]+\|?$", text):
            continue
        rows += 1
        if rows == 1:
            continue  # the header row
        first = text.split("|")[1]
        names = [n for n in re.findall(r"`([^`]+)`", first)
                 if GROUP_VERSION.fullmatch(n) or BARE_VERSION.match(n)]
        if not names:
            problems.append("docs/support.md:%d: the row's first cell names no `group/version`" % number)
        for name in names:
            if name in found:
                problems.append("docs/support.md:%d: %s has a row already (line %s)" % (number, name, found[name]))
            found.setdefault(name, str(number))
    if rows < 2:
        problems.append("docs/support.md: no table rows under %r" % HEADING)
    return found


problems = []
code = from_source()
doc = from_doc(problems)
status = 0
for problem in problems:
    print("FAILED: " + problem)
    status = 1
for name in sorted(set(code) - set(doc)):
    print("FAILED: trainenv reads %s (%s), but docs/support.md's table has no row for it" % (name, code[name]))
    status = 1
for name in sorted(set(doc) - set(code)):
    print("FAILED: docs/support.md:%s lists %s, which nothing in src/, include/ or policies/owners.yaml reads"
          % (doc[name], name))
    status = 1
if status == 0:
    print("ok: the %d API versions trainenv reads are the %d rows of docs/support.md: %s"
          % (len(code), len(doc), ", ".join(sorted(code))))
sys.exit(status)
PY
