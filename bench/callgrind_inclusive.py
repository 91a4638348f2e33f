#!/usr/bin/env python3
"""Inclusive instruction count (Ir) of the functions whose name matches a regular expression,
from one callgrind output file: their own cost plus the cost of every call they make. The
functions matched must not call one another (the metrics entry points do not).

  callgrind_inclusive.py FILE REGEX
"""
import re
import sys

path, pattern = sys.argv[1], re.compile(sys.argv[2])
names = {}
total = 0
current = None
ref = re.compile(r"(c?fn)=(?:\((\d+)\))?\s*(.*)")
with open(path) as f:
    for line in f:
        m = ref.match(line.rstrip("\n"))
        if m:
            kind, ident, name = m.groups()
            if ident and name:
                names[ident] = name
            elif ident:
                name = names[ident]
            if kind == "fn":
                current = name
        elif line[:1].isdigit() or line[:1] in "+-*":
            # A cost line: "position Ir". After a calls= line it is the call's inclusive cost.
            parts = line.split()
            if current is not None and len(parts) >= 2 and pattern.search(current):
                total += int(parts[1])
print(total)
