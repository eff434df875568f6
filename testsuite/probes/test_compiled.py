"""Compiled models (torch.compile): the probe inside the graph (_compiled.py).

A compiled model records the same forward events as the same model run
eagerly -- order, steps, call numbers, addresses (never `_orig_mod`), slots,
shapes, stats -- and the probe adds no graph break: `fullgraph=True` works.
Level 2's gradient events come from hooks compiled into the backward graph:
on the MLP the whole recording, backward included, is the eager one.  Most
tests compile with the aot_eager backend: dynamo and
AOTAutograd trace the probe's path exactly as for inductor, which two tests
use (the unmodified script at level 1, reduce-overhead) because it compiles
slowly on the CI's cores.
"""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from conftest import comparable, needs_tmdb, read
from conftest import run_tmdb as _tmdb

import tensormorph_probe as tp

# compiling is slow (minutes on 2 cores): the normal build's run checks it,
# the sanitizer run and distcheck (TM_QUICK) leave it out
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
nn = torch.nn
counters = pytest.importorskip("torch._dynamo.utils").counters

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "compiled_train.py"
BACKEND = {0: "aot_eager", 1: "inductor", 2: "aot_eager"}


def fwd_events(path, backward=False):
    """The forward events of a trace (with backward: all of its events)."""
    _, events, gaps = read(path)
    assert not gaps
    return [e for e in events if backward or e.kind in ("enter", "exit")]


def _canonical(events):
    """events in order, but each run of consecutive PARAM events in node
    order: their gradients come from post-accumulate-grad hooks, which fire
    as autograd accumulates them, and a compiled backward hands them over in
    another order than eager autograd does."""
    out, run = [], []

    def flush():
        out.extend(sorted(run, key=lambda x: (x.node, [t.slot for t in x.tensors])))
        run.clear()
    for e in events:
        if e.kind == "param":
            run.append(e)
            continue
        flush()
        out.append(e)
    flush()
    return out


def assert_same(eager, compiled, rel=1e-4, float_steps=None):
    """compiled recorded what eager did.  float_steps: compare the stats
    only in steps below it -- inductor computes in another order, and once
    this training diverges the two runs part by more than rounding (compiled,
    its first NaN comes a step later, in the backward: doc/manual.md 15)."""
    assert [e.seq for e in compiled] == [e.seq for e in eager]
    eager, compiled = _canonical(eager), _canonical(compiled)
    key = [(e.step, e.phase, e.kind, e.node, e.call, e.level,
            [(t.slot, t.shape, t.dtype) for t in e.tensors]) for e in eager]
    ckey = [(e.step, e.phase, e.kind, e.node, e.call, e.level,
             [(t.slot, t.shape, t.dtype) for t in e.tensors]) for e in compiled]
    assert ckey == key
    for a, b in zip(eager, compiled, strict=True):
        assert "_orig_mod" not in b.node
        if float_steps is not None and a.step >= float_steps:
            continue
        for ta, tb in zip(a.tensors, b.tensors, strict=True):
            assert set(tb.stats) == set(ta.stats), (a.node, ta.slot)
            for k, v in ta.stats.items():
                w = tb.stats[k]
                assert (math.isnan(v) and math.isnan(w)) or math.isclose(
                    v, w, rel_tol=rel, abs_tol=1e-5), (a.seq, a.node, ta.slot, k, v, w)
            assert (ta.hist is None) == (tb.hist is None)


def _run(args, env):
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory):
    """compiled_train.py alone, and recorded by `tensormorph-probe record`
    compiled and eager, at levels 0, 1, 2."""
    d = tmp_path_factory.mktemp("compiled")
    runs = {}
    for level, backend in BACKEND.items():
        env = dict(os.environ, TM_BACKEND=backend)
        alone = _run([sys.executable, str(SCRIPT)], env)
        assert alone.returncode == 0, alone.stderr
        rec = str(d / f"compiled{level}.tmrun")
        probed = _run([sys.executable, "-m", "tensormorph_probe", "record", "-o", rec,
                       "--level", str(level), "--", sys.executable, str(SCRIPT)], env)
        assert probed.returncode == 0, probed.stderr
        ref = str(d / f"eager{level}.tmrun")
        eager = _run([sys.executable, "-m", "tensormorph_probe", "record", "-o", ref,
                      "--level", str(level), "--", sys.executable, str(SCRIPT)],
                     dict(env, TM_COMPILE="0"))
        assert eager.returncode == 0, eager.stderr
        runs[level] = (alone.stdout, probed.stdout, rec, ref)
    return runs


# the tests on script_runs and reduce-overhead compile with inductor in
# fresh processes: slow, left out of the sanitizer runs (TM_QUICK)
@pytest.mark.slow
@pytest.mark.parametrize("level", [0, 1, 2])
def test_unmodified_script(script_runs, level):
    """The script's own output, graph-break count included, is unchanged;
    its recording is the eager one."""
    alone, probed, rec, ref = script_runs[level]
    assert "graph breaks: 0" in alone
    assert probed == alone
    assert_same(fwd_events(ref, level == 2), fwd_events(rec, level == 2),
                float_steps=2 if BACKEND[level] == "inductor" else None)


@pytest.mark.slow
def test_python_path(script_runs, tmp_path):
    """Without the C extension (TENSORMORPH_NO_HOOK=1) the probe's Python
    wrapper takes the same traced path."""
    _, _, _, ref = script_runs[1]
    rec = str(tmp_path / "nohook.tmrun")
    env = dict(os.environ, TM_BACKEND="aot_eager", TENSORMORPH_NO_HOOK="1")
    r = _run([sys.executable, "-m", "tensormorph_probe", "record", "-o", rec, "--level", "1",
              "--", sys.executable, str(SCRIPT)], env)
    assert r.returncode == 0, r.stderr
    assert "graph breaks: 0" in r.stdout
    assert_same(fwd_events(ref), fwd_events(rec))


@pytest.mark.slow
@needs_tmdb
def test_find_first_nan(script_runs):
    """`find first` names the module and step of the first NaN, as on the
    eager recording (aot_eager runs eager's kernels: the same NaN)."""
    _, _, rec, ref = script_runs[2]
    found = []
    for path in (rec, ref):
        r = _tmdb(["-ex", "find first tensor.nan_count > 0", path])
        assert r.returncode == 0, r.stderr
        found.append([ln for ln in r.stdout.splitlines() if " at step " in ln])
    assert found[0] == found[1] == ["model.layers.1.norm (out) at step 3, fwd"]
    r = _tmdb(["-ex", "goto step 2", "-ex", "info probe", rec])
    assert ("Compiled: step 2 ran region model compiled (torch.compile), observed at level 2; "
            "its forward events come when the region ends") in r.stdout, r.stdout
    r = _tmdb(["-ex", "goto step 2", "-ex", "info probe", ref])
    assert "Compiled:" not in r.stdout, r.stdout


def test_warm_caches(tmp_path):
    """A probed program run again finds its compiled graphs in inductor's
    caches on disk, as the program alone does (the probe's flush is an
    effect, which inductor does not cache unless told it may), and
    records what the cold run recorded."""
    env = dict(os.environ, TM_CACHE_COUNTS="1", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for k in range(2):
        rec = str(tmp_path / f"run{k}.tmrun")
        r = _run([sys.executable, "-m", "tensormorph_probe", "record", "-o", rec, "--level", "2",
                  "--", sys.executable, str(SCRIPT)], env)
        assert r.returncode == 0, r.stderr
        runs.append((r.stdout, rec))
    (cold, rec0), (warm, rec1) = runs
    assert "fxgraph_cache_miss=2" in cold and "autograd_cache_saved=1" in cold, cold
    assert "fxgraph_cache_hit=2" in warm and "autograd_cache_hit=1" in warm, warm
    assert "bypass" not in cold + warm and "fxgraph_cache_miss" not in warm
    # the script's own output (its losses) is the same; so is the recording
    assert [ln for ln in warm.splitlines() if ln.startswith("step")] == \
        [ln for ln in cold.splitlines() if ln.startswith("step")]
    assert_same(fwd_events(rec0, True), fwd_events(rec1, True), rel=1e-9)


@needs_tmdb
def test_live_equals_replay(tmp_path):
    """A live `break model.** if tensor.nan_count > 0` on the compiled model
    stops where the recording does, at the region's end (`info frame`)."""
    cmds = HERE / "live" / "compiled.cmds"
    trace = tmp_path / "compiled.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="1")
    live = _tmdb(["-x", str(cmds), "--args", sys.executable, str(HERE / "live_models.py"),
                  "compiled"], env=env, timeout=600)
    assert trace.exists(), live.stdout + live.stderr
    replay = _tmdb(["-x", str(cmds), str(trace)])
    a, b = comparable(live.stdout), comparable(replay.stdout)
    assert a == b, "live and replayed sessions differ:\n" + "\n".join(
        f"live:   {x}\nreplay: {y}" for x, y in zip(a, b, strict=False) if x != y)
    assert "Breakpoint 1, model.layers.1.norm (out) at step 3, fwd" in live.stdout
    assert "compiled region model: the model is paused at the region's end" in live.stdout
    assert "Error" not in live.stderr, live.stderr


@needs_tmdb
def test_rerun_exact_stop(tmp_path):
    """The exact stop: at a live stop in a compiled region (the model paused
    at the region's end), `rerun` runs the region again eagerly from the
    snapshot of its entry and stops at its first event; the breakpoint then
    stops inside the eager re-run, where bt and print work, at the module
    and step of the compiled stop."""
    cmds = tmp_path / "rerun.cmds"
    cmds.write_text("break model.** if tensor.nan_count > 0\nrun\ninfo frame\nrerun\n"
                    "info frame\ncontinue\nbacktrace\nprint tensor.nan_count\ninfo frame\n"
                    "delete\ncontinue\n")
    env = dict(os.environ, TENSORMORPH_LEVEL="1", TM_STEPS="4",
               TENSORMORPH_RECORD=str(tmp_path / "rerun.tmrun"))
    r = _tmdb(["-x", str(cmds), "--args", sys.executable, str(HERE / "live_models.py"),
               "compiled"], env=env, timeout=600)
    out = r.stdout
    assert "Error" not in r.stderr, r.stderr
    assert "Breakpoint 1, model.layers.1.norm (out) at step 3, fwd" in out, out
    assert 'live, "rerun" runs the region again eagerly from its entry' in out, out
    assert ("Re-running the compiled region of step 3 eagerly from its entry.\n"
            "Eager re-run of model; its events follow the region's, in step 3.\n"
            "model#2 (in) at step 3, fwd") in out, out
    assert "Breakpoint 1, model.layers.1.norm#2 (out) at step 3, fwd" in out, out
    assert ("#0  model.layers.1.norm#2 (LayerNorm)" in out and "#1  model.layers.1#2 (Block)"
            in out and "#2  model#2 (Net)" in out), out
    assert "$1 = 2048" in out, out
    assert "eager re-run of compiled region model: the model is paused inside it" in out, out
    assert "exited normally" in out, out
    # the re-run is in the recording, after the region, in the same step
    _, events, _ = read(str(tmp_path / "rerun.tmrun"))
    norm = {e.call: e.tensors[0].stats for e in events
            if e.kind == "exit" and e.step == 3 and e.node == "model.layers.1.norm"}
    assert sorted(norm) == [1, 2], norm
    # aot_eager runs eager's kernels: the re-run computes what the region did
    assert norm[1]["nan_count"] == norm[2]["nan_count"] == 2048, norm


@pytest.mark.slow
def test_reduce_overhead_cpu(tmp_path):
    """mode="reduce-overhead" (CUDA graphs) falls back on the CPU and the
    probe keeps recording."""
    rec = str(tmp_path / "ro.tmrun")
    env = dict(os.environ, TM_BACKEND="inductor", TM_MODE="reduce-overhead", TM_STEPS="3")
    r = _run([sys.executable, "-m", "tensormorph_probe", "record", "-o", rec, "--level", "1",
              "--", sys.executable, str(SCRIPT)], env)
    assert r.returncode == 0, r.stderr
    assert "graph breaks: 0" in r.stdout
    ref = str(tmp_path / "eager.tmrun")
    r = _run([sys.executable, "-m", "tensormorph_probe", "record", "-o", ref, "--level", "1",
              "--", sys.executable, str(SCRIPT)], dict(env, TM_COMPILE="0"))
    assert r.returncode == 0, r.stderr
    assert_same(fwd_events(ref), fwd_events(rec), float_steps=2)


# ------------------------------------------------------------ in-process models

class Block(nn.Module):
    def __init__(self, brk: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 16)
        self.brk = brk

    def forward(self, x):
        h = self.act(self.fc1(x))
        if self.brk:
            torch._dynamo.graph_break()     # the model's own
        return x + self.fc2(h)


class MLP(nn.Module):
    def __init__(self, brk: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(brk and i == 1) for i in range(3))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def train(model, run, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        loss = run(torch.randn(4, 16, generator=g)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()


def record_pair(tmp_path, model0, compile_fn, level=1, attach_model=False, backward=False,
                levels=None):
    """The same training recorded eagerly and compiled; the compiled run's
    dynamo counters."""
    paths = []
    for compiled in (False, True):
        model = copy.deepcopy(model0)
        path = str(tmp_path / f"{'c' if compiled else 'e'}.tmrun")
        torch._dynamo.reset()
        counters.clear()
        probe = tp.attach(model if attach_model else None, level=level, record=path,
                          levels=levels)
        try:
            train(model, compile_fn(model) if compiled else model)
        finally:
            probe.close()
        paths.append(path)
    stats = {k: dict(v) for k, v in counters.items()}
    return fwd_events(paths[0], backward), fwd_events(paths[1], backward), stats


def breaks(stats):
    return sum(stats.get("graph_break", {}).values())


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_mlp_fullgraph(tmp_path, level):
    torch.manual_seed(0)
    e, c, stats = record_pair(
        tmp_path, MLP(), lambda m: torch.compile(m, fullgraph=True, backend="aot_eager"), level,
        backward=True)
    if level >= 2:
        assert any(ev.kind == "bwd" and ev.node == "model.blocks.1.fc2" for ev in c)
    assert_same(e, c)
    assert breaks(stats) == 0
    assert stats["stats"]["unique_graphs"] == 1


def test_level0_hands_the_probe_no_tensor(tmp_path):
    """Level 0 records only the tensors' sizes, constants of a graph of
    static sizes: the region hands the probe's operators no tensor (none
    kept alive for them, none standing between kernels inductor would
    fuse), and records what eager mode does."""
    nodes = []

    def keep_graph(gm, example_inputs):
        nodes.extend(n for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch.manual_seed(0)
    e, c, stats = record_pair(
        tmp_path, MLP(), lambda m: torch.compile(m, fullgraph=True, backend=keep_graph), 0)
    assert_same(e, c)
    assert any(ev.tensors for ev in c)
    ops = [n for n in nodes if str(n.target).startswith("tensormorph.")]
    assert [str(n.target) for n in ops] == ["tensormorph.flush"]
    # flush(stats, table, plan, probe, captures, token, hrecs, host, hkey)
    stats_, table, plan, _, captures, _, hrecs, host, _ = ops[0].args
    assert (table, captures, hrecs, host) == ([], [], [], [])
    assert plan


@pytest.mark.parametrize("level", [1, 2])
def test_host_stats_reduces_a_tensor_passed_again_once(level):
    """A region hands host_stats a tensor again and again (a module's
    output is the next one's input): each of its rows is the row the
    tensor gets alone, whether it was reduced or copied; views that share
    an address but not the elements (a prefix, another dtype) are not
    taken for it."""
    from tensormorph_probe import _compiled
    torch.manual_seed(0)
    a = torch.randn(4, 32, 64)
    a[0, 0, :5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1e-40])
    b = torch.randn(300)
    xs = [a, b, a, a[:2], b, a.view(torch.int32), a.transpose(1, 2), a, a[:2], torch.zeros(0), b.half()]
    xs += [torch.randn(8) for _ in range(300)] + [a, b]    # a full table: probes wrap around
    op = torch.ops.tensormorph.host_stats
    got = op(xs, _compiled._const(*[level, 1] * len(xs)))
    one = _compiled._const(level, 1)
    for i, x in enumerate(xs):
        assert torch.equal(got[i], op([x], one)[0]), f"row {i}"
    assert not torch.equal(got[0], got[3]) and not torch.equal(got[0], got[5])


@pytest.mark.parametrize("level, levels", [(1, {"model.blocks.1.**": 0}),
                                           (0, {"model.blocks.1.**": 2, "model.head": 3})])
def test_levels_of_their_own(tmp_path, level, levels):
    """Nodes of level 0 among observed ones in one region: their constant
    rows and the others' computed ones come in eager mode's order."""
    torch.manual_seed(0)
    e, c, stats = record_pair(
        tmp_path, MLP(), lambda m: torch.compile(m, fullgraph=True, backend="aot_eager"), level,
        backward=True, levels=levels)
    assert_same(e, c)
    assert {ev.level for ev in c} >= {0, max(level, *levels.values())}
    assert breaks(stats) == 0


class _Queries(nn.Module):
    """Learnt queries handed to a child module, as DETR's decoder gets them:
    a leaf tensor is the child's input at every step."""

    def __init__(self) -> None:
        super().__init__()
        self.queries = nn.Parameter(torch.randn(4, 16))
        self.proj = nn.Linear(16, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(x + self.proj(self.queries))


def test_leaf_input_gradient_once_a_step(tmp_path):
    """A parameter a compiled region hands a module wants its gradient at
    every step: a hook registered by the compiled code would be registered
    again at each run and report every earlier call at each backward.  The
    compiled run records what eager mode does: one grad_in a step."""
    torch.manual_seed(0)
    e, c, stats = record_pair(
        tmp_path, _Queries(), lambda m: torch.compile(m, fullgraph=True, backend="aot_eager"),
        2, backward=True)
    assert_same(e, c)
    assert breaks(stats) == 0
    for events in (e, c):
        got = [(ev.step, ev.call) for ev in events if ev.kind == "bwd" and ev.node == "model.proj"
               for t in ev.tensors if t.slot == "grad_in.0"]
        assert got == [(0, 1), (1, 1), (2, 1)]


@pytest.mark.parametrize("level", [0, 1])
def test_dynamic_sizes(tmp_path, level):
    """dynamic=True: a region's table of host events is a constant passed
    by key (_compiled._const), and sizes are read at run time (level 0's
    tensors too, whose static sizes are constants of the table); batches
    of three sizes through one graph record what eager mode does, with no
    graph break."""
    class Var(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = MLP()

        def forward(self, x):
            return self.mlp(x)

    paths = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = Var()
        path = str(tmp_path / f"{'c' if compiled else 'e'}.tmrun")
        torch._dynamo.reset()
        counters.clear()
        with tp.attach(model, level=level, record=path):
            run = torch.compile(model, fullgraph=True, dynamic=True,
                                backend="aot_eager") if compiled else model
            for b in (3, 5, 7):
                run(torch.randn(b, 16, generator=torch.Generator().manual_seed(b)))
        paths.append(path)
    assert breaks({k: dict(v) for k, v in counters.items()}) == 0
    assert counters["stats"]["unique_graphs"] == 1
    e, c = fwd_events(paths[0]), fwd_events(paths[1])
    assert {ev.tensors[0].shape[0] for ev in c if ev.tensors} == {3, 5, 7}
    assert_same(e, c)


def test_attached_then_compiled(tmp_path):
    """attach(model) before torch.compile(model): the probe's forward is
    what dynamo traces from the model's own call."""
    torch.manual_seed(0)
    e, c, stats = record_pair(tmp_path, MLP(), lambda m: torch.compile(
        m, fullgraph=True, backend="aot_eager"), attach_model=True)
    assert_same(e, c)
    assert breaks(stats) == 0


def test_eager_run_does_not_import_dynamo(tmp_path):
    """Importing dynamo costs about a second: an eager run under the probe
    never pays it, and a model compiled after that (dynamo imported then)
    is still traced whole, with the model's own addresses."""
    rec = tmp_path / "late.tmrun"
    code = f"""
import sys, torch
import tensormorph_probe as tp
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
h = tp.attach(m, level=1, record={str(rec)!r})
m(torch.randn(3, 4)).sum().backward()
print("eager imported dynamo:", "torch._dynamo" in sys.modules)
c = torch.compile(m, fullgraph=True, backend="aot_eager")
c(torch.randn(3, 4)).sum().backward()
from torch._dynamo.utils import counters
print("graph breaks:", sum(counters["graph_break"].values()))
h.close()
"""
    r = _run([sys.executable, "-c", code], dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "eager imported dynamo: False" in r.stdout
    assert "graph breaks: 0" in r.stdout
    _, evs, _ = read(rec)
    assert {e.step for e in evs} == {0, 1}
    assert {e.node for e in evs if e.step == 1} == {"model", "model.0", "model.1", "model.2"}


def test_module_compile_method(tmp_path):
    torch.manual_seed(0)

    def comp(m):
        m.compile(fullgraph=True, backend="aot_eager")
        return m
    e, c, stats = record_pair(tmp_path, MLP(), comp)
    assert_same(e, c)
    assert breaks(stats) == 0


def test_compiled_function(tmp_path):
    """A compiled function that calls the model, first called compiled: the
    model is found while dynamo traces it."""
    torch.manual_seed(0)

    def comp(m):
        return torch.compile(lambda x: m(x) * 1.0, fullgraph=True, backend="aot_eager")
    e, c, stats = record_pair(tmp_path, MLP(), comp)
    assert_same(e, c)
    assert breaks(stats) == 0


def test_graph_break_of_its_own(tmp_path):
    """The model breaks its graph itself: regions on either side of the
    break, the eager part between them, in order."""
    torch.manual_seed(0)
    e, c, stats = record_pair(tmp_path, MLP(brk=True),
                              lambda m: torch.compile(m, backend="aot_eager"))
    assert_same(e, c)
    assert stats["stats"]["unique_graphs"] > 1
    # every break is the model's own
    assert all("graph_break()" in k for k in stats["graph_break"]), stats["graph_break"]
    if os.path.exists(os.environ.get("TMDB", "")):
        # `info probe` lists each region of the step and its levels
        r = _tmdb(["-ex", "goto end", "-ex", "info probe", str(tmp_path / "c.tmrun")])
        # (the break makes dynamo compile each leaf module as a graph)
        assert ("Compiled: step 2 ran 9 regions compiled (torch.compile); their forward events "
                "come when each region ends:\n  region model.blocks.0.fc1 observed at level 1\n"
                in r.stdout), r.stdout
        assert "  region model.blocks.2.fc2 observed at level 1\n" in r.stdout, r.stdout


def test_gpt2_fullgraph(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    # no dropout: compiled code draws other random numbers than eager
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2,
                                  n_head=2, bos_token_id=0, eos_token_id=0, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    model0 = transformers.GPT2LMHeadModel(cfg)
    ids = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(1))
    paths = []
    for compiled in (False, True):
        model = copy.deepcopy(model0)
        torch._dynamo.reset()
        counters.clear()
        path = str(tmp_path / f"g{int(compiled)}.tmrun")
        with tp.attach(None, level=1, record=path):
            run = torch.compile(model, fullgraph=True, backend="aot_eager") if compiled else model
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for _ in range(2):
                out = run(input_ids=ids)
                loss = out.logits.float().logsumexp(-1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        paths.append(path)
    assert breaks({k: dict(v) for k, v in counters.items()}) == 0
    e, c = fwd_events(paths[0]), fwd_events(paths[1])
    assert any(ev.node == "model.transformer.h.1.mlp" for ev in c)
    assert_same(e, c)


class _Deep(nn.Module):
    """n blocks in a row: a model whose guards are counted per module."""

    def __init__(self, n):
        super().__init__()
        self.blocks = nn.ModuleList(Block(False) for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_aliasing_guards_do_not_grow_with_modules():
    """dynamo guards an object it reaches two ways with a Python lambda
    evaluated on every call of the compiled code; the probe's forward must
    not give it a second way to each module (a method bound to the module
    did: `module is module.forward.__self__`, one per module).  The same
    model with twice the blocks has the same aliasing guards, none of them
    through a forward."""
    def aliasing(n):
        torch.manual_seed(0)
        torch._dynamo.reset()
        model, guards = _Deep(n), []
        with tp.attach(model, level=1, record=None):
            run = torch._dynamo.optimize("eager", guard_export_fn=guards.extend)(model)
            run(torch.randn(4, 16))
        return {(g.name, g.create_fn.keywords["source_b"].name) for g in guards
                if g.create_fn_name() == "DUPLICATE_INPUT"}
    two, four = aliasing(2), aliasing(4)
    assert not [a for a in two | four if "forward" in a[0] or "forward" in a[1]], two | four
    assert two == four


def test_guards_per_module():
    """Each guard dynamo installs is evaluated on every call of the compiled
    code: per module the probe adds its forward (identity, its type's
    __call__; no __dict__ to look for a __call__ of its own in) and one int
    (_tm_mode: the level, observed), never the node's other attributes,
    which do not change (_compiled._static); the class forward it calls is
    guarded once per class, not per module.  Counted as guards of a model
    with 4 blocks more than of the same with 2, with the probe and alone
    (the probe's per-module guards were 16 before _static, 7 before _fns
    was keyed by function, 6 while a Forward had a __dict__)."""
    def guards(n, probe):
        torch.manual_seed(0)
        torch._dynamo.reset()
        model, got = _Deep(n), []
        with tp.attach(model, level=1, record=None) if probe else nullcontext():
            run = torch._dynamo.optimize("eager", guard_export_fn=got.extend)(model)
            run(torch.randn(4, 16))
        return got
    mine = guards(2, True)
    assert not [g.name for g in mine if "_tm_node" in g.name or "_tm_bound" in g.name]
    assert [g.name for g in mine if g.name.endswith("._tm_mode")]
    added = (len(guards(4, True)) - len(mine)) - (len(guards(4, False)) - len(guards(2, False)))
    assert added <= 8 * 5, added        # 8 modules (4 a block)


def test_level_change_recompiles(tmp_path):
    """A node's level is read by the traced code: changing it (as a
    debugger's `set level` does) fails dynamo's guard and recompiles, and
    the new level is recorded -- never silently the old one."""
    torch.manual_seed(0)
    model = MLP()
    path = str(tmp_path / "lv.tmrun")
    torch._dynamo.reset()
    counters.clear()
    probe = tp.attach(model, level=1, record=path)
    run = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = torch.randn(4, 16)
    run(x)
    probe.step()
    graphs = counters["stats"]["unique_graphs"]
    node = next(n for n in probe._nodes.values() if n.address == "model.head")
    node.level = 2
    run(x)
    probe.step()
    assert counters["stats"]["unique_graphs"] == graphs + 1
    run(x)
    assert counters["stats"]["unique_graphs"] == graphs + 1
    probe.close()
    head = [ev for ev in fwd_events(path) if ev.node == "model.head" and ev.kind == "enter"]
    assert [ev.level for ev in head] == [1, 2, 2]
    assert ["std" in ev.tensors[0].stats for ev in head] == [False, True, True]


def test_inductor_is_told_of_the_ops():
    """Inductor hears of the probe's ops what their tags cannot tell it
    through with_effects: they are not to be captured in a CUDA graph
    (graph partitioning runs them between the graphs), and a graph holding
    them may be kept in the caches on disk (test_warm_caches)."""
    import torch._inductor.config as icfg
    parts = icfg.custom_should_partition_ops
    assert all(f"tensormorph::{op}" in parts for op in ("flush", "grad", "snap", "begin"))
    assert "torch.ops.higher_order.with_effects" in icfg.unsafe_marked_cacheable_functions
