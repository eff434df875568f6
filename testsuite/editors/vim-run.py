#!/usr/bin/env python3
"""vim-run.py -- run vim-termdebug.vim in Vim inside a pseudo-terminal
(termdebug opens terminal windows, which need one), and print its results.

    vim-run.py MODE OUT      (with TMDB, TM_ARGS, TM_SOURCE, TM_LINE,
                              TM_NAN_FILE in the environment)

Exits 0 when every check passed, 1 otherwise; the screen's last state is
printed when something failed.
"""
from __future__ import annotations

import os
import sys
import time

import pexpect

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    mode, out = sys.argv[1], sys.argv[2]
    if os.path.exists(out):
        os.remove(out)
    env = dict(os.environ, TM_MODE=mode, TM_OUT=out, TERM="xterm", LC_ALL="C.UTF-8")
    live = "--args" in env.get("TM_ARGS", "")
    vim = pexpect.spawn("vim", ["-Nu", "NONE", "-i", "NONE", "-n",
                                "-S", os.path.join(HERE, "vim-termdebug.vim")],
                        env=env, encoding="utf-8", dimensions=(50, 160), timeout=5)
    screen = ""
    deadline = time.time() + (240 if live else 90)
    while time.time() < deadline:
        try:
            screen += vim.read_nonblocking(65536, timeout=0.5)
            screen = screen[-20000:]
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            break
        # a hit-enter prompt would stop the script: answer it
        if screen.endswith("Press ENTER or type command to continue"):
            vim.send("\r")
    vim.close(force=True)
    lines = open(out).read().splitlines() if os.path.exists(out) else []
    for line in lines:
        if line != "done":
            print(line)
    ok = bool(lines) and lines[-1] == "done" and not any(l.startswith("FAIL") for l in lines)
    if not lines or lines[-1] != "done":
        print("FAIL the Vim script did not finish")
    if not ok:
        print("--- the terminal's last output:")
        print(screen[-3000:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
