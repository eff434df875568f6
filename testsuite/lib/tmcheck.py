#!/usr/bin/env python3
"""tmcheck.py -- run a tmdb transcript test and check its output.

A test (testsuite/tmdb.base/*.tmdb) is a tmdb command file whose comment
lines carry directives, in the manner of LLVM's lit and FileCheck:

    # TRACE: ARGS        mktrace options for the default trace %t
    # TRACE-NAME: ARGS   another trace, %{NAME} (written next to %t)
    # RUN: ARGS          run `tmdb ARGS` (default: -batch -nx -x %s %t);
                         its exit status must be 0
    # RUN-EXIT N: ARGS   ... must be N
    # RUN-SH: CMD        a shell command (preparing files; its output is
                         checked too; %tmdb is the tmdb under test)
    # CHECK: TEXT        TEXT appears at or after the last match
    # CHECK-NEXT: TEXT   ... on the line right after the last match
    # CHECK-NOT: TEXT    ... nowhere between the last match and the next
    # CHECK-EMPTY:       the next line is empty

TEXT is literal except for {{regex}} parts; runs of blanks match any run of
blanks.  %t is the default trace, %s the test file, %w the work directory.
stdout and stderr of all RUN lines are checked together, in order.  Each
test runs with HOME set to its own work directory so that no ~/.tmdbinit of
the person running the tests gets in the way.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

DIRECTIVE = re.compile(r"^#\s*(TRACE(?:-[A-Za-z0-9_]+)?|RUN(?:-EXIT\s+\d+)?|RUN-SH"
                       r"|CHECK(?:-NEXT|-NOT|-EMPTY)?):(.*)$")


@dataclass
class Check:
    kind: str
    text: str
    lineno: int
    regex: re.Pattern[str] | None = None


def pattern_to_regex(text: str) -> re.Pattern[str]:
    """FileCheck-like: literal text, {{regex}} parts, blank runs flexible."""
    out = []
    pos = 0
    while pos < len(text):
        start = text.find("{{", pos)
        if start < 0:
            out.append(literal(text[pos:]))
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise ValueError(f"unterminated {{{{ in pattern: {text}")
        out.append(literal(text[pos:start]))
        out.append("(?:" + text[start + 2:end] + ")")
        pos = end + 2
    return re.compile("".join(out))


def literal(text: str) -> str:
    parts = re.split(r"[ \t]+", text)
    return r"[ \t]+".join(re.escape(p) for p in parts)


def parse(path: str) -> tuple[dict[str, str], list[tuple[int, str]], list[Check]]:
    traces: dict[str, str] = {}
    runs: list[tuple[int, str]] = []
    checks: list[Check] = []
    with open(path, encoding="utf-8") as fp:
        for lineno, line in enumerate(fp, 1):
            m = DIRECTIVE.match(line.rstrip("\n"))
            if not m:
                continue
            kind, arg = m.group(1), m.group(2).strip()
            if kind == "TRACE":
                traces[""] = arg
            elif kind.startswith("TRACE-"):
                traces[kind[6:]] = arg
            elif kind == "RUN":
                runs.append((0, arg))
            elif kind.startswith("RUN-EXIT"):
                runs.append((int(kind.split()[1]), arg))
            elif kind == "RUN-SH":
                runs.append((-1, arg))
            else:
                c = Check(kind, m.group(2)[1:] if m.group(2).startswith(" ") else m.group(2),
                          lineno)
                if kind != "CHECK-EMPTY":
                    c.regex = pattern_to_regex(c.text.rstrip())
                checks.append(c)
    if "" not in traces:
        traces[""] = ""
    if not runs:
        runs.append((0, "-batch -nx -x %s %t"))
    return traces, runs, checks


def check_output(output: str, checks: list[Check], test: str) -> list[str]:
    lines = output.split("\n")
    errors: list[str] = []
    line, col = 0, 0
    pending_not: list[Check] = []

    def window(at: int) -> str:
        lo = max(0, at - 3)
        return "\n".join(f"  {i + 1:4}| {lines[i]}" for i in range(lo, min(len(lines), at + 6)))

    for c in checks:
        if c.kind == "CHECK-NOT":
            pending_not.append(c)
            continue
        found = None
        if c.kind == "CHECK-EMPTY":
            nxt = line + 1 if (line, col) != (0, 0) else 0
            if nxt < len(lines) and lines[nxt] == "":
                found = (nxt, 0, 0)
        elif c.kind == "CHECK-NEXT":
            nxt = line + 1
            if nxt < len(lines):
                assert c.regex is not None
                m = c.regex.search(lines[nxt])
                if m:
                    found = (nxt, m.start(), m.end())
        else:
            assert c.regex is not None
            for i in range(line, len(lines)):
                m = c.regex.search(lines[i], col if i == line else 0)
                if m:
                    found = (i, m.start(), m.end())
                    break
        if found is None:
            errors.append(f"{test}:{c.lineno}: error: {c.kind}: expected string not found:\n"
                          f"  {c.text}\noutput near line {line + 1}:\n{window(line)}")
            return errors
        for n in pending_not:
            assert n.regex is not None
            for i in range(line, found[0] + 1):
                seg = lines[i]
                lo = col if i == line else 0
                hi = found[1] if i == found[0] else len(seg)
                if n.regex.search(seg[lo:hi]):
                    errors.append(f"{test}:{n.lineno}: error: CHECK-NOT: excluded string found:"
                                  f"\n  {n.text}\noutput line {i + 1}: {seg}")
        pending_not = []
        line, col = found[0], found[2]
    for n in pending_not:
        assert n.regex is not None
        for i in range(line, len(lines)):
            seg = lines[i][col:] if i == line else lines[i]
            if n.regex.search(seg):
                errors.append(f"{test}:{n.lineno}: error: CHECK-NOT: excluded string found:\n"
                              f"  {n.text}\noutput line {i + 1}: {lines[i]}")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmdb", required=True)
    ap.add_argument("--mktrace", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("test")
    a = ap.parse_args()

    tmdb = os.path.abspath(a.tmdb)
    mktrace = os.path.abspath(a.mktrace)
    test = os.path.abspath(a.test)
    name = os.path.splitext(os.path.basename(test))[0]
    work = os.path.abspath(os.path.join("tmdb.base", name + ".work"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shutil.copy(a.model, os.path.join(work, "model.py"))

    traces, runs, checks = parse(test)
    paths: dict[str, str] = {}
    for key, args in traces.items():
        path = os.path.join(work, (key or "trace") + ".tmrun")
        cmd = [mktrace, "-o", path, "--source", "model.py", *shlex.split(args)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{test}: mktrace failed: {' '.join(cmd)}\n{r.stderr}")
            return 1
        paths[key] = path

    def subst(text: str) -> str:
        text = text.replace("%tmdb", shlex.quote(tmdb))
        text = text.replace("%s", test).replace("%w", work).replace("%t", paths[""])
        return re.sub(r"%\{([A-Za-z0-9_]+)\}", lambda m: paths[m.group(1)], text)

    env = dict(os.environ)
    env["HOME"] = work
    env.pop("TMDB_HISTFILE", None)
    env["LC_ALL"] = "C"
    output = ""
    failures: list[str] = []
    for want, args in runs:
        if want == -1:
            r = subprocess.run(subst(args), shell=True, cwd=work, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
            output += r.stdout.decode("utf-8", "replace")
            if r.returncode != 0:
                failures.append(f"{test}: RUN-SH failed ({r.returncode}): {args}")
            continue
        cmd = [tmdb, *shlex.split(subst(args))]
        try:
            r = subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=120)
        except subprocess.TimeoutExpired:
            failures.append(f"{test}: tmdb hung: {' '.join(cmd)}")
            continue
        text = r.stdout.decode("utf-8", "replace")
        output += text
        if r.returncode != want:
            failures.append(f"{test}: exit status {r.returncode}, expected {want}: "
                            f"{' '.join(cmd)}")
    with open(os.path.join(work, "output.txt"), "w", encoding="utf-8") as fp:
        fp.write(output)
    failures += check_output(output, checks, test)
    if failures:
        print("\n".join(failures))
        print(f"--- full output ({work}/output.txt) ---\n{output}")
        return 1
    print(f"PASS: {name}: {len(checks)} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
