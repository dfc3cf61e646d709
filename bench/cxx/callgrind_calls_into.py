#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""callgrind_calls_into.py OBJECT FILE: prints "TOTAL INTO": the program's
instructions (callgrind's summary) and the inclusive instructions of every
call made from outside OBJECT into it (OBJECT: a substring of the ELF
object's path). run-scaling.sh subtracts INTO to count the caller's side
without the fake provider's own work (its checks walk a list of every
object, so they grow with the peers where a real provider's do not)."""
import re
import sys


def main(obj, path):
    names = {"ob": {}, "fn": {}}  # compressed names: "(3) /path" then "(3)"
    total = into = 0
    cur_ob = callee_ob = None
    pending_call = False
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def name(kind, text):
        m = name_re.match(text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), "")

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("summary:"):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                cur_ob = name("ob", line[3:])
                callee_ob = None
            elif line.startswith("cob="):
                callee_ob = name("ob", line[4:])
            elif line.startswith("fn="):
                callee_ob = None
            elif line.startswith("calls="):
                pending_call = True
            elif pending_call and line[:1] in "0123456789+-*":
                pending_call = False
                target = callee_ob if callee_ob is not None else cur_ob
                if obj in (target or "") and obj not in (cur_ob or ""):
                    into += int(line.split()[1])
                callee_ob = None
    print(total, into)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: callgrind_calls_into.py OBJECT FILE")
    main(sys.argv[1], sys.argv[2])
