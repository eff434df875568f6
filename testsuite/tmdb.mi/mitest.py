#!/usr/bin/env python3
"""mitest.py -- run a tmdb GDB/MI test.

Two kinds of test, both run by `make check` from the testsuite build
directory:

*.mi       MI transcript tests.  Every line that is neither blank nor a
           comment is sent to `tmdb --interpreter=mi`; every output line must
           pass the MI grammar checker (lib/micheck.py), every command must
           get exactly one result record with its token, followed by a
           prompt; then the output is matched against the test's
           `# CHECK:` lines (FileCheck-like, lib/tmcheck.py).  Directives:
               # TRACE: ARGS   mktrace options for the trace %t
               # ARGS: ARGS    tmdb arguments (default: -nx -q
                               --interpreter=mi %t)
               # EXIT: N       expected exit status (default 0)
               # SH: CMD       a shell command run in the work directory
                               before tmdb starts (a live model to attach
                               to: ../../lib/livemodel SOCKET)
           Live tests start lib/livemodel as ../../lib/livemodel (the work
           directory is tmdb.mi/NAME.work in the testsuite build tree).
*.pygdbmi  Python scripts run with --tmdb TMDB --trace TRACE --work DIR
           (a second, independent MI client: pygdbmi).  77 means skipped.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

import micheck  # noqa: E402
import tmcheck  # noqa: E402


def make_trace(mktrace: str, model: str, work: str, args: str) -> str:
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shutil.copy(model, os.path.join(work, "model.py"))
    path = os.path.join(work, "trace.tmrun")
    cmd = [mktrace, "-o", path, "--source", "model.py", *shlex.split(args)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"mktrace failed: {' '.join(cmd)}\n{r.stderr}")
    return path


def run_mi(test: str, tmdb: str, mktrace: str, model: str, work: str) -> int:
    trace_args, tmdb_args, want_exit = "", "-nx -q --interpreter=mi %t", 0
    inputs: list[str] = []
    setup: list[str] = []
    with open(test, encoding="utf-8") as fp:
        for line in fp:
            line = line.rstrip("\n")
            m = re.match(r"^#\s*(TRACE|ARGS|EXIT|SH):(.*)$", line)
            if m:
                if m.group(1) == "SH":
                    setup.append(m.group(2).strip())
                elif m.group(1) == "TRACE":
                    trace_args = m.group(2).strip()
                elif m.group(1) == "ARGS":
                    tmdb_args = m.group(2).strip()
                else:
                    want_exit = int(m.group(2))
            elif line.strip() and not line.lstrip().startswith("#"):
                inputs.append(line)
    _, _, checks = tmcheck.parse(test)
    trace = make_trace(mktrace, model, work, trace_args)
    inputs = [i.replace("%t", trace).replace("%w", work) for i in inputs]
    args = shlex.split(tmdb_args.replace("%t", trace).replace("%w", work))
    env = dict(os.environ, HOME=work, LC_ALL="C")
    for cmd in setup:
        r = subprocess.run(cmd, shell=True, cwd=work, env=env, timeout=60)
        if r.returncode != 0:
            print(f"{test}: setup command failed ({r.returncode}): {cmd}")
            return 1
    try:
        r = subprocess.run([tmdb, *args], input="".join(i + "\n" for i in inputs).encode(),
                           cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
    except subprocess.TimeoutExpired:
        print(f"{test}: tmdb hung")
        return 1
    out = r.stdout.decode("ascii", "replace")
    with open(os.path.join(work, "output.txt"), "w", encoding="utf-8") as fp:
        fp.write(out)
    failures: list[str] = []
    if r.returncode != want_exit:
        failures.append(f"exit status {r.returncode}, expected {want_exit}")
    if r.stderr:
        failures.append(f"tmdb wrote to stderr in MI mode:\n{r.stderr.decode()}")
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # tokens of the MI commands sent, in order; a CLI command has none unless given
    # (an over-long token, past tmdb's MI_TOKEN_MAX of 20 digits, is refused
    # and not echoed)
    tokens = [re.match(r"\d*", i).group(0) for i in inputs]
    tokens = [tok if len(tok) <= 20 else "" for tok in tokens]
    exited = bool(inputs) and re.sub(r"^\d+", "", inputs[-1]).strip() in ("-gdb-exit", "quit")
    try:
        micheck.check_transcript(lines, tokens, exited=exited)
    except micheck.MIError as e:
        failures.append(f"MI grammar: {e}")
    failures += tmcheck.check_output(out, checks, test)
    name = os.path.basename(test)
    if failures:
        print("\n".join(failures))
        print(f"--- full output ({work}/output.txt) ---\n{out}")
        return 1
    print(f"PASS: {name}: {len(lines)} lines of MI, {len(checks)} checks")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmdb", required=True)
    ap.add_argument("--mktrace", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("test")
    a = ap.parse_args()
    test = os.path.abspath(a.test)
    name = os.path.splitext(os.path.basename(test))[0]
    work = os.path.abspath(os.path.join("tmdb.mi", name + ".work"))
    tmdb, mktrace = os.path.abspath(a.tmdb), os.path.abspath(a.mktrace)
    if test.endswith(".pygdbmi"):
        trace = make_trace(mktrace, os.path.abspath(a.model), work, "")
        return subprocess.run([sys.executable, test, "--tmdb", tmdb, "--trace", trace,
                               "--work", work], cwd=work).returncode
    return run_mi(test, tmdb, mktrace, os.path.abspath(a.model), work)


if __name__ == "__main__":
    sys.exit(main())
