"""The probe's contract on small models built in code: what it records at
each level, that the stats are right, that it never changes results, that
a full ring gives gap records, and the command-line runner."""

from __future__ import annotations

import functools
import inspect
import math
import os
import shlex
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import MLP, assert_gap_free, read

import tensormorph_probe as tp
from tensormorph_probe import _lib


def train(model, steps, seed=0, nan_at=None, lr=0.05):
    """A few SGD steps; at step nan_at a NaN is planted in fc2's weight,
    so fc2's output is the first with a NaN, at exactly that step."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    outs = []
    for step in range(steps):
        if step == nan_at:
            with torch.no_grad():
                model.fc2.weight[0, 0] = float("nan")
        x = torch.randn(5, 8, generator=g)
        y = model(x)
        loss = y.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        outs.append(y.detach().clone())
    return outs


def test_library_not_found_names_every_place(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORMORPH_LIB", str(tmp_path / "nope.so"))
    monkeypatch.setenv("TENSORMORPH_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(_lib, "_repo_root", lambda: tmp_path)
    monkeypatch.setattr(_lib.ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(_lib.sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(_lib, "_PREFIXES", (str(tmp_path / "usr"),))
    with pytest.raises(tp.LibraryNotFound) as exc:
        _lib.load.__wrapped__()
    msg = str(exc.value)
    for where in ("TENSORMORPH_LIB", "TENSORMORPH_BUILD_DIR", "build tree", "install prefix",
                  "find_library"):
        assert where in msg
    assert str(tmp_path / "nope.so") in msg
    assert str(tmp_path / "build" / "src/lib/.libs") in msg
    assert str(tmp_path / "prefix" / "lib") in msg


def test_nan_found_at_its_step_and_node(trace_path):
    torch.manual_seed(0)
    model = MLP()
    with tp.attach(model, level=1, record=trace_path):
        train(model, 6, nan_at=3)
    nodes, events, gaps = read(trace_path)
    assert not gaps
    first = next(e for e in events for t in e.tensors if t.stats.get("nan_count", 0) > 0)
    assert (first.node, first.step, first.kind, first.call) == ("model.fc2", 3, "exit", 1)
    # before it, every recorded output was clean and had its health stats
    for e in events[: events.index(first)]:
        for t in e.tensors:
            assert t.stats["nan_count"] == 0 and "abs_max" in t.stats


def test_levels_and_events(trace_path):
    torch.manual_seed(0)
    model = MLP()
    with tp.attach(model, level=0, record=trace_path, levels={"model.fc2": 2}) as probe:
        train(model, 2)
        assert probe.step_count == 1         # moves when the next root call starts
    nodes, events, _ = read(trace_path)
    assert {"model", "model.fc1", "model.act", "model.fc2", "model.fc3",
            "model.fc2.weight", "model.fc2.bias"} <= set(nodes)
    assert "model.fc1.weight" not in nodes           # parameters only at level 2
    fc1 = [e for e in events if e.node == "model.fc1"]
    assert [e.kind for e in fc1] == ["enter", "exit"] * 2
    assert [e.step for e in fc1] == [0, 0, 1, 1]
    enter, exit_ = fc1[0], fc1[1]
    assert enter.tensors == [] and enter.level == 0
    assert exit_.tensors[0].shape == (5, 16) and exit_.tensors[0].stats == {}
    assert exit_.start_ns == enter.time_ns <= exit_.end_ns == exit_.time_ns
    fc2 = [e for e in events if e.node == "model.fc2"]
    kinds = [e.kind for e in fc2]
    assert kinds.count("bwd") == 4                   # grad_out.0 and grad_in.0, two steps
    assert fc2[0].tensors[0].slot == "in.0" and "std" in fc2[0].tensors[0].stats
    bwd = [e for e in fc2 if e.kind == "bwd"]
    assert {t.slot for e in bwd for t in e.tensors} == {"grad_out.0", "grad_in.0"}
    assert all(e.phase == "bwd" for e in bwd)
    # gradients as the backward makes them, values as each optimizer step
    # changes them: each in its own step
    params = [e for e in events if e.kind == "param"]
    got = [(e.node, e.tensors[0].slot, e.step, e.phase) for e in params]
    for n in ("model.fc2.weight", "model.fc2.bias"):
        assert [x[1:] for x in got if x[0] == n] == [
            ("grad", 0, "bwd"), ("data", 0, "bwd"), ("grad", 1, "bwd"), ("data", 1, "bwd")]
    assert not any(e.kind == "bwd" for e in events if e.node != "model.fc2")
    seqs = [e.seq for e in events]
    assert seqs == list(range(len(seqs)))


def test_node_table_has_types_and_source(trace_path):
    model = MLP()
    with tp.attach(model, record=trace_path, nodes=["model", "model.fc*"]):
        model(torch.randn(2, 8))
    nodes, events, _ = read(trace_path)
    assert set(nodes) == {"model", "model.fc1", "model.fc2", "model.fc3"}
    fc1 = nodes["model.fc1"]
    code = torch.nn.Linear.forward.__code__
    assert (fc1.type, fc1.line) == ("Linear", code.co_firstlineno)
    assert os.path.samefile(fc1.file, code.co_filename)
    assert fc1.parent == nodes["model"].id and fc1.depth == 1
    assert nodes["model"].file.endswith("conftest.py")
    assert {e.node for e in events} == set(nodes)


def _keeps_kwarg(old, new):
    """A decorator with arguments, as transformers' @deprecate_kwarg."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(self, *args, **kwargs):
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
            return fn(self, *args, **kwargs)
        return inner
    return wrap


class Decorated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    @_keeps_kwarg(
        "inp",
        "x",
    )
    def forward(self, x):
        return self.fc(x)


def test_decorated_forward_points_at_def(trace_path):
    """bt and frame show the `def forward` line of a decorated forward, not
    its first decorator's line (co_firstlineno)."""
    model = Decorated()
    with tp.attach(model, record=trace_path):
        model(inp=torch.randn(2, 4))
    nodes, _, _ = read(trace_path)
    src, _ = inspect.getsourcelines(Decorated.forward)
    deco = Decorated.forward.__wrapped__.__code__.co_firstlineno
    line = deco + next(i for i, ln in enumerate(src) if ln.lstrip().startswith("def "))
    assert nodes["model"].line == line
    assert nodes["model"].line != deco


def _ref_stats(x):
    x = x.detach().double().reshape(-1)
    f = x[torch.isfinite(x)]
    return {
        "numel": x.numel(), "nan_count": int(torch.isnan(x).sum()),
        "inf_count": int(torch.isinf(x).sum()), "min": f.min().item(), "max": f.max().item(),
        "mean": f.mean().item(), "abs_max": f.abs().max().item(), "l2": f.norm().item(),
        "std": f.std(correction=0).item(), "zero_count": int((x == 0).sum()),
    }


@pytest.mark.parametrize("device_path", [False, True], ids=["c-stats", "device-stats"])
def test_stats_match_independent_values(trace_path, device_path):
    """Recorded stats against values computed here from the same tensors
    (captured by the test's own hooks); device-stats runs the GPU code path
    on CPU tensors."""
    torch.manual_seed(1)
    model = MLP()
    seen = {}

    def keep(name):
        def hook(mod, args, out):
            seen[name] = (args[0].detach().clone(), out.detach().clone())
        return hook

    for name in ("fc1", "act", "fc3"):
        getattr(model, name).register_forward_hook(keep(name))
    x = torch.randn(7, 8)
    x[0, 0] = float("nan")
    x[1, 1] = float("inf")
    with tp.attach(model, level=2, record=trace_path, device_stats_on_cpu=device_path):
        model(x)
    _, events, _ = read(trace_path)
    checked = 0
    for e in events:
        short = e.node.split(".")[-1]
        if e.kind not in ("enter", "exit") or short not in seen:
            continue
        ref_in, ref_out = seen[short]
        if short == "act":
            ref_in = None    # in-place: its input is its output by the time we look
        ref = ref_in if e.kind == "enter" else ref_out
        if ref is None:
            continue
        got = e.tensors[0]
        want = _ref_stats(ref)
        for k, v in want.items():
            assert math.isclose(got.stats[k], v, rel_tol=1e-6, abs_tol=1e-9), (e.node, k)
        # the log2 histogram (doc/tmrun.md 4.3), by sign bit and octave
        lo, hi, hist = got.hist
        f = ref.double()[torch.isfinite(ref)]
        top = int(torch.frexp(f.abs().max()).exponent)
        assert (lo, hi) == (top - 15, top)
        j = (torch.frexp(f).exponent - 1 - top + 16).clamp(0, 15)
        j = torch.where(f == 0, 0, j)
        ref_hist = torch.bincount(torch.where(torch.signbit(f), 15 - j, 16 + j), minlength=32)
        assert sum(hist) == want["numel"] - want["nan_count"] - want["inf_count"]
        assert list(hist) == ref_hist.tolist()
        checked += 1
    assert checked == 5


def test_outputs_bit_identical_with_and_without_probe(tmp_path):
    def run(level):
        torch.manual_seed(3)
        model = MLP()
        if level is None:
            outs = train(model, 4)
        else:
            with tp.attach(model, level=level, record=str(tmp_path / f"l{level}.tmrun")):
                outs = train(model, 4)
        return outs, [p.detach().clone() for p in model.parameters()]

    ref_out, ref_par = run(None)
    for level in (0, 1, 2, 3):
        out, par = run(level)
        assert all(torch.equal(a, b) for a, b in zip(ref_out, out, strict=True))
        assert all(torch.equal(a, b) for a, b in zip(ref_par, par, strict=True))


def test_level3_payload_is_the_tensor(trace_path):
    model = MLP()
    x = torch.randn(3, 8)
    with tp.attach(model, level=1, levels={"model.fc3": 3}, record=trace_path):
        y = model(x)
    _, events, _ = read(trace_path)
    ex = next(e for e in events if e.node == "model.fc3" and e.kind == "exit")
    assert ex.tensors[0].payload == y.detach().contiguous().numpy().tobytes()
    assert all(t.payload is None for e in events if not e.node.startswith("model.fc3")
               for t in e.tensors)


@pytest.mark.parametrize("lossless", [False, True])
def test_tiny_ring_gap_records(trace_path, lossless):
    torch.manual_seed(0)
    model = MLP()
    with tp.attach(model, level=1, record=trace_path, ring_events=4,
                   lossless=lossless) as probe:
        train(model, 20)
        probe.flush()
        st = probe.stats()
    nodes, events, gaps = read(trace_path)
    total = st["next_seq"]
    assert total == 20 * 10
    assert_gap_free(events, gaps, total)
    if lossless:
        assert not gaps and len(events) == total
    else:
        assert gaps and all(g.reason == _lib.GAP_BACKPRESSURE for g in gaps)
        assert sum(g.count for g in gaps) == st["events_dropped"] > 0


def test_step_without_optimizer_and_by_hand(trace_path):
    model = MLP()
    with tp.attach(model, level=0, record=trace_path) as probe:
        for _ in range(3):
            model(torch.randn(2, 8)).sum().backward()
        assert probe.step_count == 2         # moves when the next root call starts
        probe.step()
        model(torch.randn(2, 8))
        model(torch.randn(2, 8))             # by hand now: no automatic step
        assert probe.step_count == 3
    _, events, _ = read(trace_path)
    roots = [e.step for e in events if e.node == "model" and e.kind == "exit"]
    assert roots == [0, 1, 2, 3, 3]
    calls = [e.call for e in events if e.node == "model" and e.kind == "exit"]
    assert calls == [1, 1, 1, 1, 2]


def test_model_none_finds_the_model_and_later_roots(trace_path):
    model = MLP()
    lossfn = torch.nn.MSELoss()
    call = torch.nn.Module.__call__
    with tp.attach(None, level=1, record=trace_path, nodes=["model.**", "ext.**"]) as probe:
        y = model(torch.randn(2, 8))
        lossfn(y, torch.zeros_like(y)).backward()
        model.fc1(torch.randn(1, 8))         # a submodule called outside the root
        assert probe.model is model
    assert torch.nn.Module.__call__ is call
    nodes, events, _ = read(trace_path)
    assert {"model", "model.fc1", "ext.MSELoss"} <= set(nodes)
    root = [e for e in events if e.node == "model"]
    assert [e.kind for e in root] == ["enter", "exit"]
    assert [e.call for e in events if e.node == "model.fc1" and e.kind == "exit"] == [1, 2]
    ext = [e for e in events if e.node == "ext.MSELoss" and e.kind == "exit"]
    assert ext and ext[0].tensors[0].shape == ()


def test_wrapped_forward_is_invisible_to_the_user(trace_path):
    """The probe observes a module by wrapping its forward: the model must
    not notice it -- signature, copies, pickling, exceptions, its own
    hooks -- and close gives every forward back."""
    import copy
    import inspect
    import pickle
    torch.manual_seed(0)
    model = MLP()
    sig = inspect.signature(model.fc1.forward)
    seen = []
    model.fc2.register_forward_pre_hook(lambda m, a: (a[0] * 0,))     # the user's hooks
    model.fc2.register_forward_hook(lambda m, a, out: seen.append(out.abs().sum().item()))
    with tp.attach(model, level=1, record=trace_path) as probe:
        assert inspect.signature(model.fc1.forward) == sig    # transformers checks it
        twin = copy.deepcopy(model)          # an EMA copy: its own weights, not observed
        with torch.no_grad():
            for p in twin.parameters():
                p.add_(1.0)
        x = torch.randn(3, 8)
        assert not torch.equal(twin(x), model(x))
        again = pickle.loads(pickle.dumps(model.fc1))
        assert torch.equal(again(x), model.fc1(x))
        with pytest.raises(RuntimeError):
            model.fc1(torch.randn(3, 5))    # a forward that raises still ends its call
        model(x)
        probe.step()
    assert not any("forward" in vars(m) for m in model.modules())
    nodes, events, _ = read(trace_path)
    fc1 = [(e.step, e.kind, e.call, len(e.tensors)) for e in events if e.node == "model.fc1"]
    # model(x), fc1 alone (its unpickled copy is not observed), the call
    # that raised (a raise event, no outputs), then model(x), which starts step 1
    assert fc1 == [(0, "enter", 1, 1), (0, "exit", 1, 1), (0, "enter", 2, 1), (0, "exit", 2, 1),
                   (0, "enter", 3, 1), (0, "raise", 3, 0), (1, "enter", 1, 1), (1, "exit", 1, 1)]
    # fc2 is seen after the user's pre-hook (its input is zeros): its output
    # is its bias; the user's forward hook still runs (twice here, once in
    # the copy, which deepcopy gave the same hook)
    fc2 = [e for e in events if e.node == "model.fc2" and e.kind == "exit"]
    assert len(fc2) == 2
    bias = model.fc2.bias.detach()
    assert fc2[0].tensors[0].stats["max"] == pytest.approx(bias.max().item())
    assert len(seen) == 3


class _Closing(torch.nn.Module):
    """Closes the probe in its forward (a script's cleanup, a signal handler)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.probe = None

    def forward(self, x):
        if self.probe is not None:
            self.probe.close()
        return self.fc(x)


def test_probe_closed_inside_a_forward(trace_path):
    """A forward that closes the probe finishes normally, and so do the
    calls around it; what follows is the model's own."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), _Closing())
    x = torch.randn(2, 8)
    with torch.no_grad():
        want = model(x)
        model[1].probe = tp.attach(model, level=1, record=trace_path)
        assert torch.equal(model(x), want)
        assert torch.equal(model(x), want)
    assert not any("forward" in vars(m) for m in model.modules())
    nodes, events, _ = read(trace_path)
    assert [(e.node, e.kind) for e in events] == [
        ("model", "enter"), ("model.0", "enter"), ("model.0", "exit"), ("model.1", "enter")]


class _Doubling(torch.nn.Module):
    """fc1's output gets a hook of the user's, doubling its gradient,
    before fc2 takes it: fc2's grad_in must be the doubled one."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)
        self.fc3 = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc1(x)
        h.register_hook(lambda g: g * 2)
        return self.fc3(self.fc2(h))


def test_gradient_hooks_keep_their_place_among_the_users(trace_path):
    """Calls that want the same tensor's gradient (fc2's output is fc3's
    input) share the probe's hook, but never across a hook of the user's."""
    torch.manual_seed(0)
    model = _Doubling()
    with tp.attach(model, level=2, record=trace_path):
        model(torch.randn(4, 8)).pow(2).sum().backward()
    nodes, events, _ = read(trace_path)
    grad = {(e.node, t.slot): t.stats["l2"] for e in events if e.kind == "bwd"
            for t in e.tensors}
    assert grad[("model.fc2", "grad_in.0")] == pytest.approx(2 * grad[("model.fc1", "grad_out.0")])
    assert grad[("model.fc3", "grad_in.0")] == grad[("model.fc2", "grad_out.0")]


FAST_PATH_SCRIPT = """
import sys, torch
from torch import nn
import tensormorph_probe as tp
from tensormorph_probe import probe

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.act = nn.ReLU(inplace=True)           # in place: its output is its input
        self.wide = nn.Linear(16, 4096)            # 8 x 4096: a reuse lookup at level 1
        self.idx = nn.Identity()

    def forward(self, x, scale=1.0):
        h = self.act(self.fc(x)) * scale
        w = self.wide(h)
        k = self.idx(w.argmax(-1))                 # an int64 output
        t = self.idx(h.t())                        # not contiguous
        e = self.idx(h[:0])                        # empty
        s = self.idx(h.sum())                      # 0-d
        return h, (w.mean(), k, t, e, s)           # a tuple out

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        h, _ = self.block(x, scale=0.5)
        h, _ = self.block(h)                       # a second call of a shared module
        return self.head(h)

torch.manual_seed(0)
model = Model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
levels = {"1": dict(level=1, levels={"model.head": 2, "model.block.idx": 0}),
          "2": dict(level=2, levels={"model.block.fc": 3})}[sys.argv[2]]
with tp.attach(model, record=sys.argv[1], **levels):
    for _ in range(2):
        model(torch.randn(8, 16)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
print("hook" if probe._hook is not None else "python")
"""


@pytest.mark.parametrize("levels", ["1", "2"])
def test_fast_path_and_python_path_record_the_same(tmp_path, levels):
    """The C fast path (_hook.c) and the Python path write the same trace:
    the same events, tensors, stats and captured tensors, times aside."""
    script = tmp_path / "fast.py"
    script.write_text(FAST_PATH_SCRIPT)
    runs = {}
    for name, off in (("fast", "0"), ("python", "1")):
        out = tmp_path / f"{name}.tmrun"
        env = dict(os.environ, TENSORMORPH_NO_HOOK=off)
        proc = subprocess.run([sys.executable, str(script), str(out), levels], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        runs[name] = (proc.stdout.strip(), read(str(out)))
    if runs["fast"][0] != "hook":
        if os.environ.get("TENSORMORPH_EXPECT_HOOK"):
            pytest.fail("this build made the fast path (_hook), but the probe did not load it")
        pytest.skip("the probe's C fast path is not built here")
    assert runs["python"][0] == "python"

    def facts(trace):
        nodes, events, gaps = trace
        assert not gaps
        return [(e.seq, e.step, e.phase, e.kind, e.level, e.node, e.call,
                 [(t.slot, t.dtype, t.shape, t.device_type, t.stats, t.hist, t.payload)
                  for t in e.tensors]) for e in events]

    fast, python = facts(runs["fast"][1]), facts(runs["python"][1])
    assert len(fast) > 50
    for a, b in zip(fast, python, strict=True):
        assert a == b
    # what the fast path covers was there: one-tensor outputs with stats
    # (level 1), gradients, parameters and captures (level 2 and 3)
    lv = int(levels)
    assert any(e[3] == "exit" and e[4] == lv and len(e[7]) == 1 and "l2" in e[7][0][4]
               for e in fast)
    if lv == 2:
        assert {e[3] for e in fast} == {"enter", "exit", "bwd", "param"}
        assert any(t[6] for e in fast for t in e[7])


LEAF_SCRIPT = """
import sys, torch
from torch import nn
import tensormorph_probe as tp
from tensormorph_probe import probe

class Twice(nn.Module):
    def forward(self, x):
        return x * 2

torch.manual_seed(0)
model = nn.Sequential(Twice(), nn.Linear(4, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
queries = torch.randn(3, 4, requires_grad=True)     # learnt, fed to the model each step
with tp.attach(model, level=2, record=sys.argv[1]):
    for step in range(4):
        for micro in range(2):                      # two micro-batches a step
            (model(queries).pow(2).sum() * (micro + 1)).backward()
        opt.step()
        opt.zero_grad()
print("hook" if probe._hook is not None else "python")
"""


@pytest.mark.parametrize("path", ["fast", "python"])
def test_a_leaf_input_reports_each_call_once(tmp_path, path):
    """A leaf fed to the model at every call (learnt queries) keeps one
    gradient hook across steps: each backward reports the gradient of the
    call it follows, once, never again at a later backward."""
    script = tmp_path / "leaf.py"
    script.write_text(LEAF_SCRIPT)
    out = tmp_path / "leaf.tmrun"
    env = dict(os.environ, TENSORMORPH_NO_HOOK="1" if path == "python" else "0")
    proc = subprocess.run([sys.executable, str(script), str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    _, events, _ = read(str(out))
    grads = [(e.step, e.node, e.call, t.stats["l2"]) for e in events if e.kind == "bwd"
             for t in e.tensors if t.slot == "grad_in.0" and e.node == "model.0"]
    assert [(s, c) for s, _, c, _ in grads] == [(s, c) for s in range(4) for c in (1, 2)]
    # the second micro-batch's loss is scaled by 2: its gradient is twice the first's
    # (at the same weights, within a step)
    for s in range(4):
        first, second = (g[3] for g in grads if g[0] == s)
        assert second == pytest.approx(2 * first)


def test_cli_records_unmodified_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(int(sys.argv[1])):
            m(torch.randn(2, 4)).sum().backward()
            opt.step()
        sys.exit(3)
    """))
    out = tmp_path / "cli.tmrun"
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--level", "2",
           "--node-level", "model.1=0", "--", "python", str(script), "2"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    nodes, events, _ = read(str(out))
    assert {"model", "model.0", "model.1", "model.0.weight"} <= set(nodes)
    assert {e.step for e in events if e.node == "model"} == {0, 1}
    relu = [e for e in events if e.node == "model.1"]
    assert relu and all(e.level == 0 and not e.tensors[0].stats for e in relu if e.kind == "exit")
    assert any(e.kind == "bwd" for e in events if e.node == "model.0")


@pytest.mark.parametrize("signame", ["SIGKILL", "SIGTERM"])
def test_cli_dies_as_its_child_did(tmp_path, signame):
    """record passes a signal death on: the shell sees 128 + signo (137 for
    SIGKILL), with no traceback from the wrapper (issue 25, F4)."""
    script = tmp_path / "die.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, torch
        m = torch.nn.Linear(2, 2)
        m(torch.randn(1, 2))
        os.kill(os.getpid(), signal.{signame})
    """))
    out = tmp_path / "die.tmrun"
    cmd = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--",
        "python", str(script)])
    r = subprocess.run(["sh", "-c", cmd + '; echo "status=$?"'], capture_output=True,
                       text=True, timeout=120)
    signo = getattr(signal, signame)
    assert f"status={128 + signo}" in r.stdout, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "OSError" not in r.stderr, r.stderr


@pytest.mark.parametrize("level", [1, 2])
def test_level2_reuses_unchanged_inputs_but_not_inplace_outputs(trace_path, level):
    """An input that is the previous call's output, unchanged, shares its
    summary (at level 1 through the C path's last-summarised tensor, at
    level 2 also through the batch's table); ReLU(inplace=True) changes
    that tensor, so its output is read again and differs from its input."""
    torch.manual_seed(0)
    model = MLP()
    with tp.attach(model, level=level, record=trace_path) as probe:
        model(torch.randn(512, 8))       # large enough to share at either level
        assert probe.reused > 0 or (level == 1 and tp.probe._hook is None)
    _, events, _ = read(trace_path)
    get = {(e.node, e.kind): e.tensors[0] for e in events if e.tensors}
    fc1_out, act_in = get[("model.fc1", "exit")], get[("model.act", "enter")]
    act_out = get[("model.act", "exit")]
    assert act_in.slot == "in.0" and act_in.stats == fc1_out.stats and act_in.hist == fc1_out.hist
    assert act_in.stats["min"] < 0 <= act_out.stats["min"]


def test_flatten_order_of_nested_outputs():
    import collections
    import dataclasses

    from tensormorph_probe._flatten import flatten, flatten_call

    @dataclasses.dataclass
    class Out:
        a: torch.Tensor
        skip: int
        b: tuple

    Pair = collections.namedtuple("Pair", "x y")
    t = [torch.full((1,), float(i)) for i in range(6)]
    obj = Out(t[0], 7, (Pair(t[1], None), {"k": t[2], "l": [t[3], "s"]}))
    assert [int(x) for x in flatten(obj, 64)] == [0, 1, 2, 3]
    assert [int(x) for x in flatten(obj, 2)] == [0, 1]
    assert [int(x) for x in flatten_call((t[4],), {"z": t[5], "w": t[0]}, 64)] == [4, 5, 0]


class _Dict(torch.nn.Module):
    """ModuleDict keys are any string; addresses are not."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleDict({"conv-1": torch.nn.Linear(4, 4),
                                           "conv_1": torch.nn.Linear(4, 4),
                                           "b c": torch.nn.ReLU()})

    def forward(self, x):
        return self.blocks["b c"](self.blocks["conv_1"](self.blocks["conv-1"](x)))


def test_module_names_that_are_not_address_segments(trace_path):
    torch.manual_seed(0)
    model = _Dict()
    x = torch.randn(2, 4)
    want = model(x)
    with tp.attach(model, level=2, record=trace_path):
        got = model(x)
    assert torch.equal(got, want)
    nodes, events, _ = read(trace_path)
    assert {"model.blocks.conv_1", "model.blocks.conv_1_2", "model.blocks.b_c",
            "model.blocks.conv_1.weight", "model.blocks.conv_1_2.weight"} <= set(nodes)
    exits = [e.node for e in events if e.kind == "exit"]
    assert exits == ["model.blocks.conv_1", "model.blocks.conv_1_2", "model.blocks.b_c", "model"]


def test_forked_child_records_nothing(trace_path):
    """A fork() child (a DataLoader worker) that calls the model records
    nothing into the parent's trace and leaves it whole."""
    model = MLP()
    x = torch.randn(2, 8)
    probe = tp.attach(model, level=1, record=trace_path)
    model(x)
    pid = os.fork()
    if pid == 0:
        try:
            model(x)
            model(x)
        finally:
            os._exit(0 if not model.fc1._forward_hooks else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    model(x)
    probe.close()
    _, events, gaps = read(trace_path)
    assert not gaps
    assert len(events) == 2 * 10        # two parent calls: 5 modules, ENTER and EXIT
