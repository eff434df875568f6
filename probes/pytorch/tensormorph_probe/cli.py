"""tensormorph-probe record -o run.tmrun [options] -- python train.py ARGS

Runs an unmodified script with the probe attached: the child gets a
sitecustomize (tensormorph_probe/_boot) on PYTHONPATH that attaches with
model=None before the script starts and closes the trace at exit.  The
options travel in TENSORMORPH_PROBE_* environment variables.  The script's
exit status is passed through.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path


def _node_level(text: str) -> tuple[str, int]:
    pat, sep, lv = text.rpartition("=")
    if not sep or not pat or not lv.isdigit() or not 0 <= int(lv) <= 3:
        raise argparse.ArgumentTypeError(f"expected PATTERN=N with N in 0..3, got {text!r}")
    return pat, int(lv)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tensormorph-probe",
                                 description="Record a PyTorch program into a .tmrun trace.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run a command with the probe attached",
                         usage="tensormorph-probe record -o FILE [options] -- COMMAND [ARGS...]")
    rec.add_argument("-o", "--output", default="run.tmrun", help="trace file (run.tmrun)")
    rec.add_argument("--level", type=int, choices=range(4), default=1, help="probe level 0-3")
    rec.add_argument("--node-level", type=_node_level, action="append", default=[],
                     metavar="PATTERN=N", help="level of the nodes matching PATTERN")
    rec.add_argument("--nodes", action="append", default=[], metavar="PATTERN",
                     help="observe only these nodes (default model.**)")
    rec.add_argument("--ops", metavar="PATTERN", default=None,
                     help="record op events inside the matching modules (comma-separated "
                          "patterns; 'main': the code outside every module call)")
    rec.add_argument("--lossless", action="store_true",
                     help="block the program instead of dropping events")
    rec.add_argument("--listen", action="store_true",
                     help="also let tmdb attach while it runs (tmdb -ex 'attach PID')")
    rec.add_argument("--wait", type=float, metavar="SECONDS",
                     help="with --listen: wait this long for tmdb before running")
    rec.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("tensormorph-probe: no command given (... -- python train.py)", file=sys.stderr)
        return 2
    if cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    boot = Path(__file__).resolve().parent / "_boot"
    pkg_root = boot.parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(boot), str(pkg_root), env.get("PYTHONPATH", "")) if p)
    env["TENSORMORPH_PROBE_CONFIG"] = json.dumps({
        "record": os.path.abspath(args.output),
        "level": args.level,
        "nodes": args.nodes or ["model.**"],
        "levels": dict(args.node_level),
        "lossless": args.lossless,
        "ops": args.ops,
    })
    if args.listen:
        env["TENSORMORPH_LISTEN"] = "1"
        if args.wait is not None:
            env["TENSORMORPH_WAIT"] = str(args.wait)
    try:
        rc = subprocess.call(cmd, env=env)
    except FileNotFoundError:
        print(f"tensormorph-probe: {cmd[0]}: command not found", file=sys.stderr)
        return 127
    except KeyboardInterrupt:
        return 130
    if rc < 0:
        _die_like(-rc)
        return 128 - rc
    return rc


def _die_like(signo: int) -> None:
    """The child died of signal signo: so do we, so that the caller (a shell:
    128 + signo, 137 for SIGKILL) sees the same.  SIGKILL and SIGSTOP have no
    handler to reset (signal.signal raises EINVAL); our own core file would
    only hide the child's."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, OSError, ValueError):
        pass
    try:
        if signo not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signo, signal.SIG_DFL)
        if signo == signal.SIGSTOP:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signo)
    except (OSError, ValueError):
        pass
