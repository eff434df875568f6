#!/usr/bin/env python3
"""peakmem.py -- a view over steps takes the same memory on a long trace as
on a short one (views aggregate into their columns while they scan).

    peakmem.py TMDB SMALL.tmrun BIG.tmrun LIMIT_KB COMMAND...

Runs `TMDB -batch -nx -ex COMMAND` for each command on each trace under
/usr/bin/time (GNU time, Debian `time`: a child of Python would count the
Python process it was forked from in its peak), and fails when a command on the
big trace peaks more than LIMIT_KB above the same command on the small one.
Prints each command's first output line on the big trace (what a column
holds) and whether it stayed within the limit; the sizes themselves vary
with the machine and are not printed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile


TIME = "/usr/bin/time"


def peak(tmdb: str, trace: str, cmd: str) -> tuple[int, str]:
    with tempfile.NamedTemporaryFile("r") as rss:
        p = subprocess.run([TIME, "-o", rss.name, "-f", "%M", tmdb, "-batch", "-nx",
                            "-ex", cmd, trace], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, NO_COLOR="1"))
        kb = int(rss.read().split()[-1])
    lines = [ln for ln in p.stdout.splitlines() if " over steps " in ln]
    return kb, lines[0] if lines else p.stdout.strip().splitlines()[-1]


def main() -> int:
    tmdb, small, big, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if not os.access(TIME, os.X_OK):
        print(f"SKIP: {TIME} is missing (Debian package `time`; ./setup installs it)")
        return 77
    rc = 0
    for cmd in sys.argv[5:]:
        s, _ = peak(tmdb, small, cmd)
        b, line = peak(tmdb, big, cmd)
        print(line)
        if b - s > limit:
            print(f"  peak {b} KB on the big trace, {s} KB on the small: over by {b - s - limit} KB")
            rc = 1
        else:
            print(f"  peak memory within {limit} KB of the small trace's")
    return rc


if __name__ == "__main__":
    sys.exit(main())
