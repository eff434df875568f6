"""Attaches the probe inside a program started by `tensormorph-probe record`
or by tmdb (`tmdb --args python train.py`, then `run`).

Python imports sitecustomize at start-up; this one reads the options the CLI
put in TENSORMORPH_PROBE_CONFIG, or, from tmdb, TENSORMORPH_LISTEN (serve a
debugger), TENSORMORPH_WAIT (seconds to wait for it before the model runs),
TENSORMORPH_LEVEL, TENSORMORPH_RECORD (a .tmrun to write as well) and
TENSORMORPH_OPS (op patterns, doc/manual.md "Operations").  It
attaches with model=None (the first root module called becomes `model`) and
lets the probe's atexit handler close the trace.  The variables are removed
from the environment so that the program's own Python subprocesses do not
attach too.  A sitecustomize of the user's further down sys.path still runs.

A distributed launcher (torchrun, python -m torch.distributed.run or
torch.distributed.launch) runs no model: there this does nothing and leaves
the variables in the environment, which its workers inherit (the elastic
agent starts them with a copy of the launcher's environment plus RANK,
WORLD_SIZE, ...); each worker attaches as rank RANK and removes them.
"""

import importlib.util
import json
import os
import sys

_VARS = ("TENSORMORPH_PROBE_CONFIG", "TENSORMORPH_LISTEN", "TENSORMORPH_WAIT",
         "TENSORMORPH_LEVEL", "TENSORMORPH_RECORD", "TENSORMORPH_OPS")


_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_LAUNCHER_SCRIPTS = ("torchrun",)


def _is_launcher(argv: list) -> bool:
    """Whether the interpreter's command line (sys.orig_argv) runs a
    distributed launcher rather than a training script.  Reads the options
    as CPython does: flags may be bundled (-uB), and -c, -m, -W and -X take
    the rest of their argument or the next one."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i + 1 < len(argv) and os.path.basename(argv[i + 1]) in _LAUNCHER_SCRIPTS
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        if not arg.startswith("-") or arg == "-":
            return os.path.basename(arg) in _LAUNCHER_SCRIPTS
        for j in range(1, len(arg)):
            ch = arg[j]
            if ch in "cmWX":
                value = arg[j + 1:]
                if not value:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
                if ch == "c":
                    return False
                if ch == "m":
                    return value in _LAUNCHER_MODULES
                break
        i += 1
    return False


def _attach() -> None:
    env = os.environ
    if _is_launcher(list(getattr(sys, "orig_argv", sys.argv))):
        return
    cfg = env.get("TENSORMORPH_PROBE_CONFIG")
    if cfg:
        opts = json.loads(cfg)
    elif env.get("TENSORMORPH_LISTEN", "0") != "0":
        level = env.get("TENSORMORPH_LEVEL", "1")
        if level not in ("0", "1", "2", "3"):
            sys.exit(f"tensormorph-probe: TENSORMORPH_LEVEL must be 0..3, got {level!r}")
        opts = {"record": env.get("TENSORMORPH_RECORD") or None, "level": int(level),
                "nodes": ["model.**"], "levels": {}, "lossless": False}
    else:
        return
    try:
        import tensormorph_probe

        # attach() reads TENSORMORPH_LISTEN/WAIT itself
        tensormorph_probe.attach(None, level=opts["level"], record=opts["record"],
                                 nodes=opts["nodes"], levels=opts["levels"],
                                 lossless=opts["lossless"],
                                 ops=opts.get("ops") or env.get("TENSORMORPH_OPS") or None)
    except Exception as exc:
        # Asked to record or to be debugged: running on without the probe
        # would look like success and leave no trace.
        sys.stderr.write(f"tensormorph-probe: {exc}\n")
        sys.stderr.flush()
        os._exit(1)
    finally:
        for name in _VARS:
            env.pop(name, None)


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        path = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(path):
            s = importlib.util.spec_from_file_location("_user_sitecustomize", path)
            if s and s.loader:
                s.loader.exec_module(importlib.util.module_from_spec(s))
            return


_attach()
_chain()
