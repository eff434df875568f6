#!/usr/bin/env python3
"""gpu_compiled -- the probe on a compiled model on a GPU (issue #17, part of gpu-check).

testsuite/perf/gpu-check imports this module and calls run(); it can also
run alone:

    python3 testsuite/perf/gpu_compiled.py [--reps 5] [--steps 20] [--device cpu]

On CUDA, with torch.compile(mode="reduce-overhead") (inductor with CUDA
graphs; the probe's host operators are tagged cudagraph_unsafe, so inductor's
graph partitioning captures the model's kernels and the stats reductions and
runs the probe's operators between the graphs):

1. overhead: probe-overhead's hook model (12 blocks, d=64), trained, compiled
   alone and compiled with the probe at level 1, timed side by side in pairs
   (CUDA synchronised, wall clock): the median ratio and its range, each
   one's compile time (its first steps), and how many CUDA graphs inductor
   skipped (dynamo's counters["inductor"]["cudagraph_skips"]);
2. the recording: the compiled run's forward events have device stats (the
   static stats buffers each replay fills, read after it);
3. a NaN: a weight of block 5's mlp.proj set to NaN before step 3 of a
   compiled run at level 1; the recording's first event with
   tensor.nan_count > 0 must be model.layers.5.mlp.proj (out) at step 3, as
   eager mode names it.

Without CUDA it prints one line saying it skipped, and returns 0.  With
--device cpu it runs the same checks on the CPU (mode="reduce-overhead"
falls back there): a check of this script, not a GPU figure.  run() returns
0 when every check passed (or it skipped), 1 when one failed; run(argv)
takes the options above as a list (run() alone: the defaults).
"""

from __future__ import annotations

import argparse
import copy
import importlib.machinery
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "probes" / "pytorch"))


def _overhead_module():
    """probe-overhead (a script without .py): its model and step."""
    name = "tm_probe_overhead"
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.machinery.SourceFileLoader(name, str(HERE / "probe-overhead"))
    spec = importlib.util.spec_from_loader(name, loader)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod     # dynamo looks the model's module up by name
    loader.exec_module(mod)
    return mod


def _sync(dev):
    import torch
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _timed(step, steps, dev):
    _sync(dev)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(dev)
    return time.perf_counter() - t


def _first_nan(path):
    import tensormorph_probe as tp
    with tp.Trace(path) as t:
        for r in t.records():
            if isinstance(r, tp.EventRecord):
                for x in r.tensors:
                    if x.stats.get("nan_count", 0) > 0:
                        return f"{r.node} ({x.slot.split('.')[0]}) at step {r.step}, {r.phase}"
    return None


def _device_stats_seen(path):
    """(forward events, those with a device tensor whose stats are known,
    forward events by step)."""
    import tensormorph_probe as tp
    n = with_stats = 0
    steps: dict[int, int] = {}
    with tp.Trace(path) as t:
        for r in t.records():
            if isinstance(r, tp.EventRecord) and r.kind in ("enter", "exit"):
                n += 1
                steps[r.step] = steps.get(r.step, 0) + 1
                if any(x.device_type != 0 and "max" in x.stats for x in r.tensors):
                    with_stats += 1
    return n, with_stats, steps


def run(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_compiled", description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu to check the script")
    ap.add_argument("--blocks", type=int, default=12, help="the model's blocks (default 12)")
    # gpu-check calls run() with its own command line in sys.argv
    args = ap.parse_args([] if argv is None else argv)
    try:
        import torch
    except ImportError:
        print("gpu_compiled: skipped: torch is not installed")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_compiled: skipped: no CUDA device (torch.cuda.is_available() is False); "
              "nothing was measured")
        return 0
    import torch.nn.functional as F
    from torch._dynamo.utils import counters

    import tensormorph_probe as tp

    po = _overhead_module()
    dev = torch.device(args.device)
    label = "CUDA" if dev.type == "cuda" else "CPU (a check of the script, not a GPU figure)"
    print(f"gpu_compiled: torch {torch.__version__}, {label}, mode=reduce-overhead", flush=True)
    failed = 0
    cfg = dict(po.CONFIGS["hook"], blocks=args.blocks)
    bad = min(5, args.blocks - 1)       # the block whose weight goes NaN

    class LM(po.TinyLM):
        """probe-overhead's hook model, its positions on the ids' device."""

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for layer in self.layers:
                x = layer(x)
            return self.head(self.ln_f(x))

    tmp = tempfile.mkdtemp(prefix="gpu_compiled.")

    # 1. overhead, and 2. the recording
    torch.manual_seed(0)
    base_model = LM(**cfg).to(dev)
    probed_model = copy.deepcopy(base_model)
    ids = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), device=dev)
    # both compile from cold caches (an earlier run's on disk would make
    # one of them warm): a new cache directory, dynamo reset
    po._cold_inductor(tmp)
    counters.clear()
    base_step = po.make_step(torch.compile(base_model, mode="reduce-overhead"), ids, True)
    t = time.perf_counter()
    for _ in range(3):          # compile, then CUDA graph warm-up and capture
        base_step()
    _sync(dev)
    compile_base = time.perf_counter() - t
    skips_base = counters["inductor"]["cudagraph_skips"]
    rec = os.path.join(tmp, "overhead.tmrun")
    probe = tp.attach(probed_model, level=1, record=rec)
    counters.clear()
    probed_step = po.make_step(torch.compile(probed_model, mode="reduce-overhead"), ids, True)
    t = time.perf_counter()
    for _ in range(3):
        probed_step()
    _sync(dev)
    compile_probe = time.perf_counter() - t
    skips_probe = counters["inductor"]["cudagraph_skips"]
    ratios, bases = [], []
    for _ in range(args.reps):
        b = _timed(base_step, args.steps, dev)
        p = _timed(probed_step, args.steps, dev)
        ratios.append(p / b)
        bases.append(b / args.steps * 1000)
    probe.close()
    ratios.sort()
    print(f"  compiled hook model, probe L1: {statistics.median(ratios):.3f}x "
          f"[{ratios[0]:.3f}..{ratios[-1]:.3f}] over {args.reps} pairs x {args.steps} steps "
          f"(base {statistics.median(bases):.2f} ms/step)")
    print(f"  compile + capture (3 steps): {compile_base:.1f} s alone, {compile_probe:.1f} s "
          f"with the probe ({compile_probe / compile_base:.2f}x)")
    print(f"  CUDA graphs skipped by inductor: {skips_base} alone, {skips_probe} with the probe")
    n, with_stats, per_step = _device_stats_seen(rec)
    want = n if dev.type == "cuda" else 0
    ok = n > 0 and with_stats == want
    failed += not ok
    print(f"  {'ok' if ok else 'FAIL'}: {n} forward events recorded, {with_stats} with device "
          f"stats (want {want})")
    # every step the probed model ran (3 to compile and capture, then the
    # timed ones) recorded its events: a replayed CUDA graph, too
    ran = 3 + args.reps * args.steps
    ok = len(per_step) == ran and len(set(per_step.values())) == 1
    failed += not ok
    print(f"  {'ok' if ok else 'FAIL'}: forward events in {len(per_step)} steps of {ran} run, "
          f"{sorted(set(per_step.values()))} a step")

    # 3. a NaN, compiled, named as eager mode names it
    found = {}
    for mode in ("compiled", "eager"):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = LM(**cfg).to(dev)
        path = os.path.join(tmp, f"nan-{mode}.tmrun")
        with tp.attach(model, level=1, record=path):
            run_model = torch.compile(model, mode="reduce-overhead") if mode == "compiled" else model
            opt = torch.optim.SGD(model.parameters(), lr=1e-4)
            for step in range(5):
                if step == 3:
                    with torch.no_grad():
                        model.layers[bad].mlp.proj.weight[0, 0] = float("nan")
                logits = run_model(ids)
                loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        _sync(dev)
        found[mode] = _first_nan(path)
    want = f"model.layers.{bad}.mlp.proj (out) at step 3, fwd"
    ok = found["compiled"] == found["eager"] == want
    failed += not ok
    print(f"  {'ok' if ok else 'FAIL'}: first NaN, compiled: {found['compiled']}; "
          f"eager: {found['eager']} (want {want})")
    print(f"gpu_compiled: {'FAILED' if failed else 'passed'} ({tmp})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
